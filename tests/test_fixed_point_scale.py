"""tenferro_py.fixed_point at every finite scale, and its solves' product limit.

Three maps with a known fixed point: x ← x/2 + θ (x* = 2θ); x_i ← θ_i (a_i tanh(x_i/θ_i) + b_i)
(nonlinear and homogeneous, x*_i = c_i θ_i); and the complex z ← M z + θ b (z* = θ (I − M)⁻¹ b).
Their iterates, parameters, cotangents and directions run from 1e-300 to 1e300; value and
derivatives are compared with the analytic ones. Products with the step's derivative are counted
by an identity primitive whose rules tally their calls.
"""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import Tensor
from tenferro_py.fixed_point import FixedPoint, FixedPointError
from tenferro_py.linear_solve import GMRES_RESTART
from tenferro_py.rules import RuleSet

SCALES = [1e-300, 1e-170, 1.0, 1e160, 1e300]
COTANGENT_SCALES = [1e-300, 1e-200, 1.0, 1e170, 1e300]
RTOL = 1e-10  # the iteration stops at a relative change of 1e-12


def close(got, expected, rtol=RTOL):
    got, expected = np.asarray(got), np.asarray(expected)
    return np.all(np.isfinite(got)) and np.abs(got - expected).max() <= rtol * np.abs(expected).max()


# --- x ← x/2 + θ --------------------------------------------------------------------------------

SHAPE = np.array([1.0, -0.5, 0.25])


def halving(s, x, theta):
    return (s.add(s.scale_real(x[0], 0.5), theta),)


def total(s, x, theta):
    return s.reduce_sum(x[0])


def halving_solution(scale):
    return FixedPoint(halving).solve(Tensor.from_numpy(scale * SHAPE), [np.zeros(3)])


@pytest.mark.parametrize("scale", SCALES)
def test_halving_converges_to_twice_theta_with_gradient_two(scale):
    sol = halving_solution(scale)
    assert close(sol.x[0].to_numpy(), 2 * scale * SHAPE)
    assert sol.iterations > 30  # not stopped early: 2^-n ≤ 1e-12 takes 40 steps
    value, grad = sol.value_and_grad(total)
    assert close(value, 2 * scale * SHAPE.sum())
    assert close(grad.to_numpy(), np.full(3, 2.0))
    assert close(sol.value_and_jvp(total)[1], 6.0)


@pytest.mark.parametrize("scale", [1e-300, 1.0, 1e300])
@pytest.mark.parametrize("cotangent_scale", COTANGENT_SCALES)
def test_halving_vjp_and_jvp_at_any_scale(scale, cotangent_scale):
    sol = halving_solution(scale)
    cotangent = cotangent_scale * np.array([0.3, -1.0, 0.7])
    assert close(sol.vjp([cotangent]).to_numpy(), 2 * cotangent)
    assert close(sol.jvp(Tensor.from_numpy(cotangent))[0].to_numpy(), 2 * cotangent)


@pytest.mark.parametrize("solver", ["bicgstab", "series"])
@pytest.mark.parametrize("cotangent_scale", [1e-300, 1e300])
def test_every_solver_is_scale_invariant(solver, cotangent_scale):
    sol = FixedPoint(halving, solver=solver).solve(Tensor.from_numpy(1e-250 * SHAPE), [np.zeros(3)])
    cotangent = cotangent_scale * np.array([0.3, -1.0, 0.7])
    assert close(sol.vjp([cotangent]).to_numpy(), 2 * cotangent)


# --- x_i ← θ_i (a_i tanh(x_i/θ_i) + b_i) -----------------------------------------------------------

A, B = np.array([0.5, -0.3]), np.array([1.0, 0.4])
C = np.ones(2)
for _ in range(200):
    C = A * np.tanh(C) + B  # a contraction: |a| sech² ≤ 1/2
WEIGHTS = np.array([0.7, -1.3])


def homogeneous(s, x, theta):
    inner = s.tanh(s.div(x[0], theta))
    return (s.mul(theta, s.add(s.mul(Tensor.from_numpy(A), inner), Tensor.from_numpy(B))),)


def weighted_log(s, x, theta):
    """Σ w_i log x_i = Σ w_i (log c_i + log θ_i): gradient w/θ, Hessian diag(−w/θ²)."""
    return s.reduce_sum(s.mul(Tensor.from_numpy(WEIGHTS), s.log(x[0])))


def weighted_sum(s, x, theta):
    return s.reduce_sum(s.mul(Tensor.from_numpy(WEIGHTS), x[0]))


def homogeneous_solution(scale):
    return FixedPoint(homogeneous).solve(Tensor.from_numpy(np.full(2, scale)), [np.full(2, scale)])


@pytest.mark.parametrize("scale", SCALES)
def test_nonlinear_homogeneous_map_at_any_scale(scale):
    sol = homogeneous_solution(scale)
    assert close(sol.x[0].to_numpy(), C * scale)
    value, grad = sol.value_and_grad(weighted_sum)
    assert close(value, WEIGHTS @ C * scale)
    assert close(grad.to_numpy(), WEIGHTS * C)
    for cotangent_scale in COTANGENT_SCALES:
        cotangent = cotangent_scale * np.array([-0.4, 0.9])
        assert close(sol.vjp([cotangent]).to_numpy(), cotangent * C)
        assert close(sol.jvp(Tensor.from_numpy(cotangent))[0].to_numpy(), cotangent * C)


@pytest.mark.parametrize("scale, direction_scale",
                         [(1e-150, 1e-200), (1e-150, 1e-10), (1.0, 1e-300), (1.0, 1e300), (1e150, 1e170),
                          (1e100, 1e-100)])
def test_curvature_at_any_scale(scale, direction_scale):
    sol = homogeneous_solution(scale)
    direction = direction_scale * np.array([1.0, -0.5])
    value, grad, curvature = sol.value_grad_and_curvature(weighted_log, Tensor.from_numpy(direction))
    assert close(value, WEIGHTS @ np.log(C * scale))
    assert close(grad.to_numpy(), WEIGHTS / scale)
    assert close(curvature.to_numpy(), -WEIGHTS * (direction / scale) / scale)
    assert close(sol.value_and_jvp(weighted_log, Tensor.from_numpy(direction))[1], WEIGHTS @ direction / scale)


# --- complex z ← M z + θ b ---------------------------------------------------------------------

RNG = np.random.default_rng(11)
M = RNG.standard_normal((4, 4)) + 1j * RNG.standard_normal((4, 4))
M *= 0.5 / np.linalg.norm(M, 2)
B_COMPLEX = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)
U = np.linalg.solve(np.eye(4) - M, B_COMPLEX)  # z* = θ U
W_COMPLEX = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)


def affine(s, x, theta):
    shift = s.einsum([s.convert(theta, np.complex128), Tensor.from_numpy(B_COMPLEX)], ",i->i")
    return (s.add(s.einsum([Tensor.from_numpy(M), x[0]], "ij,j->i"), shift),)


def overlap(s, x, theta):
    """Re Σ conj(w) z."""
    return s.real(s.reduce_sum(s.mul(s.conj(Tensor.from_numpy(W_COMPLEX)), x[0])))


@pytest.mark.parametrize("scale", SCALES)
def test_complex_state_at_any_scale(scale):
    sol = FixedPoint(affine).solve(scale, [np.zeros(4, complex)])
    assert close(sol.x[0].to_numpy(), scale * U)
    value, grad = sol.value_and_grad(overlap)
    assert close(value, scale * np.vdot(W_COMPLEX, U).real)
    assert close(grad.to_numpy(), np.vdot(W_COMPLEX, U).real)
    for cotangent_scale in COTANGENT_SCALES:
        cotangent = cotangent_scale * W_COMPLEX
        assert close(sol.vjp([cotangent]).to_numpy(), cotangent_scale * np.vdot(W_COMPLEX, U).real)
        assert close(sol.jvp(cotangent_scale)[0].to_numpy(), cotangent_scale * U)


# --- what is not a fixed point, and what cannot be represented ------------------------------------

@pytest.mark.parametrize("scale", [1e-300, 1.0])
def test_a_zero_iterate_is_not_convergence(scale):
    """x ← θ − x from θ oscillates between 0 and θ: no scale makes the step to 0 look converged."""
    flip = FixedPoint(lambda s, x, theta: (s.sub(theta, x[0]),), maxiter=9)
    with pytest.raises(FixedPointError, match="within 9 steps, got inf after 9 steps"):
        flip.solve(Tensor.from_numpy(np.array([scale])), [np.array([scale])])


@pytest.mark.filterwarnings("ignore:overflow encountered")  # in the step's own arithmetic
def test_an_iterate_that_overflows_is_named():
    doubling = FixedPoint(lambda s, x, theta: (s.add(s.scale_real(x[0], 2.0), theta),))
    with pytest.raises(FixedPointError, match="expected finite iterates, got a non-finite one at step 5"):
        doubling.solve(Tensor.from_numpy(np.array([1e300])), [np.array([1e307])])  # 2e307, …, 1.6e308, inf


def test_a_derivative_that_overflows_is_an_error_not_inf():
    sol = halving_solution(1.0)
    with pytest.raises(FixedPointError, match=r"FixedPointSolution.vjp: expected a finite cotangent of theta"):
        sol.vjp([np.full(3, 1e308)])


def test_non_finite_starts_cotangents_and_directions_are_invalid():
    with pytest.raises(tf.InvalidArgument, match=r"FixedPoint.solve: expected x0: finite entries, got"):
        FixedPoint(halving).solve(Tensor.from_numpy(SHAPE), [np.array([0.0, np.inf, 0.0])])
    sol = halving_solution(1.0)
    with pytest.raises(tf.InvalidArgument, match=r"FixedPointSolution.vjp: expected finite cotangents, got"):
        sol.vjp([np.array([1.0, np.nan, 0.0])])
    with pytest.raises(tf.InvalidArgument, match=r"jvp: expected a finite direction, got"):
        sol.jvp(np.array([np.inf, 0.0, 0.0]))


# --- solve_maxiter: the limit on products, and the message -----------------------------------------

class Tally:
    """An identity primitive whose JVP and VJP count their calls: one per product with ∂f/∂x."""

    def __init__(self):
        self.products = 0
        self.rules = RuleSet()

        def jvp(s, tangents, primals, outputs):
            self.products += 1
            return (tangents[0],)

        def vjp(s, cotangents, primals, outputs, needs):
            self.products += 1
            return (cotangents[0],)

        self.op = self.rules.define("tally", lambda x: (x,), lambda x: (x,), jvp, vjp)

    def runtime(self):
        return tf.EagerRuntime(tf.AdContext.builder().with_semantic_extension_rules(self.rules).build())


N_SLOW = 200
SLOW_SPECTRUM = np.linspace(0.0, 0.995, N_SLOW)  # I − J's eigenvalues in [0.005, 1]: many products to 1e-12


def slow_problem(tally, **options):
    """x ← J x + θ with J = diag(SLOW_SPECTRUM) seen through the tally, started at its fixed point."""
    def step(s, x, theta):
        return (s.add(s.mul(Tensor.from_numpy(SLOW_SPECTRUM), s.bind(tally.op, x[0])[0]), theta),)

    theta = np.linspace(1.0, 2.0, N_SLOW)
    sol = FixedPoint(step, **options).solve(theta, [theta / (1 - SLOW_SPECTRUM)], runtime=tally.runtime())
    return sol, np.linspace(-1.0, 1.0, N_SLOW)


@pytest.mark.parametrize("solver", ["gmres", "bicgstab", "series"])
@pytest.mark.parametrize("limit", [1, 2, 50, 61, 130])
def test_solve_maxiter_is_honoured_and_named(solver, limit):
    tally = Tally()
    sol, cotangent = slow_problem(tally, solver=solver, solve_maxiter=limit)
    tally.products = 0
    with pytest.raises(FixedPointError) as info:
        sol.vjp([cotangent])
    message = str(info.value)
    assert tally.products <= limit
    assert f"the adjoint solve ({solver}) to reach a relative residual of 1e-12 within {limit} products" in message
    got = message.split(", got ")[1]
    residual, count = float(got.split(" after ")[0]), int(got.split(" after ")[1].split()[0])
    assert count == tally.products and 1e-12 < residual < 10  # a finite residual, of the products counted
    if solver == "gmres" and limit >= 50:  # its restarts fit the limit: no products lost to an unfinished one
        assert residual < 1e-2 and count >= limit - GMRES_RESTART
    tally.products = 0
    with pytest.raises(FixedPointError, match=rf"the tangent solve \({solver}\) .* within {limit} products"):
        sol.jvp(np.ones(N_SLOW))
    assert tally.products <= limit


@pytest.mark.parametrize("solver", ["gmres", "bicgstab", "series"])
def test_a_solve_within_its_limit_is_right(solver):
    tally = Tally()
    sol, cotangent = slow_problem(tally, solver=solver, solve_maxiter=10_000)
    tally.products = 0
    theta_bar = sol.vjp([cotangent]).to_numpy()
    assert tally.products <= 10_000
    assert close(theta_bar, cotangent / (1 - SLOW_SPECTRUM), 1e-9)
