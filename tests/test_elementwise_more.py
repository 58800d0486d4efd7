"""arcsinh arccosh arctanh exp2 log2 log10 angle floor ceil fabs deg2rad rad2deg degrees radians
logaddexp: values against NumPy's (bit for bit: the same kernels), derivatives by check_grads to
order 2 (real and complex where NumPy defines the op for complex), at extreme scales and special
values, zero-size inputs, complex refused where NumPy refuses it, and the tnp functions."""

import math

import numpy as np
import pytest
import scipy.special

import tenferro_py as tf
import tenferro_py.numpy as tnp
from tenferro_py.errors import DTypeMismatch
from tenferro_py.testing import check_grads

#: op -> points inside its domain (real), from autograd's test_scalar_ops where it has them.
DOMAINS = {
    "arcsinh": lambda rng, n: rng.standard_normal(n) * 2,
    "arccosh": lambda rng, n: rng.standard_normal(n) ** 2 + 1.2,
    "arctanh": lambda rng, n: rng.uniform(-0.8, 0.8, n),
    "exp2": lambda rng, n: rng.standard_normal(n) * 3,
    "log2": lambda rng, n: rng.uniform(0.2, 5.0, n),
    "log10": lambda rng, n: rng.uniform(0.2, 5.0, n),
}
COMPLEX_TOO = list(DOMAINS) + ["angle"]
REAL_ONLY = ["floor", "ceil", "fabs", "deg2rad", "rad2deg", "degrees", "radians"]


def value(rt, eng, op, *xs):
    ts = [rt.variable_from(tf.Tensor(np.asarray(x))) for x in xs]
    return rt.with_eager_session(eng, lambda s: getattr(s, op)(*ts)).value().to_numpy()


def grads(rt, eng, op, *xs):
    """The gradient of sum(op(xs)) with respect to each x."""
    ts = [rt.variable_from(tf.Tensor(np.asarray(x))) for x in xs]
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(getattr(s, op)(*ts)))
    return [g.value().to_numpy() for g in rt.grad(eng, y, ts)]


# --- values ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(DOMAINS) + ["angle"] + REAL_ONLY)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(5,), (2, 3), (0,), (), (3, 0)])
def test_values_are_numpys(rt, eng, rng, op, dtype, shape):
    x = np.asarray(DOMAINS.get(op, lambda r, n: r.standard_normal(n) * 4)(rng, shape), dtype=dtype)
    got = value(rt, eng, op, x)
    want = getattr(np, op)(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype == np.float32 and op in ("deg2rad", "rad2deg", "degrees", "radians"):
        # x times the float32 nearest to π/180 (180/π); NumPy's float32 kernel divides by a rounded π
        exact = x.astype(np.float64) * (math.pi / 180 if op in ("deg2rad", "radians") else 180 / math.pi)
        assert np.all(np.abs(got - exact) <= np.abs(want - exact) + np.spacing(np.abs(want)))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", COMPLEX_TOO)
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_complex_values_are_numpys(rt, eng, rng, op, dtype):
    z = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(dtype)
    got = value(rt, eng, op, z)
    want = getattr(np, op)(z)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_exact_where_numpy_is_exact(rt, eng):
    """The kernels are NumPy's: 2**k, log2 of powers of two, log10 of powers of ten are exact."""
    k = np.arange(-20.0, 21.0)
    np.testing.assert_array_equal(value(rt, eng, "exp2", k), 2.0 ** k)
    np.testing.assert_array_equal(value(rt, eng, "log2", 2.0 ** k), k)
    np.testing.assert_array_equal(value(rt, eng, "log10", 10.0 ** np.arange(0.0, 16.0)), np.arange(0.0, 16.0))


# --- derivatives -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(DOMAINS))
def test_check_grads_real(rng, op):
    check_grads(lambda s, x: s.scale_real(getattr(s, op)(x), 3.0), [DOMAINS[op](rng, (4,))])


@pytest.mark.parametrize("op", COMPLEX_TOO)
def test_check_grads_complex(rng, op):
    z = rng.uniform(0.3, 1.5, 4) * np.exp(1j * rng.uniform(-2.5, 2.5, 4))  # away from the branch cuts
    if op == "arccosh":
        z = z + 1.5
    check_grads(lambda s, x: getattr(s, op)(x), [z])


@pytest.mark.parametrize("op", ["fabs", "deg2rad", "rad2deg", "degrees", "radians"])
def test_check_grads_linear_and_fabs(rng, op):
    check_grads(lambda s, x: getattr(s, op)(x), [rng.standard_normal(5) + np.array([2, -2, 3, -3, 4])])


def test_known_derivatives(rt, eng):
    x = np.array([0.3, -1.7, 2.5])
    np.testing.assert_allclose(grads(rt, eng, "arcsinh", x)[0], 1 / np.sqrt(1 + x * x), rtol=1e-15)
    np.testing.assert_allclose(grads(rt, eng, "arccosh", x + 3)[0], 1 / np.sqrt((x + 3) ** 2 - 1), rtol=1e-14)
    np.testing.assert_allclose(grads(rt, eng, "arctanh", x / 3)[0], 1 / (1 - (x / 3) ** 2), rtol=1e-15)
    np.testing.assert_allclose(grads(rt, eng, "exp2", x)[0], np.log(2) * 2 ** x, rtol=1e-15)
    np.testing.assert_allclose(grads(rt, eng, "log2", x + 2)[0], 1 / ((x + 2) * np.log(2)), rtol=1e-15)
    np.testing.assert_allclose(grads(rt, eng, "log10", x + 2)[0], 1 / ((x + 2) * np.log(10)), rtol=1e-15)
    np.testing.assert_allclose(grads(rt, eng, "deg2rad", x)[0], np.full(3, math.pi / 180), rtol=1e-16)
    np.testing.assert_allclose(grads(rt, eng, "rad2deg", x)[0], np.full(3, 180 / math.pi), rtol=1e-16)
    np.testing.assert_array_equal(grads(rt, eng, "fabs", x)[0], np.sign(x))


@pytest.mark.parametrize("op", ["floor", "ceil"])
def test_rounding_has_zero_derivative(rt, eng, op):
    """floor(x)·x has derivative floor(x): the rounding itself contributes nothing, at every order."""
    x = np.array([0.5, -1.5, 2.25])
    t = rt.variable_from(tf.Tensor(x))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(getattr(s, op)(t), t)))
    np.testing.assert_array_equal(rt.grad(eng, y, t).value().to_numpy(), getattr(np, op)(x))
    check_grads(lambda s, v: s.mul(getattr(s, op)(v), v), [x])


def test_inverse_hyperbolic_derivatives_at_extreme_scales(rt, eng):
    """1/cosh(arcsinh x) and 1/sinh(arccosh x) never square x: right where 1 + x² overflows."""
    big = np.array([1e200, -1e300, 1e-300])
    np.testing.assert_allclose(grads(rt, eng, "arcsinh", big)[0], [1e-200, 1e-300, 1.0], rtol=1e-13)
    np.testing.assert_allclose(grads(rt, eng, "arccosh", np.array([1e200, 1e300]))[0], [1e-200, 1e-300], rtol=1e-13)
    second = tnp.grad(tnp.grad(lambda v: tnp.arcsinh(v)))(1e100)  # −x/(1 + x²)^{3/2}
    assert second == pytest.approx(-1e-200, rel=1e-12)


def test_angle_derivative(rt, eng):
    """∂θ/∂Re z + i ∂θ/∂Im z = i z/|z|², formed without |z|²: right at 1e-300, 0 at z = 0 (as abs's)."""
    z = np.array([1 + 1j, -2 + 0.5j, 1e-300 * (1 - 2j), 1e300 * (3 + 1j), 0j])
    expected = np.zeros_like(z)
    expected[:4] = 1j * z[:4] / np.abs(z[:4]) / np.abs(z[:4])
    got = grads(rt, eng, "angle", z)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0)
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(grads(rt, eng, "angle", np.array([-1.0, 2.0]))[0], [0.0, 0.0])  # real: 0 or π


def test_abs_derivative_at_tiny_complex_numbers(rt, eng):
    """z/|z| with |z| read exactly (it was |z| + 2.2e-308: off by 1e-8 relative at |z| = 1e-300)."""
    z = np.array([1e-300 * (1 - 2j), 3e-306 + 4e-306j, 1 + 1j, 0j])
    expected = np.where(z == 0, 0, z / np.where(z == 0, 1, np.abs(z)))
    np.testing.assert_allclose(grads(rt, eng, "abs", z)[0], expected, rtol=1e-15, atol=0)


# --- logaddexp -------------------------------------------------------------------------------------

SPECIAL = [-np.inf, -1e308, -745.0, -1.0, 0.0, 1.0, 1e308, np.inf]


def test_logaddexp_values_are_numpys_at_special_values(rt, eng):
    a, b = (np.array(p, dtype=float) for p in zip(*[(x, y) for x in SPECIAL for y in SPECIAL]))
    with np.errstate(over="ignore"):  # logaddexp(1e308, 1e308) = inf, as NumPy's
        np.testing.assert_array_equal(value(rt, eng, "logaddexp", a, b), np.logaddexp(a, b))


def test_logaddexp_derivative_is_softmax_weights_and_never_nan(rt, eng):
    a, b = (np.array(p, dtype=float) for p in zip(*[(x, y) for x in SPECIAL for y in SPECIAL]))
    with np.errstate(over="ignore", invalid="ignore"):  # the values' sum is inf − inf, as NumPy's
        ga, gb = grads(rt, eng, "logaddexp", a, b)
    assert np.all((ga >= 0) & (ga <= 1) & (gb >= 0) & (gb <= 1))
    np.testing.assert_allclose(ga + gb, 1.0, rtol=1e-15)
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(ga[finite], scipy.special.expit(a[finite] - b[finite]), rtol=1e-14, atol=1e-300)
    tie = (a == b) & np.isinf(a)
    np.testing.assert_array_equal(ga[tie], 0.5)  # one infinity: half each, by symmetry
    one_finite = np.isneginf(a) & np.isfinite(b)
    np.testing.assert_array_equal(ga[one_finite], 0.0)
    np.testing.assert_array_equal(gb[one_finite], 1.0)


@pytest.mark.parametrize("gap", [0.0, 0.7, 40.0])
def test_logaddexp_check_grads(rng, gap):
    a = rng.standard_normal(4)
    check_grads(lambda s, x, y: s.logaddexp(x, y), [a, a - gap + 0.1 * rng.standard_normal(4)])


def test_logaddexp_at_large_values_keeps_the_digits(rt, eng):
    a, b = np.array([1000.0, 1e300]), np.array([1000.0 - math.log(3.0), 1e300])
    np.testing.assert_allclose(value(rt, eng, "logaddexp", a, b)[0], 1000.0 + math.log(4.0 / 3.0), rtol=1e-16)
    ga, gb = grads(rt, eng, "logaddexp", a, b)
    share = 1 / (1 + math.exp(b[0] - a[0]))  # b − a is exact; ≈ 3/4 (b is 1000 − log 3 rounded)
    np.testing.assert_allclose(ga, [share, 0.5], rtol=2e-16)
    np.testing.assert_allclose(gb, [1 - share, 0.5], rtol=2e-16)


# --- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", REAL_ONLY)
def test_complex_is_refused_where_numpy_refuses_it(run, op):
    with pytest.raises(DTypeMismatch, match=f"^{op}: expected a real tensor"):
        run(lambda s: getattr(s, op)(tf.Tensor(np.array([1 + 1j]))))


def test_logaddexp_refuses_complex_and_mismatched_operands(run):
    with pytest.raises(DTypeMismatch, match="logaddexp"):
        run(lambda s: s.logaddexp(tf.Tensor(np.array([1j])), tf.Tensor(np.array([1j]))))
    with pytest.raises(tf.errors.ShapeMismatch, match="logaddexp"):
        run(lambda s: s.logaddexp(tf.Tensor(np.ones(2)), tf.Tensor(np.ones(3))))


# --- tnp -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(DOMAINS) + ["angle"] + REAL_ONLY)
def test_tnp_functions_are_numpys_outside_a_session_and_differentiate_inside(rng, name):
    x = np.abs(DOMAINS.get(name, lambda r, n: r.standard_normal(n))(rng, (3,))) + (0.5 if name == "arccosh" else 0)
    if name == "arctanh":
        x = x / (1 + x)
    assert type(getattr(tnp, name)(x)) is np.ndarray
    np.testing.assert_array_equal(getattr(tnp, name)(x), getattr(np, name)(x))
    tnp.check_grads(lambda v: getattr(tnp, name)(v) * 2.0, [x + 0.1])


def test_tnp_angle_in_degrees_and_logaddexp_broadcast(rng):
    z = np.array([1 + 1j, -1 + 2j])
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(tnp.angle(v, deg=True)))(z),
                               1j * z / np.abs(z) ** 2 * 180 / np.pi, rtol=1e-15)
    a = rng.standard_normal((2, 3))
    f = lambda v: tnp.sum(tnp.logaddexp(v, 0.5))  # noqa: E731
    assert tnp.value_and_grad(f)(a)[0] == pytest.approx(np.sum(np.logaddexp(a, 0.5)), rel=1e-15)
    np.testing.assert_allclose(tnp.grad(f)(a), 1 / (1 + np.exp(0.5 - a)), rtol=1e-14)
    tnp.check_grads(lambda u, v: tnp.logaddexp(u, v), [a, rng.standard_normal(3)])


@pytest.mark.parametrize("op", ["sqrt", "power"])
def test_an_infinite_slope_at_zero_passes_no_nan_where_nothing_flows(op):
    """√x and x**0.25 at x = 0 have an infinite slope: a cotangent of 0 there gives 0 (quimb's √s
    gauges at zero singular values, which the loss does not see), a nonzero one stays infinite."""
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(np.array([0.0, 4.0, 0.0])))
    f = (lambda s, v: s.sqrt(v)) if op == "sqrt" else (lambda s, v: s.real_pow(v, 0.25))
    y = rt.with_eager_session(eng, lambda s: f(s, x))
    with np.errstate(divide="ignore", invalid="ignore"):
        g = rt.vjp(eng, y, x, tf.Tensor(np.array([0.0, 1.0, 1.0]))).value().to_numpy()
    slope = 0.25 if op == "sqrt" else 0.25 * 4.0 ** -0.75
    assert g[0] == 0.0 and g[1] == pytest.approx(slope) and g[2] == np.inf
