"""autoray dispatch: ``autoray.do(name, x)`` on tnp arrays runs tnp's function (with its derivative),
registered by importing tenferro_py.numpy."""

import numpy as np
import pytest

import tenferro_py.numpy as tnp
from tenferro_py.errors import TrackedConversion

autoray = pytest.importorskip("autoray")
from tenferro_py.numpy import autoray_backend  # noqa: E402 (only with autoray installed)

#: (autoray's name, the arguments made of a differentiated array x, keyword arguments, tnp's function
#: when autoray's differs from tnp's of that name)
CASES = [
    ("tensordot", lambda x: (x, x), {"axes": [[0], [0]]}, None),
    ("einsum", lambda x: ("ij,kj->ik", x, x), {}, None),
    ("transpose", lambda x: (x, (1, 0)), {}, None),
    ("reshape", lambda x: (x, (2, 6)), {}, None),
    ("conj", lambda x: (x * 1j,), {}, None),
    ("real", lambda x: (x * (1 + 2j),), {}, None),
    ("imag", lambda x: (x * (1 + 2j),), {}, None),
    ("linalg.svd", lambda x: (x,), {}, lambda a: tnp.linalg.svd(a, full_matrices=False)),
    ("linalg.qr", lambda x: (x,), {}, None),
    ("linalg.eigh", lambda x: (x.T @ x,), {}, None),
    ("linalg.norm", lambda x: (x,), {}, None),
    ("exp", lambda x: (x,), {}, None),
    ("log", lambda x: (x * x + 1,), {}, None),
    ("sqrt", lambda x: (x * x + 1,), {}, None),
    ("abs", lambda x: (x * (1 - 1j),), {}, None),
    ("sin", lambda x: (x,), {}, None),
    ("cos", lambda x: (x,), {}, None),
    ("tanh", lambda x: (x,), {}, None),
    ("sum", lambda x: (x,), {"axis": 0}, None),
    ("max", lambda x: (x,), {"axis": 1}, None),
    ("trace", lambda x: (x[:3, :3],), {}, None),
    ("diag", lambda x: (x[:, 0],), {}, None),
    ("stack", lambda x: ([x, 2 * x],), {"axis": 1}, None),
    ("concatenate", lambda x: ([x, x * x],), {"axis": 0}, None),
    ("clip", lambda x: (x, -0.5, 0.5), {}, None),
    ("matmul", lambda x: (x, x.T), {}, None),
    ("multiply", lambda x: (x, x), {}, None),
    ("divide", lambda x: (x, x * x + 1), {}, None),
    ("power", lambda x: (x, 3), {}, None),
    ("astype", lambda x: (x, "complex128"), {}, lambda a, dtype: a.astype(dtype)),
    ("complex", lambda x: (x, 2 * x), {}, lambda re, im: re + 1j * im),
    ("take", lambda x: (x, [2, 0, 2]), {"axis": 1}, lambda a, i, axis: a[:, i]),
    ("take", lambda x: (x, [5, 0, 11]), {}, lambda a, i: tnp.ravel(a)[np.asarray(i)]),
]


def _loss(result, weights):
    """A real scalar of every array in a result (an array or a tuple of them)."""
    parts = result if isinstance(result, tuple) else (result,)
    return sum(tnp.sum(tnp.real(p * w)) for p, w in zip(parts, weights))


@pytest.mark.parametrize("name, make_args, kwargs, reference", CASES, ids=[c[0] for c in CASES])
def test_do_runs_tnps_function_with_its_derivative(rng, name, make_args, kwargs, reference):
    x = rng.standard_normal((4, 3))
    own = reference or _tnp_function(name)
    with tnp.session():
        shapes = _shapes(own(*make_args(tnp.asarray(x)), **kwargs))
    weights = [rng.standard_normal(shape) for shape in shapes]

    def through(do):
        return lambda x: _loss(do(*make_args(x), **kwargs), weights)

    got = tnp.value_and_grad(through(lambda *a, **k: autoray.do(name, *a, **k)))(x)
    want = tnp.value_and_grad(through(own))(x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    with tnp.session():
        result = autoray.do(name, *make_args(tnp.asarray(x)), **kwargs)
        assert all(isinstance(r, tnp.ndarray) for r in (result if isinstance(result, tuple) else (result,)))


def _tnp_function(name):
    f = tnp
    for part in name.split("."):
        f = getattr(f, part)
    return f


def _shapes(result):
    return [r.shape for r in (result if isinstance(result, tuple) else (result,))]


def test_autoray_finds_tnps_own_functions_by_the_backend_name():
    with tnp.session():
        x = tnp.asarray(np.ones((2, 2)))
        assert autoray.infer_backend(x) == autoray_backend.BACKEND == "tenferro_py.numpy"
    for name in ("tensordot", "einsum", "exp", "reshape", "linalg.qr", "linalg.eigh"):
        assert autoray.get_lib_fn(autoray_backend.BACKEND, name) is _tnp_function(name)


def test_the_thin_svd_by_default_as_autoray_gives_numpys(rng):
    x = rng.standard_normal((5, 3))
    with tnp.session():
        u, s, vh = autoray.do("linalg.svd", tnp.asarray(x))
        assert (u.shape, s.shape, vh.shape) == ((5, 3), (3,), (3, 3))
        np.testing.assert_allclose(tnp.stop_gradient(u * s) @ vh, x, atol=1e-14)


def test_functions_without_a_derivative_read_the_values_of_a_tracked_array(rng):
    x = rng.standard_normal(6)

    def f(x):
        assert autoray.do("count_nonzero", x > 0) == np.count_nonzero(x > 0)
        assert autoray.do("argmax", x) == np.argmax(tnp.stop_gradient(x))
        np.testing.assert_array_equal(autoray.do("equal", x, 0.0), np.zeros(6, bool))
        assert autoray.do("isfinite", x).all()
        assert autoray.do("get_dtype_name", x) == "float64"
        assert autoray.do("shape", x) == (6,)
        return tnp.sum(x * x)

    np.testing.assert_allclose(tnp.grad(f)(x), 2 * x, rtol=1e-15)


def test_to_numpy_gives_the_value_of_a_constant_and_refuses_a_tracked_array(rng):
    x = rng.standard_normal(3)
    with tnp.session():
        np.testing.assert_array_equal(autoray.to_numpy(tnp.asarray(x)), x)

    def f(y):
        with pytest.raises(TrackedConversion, match="tracked array"):
            autoray.to_numpy(y)
        np.testing.assert_array_equal(autoray.to_numpy(tnp.stop_gradient(y)), x)
        return tnp.sum(y)

    tnp.grad(f)(x)


def test_a_namespace_of_a_tnp_array_is_tnp(rng):
    x = rng.standard_normal((3, 3))

    def f(x):
        xp = autoray.get_namespace(x)
        return tnp.sum(xp.where(xp.abs(x) > 0.5, x, 0.0) ** 2) + xp.linalg.norm(xp.swapaxes(x, 0, 1))

    np.testing.assert_allclose(tnp.grad(f)(x), np.where(np.abs(x) > 0.5, 2 * x, 0.0) + x / np.linalg.norm(x),
                               rtol=1e-14)


def test_where_goes_to_tnp_when_an_array_of_tnp_is_among_its_arguments(rng):
    """A comparison gives NumPy bools, so ``do("where", x > 0, x, 1.0)`` (quimb's safe_inverse) has a
    NumPy first argument: it is tnp's where all the same, with its derivative."""
    x = rng.standard_normal(5)
    grad = tnp.grad(lambda y: tnp.sum(autoray.do("where", y > 0, y * y, 1.0)))(x)
    np.testing.assert_array_equal(grad, np.where(x > 0, 2 * x, 0.0))
    plain = autoray.do("where", x > 0, x, 1.0)  # no tnp array: NumPy's, as before
    assert type(plain) is np.ndarray
    np.testing.assert_array_equal(plain, np.where(x > 0, x, 1.0))
