"""cholesky, det, slogdet, eigvalsh, svdvals, lstsq and matrix_power: values against NumPy's
(real, complex, stacks, zero-size), derivatives by check_grads to order 2, and the degenerate
inputs: a singular det (its derivative is the adjugate, exact), a singular slogdet and a second
derivative of det at a singular matrix (clear errors), a semidefinite cholesky (an error), a
rank-deficient lstsq (NumPy's value; its derivative in a refused), repeated eigen- and singular
values (symmetric functions of them exact to first order). Some cases follow autograd's
tests/test_linalg.py (det, slogdet, cholesky and its reparameterisation trick)."""

import numpy as np
import pytest

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py.errors import InvalidArgument, LinalgError, ShapeMismatch
from tenferro_py.testing import check_grads

# These tests characterise the rules along directions that split repeated values and at cuts
# inside multiplets, where the rules warn; tests/test_split.py tests the warnings themselves.
pytestmark = pytest.mark.filterwarnings("ignore::tenferro_py.DegenerateDerivativeWarning")


def random(rng, shape, complex_=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if complex_ else x


def positive_definite(rng, shape, complex_=False):
    x = random(rng, shape, complex_)
    return x @ np.swapaxes(x, -1, -2).conj() + shape[-1] * np.eye(shape[-1])


def evaluate(rt, eng, f, *arrays):
    xs = [rt.variable_from(tf.Tensor(np.asarray(a))) for a in arrays]
    out = rt.with_eager_session(eng, lambda s: f(s, *xs))
    return tuple(o.value().to_numpy() if isinstance(o, tf.EagerTensor) else o for o in out) \
        if isinstance(out, tuple) else out.value().to_numpy()


def gradient(rt, eng, f, a):
    x = rt.variable_from(tf.Tensor(np.asarray(a)))
    y = rt.with_eager_session(eng, lambda s: f(s, x))
    return rt.grad(eng, y, x).value().to_numpy()


SHAPES = [(3, 3), (1, 1), (2, 4, 4)]


# --- cholesky ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES + [(0, 0), (0, 3, 3)])
@pytest.mark.parametrize("complex_", [False, True])
def test_cholesky_is_numpys(rt, eng, rng, shape, complex_):
    a = positive_definite(rng, shape, complex_)
    got = evaluate(rt, eng, lambda s, x: s.cholesky(x), a)
    np.testing.assert_allclose(got, np.linalg.cholesky(a), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
@pytest.mark.parametrize("complex_", [False, True])
def test_cholesky_check_grads(rng, shape, complex_):
    check_grads(lambda s, x: s.cholesky(x), [positive_definite(rng, shape, complex_)])


def test_cholesky_reads_the_hermitian_part(rt, eng, rng):
    a = positive_definite(rng, (4, 4), True)
    skew = random(rng, (4, 4), True)
    got = evaluate(rt, eng, lambda s, x: s.cholesky(x), a + skew - skew.conj().T)
    np.testing.assert_allclose(got, np.linalg.cholesky(a), rtol=1e-13, atol=1e-14)


def test_cholesky_reparameterisation_trick(rng):
    """autograd's case: ‖L z‖ for a fixed z."""
    z = rng.standard_normal(5)
    check_grads(lambda s, a: s.norm(s.einsum([s.cholesky(a), tf.Tensor(z)], "ij,j->i")),
                [positive_definite(rng, (5, 5))])


@pytest.mark.parametrize("a", [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]], [[-1.0, 0.0], [0.0, -2.0]],
                               [[0.0, 0.0], [0.0, 0.0]]])
def test_cholesky_of_a_matrix_not_positive_definite_is_an_error(run, a):
    with pytest.raises(LinalgError, match="cholesky: expected a Hermitian positive-definite matrix"):
        run(lambda s: s.cholesky(tf.Tensor(np.array(a))).value())


def test_cholesky_shape_and_value_errors(run):
    with pytest.raises(ShapeMismatch, match="cholesky"):
        run(lambda s: s.cholesky(tf.Tensor(np.ones((2, 3)))))
    with pytest.raises(LinalgError, match="cholesky: expected a matrix of finite entries"):
        run(lambda s: s.cholesky(tf.Tensor(np.array([[np.nan]]))).value())


# --- det and slogdet ------------------------------------------------------------------------------


def cofactor_adjugate(a):
    """adj(a) by its definition: adj[j, i] = (−1)^(i+j) det(a without row i and column j)."""
    n = a.shape[0]
    minor = lambda i, j: np.delete(np.delete(a, i, 0), j, 1)  # noqa: E731
    return np.array([[(-1) ** (i + j) * np.linalg.det(minor(j, i)) for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("shape", SHAPES + [(0, 0), (0, 2, 2), (2, 0, 0)])
@pytest.mark.parametrize("complex_", [False, True])
def test_det_and_slogdet_are_numpys(rt, eng, rng, shape, complex_):
    a = random(rng, shape, complex_)
    np.testing.assert_allclose(evaluate(rt, eng, lambda s, x: s.det(x), a), np.linalg.det(a), rtol=1e-13)
    sign, logabs = evaluate(rt, eng, lambda s, x: s.slogdet(x), a)
    want = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, want.sign, rtol=1e-14)
    np.testing.assert_allclose(logabs, want.logabsdet, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("shape", [(4, 4), (3, 3, 3)])
@pytest.mark.parametrize("complex_", [False, True])
def test_det_and_slogdet_check_grads(rng, shape, complex_):
    a = random(rng, shape, complex_)
    check_grads(lambda s, x: s.det(x), [a])
    check_grads(lambda s, x: s.slogdet(x)[1], [a])
    check_grads(lambda s, x: s.slogdet(x)[1], [-a])
    if complex_:
        check_grads(lambda s, x: s.slogdet(x)[0], [a])


def test_det_second_derivative_at_the_identity(rng):
    """d²det at I along (E, F) is tr E tr F − tr(EF): every pair of values is repeated there."""
    check_grads(lambda s, x: s.det(x), [np.eye(4)])
    e, f = rng.standard_normal((2, 4, 4))
    hvp = tnp.jvp(tnp.grad(lambda x: tnp.linalg.det(x)), (np.eye(4),), (e,))[1]
    np.testing.assert_allclose(np.sum(hvp * f), np.trace(e) * np.trace(f) - np.trace(e @ f), rtol=1e-13)


@pytest.mark.parametrize("a, adjugate", [
    ([[1.0, 2.0], [2.0, 4.0]], [[4.0, -2.0], [-2.0, 1.0]]),
    ([[0.0, 1.0], [0.0, 1.0]], [[1.0, -1.0], [0.0, 0.0]]),  # a zero first pivot: LU's corner trick fails here
    ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], [[-3.0, 6.0, -3.0], [6.0, -12.0, 6.0], [-3.0, 6.0, -3.0]]),
    ([[0.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]], [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    (np.outer([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), np.zeros((3, 3))),  # rank n − 2: the adjugate is 0
])
def test_det_derivative_at_a_singular_matrix_is_the_adjugate(rt, eng, a, adjugate):
    a = np.array(a)
    assert evaluate(rt, eng, lambda s, x: s.det(x), a) == pytest.approx(0.0, abs=1e-14)
    scale = np.linalg.norm(a) ** (len(a) - 1)  # the adjugate's size: rounding is relative to it
    np.testing.assert_allclose(gradient(rt, eng, lambda s, x: s.det(x), a), np.array(adjugate).T, atol=1e-15 * scale)
    np.testing.assert_allclose(cofactor_adjugate(a), adjugate, atol=1e-15 * scale)
    check_grads(lambda s, x: s.det(x), [a], order=1)


@pytest.mark.parametrize("rank", [3, 2])
def test_det_derivative_of_a_complex_singular_matrix(rt, eng, rng, rank):
    a = random(rng, (4, rank), True) @ random(rng, (rank, 4), True)  # rank 3: adj ≠ 0; rank 2: adj = 0
    got = gradient(rt, eng, lambda s, x: s.real(s.det(x)), a)  # ∂Re det/∂Re a + i ∂Re det/∂Im a = conj(adj)ᵀ
    np.testing.assert_allclose(got, cofactor_adjugate(a).conj().T, atol=1e-12 * np.abs(a).max() ** 3)
    check_grads(lambda s, x: s.det(x), [a], order=1)


def test_det_at_every_scale(rt, eng):
    a = np.diag([1e-200, 1e-200, 1e200])  # det = 1e-200; the adjugate diag(1, 1, 1e-400 → 0)
    np.testing.assert_allclose(gradient(rt, eng, lambda s, x: s.det(x), a), np.diag([1.0, 1.0, 0.0]), rtol=1e-14,
                               atol=1e-300)


def test_det_second_derivative_at_a_singular_matrix():
    """Exact for n ≤ 2 (adj is linear there); for n ≥ 3 it needs A⁻¹: a clear error at a singular A."""
    check_grads(lambda s, x: s.det(x), [np.array([[1.0, 2.0], [2.0, 4.0]])], order=3)
    check_grads(lambda s, x: s.det(x), [np.zeros((2, 2))], order=3)
    with pytest.raises(LinalgError, match="det: expected a nonsingular matrix for second and higher derivatives"):
        check_grads(lambda s, x: s.det(x), [np.diag([1.0, 2.0, 0.0])], order=2)


@pytest.mark.parametrize("a", [
    [[50.0, -30.0, 45.0], [-30.0, 90.0, -81.0], [45.0, -81.0, 81.0]],  # JAX's corank-1 case
    [[36.0, -42.0, 18.0], [-42.0, 49.0, -21.0], [18.0, -21.0, 9.0]],  # JAX's corank-2 case: gradient 0
    np.zeros((3, 3)), np.zeros((1, 1)),  # JAX's "no NaN at a zero matrix"
])
def test_jax_det_cases_at_singular_matrices(rt, eng, a):
    a = np.array(a)
    got = gradient(rt, eng, lambda s, x: s.det(x), a)
    np.testing.assert_allclose(got, cofactor_adjugate(a).T, atol=1e-15 * np.linalg.norm(a) ** 2)
    check_grads(lambda s, x: s.det(x), [a], order=1)


def test_jax_det_of_a_stack_of_one_by_one():
    check_grads(lambda s, x: s.reduce_sum(s.det(x)), [np.ones((16, 1, 1))], order=2)


def test_slogdet_of_a_singular_matrix(rt, eng):
    """The value is NumPy's (0, −inf); the derivative of log|det| is infinite there: a clear error."""
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    sign, logabs = evaluate(rt, eng, lambda s, x: s.slogdet(x), a)
    assert sign == 0 and logabs == -np.inf
    with pytest.raises(LinalgError, match=r"slogdet: expected a nonsingular matrix for the derivative of log\|det\|"):
        gradient(rt, eng, lambda s, x: s.slogdet(x)[1], a)


def test_slogdet_where_det_overflows(rt, eng, rng):
    a = 1e5 * random(rng, (80, 80))
    sign, logabs = evaluate(rt, eng, lambda s, x: s.slogdet(x), a)
    want = np.linalg.slogdet(a)
    assert sign == want.sign and logabs == pytest.approx(want.logabsdet, rel=1e-13)
    np.testing.assert_allclose(gradient(rt, eng, lambda s, x: s.slogdet(x)[1], a), np.linalg.inv(a).T, rtol=1e-9,
                               atol=1e-9 * np.abs(np.linalg.inv(a)).max())


# --- eigvalsh and svdvals ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES + [(0, 0), (2, 0, 0)])
@pytest.mark.parametrize("complex_", [False, True])
def test_eigvalsh_and_svdvals_are_numpys(rt, eng, rng, shape, complex_):
    a = random(rng, shape, complex_)
    h = a + np.swapaxes(a, -1, -2).conj()
    np.testing.assert_allclose(evaluate(rt, eng, lambda s, x: s.eigvalsh(x), h), np.linalg.eigvalsh(h),
                               rtol=1e-13, atol=1e-13)
    wide = random(rng, shape[:-1] + (shape[-1] + 2,), complex_)
    np.testing.assert_allclose(evaluate(rt, eng, lambda s, x: s.svdvals(x), wide), np.linalg.svdvals(wide),
                               rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("complex_", [False, True])
def test_eigvalsh_and_svdvals_check_grads(rng, complex_):
    a = random(rng, (2, 4, 4), complex_)
    check_grads(lambda s, x: s.eigvalsh(x), [a])
    check_grads(lambda s, x: s.svdvals(x), [random(rng, (2, 5, 3), complex_)])


def test_symmetric_functions_of_repeated_values_have_their_derivative(rt, eng, rng):
    """At repeated values single eigenvalues have no derivative, but symmetric functions of them do,
    and the values alone give it: Σ w² = ‖A‖², Σ exp(w) = tr exp(A), Σ s² = ‖A‖², Σ s = ‖A‖_nuc."""
    q = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    h = q @ np.diag([1.0, 1.0, 1.0, 3.0]) @ q.T
    h = (h + h.T) / 2
    squares = gradient(rt, eng, lambda s, x: s.reduce_sum(s.square(s.eigvalsh(x))), h)
    np.testing.assert_allclose(squares, 2 * h, atol=1e-13)
    exps = gradient(rt, eng, lambda s, x: s.reduce_sum(s.exp(s.eigvalsh(x))), h)
    np.testing.assert_allclose(exps, q @ np.diag(np.exp([1.0, 1.0, 1.0, 3.0])) @ q.T, atol=1e-13)
    check_grads(lambda s, x: s.reduce_sum(s.exp(s.eigvalsh(x))), [h], order=1)
    orthogonal = np.linalg.qr(rng.standard_normal((3, 3)))[0]  # all singular values 1
    np.testing.assert_allclose(gradient(rt, eng, lambda s, x: s.reduce_sum(s.square(s.svdvals(x))), orthogonal),
                               2 * orthogonal, atol=1e-13)
    np.testing.assert_allclose(gradient(rt, eng, lambda s, x: s.reduce_sum(s.svdvals(x)), orthogonal), orthogonal,
                               atol=1e-13)
    check_grads(lambda s, x: s.reduce_sum(s.svdvals(x)), [np.eye(3)], order=1)


# --- lstsq -----------------------------------------------------------------------------------------


def lstsq(s, a, b, rcond=None):
    return s.lstsq(a, b, rcond)


@pytest.mark.parametrize("m, n", [(5, 3), (3, 5), (4, 4), (3, 0), (0, 3)])
@pytest.mark.parametrize("b_shape", [(), (2,)])
@pytest.mark.parametrize("complex_", [False, True])
def test_lstsq_is_numpys(rt, eng, rng, m, n, b_shape, complex_):
    a, b = random(rng, (m, n), complex_), random(rng, (m,) + b_shape, complex_)
    x, residuals, rank, sv = evaluate(rt, eng, lstsq, a, b)
    want = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x, want[0], rtol=1e-12, atol=1e-13)
    assert residuals.shape == want[1].shape and residuals.dtype == want[1].dtype
    np.testing.assert_allclose(residuals, want[1], rtol=1e-12)
    assert rank == want[2] and isinstance(rank, int)
    np.testing.assert_allclose(sv, want[3], rtol=1e-13)


@pytest.mark.parametrize("m, n", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("complex_", [False, True])
def test_lstsq_check_grads_at_full_rank(rng, m, n, complex_):
    a, b = random(rng, (m, n), complex_), random(rng, (m, 2), complex_)
    check_grads(lambda s, x, y: lstsq(s, x, y)[0], [a, b])
    check_grads(lambda s, x, y: lstsq(s, x, y)[0], [a, b[:, 0]], order=1)
    if m > n:
        check_grads(lambda s, x, y: lstsq(s, x, y)[1], [a, b])


def test_lstsq_below_full_rank(rt, eng, rng):
    """NumPy's minimum-norm solution; exact in b; its derivative in a (which would need the rank to
    stay put) is a clear error, raised only when asked for."""
    a = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 4))  # rank 2
    b = rng.standard_normal(5)
    x, residuals, rank, sv = evaluate(rt, eng, lstsq, a, b)
    want = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x, want[0], rtol=1e-12)
    assert rank == 2 and residuals.shape == (0,)
    check_grads(lambda s, y: lstsq(s, tf.Tensor(a), y)[0], [b])
    with pytest.raises(LinalgError, match="lstsq: expected a of full rank"):
        gradient(rt, eng, lambda s, v: s.reduce_sum(lstsq(s, v, tf.Tensor(b))[0]), a)
    rank = evaluate(rt, eng, lambda s, v: (lstsq(s, v, tf.Tensor(np.ones(2)), rcond=0.9)[2],), np.diag([1.0, 0.5]))[0]
    assert rank == 1 == np.linalg.lstsq(np.diag([1.0, 0.5]), np.ones(2), rcond=0.9)[2]


def test_lstsq_errors(run):
    with pytest.raises(ShapeMismatch, match="lstsq: expected a matrix"):
        run(lambda s: s.lstsq(tf.Tensor(np.ones((2, 3, 3))), tf.Tensor(np.ones(3))))
    with pytest.raises(ShapeMismatch, match="lstsq: expected b of shape"):
        run(lambda s: s.lstsq(tf.Tensor(np.ones((4, 3))), tf.Tensor(np.ones(3))))
    with pytest.raises(InvalidArgument, match="lstsq: expected rcond: a real number"):
        run(lambda s: s.lstsq(tf.Tensor(np.ones((3, 3))), tf.Tensor(np.ones(3)), "warn"))
    with pytest.raises(tf.errors.DTypeMismatch, match="lstsq: expected a and b of one dtype"):
        run(lambda s: s.lstsq(tf.Tensor(np.ones((3, 3))), tf.Tensor(np.ones(3, complex))))


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_zero_size_derivatives(shape):
    """det, slogdet and cholesky of empty matrices or stacks, lstsq of empty systems: zeros, not errors."""
    check_grads(lambda s, x: s.det(x), [np.zeros(shape)])
    check_grads(lambda s, x: s.slogdet(x)[1], [np.zeros(shape)])
    check_grads(lambda s, x: s.cholesky(x), [np.zeros(shape) + np.eye(shape[-1])])
    for m, n in ((3, 0), (0, 3)):
        check_grads(lambda s, x, y: lstsq(s, x, y)[0], [np.zeros((m, n)), np.ones(m)])


# --- matrix_power ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 5, 8])
@pytest.mark.parametrize("complex_", [False, True])
def test_matrix_power(rt, eng, rng, n, complex_):
    a = random(rng, (2, 3, 3), complex_) + 2 * np.eye(3)
    np.testing.assert_allclose(evaluate(rt, eng, lambda s, x: s.matrix_power(x, n), a),
                               np.linalg.matrix_power(a, n), rtol=1e-12, atol=1e-13)
    check_grads(lambda s, x: s.matrix_power(x, n), [a / 3])


def test_matrix_power_errors(run):
    with pytest.raises(InvalidArgument, match="matrix_power: expected an int exponent"):
        run(lambda s: s.matrix_power(tf.Tensor(np.eye(2)), 0.5))
    with pytest.raises(ShapeMismatch, match="matrix_power"):
        run(lambda s: s.matrix_power(tf.Tensor(np.ones((2, 3))), 2))
    with pytest.raises(LinalgError, match="inv: expected a nonsingular matrix"):
        run(lambda s: s.matrix_power(tf.Tensor(np.ones((2, 2))), -1).value())


# --- tnp.linalg -----------------------------------------------------------------------------------


def test_tnp_linalg_is_numpys_outside_a_session(rng):
    a = positive_definite(rng, (3, 3))
    for name in ("det", "cholesky", "eigvalsh", "svdvals"):
        assert type(getattr(tnp.linalg, name)(a)) is np.ndarray or np.isscalar(getattr(tnp.linalg, name)(a))
        np.testing.assert_array_equal(getattr(tnp.linalg, name)(a), getattr(np.linalg, name)(a))
    assert tnp.linalg.slogdet(a) == np.linalg.slogdet(a)
    np.testing.assert_array_equal(tnp.linalg.matrix_power(a, 3), np.linalg.matrix_power(a, 3))
    np.testing.assert_array_equal(tnp.linalg.lstsq(a, a[0])[0], np.linalg.lstsq(a, a[0])[0])


def test_tnp_linalg_differentiates(rng):
    a = positive_definite(rng, (3, 3))
    b = rng.standard_normal(3)
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.linalg.slogdet(x).logabsdet)(a), np.linalg.inv(a).T,
                               rtol=1e-13)
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.linalg.det(x))(a), np.linalg.det(a) * np.linalg.inv(a).T,
                               rtol=1e-12)
    tnp.check_grads(lambda x: tnp.linalg.cholesky(x, upper=True), [a])
    np.testing.assert_allclose(tnp.value_and_grad(lambda x: tnp.sum(tnp.linalg.cholesky(x, upper=True)))(a)[0],
                               np.sum(np.linalg.cholesky(a, upper=True)), rtol=1e-14)
    tnp.check_grads(lambda x: tnp.linalg.eigvalsh(x), [a])
    tnp.check_grads(lambda x: tnp.linalg.svdvals(x), [a[:, :2]])
    tnp.check_grads(lambda x, y: tnp.linalg.lstsq(x, y)[0], [a[:, :2], b])
    tnp.check_grads(lambda x: tnp.linalg.matrix_power(x, -2), [a])
    with tnp.session():
        x, residuals, rank, sv = tnp.linalg.lstsq(tnp.asarray(a[:, :2]), b)
        assert rank == 2 and residuals.shape == (1,)
        np.testing.assert_allclose(np.asarray(residuals), np.linalg.lstsq(a[:, :2], b)[1], rtol=1e-12)
