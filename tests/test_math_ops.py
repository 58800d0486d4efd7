"""The elementwise functions, powers, maximum/minimum/where and the reductions max, min, prod,
mean: forward against NumPy in every dtype, derivatives by check_grads to order 2 (real and
complex where defined), and the points where a rule must choose (ties, zeros, 0**0)."""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py.testing import check_grads

DTYPES = [np.float64, np.float32, np.complex128, np.complex64]


def sample(rng, shape, dtype, low=-0.9, high=0.9):
    """Entries in [low, high) (real and imaginary parts alike): inside every function's domain."""
    x = rng.uniform(low, high, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(low, high, shape)
    return x.astype(dtype)


# name -> (NumPy's function, domain (low, high), defined for complex)
UNARY = {
    "sin": (np.sin, (-2, 2), True),
    "cos": (np.cos, (-2, 2), True),
    "tan": (np.tan, (-1, 1), True),
    "sinh": (np.sinh, (-2, 2), True),
    "cosh": (np.cosh, (-2, 2), True),
    "tanh": (np.tanh, (-2, 2), True),
    "arcsin": (np.arcsin, (-0.9, 0.9), True),
    "arccos": (np.arccos, (-0.9, 0.9), True),
    "arctan": (np.arctan, (-2, 2), True),
    "log1p": (np.log1p, (-0.5, 2), True),
    "expm1": (np.expm1, (-2, 2), True),
    "square": (np.square, (-2, 2), True),
}


def run(f, *arrays):
    rt = tf.EagerRuntime()
    return rt.with_eager_session(tf.CpuEngine.serial(), lambda s: f(s, *[rt.constant_from(tf.Tensor(a)) for a in arrays]))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_is_numpys(rng, name, dtype):
    reference, (low, high), _ = UNARY[name]
    x = sample(rng, (3, 4), dtype, low, high)
    y = run(lambda s, a: getattr(s, name)(a), x)
    assert y.dtype == dtype
    tol = 1e-6 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-15
    np.testing.assert_allclose(y.value().to_numpy(), reference(x), rtol=tol, atol=tol)


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_grads(rng, name, kind):
    _, (low, high), _ = UNARY[name]
    x = sample(rng, (2, 3), np.complex128 if kind == "complex" else np.float64, low, high)
    check_grads(lambda s, a: getattr(s, name)(a), [x], order=2)


# --- powers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, -1, -2, 0.5, 2.5, -1.5, 1.0])
def test_power_by_a_number_is_numpys(rng, dtype, exponent):
    x = sample(rng, (3, 3), dtype, 0.2, 2.0)
    y = run(lambda s, a: s.power(a, exponent), x)
    assert y.dtype == dtype
    tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-14
    np.testing.assert_allclose(y.value().to_numpy(), np.power(x, x.dtype.type(exponent)), rtol=tol)


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, -2, 0.5, -1.5])
def test_power_by_a_number_grads(rng, exponent, kind):
    x = sample(rng, (2, 3), np.complex128 if kind == "complex" else np.float64, 0.3, 2.0)
    check_grads(lambda s, a: s.power(a, exponent), [x], order=2)


def test_integer_powers_of_negative_numbers_and_zero(rt, eng):
    """x**n for an int n is defined at every real x, and so is its derivative n·x**(n−1)."""
    x = rt.variable_from(tf.Tensor(np.array([-2.0, -0.5, 0.0, 1.5])))
    for n, derivative in ((3, 3 * np.array([4.0, 0.25, 0.0, 2.25])), (2, 2 * np.array([-2.0, -0.5, 0.0, 1.5])),
                          (0, np.zeros(4))):
        y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.power(x, n)))
        np.testing.assert_array_equal(rt.grad(eng, y, x).value().to_numpy(), derivative)
    check_grads(lambda s, a: s.power(a, 3), [np.array([-2.0, -0.5, 0.0, 1.5])], order=2)


@pytest.mark.parametrize("kind", ["real", "complex"])
def test_tensor_power_grads(rng, kind):
    dtype = np.complex128 if kind == "complex" else np.float64
    x, y = sample(rng, (2, 3), dtype, 0.3, 2.0), sample(rng, (2, 3), dtype, -1.5, 2.0)
    np.testing.assert_allclose(run(lambda s, a, b: s.power(a, b), x, y).value().to_numpy(), np.power(x, y),
                               rtol=1e-14)
    check_grads(lambda s, a, b: s.power(a, b), [x, y], order=2)


def test_tensor_power_at_zero_base_and_zero_exponent(rt, eng):
    """0**y: its y-derivative log(0)·0 is read as 0; x**0: its x-derivative 0·x**−1 is 0 (as JAX)."""
    x = rt.variable_from(tf.Tensor(np.array([0.0, 0.0, 2.0, 0.0])))
    y = rt.variable_from(tf.Tensor(np.array([2.0, 0.0, 0.0, 1.0])))
    z = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.power(x, y)))
    assert z.item() == 0.0 + 1.0 + 1.0 + 0.0
    gx, gy = (g.value().to_numpy() for g in rt.grad(eng, z, [x, y]))
    np.testing.assert_array_equal(gx, [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0, np.log(2.0), 0.0])


# --- maximum, minimum, where ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda t: np.dtype(t).name)
def test_maximum_minimum_forward(rng, dtype):
    a, b = sample(rng, (3, 4), dtype), sample(rng, (3, 4), dtype)
    np.testing.assert_array_equal(run(lambda s, x, y: s.maximum(x, y), a, b).value().to_numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(run(lambda s, x, y: s.minimum(x, y), a, b).value().to_numpy(), np.minimum(a, b))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_grads_and_ties(rt, eng, rng, op):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    check_grads(lambda s, x, y: getattr(s, op)(x, y), [a, b], order=2)
    x = rt.variable_from(tf.Tensor(np.array([1.0, 2.0, 3.0])))
    y = rt.variable_from(tf.Tensor(np.array([1.0, 5.0, 0.0])))
    z = rt.with_eager_session(eng, lambda s: s.reduce_sum(getattr(s, op)(x, y)))
    gx, gy = (g.value().to_numpy() for g in rt.grad(eng, z, [x, y]))
    first = [0.5, 0.0, 1.0] if op == "maximum" else [0.5, 1.0, 0.0]
    np.testing.assert_array_equal(gx, first)  # a tie shares the derivative (JAX's convention)
    np.testing.assert_array_equal(gy, 1.0 - np.array(first))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_refuse_complex(run, op):
    z = tf.Tensor(np.ones(2, np.complex128))
    with pytest.raises(tf.DTypeMismatch, match=rf"^{op}: expected real operands"):
        run(lambda s: getattr(s, op)(z, z))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_where_forward_and_grads(rng, dtype):
    cond = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    x, y = sample(rng, (2, 3), dtype), sample(rng, (2, 3), dtype)
    out = run(lambda s, c, a, b: s.where(c, a, b), cond, x, y)
    np.testing.assert_array_equal(out.value().to_numpy(), np.where(cond != 0, x, y))
    check_grads(lambda s, a, b: s.where(s.constant_from(tf.Tensor(cond)), a, b), [x, y], order=2)


def test_where_selects_without_multiplying_by_the_other_branch(rt, eng):
    """where's own derivative never forms 0·inf: an inf in the unselected branch stays out. (As in
    JAX, where(x > 0, log(x), 0) at x = 0 still gets 0·(1/0) from log's own rule; the remedy is
    the same double where, shown here.)"""
    x = rt.variable_from(tf.Tensor(np.array([0.0, 2.0])))
    positive = tf.Tensor(np.array([0.0, 1.0]))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.where(positive, x, s.constant_from(tf.Tensor(
        np.array([np.inf, np.inf]))))))
    np.testing.assert_array_equal(rt.grad(eng, y, x).value().to_numpy(), [0.0, 1.0])

    def safe_log(s):
        inside = s.where(positive, x, s.constant_from(tf.Tensor(np.ones(2))))
        return s.reduce_sum(s.where(positive, s.log(inside), s.zeros((2,))))

    y = rt.with_eager_session(eng, safe_log)
    np.testing.assert_array_equal(rt.grad(eng, y, x).value().to_numpy(), [0.0, 0.5])


def test_where_checks_shapes(run):
    with pytest.raises(tf.ShapeMismatch, match=r"^where: expected a condition of the operands' shape"):
        run(lambda s: s.where(tf.Tensor(np.ones(3)), tf.Tensor(np.ones(2)), tf.Tensor(np.ones(2))))


# --- reductions ------------------------------------------------------------------------------------

AXES = [None, (0,), (1,), (0, 2), (2, 0, 1), ()]


@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("op, reference", [("reduce_max", np.max), ("reduce_min", np.min), ("reduce_prod", np.prod),
                                           ("mean", np.mean)])
def test_reductions_forward(rng, op, reference, axes):
    for dtype in (np.float64, np.float32) if op in ("reduce_max", "reduce_min") else DTYPES:
        x = sample(rng, (2, 3, 4), dtype, 0.5, 1.5)
        y = run(lambda s, a: getattr(s, op)(a, axes), x).value().to_numpy()
        tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-14
        np.testing.assert_allclose(y, reference(x, axis=axes), rtol=tol)


@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("op", ["reduce_max", "reduce_min", "reduce_prod", "mean"])
def test_reductions_grads(rng, op, axes):
    x = rng.uniform(0.5, 1.5, (2, 3, 4))  # distinct values: max and min are smooth there
    check_grads(lambda s, a: getattr(s, op)(a, axes), [x], order=2)
    if op in ("reduce_prod", "mean"):
        check_grads(lambda s, a: getattr(s, op)(a, axes), [sample(rng, (2, 3, 4), np.complex128, 0.5, 1.5)], order=2)


def test_prod_derivative_is_exact_at_zeros(rt, eng):
    """d prod/dx_i = Π_{j≠i} x_j: one zero leaves one nonzero entry, two zeros none; and the
    second derivatives (products of all but two) are right as well."""
    for row, grad in (([2.0, 0.0, 3.0, 4.0], [0.0, 24.0, 0.0, 0.0]), ([0.0, 5.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0])):
        x = rt.variable_from(tf.Tensor(np.array(row)))
        y = rt.with_eager_session(eng, lambda s: s.reduce_prod(x))
        g = rt.grad(eng, y, x)
        np.testing.assert_array_equal(g.value().to_numpy(), grad)
        hessian_row = rt.jvp(eng, g, x, tf.Tensor(np.array([1.0, 0.0, 0.0, 0.0]))).value().to_numpy()
        expected = [0.0] + [np.prod([v for k, v in enumerate(row) if k not in (0, i)]) for i in range(1, 4)]
        np.testing.assert_array_equal(hessian_row, expected)
    check_grads(lambda s, a: s.reduce_prod(a, (1,)), [np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 1.5]])], order=2)


def test_max_and_min_share_the_derivative_among_ties(rt, eng):
    x = rt.variable_from(tf.Tensor(np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0]])))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.reduce_max(x, (1,))))
    np.testing.assert_array_equal(rt.grad(eng, y, x).value().to_numpy(), [[0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    z = rt.with_eager_session(eng, lambda s: s.reduce_min(x))
    np.testing.assert_allclose(rt.grad(eng, z, x).value().to_numpy(), [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])


def test_reduction_errors(run):
    empty, complex_ = tf.Tensor(np.ones((2, 0))), tf.Tensor(np.ones(3, np.complex128))
    with pytest.raises(tf.InvalidArgument, match=r"^reduce_max: expected axes of size >= 1"):
        run(lambda s: s.reduce_max(empty, (1,)))
    with pytest.raises(tf.InvalidArgument, match=r"^mean: expected axes of size >= 1"):
        run(lambda s: s.mean(empty))
    with pytest.raises(tf.DTypeMismatch, match=r"^reduce_min: expected a real tensor"):
        run(lambda s: s.reduce_min(complex_))
    with pytest.raises(tf.InvalidArgument, match=r"^reduce_prod: expected axes in \[0, 2\)"):
        run(lambda s: s.reduce_prod(empty, (2,)))
    assert run(lambda s: s.reduce_prod(empty, (1,))).value().to_numpy().tolist() == [1.0, 1.0]  # NumPy's empty product


# --- a session attribute that is no op -------------------------------------------------------------


def test_an_unknown_op_is_a_library_error_naming_it(run):
    with pytest.raises(tf.NoSuchOp) as info:
        run(lambda s: s.sine(tf.Tensor(np.ones(2))))
    assert isinstance(info.value, AttributeError) and isinstance(info.value, tf.TenferroError)
    assert str(info.value).startswith("sine: expected an op of the session") and "did you mean 'sin'" in str(info.value)
    assert not hasattr(tf.EagerRuntime().with_eager_session(tf.CpuEngine.serial(), lambda s: s), "nonexistent")
