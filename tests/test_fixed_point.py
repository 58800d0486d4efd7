"""tenferro_py.fixed_point: derivatives of a fixed point against central differences, against the
unrolled iteration (staged), and against each other; solvers; errors."""

import numpy as np
import pytest

from tenferro_py import EagerRuntime, SliceConfig, Tensor
from tenferro_py.errors import InvalidArgument
from tenferro_py.fixed_point import FixedPoint, FixedPointError
from tenferro_py.staged import Program, Stage

N, M = 5, 3  # the state: a vector of N and an M × 2 matrix
RNG = np.random.default_rng(7)
W = RNG.standard_normal((N, N))
W *= 0.6 / np.linalg.norm(W, 2)  # a contraction: the iteration converges
B = RNG.standard_normal((M, 2, N)) * 0.3
THETA = RNG.standard_normal(N)


def step(s, x, theta):
    """v ← tanh(W v + θ), P ← P / 2 + B v: two coupled tensors, both depending on θ."""
    v, p = x
    v_next = s.tanh(s.add(s.einsum([Tensor.from_numpy(W), v], "ij,j->i"), theta))
    return v_next, s.add(s.scale_real(p, 0.5), s.einsum([Tensor.from_numpy(B), v_next], "abj,j->ab"))


def readout(s, x, theta):
    """ℓ = Σ v² + Σ sin(θ) v + Σ P²."""
    v, p = x
    return s.add(s.add(s.reduce_sum(s.mul(v, v)), s.reduce_sum(s.mul(s.sin(theta), v))), s.reduce_sum(s.mul(p, p)))


START = (np.zeros(N), np.zeros((M, 2)))


def solved(theta, problem=None):
    return (problem or FixedPoint(step)).solve(Tensor.from_numpy(np.asarray(theta, float)), START)


def loss(theta):
    return solved(theta).value(readout)


def test_the_fixed_point_solves_its_equation():
    sol = solved(THETA)
    v, p = (t.to_numpy() for t in sol.x)
    assert np.abs(v - np.tanh(W @ v + THETA)).max() <= 1e-11
    assert np.abs(p - (0.5 * p + B @ v)).max() <= 1e-11
    assert sol.residual <= 1e-12 and 1 < sol.iterations < 100


def test_gradient_against_central_differences():
    value, grad = solved(THETA).value_and_grad(readout)
    assert value == loss(THETA)
    h = 1e-5
    fd = np.array([(loss(THETA + h * e) - loss(THETA - h * e)) / (2 * h) for e in np.eye(N)])
    assert np.abs(grad.to_numpy() - fd).max() <= 1e-8 * max(1.0, np.abs(fd).max())


def test_derivatives_do_not_depend_on_what_was_asked_before_or_on_no_grad():
    """A value first (nothing recorded), or a call inside the runtime's no_grad, changes no derivative."""
    _, reference = solved(THETA).value_and_grad(readout)
    sol = solved(THETA)
    sol.value(readout)
    assert np.array_equal(sol.value_and_grad(readout)[1].to_numpy(), reference.to_numpy())
    rt = EagerRuntime()
    sol = FixedPoint(step).solve(Tensor.from_numpy(THETA), START, runtime=rt)
    with rt.no_grad():
        assert np.array_equal(sol.value_and_grad(readout)[1].to_numpy(), reference.to_numpy())


def test_forward_mode_and_curvature_against_reverse_and_differences():
    sol = solved(THETA)
    direction = RNG.standard_normal(N)
    _, grad = sol.value_and_grad(readout)
    _, slope = sol.value_and_jvp(readout, Tensor.from_numpy(direction))
    assert abs(slope - grad.to_numpy() @ direction) <= 1e-12 * np.abs(grad.to_numpy()).sum()
    value, grad2, hv = sol.value_grad_and_curvature(readout, Tensor.from_numpy(direction))
    assert np.array_equal(grad2.to_numpy(), grad.to_numpy())
    h = 1e-4
    fd = (solved(THETA + h * direction).value_and_grad(readout)[1].to_numpy()
          - solved(THETA - h * direction).value_and_grad(readout)[1].to_numpy()) / (2 * h)
    assert np.abs(hv.to_numpy() - fd).max() <= 1e-7 * max(1.0, np.abs(fd).max())
    other = RNG.standard_normal(N)  # the Hessian is symmetric: eᵀ H d = dᵀ H e
    hv_other = sol.value_grad_and_curvature(readout, Tensor.from_numpy(other))[2].to_numpy()
    assert abs(other @ hv.to_numpy() - direction @ hv_other) <= 1e-11 * np.abs(hv.to_numpy()).max()


def test_x_tangent_and_cotangent_are_adjoint():
    sol = solved(THETA)
    direction = RNG.standard_normal(N)
    x_bar = (RNG.standard_normal(N), RNG.standard_normal((M, 2)))
    x_dot = sol.jvp(Tensor.from_numpy(direction))
    theta_bar = sol.vjp(x_bar).to_numpy()
    lhs = sum(float(np.sum(b * d.to_numpy())) for b, d in zip(x_bar, x_dot))
    assert abs(lhs - theta_bar @ direction) <= 1e-12 * np.abs(theta_bar).sum()


def unrolled_gradient(steps):
    """The gradient of ℓ after ``steps`` iterations from START, by staged reverse mode: θ rides along
    in the state z = [v; vec P; θ] so that each stage is one step of the same map."""
    def split(s, z):
        v = s.slice(z, SliceConfig([0], [N]))
        p = s.reshape(s.slice(z, SliceConfig([N], [N + 2 * M])), (M, 2))
        return (v, p), s.slice(z, SliceConfig([N + 2 * M], [2 * N + 2 * M]))

    def join(s, x, theta):
        v, p = x
        return s.concatenate([v, s.reshape(p, (2 * M,)), theta], 0)

    def stage(s, z):
        x, theta = split(s, z)
        return join(s, step(s, x, theta), theta), None

    def source(s, theta):
        return join(s, (s.zeros((N,), np.float64), s.zeros((M, 2), np.float64)), theta)

    program = Program(source, [Stage(stage, 0.0)] * steps, lambda s, z: readout(s, *split(s, z)))
    return program.value_and_grad(Tensor.from_numpy(THETA))


def test_gradient_equals_the_unrolled_iterations_once_converged():
    sol = solved(THETA, FixedPoint(step, tol=1e-15))
    _, implicit = sol.value_and_grad(readout)
    value, unrolled = unrolled_gradient(80)
    assert abs(value - sol.value(readout)) <= 1e-12
    assert np.abs(unrolled.to_numpy() - implicit.to_numpy()).max() <= 1e-8 * np.abs(implicit.to_numpy()).max()
    _, early = unrolled_gradient(5)  # and the unrolled gradient does depend on the count
    assert np.abs(early.to_numpy() - implicit.to_numpy()).max() > 1e-4


@pytest.mark.parametrize("solver", ["bicgstab", "series"])
def test_solvers_agree(solver):
    _, reference = solved(THETA).value_and_grad(readout)
    sol = solved(THETA, FixedPoint(step, solver=solver))
    _, grad = sol.value_and_grad(readout)
    assert np.abs(grad.to_numpy() - reference.to_numpy()).max() <= 1e-10 * np.abs(reference.to_numpy()).max()


def test_complex_state_with_a_gauge():
    """z ← e^{iφ(z)} (A z + θ b) / ‖·‖ has a fixed point only up to a phase; the gauge makes z's first
    entry real and positive, and the derivative is the gauge-fixed map's."""
    a = RNG.standard_normal((4, 4)) + 1j * RNG.standard_normal((4, 4))
    b = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)

    def power_step(s, x, theta):
        (z,) = x
        shift = s.einsum([s.convert(theta, np.complex128), Tensor.from_numpy(b)], ",i->i")
        w = s.add(s.einsum([Tensor.from_numpy(a), z], "ij,j->i"), shift)
        norm = s.convert(s.sqrt(s.reduce_sum(s.real(s.mul(w, s.conj(w))))), np.complex128)
        return (s.einsum([w, s.div(norm, s.mul(norm, norm))], "i,->i"),)  # w / ‖w‖

    def phase(s, new, old):
        (z,) = new
        first = s.slice(z, SliceConfig([0], [1]))
        unit = s.div(s.conj(first), s.convert(s.sqrt(s.real(s.mul(first, s.conj(first)))), np.complex128))
        return (s.einsum([z, unit], "i,j->i"),)

    def weight(s, x, theta):
        (z,) = x
        return s.real(s.einsum([z, s.conj(z), Tensor.from_numpy(np.arange(4.0) + 0j)], "i,i,i->"))

    problem = FixedPoint(power_step, phase, maxiter=5000)
    theta = 0.7

    def value(t):
        return problem.solve(t, [np.ones(4, complex)]).value(weight)

    sol = problem.solve(theta, [np.ones(4, complex)])
    z = sol.x[0].to_numpy()
    assert z[0].imag == 0 and z[0].real > 0
    _, grad = sol.value_and_grad(weight)
    h = 1e-5
    assert abs(grad.item() - (value(theta + h) - value(theta - h)) / (2 * h)) <= 1e-8
    _, slope = sol.value_and_jvp(weight)
    assert abs(slope - grad.item()) <= 1e-10


def test_errors_name_the_iterations_and_the_residual():
    with pytest.raises(FixedPointError, match=r"FixedPoint.solve: expected a change <= 1e-12 .* within 3 steps, "
                                              r"got .* after 3 steps"):
        solved(THETA, FixedPoint(step, maxiter=3))
    sol = solved(THETA, FixedPoint(step, solver="series", solve_maxiter=2))
    with pytest.raises(FixedPointError, match=r"the adjoint solve \(series\) .* within 2 products, got .* after 2"):
        sol.value_and_grad(readout)
    with pytest.raises(InvalidArgument, match="solver one of gmres, bicgstab, series"):
        FixedPoint(step, solver="newton")
    with pytest.raises(InvalidArgument, match="tol in"):
        FixedPoint(step, tol=0.0)
    with pytest.raises(InvalidArgument, match="FixedPoint.step: expected 2 tensors of shapes"):
        FixedPoint(lambda s, x, theta: x[:1]).solve(0.5, START)
    with pytest.raises(InvalidArgument, match="a readout that returns a scalar tensor"):
        solved(THETA).value(lambda s, x, theta: x[0])
    with pytest.raises(InvalidArgument, match=r"FixedPointSolution.vjp: expected cotangents of the state's shapes "
                                              r"\[\[5\], \[3, 2\]\], got \[\[5\]\]"):
        solved(THETA).vjp([np.ones(N)])
    with pytest.raises(InvalidArgument, match="jvp: expected a direction of theta's shape"):
        solved(THETA).jvp(np.ones(2))
    with pytest.raises(FixedPointError, match="expected finite iterates, got a non-finite one at step 1"):
        FixedPoint(lambda s, x, theta: (s.add(x[0], Tensor.from_numpy(np.full(2, np.inf))),)).solve(0.5, [np.ones(2)])
    with pytest.raises(InvalidArgument, match="FixedPoint.step: expected a tuple of tensors, got EagerTensor"):
        FixedPoint(lambda s, x, theta: x[0]).solve(0.5, [np.ones(2)])
    with pytest.raises(InvalidArgument, match="x0: a Tensor, a NumPy array or a real number"):
        FixedPoint(step).solve(0.5, ["not a tensor"])
