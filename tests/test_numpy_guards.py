"""tenferro_py.numpy never gives a silently wrong number: a tracked array read as a number or
NumPy data is refused (tnp.stop_gradient is the explicit read), tangents of the wrong dtype are
refused, var/std at ddof >= n are NumPy's, the transforms take what JAX's take, ``x.at[...]``
updates, and svd's full_matrices=True is NumPy's forward with a refused derivative (issue 26)."""

import math
import warnings

import numpy as np
import pytest

import tenferro_py as tf
import tenferro_py.numpy as tnp

# --- a tracked array is read only on purpose ------------------------------------------------------

DETACHING = {
    "float": lambda x: float(x) * x,
    "math.exp": lambda x: math.exp(x) * x,
    "np.asarray": lambda x: tnp.sum(np.asarray(x) ** 2 * x),
    "np.array": lambda x: tnp.sum(np.array([x, 1.0]) * x),
    "item": lambda x: x.item() * x,
    "tolist": lambda x: x.tolist() * x,
    "complex": lambda x: tnp.real(complex(x) * x),
    "np.float64": lambda x: np.float64(x) * x,
}


@pytest.mark.parametrize("name", sorted(DETACHING))
def test_reading_a_tracked_array_as_a_number_or_numpy_data_is_refused(name):
    """float(x) * x would differentiate as a constant times x: 2 where the answer is 4."""
    with pytest.raises(tf.TrackedConversion, match=r"tnp\.stop_gradient\(x\) reads the value") as info:
        tnp.grad(DETACHING[name])(2.0)
    assert isinstance(info.value, TypeError)
    with pytest.raises(tf.TrackedConversion):
        tnp.jvp(DETACHING[name], (2.0,), (1.0,))


@pytest.mark.parametrize("call, replacement", [
    (lambda x: np.exp(x), "tnp.exp"),
    (lambda x: np.sin(x) + 1.0, "tnp.sin"),
    (lambda x: np.linalg.svd(x), "tnp.linalg.svd"),
    (lambda x: np.linalg.svd(x.reshape(1, -1)), "tnp.linalg.svd"),
    (lambda x: np.concatenate([x, x]), "tnp.concatenate"),
    (lambda x: np.fft.fft(x), "tnp's functions (tnp has no fft)"),
])
def test_numpy_functions_on_a_tracked_array_name_tnps(call, replacement):
    with pytest.raises(tf.TrackedConversion, match=r"^np\.[\w.]+: expected " + replacement.replace(".", r"\.")
                       .replace("(", r"\(").replace(")", r"\)")):
        tnp.grad(lambda x: tnp.sum(call(x)))(np.ones(3))


def test_numpy_functions_that_call_the_arrays_method_keep_the_derivative():
    """np.sum(x) is x.sum() for any array-like (NumPy's protocol; autograd's tests rely on it)."""
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(tnp.grad(lambda v: np.sum(v**3))(x), 3 * x**2, rtol=1e-15)
    np.testing.assert_allclose(tnp.grad(lambda v: np.max(np.reshape(v, (3, 1)) * 2.0))(x), [0, 0, 2], rtol=1e-15)
    with pytest.raises(tf.InvalidArgument, match=r"^max: expected axis, dtype, out=None and keepdims only, "
                                                 r"got initial"):
        tnp.grad(lambda v: np.max(v, initial=5.0))(x)  # was ignored: 2 where NumPy says 5


def test_what_has_no_derivative_reads_values_of_a_tracked_array():
    """Comparisons, truth values, integers, masks, shapes and printing: as in autograd and JAX."""
    seen = []

    def f(x):
        if x[0] > 0:  # control flow on values
            y = x * 3.0
        else:
            y = x
        assert bool(x[0]) and int(x[2]) == 2 and np.int64(x[2]) == 2
        assert np.isfinite(x).all() and np.argmax(x) == 2 and np.shape(x) == (3,) and np.ndim(x) == 1
        assert np.zeros_like(x).shape == (3,) and (np.ones(3) < x).tolist() == [False, False, True]
        seen.append((repr(x), f"{x[0]:.2f}", str(x[1])))
        return tnp.sum(y * tnp.where(x > 0.6, x, 0.0))

    g = tnp.grad(f)(np.array([0.5, 0.75, 2.0]))
    np.testing.assert_allclose(g, [0.0, 4.5, 12.0], rtol=1e-15)  # 3 x² where x > 0.6
    assert seen == [("tnp.ndarray(array([0.5 , 0.75, 2.  ]), tracked=True)", "0.50",
                     "tnp.ndarray(array(0.75), tracked=True)")]


def test_operators_with_a_numpy_operand_on_the_left_keep_the_derivative():
    x = np.array([1.0, 2.0])
    g = tnp.grad(lambda v: tnp.sum(np.ones(2) * v + np.float64(2.0) * v - np.full(2, 3.0) / v
                                   + np.eye(2) @ v + np.ones(2) ** v))(x)
    np.testing.assert_allclose(g, 1 + 2 + 3 / x**2 + 1 + 0.0, rtol=1e-15)


def test_stop_gradient_is_the_explicit_read():
    assert tnp.grad(lambda x: float(tnp.stop_gradient(x)) * x)(2.0) == 2.0
    assert tnp.grad(lambda x: tnp.stop_gradient(x) * x)(3.0) == 3.0
    assert tnp.grad(lambda x: np.exp(tnp.stop_gradient(x)) * x)(0.0) == 1.0
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.sum(np.asarray(tnp.stop_gradient(x)) ** 2 * x))(np.ones(2)),
                               [1.0, 1.0])
    data = np.ones(2)
    assert tnp.stop_gradient(data) is data and tnp.stop_gradient(2.0) == 2.0
    d, c = tnp.jvp(lambda x: tnp.stop_gradient([x, x])[0] * x, (2.0,), (1.0,))
    assert (d, c) == (4.0, 2.0)


def test_untracked_arrays_keep_numpys_interop():
    with tnp.session():
        c = tnp.asarray(np.array([1.0, 2.0]))
        assert float(c[1]) == 2.0 and c[0].item() == 1.0 and c.tolist() == [1.0, 2.0]
        np.testing.assert_array_equal(np.asarray(c), [1.0, 2.0])
        np.testing.assert_allclose(np.exp(c), np.exp([1.0, 2.0]), rtol=1e-15)
        assert isinstance(np.linalg.norm(c), float) and math.exp(c[0]) == math.e
    kept = c  # an array of an ended session: its value still reads
    np.testing.assert_array_equal(np.asarray(kept), [1.0, 2.0])


def test_a_tracked_array_of_the_tenferro_style_refuses_too():
    """Inside tnp.session, a variable made in the tenferro style is tracked: its reads refuse too;
    the tenferro style's own reads (.value(), .item()) are explicit and unchanged."""
    with tnp.session() as s:
        x = s.variable_from(tf.Tensor(np.array(2.0)))
        with pytest.raises(tf.TrackedConversion):
            float(tnp.ndarray(x) * 2.0)
        assert x.item() == 2.0 and x.value().item() == 2.0


# --- tangents and cotangents of the wrong dtype -------------------------------------------------------


def test_a_complex_tangent_for_a_real_primal_is_refused_naming_both():
    with pytest.raises(tf.DTypeMismatch, match=r"^jvp: expected a tangent of its primal's dtype float64, "
                                               r"got complex128"):
        tnp.jvp(lambda x: x**2, (np.ones(3),), (1j * np.ones(3),))
    with pytest.raises(tf.DTypeMismatch, match="dtype float64, got complex"):
        tnp.jvp(lambda x: x**2, (1.0,), (1j,))
    with pytest.raises(tf.DTypeMismatch, match="dtype float32, got float64"):
        tnp.jvp(lambda x: x**2, (np.ones(2, np.float32),), (np.ones(2),))
    _, pullback = tnp.vjp(lambda x: x**2, np.ones(2))
    with pytest.raises(tf.DTypeMismatch, match=r"^vjp: expected a cotangent of the output's dtype float64"):
        pullback(1j * np.ones(2))


def test_tangents_of_their_primals_dtype_pass():
    z = np.array([1.0 + 1.0j, 2.0])
    _, dy = tnp.jvp(lambda x: x**2, (z,), (1j * np.ones(2),))
    np.testing.assert_allclose(dy, 2j * z, rtol=1e-15)
    _, dy = tnp.jvp(lambda x: x**2, (z[0],), (1.0,))  # a Python number takes the primal's dtype
    assert dy == 2 * z[0]
    _, dy = tnp.jvp(lambda x: x**2, (np.ones(2, np.float32),), (np.ones(2, np.float32),))
    assert dy.dtype == np.float32


# --- var and std at ddof >= n ----------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("data, ddof, axis", [([1.0, 2.0], 2, None), ([1.0, 1.0], 2, None), ([1.0, 2.0], 3, None),
                                              ([[1.0, 2.0], [3.0, 3.0]], 2, 0)])
def test_var_and_std_at_ddof_not_below_n_are_numpys(data, ddof, axis):
    a = np.array(data)
    for name in ("var", "std"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = getattr(np, name)(a, axis=axis, ddof=ddof)
        with tnp.session(), pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0"):
            got = np.asarray(getattr(tnp, name)(tnp.asarray(a), axis=axis, ddof=ddof))
        np.testing.assert_array_equal(got, want)


# --- the transforms' calling conventions, at-updates, pullbacks ------------------------------------------


def test_primals_that_are_no_tuple_are_refused():
    with pytest.raises(tf.InvalidArgument, match=r"^jvp: expected primals as a tuple, one per argument of f "
                                                 r"\(e\.g\. \(x,\)\), got float"):
        tnp.jvp(lambda x: x * x, 1.0, 1.0)
    with pytest.raises(tf.InvalidArgument, match=r"^jvp: expected tangents as a tuple"):
        tnp.jvp(lambda x: x * x, [1.0], np.ones(1))


def test_keyword_arguments_pass_to_f_undifferentiated():
    assert tnp.grad(lambda x, y=1.0: x * y)(2.0, y=3.0) == 3.0
    value, (gx, gy) = tnp.value_and_grad(lambda x, z, scale=1.0: x * z * scale, argnums=(0, 1))(2.0, 5.0, scale=10.0)
    assert (value, gx, gy) == (100.0, 50.0, 20.0)


AT_KEYS = [0, (1, 2), (slice(None), [0, 0, 2]), (np.array([True, False, True]),), (Ellipsis, 1), ([0, 0, 2], [1, 1, 3]),
           (slice(None, None, -1), None, slice(1, 3))]


@pytest.mark.parametrize("key", AT_KEYS, ids=range(len(AT_KEYS)))
def test_at_set_and_add_are_numpys_assignment_with_derivatives(rng, key):
    a = rng.standard_normal((3, 4))
    v = rng.standard_normal(a[key].shape)
    want_set, want_add = a.copy(), a.copy()
    want_set[key] = v
    np.add.at(want_add, key, v)
    with tnp.session():
        x = tnp.asarray(a)
        np.testing.assert_array_equal(np.asarray(x.at[key].set(v)), want_set)
        np.testing.assert_allclose(np.asarray(x.at[key].add(v)), want_add, rtol=1e-15)
        np.testing.assert_array_equal(np.asarray(x.at[key].get()), a[key])
        chosen = np.isin(np.arange(12).reshape(3, 4), np.arange(12).reshape(3, 4)[key])
        np.testing.assert_array_equal(np.asarray(x.at[key].set(2.0)), np.where(chosen, 2.0, a))
    tnp.check_grads(lambda x, w: x.at[key].set(w * w) * x, [a, v], order=2)
    tnp.check_grads(lambda x, w: x.at[key].add(w * w) * x, [a + 1j * a, v], order=2)


def test_at_refuses_complex_values_for_a_real_array_and_setitem_names_at():
    with tnp.session():
        x = tnp.asarray(np.ones(3))
        with pytest.raises(tf.DTypeMismatch, match=r"^at\.set: expected real values for an array of dtype float64"):
            x.at[0].set(1j)
        with pytest.raises(TypeError, match=r"x\.at\[key\]\.set\(value\)"):
            x[0] = 1.0


def test_a_pullback_called_after_its_grad_returned_gives_numpy_data():
    kept = []

    def f(x):
        y, pullback = tnp.vjp(lambda a: a * a, x)
        kept.append(pullback)
        return tnp.sum(y)

    x = np.array([1.0, -2.0])
    tnp.grad(f)(x)
    (ct,) = kept[0](np.ones(2))
    assert type(ct) is np.ndarray
    np.testing.assert_allclose(ct, 2 * x, rtol=1e-15)


# --- svd with full_matrices=True -------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3), (2, 3, 5)])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_full_svd_forward_is_numpys(rng, shape, kind):
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if kind == "complex" else 0)
    with tnp.session():
        u, s, vh = (np.asarray(t) for t in tnp.linalg.svd(tnp.asarray(a)))
        thin = [np.asarray(t) for t in tnp.linalg.svd(tnp.asarray(a), full_matrices=False)]
    nu, ns, nvh = np.linalg.svd(a)
    assert (u.shape, s.shape, vh.shape, u.dtype, vh.dtype) == (nu.shape, ns.shape, nvh.shape, nu.dtype, nvh.dtype)
    np.testing.assert_allclose(s, ns, rtol=1e-13, atol=1e-14)
    k = min(shape[-2:])
    np.testing.assert_array_equal(u[..., :k], thin[0])
    np.testing.assert_array_equal(vh[..., :k, :], thin[2])
    m, n = shape[-2:]
    for q, size in ((u, m), (vh, n)):
        np.testing.assert_allclose(np.swapaxes(q.conj(), -1, -2) @ q, np.broadcast_to(np.eye(size), q.shape),
                                   atol=1e-14)
    sigma = np.swapaxes(u.conj(), -1, -2) @ a @ np.swapaxes(vh.conj(), -1, -2)  # diag(s), zeros in the complement
    want = np.zeros(shape, dtype=sigma.dtype)
    want[..., range(k), range(k)] = s
    np.testing.assert_allclose(sigma, want, atol=1e-13)


def test_full_svd_derivative_is_refused_saying_why(rng):
    a = rng.standard_normal((4, 2))
    for f in (lambda x: tnp.sum(tnp.linalg.svd(x)[0] ** 2 * np.arange(16.0).reshape(4, 4)),
              lambda x: tnp.sum(tnp.linalg.svd(x.T)[2][:1] ** 2)):
        with pytest.raises(tf.Unsupported, match=r"^svd: expected full_matrices=False to differentiate .*arbitrary "
                                                 r"basis of the complement"):
            tnp.grad(f)(a)
        with pytest.raises(tf.Unsupported, match="arbitrary basis"):
            tnp.jvp(f, (a,), (np.ones_like(a),))


def test_full_svd_values_and_square_matrices_stay_differentiable(rng):
    a = rng.standard_normal((4, 2))
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.sum(tnp.linalg.svd(x)[1]))(a),
                               tnp.grad(lambda x: tnp.sum(tnp.linalg.svd(x, full_matrices=False)[1]))(a), rtol=1e-15)
    tnp.check_grads(lambda x: (lambda u, s, vh: (u * s) @ vh)(*tnp.linalg.svd(x)), [rng.standard_normal((3, 3))],
                    order=1)
