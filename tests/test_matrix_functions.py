"""Matrix functions: expm of any square matrix, sqrtm, inv_sqrtm and logm of Hermitian ones, and
eigh_function for a user's f: SciPy's values in every dtype and on stacks, check_grads to order 2
(real and complex) at random, repeated, defective and singular spectra, their domains' errors,
and tnp.scipy.linalg."""

import numpy as np
import pytest
import scipy.linalg
from conftest import random

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py.testing import check_grads

FLOATS = [np.float64, np.float32, np.complex128, np.complex64]
ORDER2 = dict(modes=("fwd", "rev"), order=2)
HERMITIAN_OPS = ["sqrtm", "inv_sqrtm", "logm"]


def tol(dtype):
    return 1e-4 if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-12


def with_spectrum(rng, values, dtype=np.float64):
    """Q diag(values) Qᴴ for a random unitary Q."""
    q = np.linalg.qr(random(rng, (len(values), len(values)), dtype))[0]
    return ((q * np.asarray(values)) @ q.conj().T).astype(dtype)


def positive(rng, shape, dtype=np.float64):
    """Random Hermitian positive definite matrices (eigenvalues ≥ 0.5)."""
    b = random(rng, shape, dtype)
    return (b @ np.conj(np.swapaxes(b, -1, -2)) + 0.5 * np.eye(shape[-1])).astype(dtype)


def reference(name, a):
    """SciPy's (inv_sqrtm: the inverse of sqrtm), matrix by matrix."""
    if a.ndim > 2:
        return np.stack([reference(name, m) for m in a])
    if name == "inv_sqrtm":
        return np.linalg.inv(scipy.linalg.sqrtm(a))
    return getattr(scipy.linalg, name)(a)


def value(run, name, a, *args):
    return run(lambda s: getattr(s, name)(tf.Tensor(a), *args)).value().to_numpy()


# --- expm ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (0, 0), (1, 1)])
def test_expm_is_scipys(run, rng, shape, dtype):
    a = random(rng, shape, dtype)
    got = value(run, "expm", a)
    assert got.dtype == a.dtype and got.shape == shape
    np.testing.assert_allclose(got, scipy.linalg.expm(a), rtol=tol(dtype), atol=tol(dtype))


@pytest.mark.parametrize("complex_", [False, True])
def test_expm_grads(rng, complex_):
    dtype = np.complex128 if complex_ else np.float64
    for a in (random(rng, (4, 4), dtype), random(rng, (2, 3, 3), dtype)):
        check_grads(lambda s, x: s.expm(x), [a], **ORDER2)


@pytest.mark.parametrize("a", [np.eye(3), np.zeros((3, 3)), np.array([[1.0, 1, 0], [0, 1, 1], [0, 0, 1]]),
                               2 * np.eye(2) + np.array([[0, 1e-9], [0, 0]])], ids=["I", "0", "jordan", "near-jordan"])
def test_expm_grads_exact_at_repeated_and_defective_spectra(a):
    check_grads(lambda s, x: s.expm(x), [a], **ORDER2)
    check_grads(lambda s, x: s.expm(x), [a.astype(complex)], **ORDER2)


def test_expm_third_order(rng):
    check_grads(lambda s, x: s.expm(x), [random(rng, (2, 2))], order=3)


def test_expm_derivative_is_scipys_frechet(rt, eng, rng):
    a, e, w = random(rng, (5, 5)), random(rng, (5, 5)), random(rng, (5, 5))
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.expm(x))
    frechet = scipy.linalg.expm_frechet(a, e, compute_expm=False)
    np.testing.assert_allclose(rt.jvp(eng, y, x, tf.Tensor(e)).value().to_numpy(), frechet, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(rt.vjp(eng, y, x, tf.Tensor(w)).value().to_numpy(),
                               scipy.linalg.expm_frechet(a.T, w, compute_expm=False), rtol=1e-13, atol=1e-13)


# --- sqrtm, inv_sqrtm, logm ------------------------------------------------------------------------


@pytest.mark.parametrize("name", HERMITIAN_OPS)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (0, 0)])
def test_hermitian_functions_are_scipys(run, rng, name, shape, dtype):
    a = positive(rng, shape, dtype)
    got = value(run, name, a)
    assert got.dtype == a.dtype and got.shape == shape
    if a.size:
        np.testing.assert_allclose(got, reference(name, a.astype(np.complex128 if a.dtype.kind == "c" else float)),
                                   rtol=10 * tol(dtype), atol=10 * tol(dtype))
        np.testing.assert_array_equal(got, np.conj(np.swapaxes(got, -1, -2)))  # Hermitian to the last bit


@pytest.mark.parametrize("name", HERMITIAN_OPS)
def test_the_hermitian_part_is_read(run, rng, name):
    """As eigh: a non-Hermitian x gives f((x + xᴴ)/2), its derivatives those of that function."""
    a = positive(rng, (3, 3)) + np.triu(random(rng, (3, 3)), 1) * 0.1
    np.testing.assert_allclose(value(run, name, a), reference(name, (a + a.T) / 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", HERMITIAN_OPS)
@pytest.mark.parametrize("complex_", [False, True])
def test_hermitian_function_grads(rng, name, complex_):
    dtype = np.complex128 if complex_ else np.float64
    for a in (positive(rng, (4, 4), dtype), positive(rng, (2, 3, 3), dtype)):
        check_grads(lambda s, x: getattr(s, name)(x), [a], **ORDER2)


@pytest.mark.parametrize("name", HERMITIAN_OPS)
@pytest.mark.parametrize("spectrum", [[1.0, 1, 1], [2.0, 2, 5, 5], [1.0, 1 + 1e-9, 3]], ids=["I", "pairs", "near"])
@pytest.mark.parametrize("complex_", [False, True])
def test_hermitian_function_grads_exact_at_repeated_eigenvalues(rng, name, spectrum, complex_):
    """Exact at every order: the rules solve with Daleckii–Krein's formula of square or exp, whose
    own derivative has no divided difference (the third order at I as a probe)."""
    a = with_spectrum(rng, spectrum, np.complex128 if complex_ else np.float64)
    check_grads(lambda s, x: getattr(s, name)(x), [a], **ORDER2)
    if spectrum == [1.0, 1, 1] and not complex_:
        check_grads(lambda s, x: getattr(s, name)(x), [np.eye(2)], order=3)


def test_sqrtm_at_a_singular_matrix(rng, rt, eng):
    """The value is SciPy's; the derivatives are finite, and exact along paths that keep the kernel
    (against the Sylvester solve S L + L S = dC of the range; finite differences cannot serve here:
    √ of the kernel's rounding, 1e-8, moves with every step)."""
    u = np.linalg.qr(random(rng, (4, 2)))[0]
    c, dc, w = positive(rng, (2, 2)), random(rng, (2, 2)), random(rng, (4, 4))
    dc = (dc + dc.T) / 2
    a = u @ c @ u.T
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.sqrtm(x))
    np.testing.assert_allclose(y.value().to_numpy(), u @ scipy.linalg.sqrtm(c) @ u.T, atol=1e-7)
    root = scipy.linalg.sqrtm(c)
    want = u @ scipy.linalg.solve_sylvester(root, root, dc) @ u.T
    got = rt.jvp(eng, y, x, tf.Tensor(u @ dc @ u.T)).value().to_numpy()
    np.testing.assert_allclose(got, want, atol=1e-6 * np.abs(want).max())
    pullback = rt.vjp(eng, y, x, tf.Tensor(w)).value().to_numpy()
    assert np.vdot(pullback, u @ dc @ u.T) == pytest.approx(np.vdot(w, want), rel=1e-6)
    zero = rt.variable_from(tf.Tensor(np.zeros((3, 3))))
    total = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.sqrtm(zero)))
    assert np.isfinite(rt.grad(eng, total, zero).value().to_numpy()).all()


@pytest.mark.parametrize("name, power", [("sqrtm", 0.5), ("inv_sqrtm", -0.5), ("logm", 0.0)])
@pytest.mark.parametrize("scale", [1e-150, 1e150])
def test_hermitian_functions_at_any_scale(rng, name, power, scale):
    """f(cX) = c^p f(X) (logm: + log(c) I): the derivatives are those at c = 1 times c^(p − 1)."""
    a, e, w = positive(rng, (4, 4)), random(rng, (4, 4)), random(rng, (4, 4))

    def derivatives(x):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        v = rt.variable_from(tf.Tensor(x))
        y = rt.with_eager_session(eng, lambda s: getattr(s, name)(v))
        return (rt.jvp(eng, y, v, tf.Tensor(e)).value().to_numpy(), rt.vjp(eng, y, v, tf.Tensor(w)).value().to_numpy())

    for got, want in zip(derivatives(scale * a), derivatives(a)):  # logm's Y carries log(c) I: 345 in Y's rounding
        np.testing.assert_allclose(got * scale ** (1 - power), want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_logm_derivative_inverts_expm_s(rt, eng, rng):
    """L_exp(log X, dlog X) = dX, to rounding, also where eigenvalues nearly coincide."""
    for spectrum in ([0.5, 1, 2, 4], [1, 1 + 1e-7, 1 + 2e-7, 3], [1e-3, 1, 1e3, 1e3]):
        a, e = with_spectrum(rng, spectrum), random(rng, (4, 4))
        e = (e + e.T) / 2
        x = rt.variable_from(tf.Tensor(a))
        y = rt.with_eager_session(eng, lambda s: s.logm(x))
        dlog = rt.jvp(eng, y, x, tf.Tensor(e)).value().to_numpy()
        back = scipy.linalg.expm_frechet(y.value().to_numpy(), dlog, compute_expm=False)
        np.testing.assert_allclose(back, e, atol=1e-10 * np.abs(e).max())


@pytest.mark.parametrize("name, spectrum, message", [
    ("sqrtm", [1.0, -0.5, 2], "sqrtm: expected a positive semidefinite matrix"),
    ("logm", [1.0, 0, 2], "logm: expected a positive definite matrix"),
    ("logm", [1.0, -1, 2], "logm: expected a positive definite matrix"),
    ("inv_sqrtm", [1.0, 1e-17, 2], "inv_sqrtm: expected a positive definite matrix"),
])
def test_domain_errors(run, rng, name, spectrum, message):
    with pytest.raises(tf.LinalgError, match=message):
        value(run, name, with_spectrum(rng, spectrum))


def test_rounding_below_zero_counts_as_zero(run, rng):
    q = np.linalg.qr(random(rng, (3, 3)))[0]
    got = value(run, "sqrtm", (q * [-1e-17, 1, 2]) @ q.T)
    np.testing.assert_allclose(got, (q * np.sqrt([0, 1, 2])) @ q.T, atol=1e-12)


@pytest.mark.parametrize("name", HERMITIAN_OPS + ["expm"])
@pytest.mark.parametrize("call, cls, message", [
    (lambda s, op: getattr(s, op)(tf.Tensor(np.ones((2, 3)))), tf.ShapeMismatch, "expected a square matrix"),
    (lambda s, op: getattr(s, op)(tf.Tensor(np.array([[1.0, np.inf], [0, 1]]))), tf.LinalgError,
     "expected a matrix of finite entries"),
])
def test_errors(run, name, call, cls, message):
    with pytest.raises(cls, match=f"{name}: {message}"):
        run(lambda s: call(s, name))


# --- eigh_function ----------------------------------------------------------------------------------


def test_eigh_function_is_the_function_of_the_matrix(run, rng):
    a = positive(rng, (2, 4, 4))
    np.testing.assert_allclose(value(run, "eigh_function", a, np.exp, np.exp), scipy.linalg.expm(a), rtol=1e-10)
    np.testing.assert_allclose(value(run, "eigh_function", a, np.sqrt, lambda w: 0.5 / np.sqrt(w)),
                               value(run, "sqrtm", a), rtol=1e-12)


@pytest.mark.parametrize("complex_", [False, True])
def test_eigh_function_grads(rng, complex_):
    dtype = np.complex128 if complex_ else np.float64
    sine = (np.sin, np.cos, lambda w: -np.sin(w))
    check_grads(lambda s, x: s.eigh_function(x, *sine), [random(rng, (4, 4), dtype)], **ORDER2)
    check_grads(lambda s, x: s.eigh_function(x, *sine), [random(rng, (2, 3, 3), dtype)], **ORDER2)
    for spectrum in ([1.0, 1, 2], [0.0, 0, 0]):  # the first derivative is exact at repeated eigenvalues
        check_grads(lambda s, x: s.eigh_function(x, *sine), [with_spectrum(rng, spectrum, dtype)], order=1)


@pytest.mark.parametrize("gap", [0.0, 1e-12, 1e-9, 1e-6, 1e-4, 1e-2, 1.0])
def test_eigh_function_divided_differences_are_accurate_at_every_gap(rt, eng, rng, gap):
    """exp through eigh_function against expm's Fréchet derivative, exact at any spectrum."""
    for shift in (0.0, 30.0, -30.0):
        a, e = with_spectrum(rng, [shift, shift + gap, shift + 1]), random(rng, (3, 3))
        e = (e + e.T) / 2
        x = rt.variable_from(tf.Tensor(a))
        y = rt.with_eager_session(eng, lambda s: s.eigh_function(x, np.exp, np.exp))
        got = rt.jvp(eng, y, x, tf.Tensor(e)).value().to_numpy()
        want = scipy.linalg.expm_frechet(a, e, compute_expm=False)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_eigh_function_derivatives_beyond_those_given(rng):
    with pytest.raises(tf.Unsupported, match=r"eigh_function\(x, f, fprime, fsecond\)"):
        check_grads(lambda s, x: s.eigh_function(x, np.exp, np.exp), [random(rng, (3, 3))], **ORDER2)


@pytest.mark.parametrize("f, cls, message", [
    (lambda w: w + 0j, tf.InvalidArgument, "f: real values"),
    (lambda w: w[:1], tf.InvalidArgument, "f: real values of the eigenvalues' shape"),
    (lambda w: np.where(w > 10, w, np.inf), tf.LinalgError, "f finite at every eigenvalue"),
])
def test_eigh_function_errors(run, rng, f, cls, message):
    with pytest.raises(cls, match=message):
        value(run, "eigh_function", positive(rng, (3, 3)), f, np.exp)
    with pytest.raises(tf.InvalidArgument, match="eigh_function: expected f and fprime"):
        value(run, "eigh_function", positive(rng, (3, 3)), np.exp, 2.0)


# --- tnp.scipy.linalg ---------------------------------------------------------------------------------


def test_tnp_scipy_linalg(rng):
    a, h = random(rng, (3, 3)), positive(rng, (3, 3))
    for name in ("expm", "sqrtm", "logm"):  # NumPy data: SciPy's own, for any matrix
        np.testing.assert_array_equal(getattr(tnp.scipy.linalg, name)(a), getattr(scipy.linalg, name)(a))
    np.testing.assert_allclose(tnp.scipy.linalg.inv_sqrtm(h), reference("inv_sqrtm", h), rtol=1e-12)
    with tnp.session():
        for name in ("expm", "sqrtm", "logm", "inv_sqrtm"):
            got = np.asarray(getattr(tnp.scipy.linalg, name)(tnp.asarray(h)))
            np.testing.assert_allclose(got, reference(name, h), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(tnp.scipy.linalg.eigh_function(tnp.asarray(h), np.exp, np.exp)),
                                   scipy.linalg.expm(h), rtol=1e-12)
        for name in ("sqrtm", "logm", "inv_sqrtm"):
            with pytest.raises(tf.InvalidArgument, match=f"{name}: expected a Hermitian matrix"):
                getattr(tnp.scipy.linalg, name)(tnp.asarray(a))
    tnp.check_grads(lambda b: tnp.scipy.linalg.expm(b), (a,))
    for name in ("sqrtm", "logm", "inv_sqrtm"):
        tnp.check_grads(lambda b: getattr(tnp.scipy.linalg, name)(b @ b.T + tnp.eye(3)), (a,))
