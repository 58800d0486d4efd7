"""tnp's Hermitian routines read one triangle, as NumPy's do (JAX's testEigh with a triangle as input
found them reading the Hermitian part instead, a wrong value for non-Hermitian input)."""

import numpy as np
import pytest

import tenferro_py.numpy as tnp
from tenferro_py import InvalidArgument


def _matrix(dtype, shape=(2, 5, 5)):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_and_eigvalsh_read_the_triangle_numpy_reads(dtype, uplo):
    a = _matrix(dtype)
    with tnp.session():
        x = tnp.asarray(a) * 1.0
        w, v = tnp.linalg.eigh(x, uplo)
        values = tnp.linalg.eigvalsh(x, uplo)
        np.testing.assert_allclose(tnp.stop_gradient(w), np.linalg.eigvalsh(a, uplo), atol=1e-12)
        np.testing.assert_allclose(tnp.stop_gradient(values), np.linalg.eigvalsh(a, uplo), atol=1e-12)
    value = tnp.value_and_grad(lambda x: tnp.sum(tnp.linalg.eigh(x, uplo)[0] ** 2))(a)[0]
    assert abs(value - np.sum(np.linalg.eigvalsh(a, uplo) ** 2)) < 1e-11


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_the_other_triangle_has_no_derivative(dtype):
    a = _matrix(dtype, (4, 4))
    grad = tnp.grad(lambda x: tnp.sum(tnp.linalg.eigvalsh(x, "L") ** 3))(a)
    assert np.all(np.triu(grad, 1) == 0)
    tnp.check_grads(lambda x: tnp.linalg.eigvalsh(x, "U"), (a,), order=2)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_the_triangle_numpy_reads(dtype, upper):
    a = _matrix(dtype, (4, 4))
    spd = a @ np.conj(a.T) + 4 * np.eye(4)
    half = np.triu(spd) if upper else np.tril(spd)  # the other triangle zero: not Hermitian
    value = tnp.value_and_grad(lambda x: tnp.sum(tnp.abs(tnp.linalg.cholesky(x, upper=upper)) ** 2))(half)[0]
    assert abs(value - np.sum(np.abs(np.linalg.cholesky(half, upper=upper)) ** 2)) < 1e-11
    tnp.check_grads(lambda x: tnp.linalg.cholesky(x, upper=upper), (spd,), order=2)


def test_a_bad_uplo_is_named():
    with pytest.raises(InvalidArgument, match="UPLO 'L' or 'U'"):
        tnp.grad(lambda x: tnp.sum(tnp.linalg.eigvalsh(x, "X")))(np.eye(2))
