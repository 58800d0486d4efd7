"""eig and eigvals of general matrices: NumPy's eigenvalues, eigenvectors of unit norm with their
largest entry real and positive, in every dtype and on stacks; check_grads to order 2 (real and
complex) of eigenvalues, of eigenvectors and of gauge-invariant functions of them; and, at
repeated eigenvalues, the derivatives that exist (symmetric functions of the eigenvalues, the
eigenvectors of the other eigenvalues) and clear errors for those that do not."""

import numpy as np
import pytest
from conftest import random

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py import SliceConfig
from tenferro_py.testing import check_grads

FLOATS = [np.float64, np.float32, np.complex128, np.complex64]
ORDER2 = dict(modes=("fwd", "rev"), order=2)


def with_eigenvalues(rng, values, dtype=np.float64):
    """S diag(values) S⁻¹ for a random (well-conditioned) S."""
    n = len(values)
    s = np.eye(n) + 0.3 * random(rng, (n, n), dtype)
    return (s @ np.diag(values) @ np.linalg.inv(s)).astype(dtype)


def values(*ts):
    return [t.value().to_numpy() for t in ts]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (1, 1), (0, 0)])
def test_eig_is_numpys(run, rng, shape, dtype):
    a = random(rng, shape, dtype)
    w, v = values(*run(lambda s: s.eig(tf.Tensor(a))))
    wv = values(run(lambda s: s.eigvals(tf.Tensor(a))))[0]
    complex_ = np.result_type(dtype, np.complex64)
    assert w.dtype == v.dtype == wv.dtype == complex_ and w.shape == wv.shape == shape[:-1] and v.shape == shape
    tol = 1e-4 if complex_ == np.complex64 else 1e-12
    np.testing.assert_array_equal(w, wv)
    np.testing.assert_allclose(w, np.linalg.eigvals(a), rtol=tol, atol=tol)  # LAPACK's order
    np.testing.assert_allclose(np.einsum("...ab,...bj->...aj", a, v), v * w[..., None, :], atol=10 * tol)
    if a.size:
        np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, rtol=tol)
        top = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
        assert np.all(top.imag == 0) and np.all(top.real > 0)


def test_real_matrix_with_complex_pairs(run):
    rotation = np.array([[0.0, -2, 0], [2, 0, 0], [0, 0, 3]])
    w, v = values(*run(lambda s: s.eig(tf.Tensor(rotation))))
    np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(np.array([-2j, 2j, 3])), atol=1e-14)
    for f in (projectors, moduli):  # free of the phase, which a tie of the largest entries (|1| = |∓i|) leaves open
        check_grads(f, [rotation], **ORDER2)
    check_grads(lambda s, x: s.eig(x)[1], [rotation + np.array([[0, 0, 0.3], [0, 0.1, 0], [0.5, 0, 0]])], **ORDER2)


def projectors(s, x):
    """v_i ⟨ṽ_i| for ṽ_i the rows of V⁻¹: each eigenvector's spectral projector, free of its scale."""
    _, v = s.eig(x)
    return s.einsum([v, s.inv(v)], "...ai,...ib->...iab")


def moduli(s, x):
    """|V_ij|²: free of each eigenvector's phase."""
    v = s.eig(x)[1]
    return s.real(s.mul(v, s.conj(v)))


@pytest.mark.parametrize("f", [lambda s, x: s.eigvals(x), lambda s, x: s.eig(x)[0], lambda s, x: s.eig(x)[1],
                               projectors, moduli], ids=["eigvals", "w", "v", "projectors", "moduli"])
@pytest.mark.parametrize("complex_", [False, True])
def test_eig_grads(rng, f, complex_):
    dtype = np.complex128 if complex_ else np.float64
    for shape in ((4, 4), (2, 3, 3)):
        check_grads(f, [random(rng, shape, dtype)], **ORDER2)


def test_eig_derivative_is_perturbation_theorys(rt, eng, rng):
    """dw_i = ⟨u_i| dA |v_i⟩ / ⟨u_i|v_i⟩ for the left eigenvectors u_i."""
    a, da = random(rng, (5, 5)), random(rng, (5, 5))
    x = rt.variable_from(tf.Tensor(a))
    w = rt.with_eager_session(eng, lambda s: s.eigvals(x))
    left = np.linalg.inv(np.linalg.eig(a)[1]).conj().T  # columns u_i with u_iᴴ v_j = δ_ij
    v = np.linalg.eig(a)[1]
    want = np.einsum("ai,ab,bi->i", left.conj(), da, v)
    np.testing.assert_allclose(rt.jvp(eng, w, x, tf.Tensor(da)).value().to_numpy(), want, rtol=1e-10)


@pytest.mark.parametrize("scale", [1e-150, 1e150])
def test_eig_rules_at_any_scale(rng, scale):
    """w(cA) = c w(A) and V(cA) = V(A): at cA the derivatives are those at A, V's divided by c."""
    a, d = random(rng, (4, 4)), random(rng, (4, 4))

    def tangents(x):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        v = rt.variable_from(tf.Tensor(x))
        w, vectors = rt.with_eager_session(eng, lambda s: s.eig(v))
        order = np.argsort(w.value().to_numpy() / x[0, 0])  # LAPACK's order may differ between scales
        dw, dv = (rt.jvp(eng, y, v, tf.Tensor(d)).value().to_numpy() for y in (w, vectors))
        return dw[order], dv[:, order]

    (dw, dv), (dw1, dv1) = tangents(scale * a), tangents(a)
    np.testing.assert_allclose(dw, dw1, rtol=0, atol=1e-13 * np.abs(dw1).max())
    np.testing.assert_allclose(dv * scale, dv1, rtol=0, atol=1e-13 * np.abs(dv1).max())


# --- repeated eigenvalues -----------------------------------------------------------------------------


def symmetric(s, x):
    """Σ exp(w_i): symmetric in the eigenvalues."""
    return s.reduce_sum(s.exp(s.eigvals(x)))


@pytest.mark.parametrize("spectrum", [[1.0, 1, 1], [1.0, 1, 3], [2.0, 2, -1, -1]], ids=["I", "pair", "two pairs"])
@pytest.mark.parametrize("complex_", [False, True])
def test_symmetric_functions_of_repeated_eigenvalues(rng, spectrum, complex_):
    a = np.eye(3) if spectrum == [1.0, 1, 1] else with_eigenvalues(rng, spectrum)
    check_grads(symmetric, [a.astype(complex) if complex_ else a], order=1)
    check_grads(lambda s, x: s.reduce_sum(s.eig(x)[0]), [a], modes=("rev",), order=1)


def test_eigenvectors_of_the_other_eigenvalues(rng):
    """A cotangent that reaches only the eigenvector of the simple eigenvalue 3 has its derivative."""
    a = with_eigenvalues(rng, [1.0, 1, 3])
    k = int(np.argmax(np.linalg.eigvals(a).real))

    def simple_vector(s, x):
        v = s.eig(x)[1]
        return s.slice(v, SliceConfig([0, k], [3, k + 1]))

    check_grads(simple_vector, [a], modes=("rev",), order=1)


@pytest.mark.parametrize("f, message", [
    (lambda s, x: s.eig(x)[1], "eig: expected eigenvalues apart where eigenvectors are differentiated"),
    (lambda s, x: s.eigvals(x), "eig: expected equal cotangents on eigenvalues equal to rounding"),
])
@pytest.mark.parametrize("a", [np.eye(3), np.diag([1.0, 2, 1])], ids=["I", "pair"])
def test_what_has_no_derivative_at_repeated_eigenvalues_raises(f, message, a):
    with pytest.raises(tf.LinalgError, match=message):
        check_grads(f, [a], modes=("rev",), order=1)


def test_eig_forward_mode_at_repeated_eigenvalues_raises(rng):
    with pytest.raises(tf.LinalgError, match="eigenvectors are differentiated"):
        check_grads(lambda s, x: s.eig(x)[0], [with_eigenvalues(rng, [1.0, 1, 3])], modes=("fwd",), order=1)


def test_second_derivative_of_repeated_eigenvalues_raises():
    with pytest.raises(tf.LinalgError, match="eigenvectors are differentiated"):
        check_grads(symmetric, [np.eye(2)], **ORDER2)


@pytest.mark.parametrize("a", [np.array([[1.0, 1], [0, 1]]), np.array([[1.0, 1e-8], [0, 1]]),
                               np.array([[2.0, 1, 0], [0, 2, 1], [0, 0, 2]])], ids=["jordan", "near", "jordan3"])
def test_defective_matrices_have_no_derivative(run, a):
    w = values(run(lambda s: s.eigvals(tf.Tensor(a))))[0]
    np.testing.assert_allclose(w, np.linalg.eigvals(a))  # the forward is LAPACK's
    for modes in (("fwd",), ("rev",)):
        with pytest.raises(tf.LinalgError, match="eig: expected a diagonalisable matrix for a derivative"):
            check_grads(symmetric, [a], modes=modes, order=1)


def test_close_but_separated_eigenvalues_are_differentiable(rt, eng, rng):
    """Eigenvalues 1e-9 apart are resolved (rounding moves them by 1e-15): their eigenvectors have
    a derivative, of size 1/gap, and the eigenvalues' is perturbation theory's."""
    a, da, vb = with_eigenvalues(rng, [1.0, 1 + 1e-9, 3]), random(rng, (3, 3)), random(rng, (3, 3))
    x = rt.variable_from(tf.Tensor(a))
    w, v = rt.with_eager_session(eng, lambda s: s.eig(x))
    right = np.linalg.eig(a)[1]
    want = np.einsum("ia,ab,bi->i", np.linalg.inv(right), da, right)
    np.testing.assert_allclose(rt.jvp(eng, w, x, tf.Tensor(da)).value().to_numpy(), want, rtol=1e-6)
    grad = rt.vjp(eng, v, x, tf.Tensor(vb.astype(complex))).value().to_numpy()
    assert np.isfinite(grad).all() and np.abs(grad).max() > 1e6


def test_errors(run):
    with pytest.raises(tf.ShapeMismatch, match="eig: expected a square matrix"):
        run(lambda s: s.eig(tf.Tensor(np.ones((2, 3)))))
    with pytest.raises(tf.LinalgError, match="eig: expected a matrix of finite entries"):
        run(lambda s: s.eigvals(tf.Tensor(np.array([[np.nan, 0], [0, 1]]))))


def test_tnp_eig(rng):
    a = random(rng, (3, 3))
    w, v = tnp.linalg.eig(a)  # NumPy data: NumPy's own
    np.testing.assert_array_equal(w, np.linalg.eig(a)[0])
    with tnp.session():
        w, v = tnp.linalg.eig(tnp.asarray(a))
        np.testing.assert_allclose(np.asarray(w), np.linalg.eigvals(a), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(tnp.linalg.eigvals(tnp.asarray(a))), np.asarray(w), rtol=0)
    tnp.check_grads(lambda x: tnp.real(tnp.sum(tnp.linalg.eigvals(x) ** 2)), (a,))
