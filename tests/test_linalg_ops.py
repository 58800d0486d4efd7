"""Linear algebra beyond one matrix's SVD and eigh: stacks of matrices through svd and eigh,
the thin QR (its sign convention, its derivatives at full and deficient rank), solve, inv and
norm: forward against NumPy in every dtype, check_grads to order 2 (real and complex), and
errors.
"""

import math

import numpy as np
import pytest
from conftest import random

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.linalg import unit_solve_p
from tenferro_py.testing import check_grads

# The QR tests at deficient rank characterise the rules where they warn (tests/test_split.py tests that).
pytestmark = pytest.mark.filterwarnings("ignore::tenferro_py.DegenerateDerivativeWarning")

FLOATS = [np.float64, np.float32, np.complex128, np.complex64]
ORDER2 = dict(modes=("fwd", "rev"), order=2)


def tol(dtype):
    return 2e-5 if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-12


def values(*ts):
    return [t.value().to_numpy() for t in ts]


def wide_engine():
    return tf.CpuEngine(tf.Pool.builder().threads(2).build())


def like(s, re, x):
    """The real tensor re in x's dtype (complex when x is)."""
    return s.complex(re, s.zeros(re.shape, re.dtype)) if x.dtype.kind == "c" else re


def leading(s, x, axis, k):
    limits = list(x.shape)
    limits[axis] = k
    return s.slice(x, SliceConfig([0] * x.ndim, limits))


# --- stacks through svd and eigh ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 2, 2, 5), (1, 3, 3)])
def test_batched_svd_is_numpys_and_each_matrix_s(rt, run, rng, shape, dtype):
    a = random(rng, shape, dtype)
    x = rt.variable_from(tf.Tensor(a))
    u, sv, vt = values(*run(lambda s: s.svd(x)))
    m, n = shape[-2:]
    k = min(m, n)
    assert (u.shape, sv.shape, vt.shape) == (shape[:-2] + (m, k), shape[:-2] + (k,), shape[:-2] + (k, n))
    np.testing.assert_allclose(sv, np.linalg.svd(a, compute_uv=False), rtol=tol(dtype), atol=tol(dtype))
    np.testing.assert_allclose(np.einsum("...ai,...i,...ib->...ab", u, sv, vt), a, atol=10 * tol(dtype))
    for index in np.ndindex(*shape[:-2]):  # each matrix: bit for bit the 2-D op's
        one = values(*run(lambda s: s.svd(tf.Tensor(a[index]))))
        for got, want in zip((u, sv, vt), one):
            np.testing.assert_array_equal(got[index], want)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
def test_batched_eigh_is_numpys(rt, run, rng, dtype):
    a = random(rng, (2, 3, 4, 4), dtype)
    w, v = values(*run(lambda s: s.eigh(rt.variable_from(tf.Tensor(a)))))
    hermitian = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
    np.testing.assert_allclose(w, np.linalg.eigh(hermitian)[0], rtol=tol(dtype), atol=tol(dtype))
    np.testing.assert_allclose(np.einsum("...ai,...i,...bi->...ab", v, w, np.conj(v)), hermitian, atol=10 * tol(dtype))


def batched_reconstruction(s, a):
    u, sv, vt = s.svd(a)
    return s.einsum([u, like(s, s.sqrt(sv), u), vt], "zai,zi,zib->zab")


def batched_truncation(s, a):
    """U_k S_k V_kᴴ of each matrix, truncated by slices of the stacked factors."""
    u, sv, vt = s.svd(a)
    z, m, k = u.shape
    n = vt.shape[2]
    uk = s.slice(u, SliceConfig([0, 0, 0], [z, m, 1]))
    vk = s.slice(vt, SliceConfig([0, 0, 0], [z, 1, n]))
    return s.einsum([uk, like(s, leading(s, sv, 1, 1), u), vk], "zai,zi,zib->zab")


def batched_matrix_exp(s, a):
    w, v = s.eigh(a)
    return s.einsum([v, like(s, s.exp(w), v), s.conj(v)], "zai,zi,zbi->zab")


@pytest.mark.parametrize("f", [batched_reconstruction, batched_truncation, batched_matrix_exp])
@pytest.mark.parametrize("complex_", [False, True])
def test_batched_svd_and_eigh_grads(rng, f, complex_):
    shape = (3, 3, 3) if f is batched_matrix_exp else (2, 4, 3)
    check_grads(f, [random(rng, shape, np.complex128 if complex_ else np.float64)], **ORDER2)


def test_batched_gradient_is_each_matrix_s(rt, eng, rng):
    a = random(rng, (3, 4, 3))
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(batched_truncation(s, x)))
    g = rt.grad(eng, y, x).value().to_numpy()
    for i in range(3):
        xi = rt.variable_from(tf.Tensor(a[i]))
        yi = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.reshape(batched_truncation(
            s, s.reshape(xi, (1, 4, 3))), (4, 3))))
        np.testing.assert_array_equal(g[i], rt.grad(eng, yi, xi).value().to_numpy())


def test_batched_on_a_wide_engine_is_bitwise_the_serial_one(rng):
    a = random(rng, (4, 5, 3))
    results = []
    for eng in (tf.CpuEngine.serial(), wide_engine()):
        rt = tf.EagerRuntime()
        x = rt.variable_from(tf.Tensor(a))
        y = rt.with_eager_session(eng, lambda s: s.reduce_sum(batched_reconstruction(s, x)))
        results.append(values(y, rt.grad(eng, y, x)))
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


def test_empty_stacks(run):
    u, sv, vt = run(lambda s: s.svd(tf.Tensor(np.zeros((0, 4, 3)))))
    w, v = run(lambda s: s.eigh(tf.Tensor(np.zeros((2, 0, 3, 3)))))
    assert (u.shape, sv.shape, vt.shape, w.shape, v.shape) == ((0, 4, 3), (0, 3), (0, 3, 3), (2, 0, 3), (2, 0, 3, 3))


# --- qr -----------------------------------------------------------------------------------------

QR_SHAPES = [(5, 3), (3, 3), (3, 5), (4, 1), (1, 4)]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape", QR_SHAPES + [(2, 4, 3)])
def test_qr_is_numpys_with_a_nonnegative_diagonal(rt, run, rng, shape, dtype):
    a = random(rng, shape, dtype)
    q, r = values(*run(lambda s: s.qr(rt.variable_from(tf.Tensor(a)))))
    m, n = shape[-2:]
    k = min(m, n)
    assert (q.shape, r.shape, q.dtype, r.dtype) == (shape[:-2] + (m, k), shape[:-2] + (k, n), a.dtype, a.dtype)
    d = np.diagonal(r, axis1=-2, axis2=-1)
    assert np.all(d.real >= 0) and np.all(d.imag == 0)
    np.testing.assert_array_equal(np.tril(r, -1), 0)
    np.testing.assert_allclose(q @ r, a, atol=10 * tol(dtype))
    np.testing.assert_allclose(np.conj(np.swapaxes(q, -1, -2)) @ q, np.broadcast_to(np.eye(k), shape[:-2] + (k, k)),
                               atol=10 * tol(dtype))
    q_np, r_np = np.linalg.qr(a)  # the same factors up to the signs of R's diagonal
    signs = np.sign(np.diagonal(r_np, axis1=-2, axis2=-1).real)
    np.testing.assert_allclose(q, q_np * signs[..., None, :], atol=10 * tol(dtype))
    np.testing.assert_allclose(r, r_np * signs[..., :, None], atol=10 * tol(dtype))


def q_of(s, a):
    return s.qr(a)[0]


def r_of(s, a):
    return s.qr(a)[1]


@pytest.mark.parametrize("shape", QR_SHAPES)
@pytest.mark.parametrize("complex_", [False, True])
def test_qr_grads_of_q_and_r(rng, shape, complex_):
    a = random(rng, shape, np.complex128 if complex_ else np.float64)
    check_grads(q_of, [a], **ORDER2)
    check_grads(r_of, [a], **ORDER2)


@pytest.mark.parametrize("complex_", [False, True])
def test_qr_grads_of_a_wide_matrix_whose_other_columns_are_anything(rng, complex_):
    """Q and R are smooth wherever the leading k × k block is invertible: the other columns may be
    zero or repeat the leading ones."""
    a = random(rng, (3, 7), np.complex128 if complex_ else np.float64)
    a[:, 3] = 0
    a[:, 4] = a[:, 5] = a[:, 0]
    a[:, 6] = a[:, 1] - 2 * a[:, 2]
    check_grads(q_of, [a], **ORDER2)
    check_grads(r_of, [a], **ORDER2)


def rank_deficient(rng, kind, dtype):
    """A 5 × 4 matrix whose first two columns are independent and whose last two are not."""
    a = random(rng, (5, 4), dtype)
    if kind == "zero":
        a[:, 2:] = 0
    elif kind == "dependent":
        a[:, 2] = a[:, 0] - 2 * a[:, 1]
        a[:, 3] = 3 * a[:, 1]
    else:  # a zero and a dependent column
        a[:, 2] = 0
        a[:, 3] = a[:, 0] + a[:, 1]
    return a


def leading_factors(r):
    """Q[:, :r] and R[:r, :], the factors that stay smooth where the first r columns are independent."""

    def f(s, a):
        q, rr = s.qr(a)
        m, n = a.shape
        return s.concatenate([s.reshape(leading(s, q, 1, r), (m * r,)), s.reshape(leading(s, rr, 0, r), (r * n,))], 0)

    return f


def keeping_the_deficiency(kind, f):
    """f of [x, the two deficient columns made from x]: every path keeps the rank at 2."""

    def g(s, x):
        if kind == "zero":
            rest = s.zeros((x.shape[0], 2), x.dtype)
        else:
            mix = {"dependent": [[1.0, 0.0], [-2.0, 3.0]], "mixed": [[0.0, 1.0], [0.0, 1.0]]}[kind]
            rest = s.einsum([x, s.constant_from(tf.Tensor(np.array(mix, dtype=x.dtype)))], "ai,ij->aj")
        return f(s, s.concatenate([x, rest], 1))

    return g


@pytest.mark.parametrize("kind", ["zero", "dependent", "mixed"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32], ids=lambda t: np.dtype(t).name)
def test_qr_at_deficient_rank_is_finite(rt, eng, rng, kind, dtype):
    """Q and R have no derivative there; the rules still give finite numbers, to second order."""
    x = rt.variable_from(tf.Tensor(rank_deficient(rng, kind, dtype)))
    for which in (0, 1):
        y = rt.with_eager_session(eng, lambda s: s.qr(x)[which])
        g = rt.vjp(eng, y, x, tf.Tensor(random(rng, y.shape, dtype)))
        hv = rt.jvp(eng, g, x, tf.Tensor(random(rng, x.shape, dtype)))
        t = rt.jvp(eng, y, x, tf.Tensor(random(rng, x.shape, dtype)))
        for value in values(g, hv, t):
            assert np.all(np.isfinite(value))


@pytest.mark.parametrize("kind", ["zero", "dependent", "mixed"])
@pytest.mark.parametrize("complex_", [False, True])
def test_qr_at_deficient_rank_exact_where_differentiable(rng, kind, complex_):
    """With the first r columns independent, Q[:, :r] and R[:r, :] are smooth: the first derivative
    is exact along every direction, and every order along paths that keep the rank."""
    dtype = np.complex128 if complex_ else np.float64
    a = rank_deficient(rng, kind, dtype)
    check_grads(leading_factors(2), [a], modes=("fwd", "rev"), order=1)
    check_grads(keeping_the_deficiency(kind, leading_factors(2)), [a[:, :2]], **ORDER2)


def test_qr_of_zero_matrix_has_finite_derivatives(rt, eng, rng):
    x = rt.variable_from(tf.Tensor(np.zeros((4, 3))))
    for which in (0, 1):
        y = rt.with_eager_session(eng, lambda s: s.qr(x)[which])
        g = rt.vjp(eng, y, x, tf.Tensor(random(rng, y.shape)))
        for value in values(g, rt.jvp(eng, g, x, tf.Tensor(random(rng, (4, 3))))):
            assert np.all(np.isfinite(value))


def test_qr_float32_derivatives_agree_with_float64(rt, eng, rng):
    a = random(rng, (5, 3))
    w = random(rng, (5, 3))
    grads = []
    for dtype in (np.float64, np.float32):
        x = rt.variable_from(tf.Tensor(a.astype(dtype)))
        y = rt.with_eager_session(eng, lambda s: s.qr(x)[0])
        grads.append(rt.vjp(eng, y, x, tf.Tensor(w.astype(dtype))).value().to_numpy())
    assert grads[1].dtype == np.float32
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-4, atol=1e-4)


def test_batched_qr_grads(rng):
    check_grads(lambda s, a: s.qr(a)[0], [random(rng, (2, 4, 3))], **ORDER2)


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("complex_", [False, True])
def test_unit_triangular_solve_grads(rng, lower, right, complex_):
    """The primitive QR's rules solve with: (I + strict(T)) X = B, or X (I + strict(T)) = B."""
    dtype = np.complex128 if complex_ else np.float64
    t, b = random(rng, (3, 3), dtype), random(rng, (4, 3) if right else (3, 4), dtype)
    check_grads(lambda s, t, b: s.bind(unit_solve_p, t, b, lower=lower, right=right)[0], [t, b], **ORDER2)
    rt = tf.EagerRuntime()
    x = rt.with_eager_session(tf.CpuEngine.serial(), lambda s: s.bind(unit_solve_p, s.constant_from(tf.Tensor(t)),
                                                                      s.constant_from(tf.Tensor(b)), lower=lower,
                                                                      right=right)[0]).value().to_numpy()
    unit = np.eye(3) + (np.tril(t, -1) if lower else np.triu(t, 1))
    np.testing.assert_allclose(x @ unit if right else unit @ x, b, atol=1e-12)


# --- solve, inv -----------------------------------------------------------------------------------


def well_conditioned(rng, shape, dtype=np.float64):
    return (random(rng, shape, dtype) + 4 * np.eye(shape[-1])).astype(dtype)


SOLVE_SHAPES = [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 4)), ((2, 3, 3), (3,)), ((3, 3), (2, 3, 1))]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shapes", SOLVE_SHAPES, ids=str)
def test_solve_is_numpys(run, rng, shapes, dtype):
    a, b = well_conditioned(rng, shapes[0], dtype), random(rng, shapes[1], dtype)
    x = run(lambda s: s.solve(tf.Tensor(a), tf.Tensor(b))).value().to_numpy()
    want = np.linalg.solve(a, b)
    assert x.shape == want.shape and x.dtype == a.dtype
    np.testing.assert_allclose(x, want, rtol=10 * tol(dtype), atol=10 * tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (2, 3, 3)])
def test_inv_is_numpys(run, rng, shape, dtype):
    a = well_conditioned(rng, shape, dtype)
    y = run(lambda s: s.inv(tf.Tensor(a))).value().to_numpy()
    assert y.dtype == a.dtype
    np.testing.assert_allclose(y, np.linalg.inv(a), rtol=10 * tol(dtype), atol=10 * tol(dtype))


@pytest.mark.parametrize("shapes", SOLVE_SHAPES, ids=str)
@pytest.mark.parametrize("complex_", [False, True])
def test_solve_grads(rng, shapes, complex_):
    dtype = np.complex128 if complex_ else np.float64
    check_grads(lambda s, a, b: s.solve(a, b), [well_conditioned(rng, shapes[0], dtype), random(rng, shapes[1], dtype)],
                **ORDER2)


@pytest.mark.parametrize("shape", [(3, 3), (2, 2, 2)])
@pytest.mark.parametrize("complex_", [False, True])
def test_inv_grads(rng, shape, complex_):
    check_grads(lambda s, a: s.inv(a), [well_conditioned(rng, shape, np.complex128 if complex_ else np.float64)],
                **ORDER2)


def test_solve_and_inv_gradient_values(rt, eng, rng):
    """d⟨W, A⁻¹ b⟩/db = A⁻ᵀ W, d⟨W, A⁻¹⟩/dA = −A⁻ᵀ W A⁻ᵀ."""
    a, b, w = well_conditioned(rng, (3, 3)), random(rng, (3,)), random(rng, (3, 3))
    x_a, x_b = rt.variable_from(tf.Tensor(a)), rt.variable_from(tf.Tensor(b))
    y = rt.with_eager_session(eng, lambda s: s.solve(x_a, x_b))
    np.testing.assert_allclose(rt.vjp(eng, y, x_b, tf.Tensor(w[0])).value().to_numpy(), np.linalg.solve(a.T, w[0]))
    y = rt.with_eager_session(eng, lambda s: s.inv(x_a))
    inv_t = np.linalg.inv(a).T
    np.testing.assert_allclose(rt.vjp(eng, y, x_a, tf.Tensor(w)).value().to_numpy(), -inv_t @ w @ inv_t)


# --- norm ------------------------------------------------------------------------------------------

MATRIX_ORDS = [None, "fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]
VECTOR_ORDS = [None, 2, 1, math.inf, -math.inf]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
def test_norm_is_numpys(run, rng, dtype):
    for shape, ords in (((4, 3), MATRIX_ORDS), ((3, 5), MATRIX_ORDS), ((5,), VECTOR_ORDS)):
        a = random(rng, shape, dtype)
        for ord in ords:
            got = run(lambda s: s.norm(tf.Tensor(a), ord)).value().to_numpy()
            assert got.shape == () and got.dtype == np.abs(a).dtype
            np.testing.assert_allclose(got, np.linalg.norm(a, ord), rtol=10 * tol(dtype))


@pytest.mark.parametrize("ord", MATRIX_ORDS + ["vector " + repr(o) for o in VECTOR_ORDS], ids=str)
@pytest.mark.parametrize("complex_", [False, True])
def test_norm_grads(rng, ord, complex_):
    dtype = np.complex128 if complex_ else np.float64
    if isinstance(ord, str) and ord.startswith("vector"):
        a, ord = random(rng, (5,), dtype), eval(ord.split(" ")[1], {"inf": math.inf})
    else:
        a = random(rng, (4, 3), dtype)
    check_grads(lambda s, x: s.norm(x, ord), [a], **ORDER2)


def test_frobenius_norm_at_zero_has_derivative_zero(rt, eng, rng):
    """‖x‖ has no derivative at 0; every order gives 0 there (the smallest subgradient), never NaN."""
    for shape in ((3,), (3, 2)):
        for dtype in (np.float64, np.complex128):
            x = rt.variable_from(tf.Tensor(np.zeros(shape, dtype)))
            y = rt.with_eager_session(eng, lambda s: s.norm(x))
            g = rt.grad(eng, y, x)
            hv = rt.jvp(eng, g, x, tf.Tensor(random(rng, shape, dtype)))
            t = rt.jvp(eng, y, x, tf.Tensor(random(rng, shape, dtype)))
            for value in values(y, g, hv, t):
                np.testing.assert_array_equal(value, 0)


def test_norm_extremum_ties_share_the_derivative(rt, eng):
    """At a tie the derivative is split equally among the maxima (JAX's convention)."""
    a = np.array([[1.0, -2.0, 0.5], [2.0, 1.0, 0.5]])  # column sums of |a|: 3, 3, 1
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.norm(x, 1))
    np.testing.assert_array_equal(rt.grad(eng, y, x).value().to_numpy(), [[0.5, -0.5, 0], [0.5, 0.5, 0]])
    v = rt.variable_from(tf.Tensor(np.array([3.0, -3.0, 1.0])))
    y = rt.with_eager_session(eng, lambda s: s.norm(v, math.inf))
    np.testing.assert_array_equal(rt.grad(eng, y, v).value().to_numpy(), [0.5, -0.5, 0])


def test_spectral_norm_gradient_is_the_leading_pair(rt, eng, rng):
    a = random(rng, (4, 3))
    u, _, vt = np.linalg.svd(a)
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.norm(x, 2))
    np.testing.assert_allclose(rt.grad(eng, y, x).value().to_numpy(), np.outer(u[:, 0], vt[0]), atol=1e-13)


def test_frobenius_norm_does_not_overflow(run):
    for value in (1e200, 1e-200):
        got = run(lambda s: s.norm(tf.Tensor(np.full((3, 4), value)))).value().to_numpy()
        np.testing.assert_allclose(got, value * math.sqrt(12), rtol=1e-14)


# --- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, cls, message",
    [
        (lambda s: s.qr(tf.Tensor(np.ones(3))), tf.ShapeMismatch, r"^qr: expected a matrix or a stack of them"),
        (lambda s: s.svd(tf.Tensor(np.ones(()))), tf.ShapeMismatch, r"^svd: expected a matrix or a stack"),
        (lambda s: s.inv(tf.Tensor(np.ones((2, 3)))), tf.ShapeMismatch, r"^inv: expected a square matrix.*\[2, 3\]"),
        (lambda s: s.eigh(tf.Tensor(np.ones((2, 3, 4)))), tf.ShapeMismatch, r"^eigh: expected a square matrix"),
        (lambda s: s.solve(tf.Tensor(np.ones((2, 3))), tf.Tensor(np.ones(2))), tf.ShapeMismatch,
         r"^solve: expected a square matrix"),
        (lambda s: s.solve(tf.Tensor(np.eye(3)), tf.Tensor(np.ones(2))), tf.ShapeMismatch,
         r"^solve: expected b of shape \[3\] or \[\.\.\., 3, m\].*got shape \[2\]"),
        (lambda s: s.solve(tf.Tensor(np.eye(3)), tf.Tensor(np.ones((2, 3)))), tf.ShapeMismatch, r"^solve: expected b"),
        (lambda s: s.solve(tf.Tensor(np.ones((2, 3, 3))), tf.Tensor(np.ones((4, 3, 1)))), tf.ShapeMismatch,
         r"^solve: expected operands with equal leading \(batch\) axes \(\[2\]\), got \[4\]"),
        (lambda s: s.solve(tf.Tensor(np.eye(2)), tf.Tensor(np.ones(2, np.float32))), tf.DTypeMismatch,
         r"^solve: expected a and b of one dtype \(a float64\), got b float32"),
        (lambda s: s.solve(tf.Tensor(np.ones((2, 2))), tf.Tensor(np.ones(2))), tf.LinalgError,
         r"^solve: expected a nonsingular matrix, got a singular one"),
        (lambda s: s.inv(tf.Tensor(np.array([[1.0, 2.0], [2.0, 4.0]]))), tf.LinalgError,
         r"^inv: expected a nonsingular matrix, got a singular one"),
        (lambda s: s.inv(tf.Tensor(np.zeros((2, 2, 2)))), tf.LinalgError, r"^inv: expected a nonsingular matrix"),
        (lambda s: s.solve(tf.Tensor(np.diag([1e-300, 1.0])), tf.Tensor(np.array([1e10, 1.0]))), tf.LinalgError,
         r"^solve: expected a matrix nonsingular to working precision, got one whose result overflows"),
        (lambda s: s.norm(tf.Tensor(np.ones((2, 2, 2)))), tf.ShapeMismatch, r"^norm: expected a vector or a matrix"),
        (lambda s: s.norm(tf.Tensor(np.ones(3)), "fro"), tf.InvalidArgument, r"^norm: expected a vector order among"),
        (lambda s: s.norm(tf.Tensor(np.ones((3, 3))), 3), tf.InvalidArgument,
         r"^norm: expected a matrix order .*got 3"),
        (lambda s: s.norm(tf.Tensor(np.ones((3, 3))), True), tf.InvalidArgument, r"^norm: expected a matrix order"),
        (lambda s: s.qr(tf.Tensor(np.eye(2)), derivative_eps=0.0), tf.InvalidArgument, r"^qr: expected derivative_eps"),
    ],
)
def test_errors(run, call, cls, message):
    with pytest.raises(cls, match=message):
        run(call)


def _with_entry(dtype, value, shape=(3, 3)):
    a = np.eye(shape[-1], dtype=dtype) * np.ones(shape, dtype)
    a[..., 1, 2] = value
    return a


@pytest.mark.parametrize("value", [np.inf, np.nan])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("width", [1, 2])
@pytest.mark.parametrize(
    "op, what",
    [("qr", "a matrix"), ("inv", "a matrix"), ("solve a", "a matrix"), ("solve b", "a right-hand side"),
     ("svd of a stack", "a matrix"), ("norm nuc", "a matrix")],  # norm's SVD names itself
)
def test_non_finite_input_raises(op, what, width, dtype, value):
    """On a serial engine and on worker threads; the engine goes on working after the error."""
    rt = tf.EagerRuntime()
    eng = tf.CpuEngine(tf.Pool.builder().threads(width).build())
    calls = {
        "qr": lambda s, x: s.qr(x)[1],
        "inv": lambda s, x: s.inv(x),
        "solve a": lambda s, x: s.solve(x, s.constant_from(tf.Tensor(np.ones(3, dtype)))),
        "solve b": lambda s, x: s.solve(s.constant_from(tf.Tensor(np.eye(3, dtype=dtype))), s.reshape(
            s.slice(x, SliceConfig([0, 2], [3, 3])), (3,))),
        "svd of a stack": lambda s, x: s.svd(s.reshape(x, (1, 3, 3)))[1],
        "norm nuc": lambda s, x: s.norm(x, "nuc"),
    }
    name = {"norm": "svd"}.get(op.split()[0], op.split()[0])
    bad = rt.variable_from(tf.Tensor(_with_entry(dtype, value)))
    with pytest.raises(tf.LinalgError, match=rf"^{name}: expected {what} of finite entries, got inf or NaN"):
        rt.with_eager_session(eng, lambda s: calls[op](s, bad).value())
    good = rt.variable_from(tf.Tensor(_with_entry(dtype, 0.5)))
    out = rt.with_eager_session(eng, lambda s: calls[op](s, good))
    assert np.all(np.isfinite(out.value().to_numpy()))
