"""tnp's remainders, rounding, functions of two reals, special functions, differences and joins:
values as NumPy's (empty and edge inputs too), derivatives by check_grads (both modes, second order,
real and complex where NumPy has complex), the derivatives the rules choose at edges, and refusals."""

import numpy as np
import pytest

import tenferro_py.numpy as tnp
from tenferro_py.errors import DTypeMismatch, InvalidArgument, ShapeMismatch, Unsupported

EDGES = np.array([0.0, -0.0, 1.5, -2.5, 0.5, np.inf, -np.inf, np.nan, 3.0, -7.25])


def ours(f, *args):
    """f on the arguments as tnp computes it in a session, as NumPy data."""
    def plain(out):
        return np.asarray(tnp.stop_gradient(out)) if isinstance(out, tnp.ndarray) else out

    with tnp.session():
        out = f(*args)
        return type(out)(plain(o) for o in out) if isinstance(out, (tuple, list)) else plain(out)


def same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    np.testing.assert_allclose(np.asarray(got, dtype=np.result_type(want, float)), want, rtol=1e-14, atol=0)
    assert np.shape(got) == np.shape(want)


@pytest.fixture
def a(rng):
    return rng.standard_normal((3, 4))


@pytest.fixture
def b(rng):
    return rng.standard_normal((3, 4)) + 0.1


BINARY = ["arctan2", "hypot", "fmax", "fmin", "logaddexp2", "remainder", "mod", "fmod", "floor_divide", "divmod",
          "copysign", "heaviside", "nextafter", "float_power"]
UNARY = ["cbrt", "rint", "trunc", "fix", "spacing", "i0", "sinc", "modf", "signbit"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_values_are_numpys_at_edges_broadcast_and_empty(name):
    x, y = np.meshgrid(EDGES, EDGES)
    with np.errstate(all="ignore"):
        same(ours(getattr(tnp, name), x, y), getattr(np, name)(x, y))
        same(ours(getattr(tnp, name), x[:1], 2.0), getattr(np, name)(x[:1], 2.0))
        same(ours(getattr(tnp, name), np.zeros((0, 3)), np.ones(3)), getattr(np, name)(np.zeros((0, 3)), np.ones(3)))


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_are_numpys_at_edges_and_empty(name):
    with np.errstate(all="ignore"):
        x = EDGES[np.isfinite(EDGES)] if name == "i0" else EDGES
        same(ours(getattr(tnp, name), x), getattr(np, name)(x))
        same(ours(getattr(tnp, name), np.zeros((2, 0))), getattr(np, name)(np.zeros((2, 0))))


@pytest.mark.parametrize("name", ["arctan2", "hypot", "fmax", "fmin", "logaddexp2", "remainder", "fmod", "copysign",
                                  "heaviside", "float_power"])
def test_binary_derivatives(name, a, b):
    x = np.abs(a) + 0.5 if name == "float_power" else a
    tnp.check_grads(getattr(tnp, name), [x, b])


@pytest.mark.parametrize("f", [tnp.cbrt, tnp.i0, tnp.sinc, lambda x: tnp.modf(x)[0], tnp.unwrap,
                               lambda x: tnp.ldexp(x, np.arange(-2, 2)), lambda x: tnp.float_power(x, 3)])
def test_unary_derivatives(f, a):
    tnp.check_grads(f, [4 * a])


def test_complex_derivatives(a, b):
    z = a + 1j * b
    tnp.check_grads(tnp.sinc, [z])
    tnp.check_grads(lambda p, x: tnp.polyval(p, x), [z[0], z[1:]])
    tnp.check_grads(lambda x: tnp.float_power(x, 2.5), [z])
    tnp.check_grads(lambda x: tnp.real_if_close(x) * 2.0, [z])
    same(ours(tnp.rint, 2.5 * z), np.rint(2.5 * z))


def test_sinc_is_exact_at_and_near_zero_at_every_order():
    for x in (np.zeros(3), np.array([1e-9, -1e-4, 0.07, 0.08]), np.zeros(2) + 0j):
        tnp.check_grads(tnp.sinc, [x])
    second = tnp.grad(tnp.grad(tnp.sinc))(0.0)
    assert second == pytest.approx(-np.pi**2 / 3, rel=1e-15)
    assert tnp.grad(tnp.grad(tnp.grad(tnp.grad(tnp.sinc))))(0.0) == pytest.approx(np.pi**4 / 5, rel=1e-15)
    same(ours(tnp.sinc, np.array([0.0, 1e-300, 0.05, -0.0796, 1.0, 0.5j])), np.sinc([0.0, 1e-300, 0.05, -0.0796, 1.0, 0.5j]))


def test_derivatives_at_edges_are_the_rules():
    assert tnp.grad(tnp.hypot, argnum=0)(0.0, 0.0) == 0.0  # as |x|'s at 0
    assert np.isnan(tnp.grad(tnp.arctan2)(0.0, 0.0))  # no derivative at the origin: NaN, as JAX
    x, y = np.array([5.3, -5.3, 5.3]), np.array([2.0, 2.0, -2.0])
    np.testing.assert_array_equal(tnp.grad(lambda u: tnp.sum(tnp.remainder(x, u)))(y), -np.floor_divide(x, y))
    np.testing.assert_array_equal(tnp.grad(lambda u: tnp.sum(tnp.fmod(x, u)))(y), -np.trunc(x / y))
    np.testing.assert_array_equal(tnp.grad(lambda u: tnp.sum(u % 2.0 + u // 0.3))(x), np.ones(3))
    np.testing.assert_array_equal(tnp.grad(lambda u: tnp.sum(tnp.fmax(u, np.nan) + tnp.fmin(np.nan, u)))(x), 2 * np.ones(3))
    np.testing.assert_array_equal(tnp.grad(lambda u: tnp.sum(tnp.fmax(u, u)))(x), np.ones(3))  # a tie splits
    for f in (tnp.rint, tnp.trunc, tnp.spacing, lambda u: tnp.modf(u)[1], lambda u: tnp.floor_divide(u, 0.7)):
        np.testing.assert_array_equal(tnp.grad(lambda u: tnp.sum(f(u)))(x), np.zeros(3))
    np.testing.assert_array_equal(tnp.grad(lambda u: tnp.sum(tnp.heaviside(np.array([0.0, 1.0, -1.0]), u)))(x), [1, 0, 0])
    np.testing.assert_array_equal(tnp.grad(lambda u: tnp.sum(tnp.copysign(u, -1.0)))(x), -np.sign(x))
    assert tnp.grad(tnp.cbrt)(8.0) == pytest.approx(1 / 12, rel=1e-15)


def test_operators_and_divmod(a, b):
    same(ours(lambda x, y: (x % y, x // y, divmod(x, y), a % tnp.asarray(y), 3.0 // tnp.asarray(y)), a, b),
         (a % b, a // b, divmod(a, b), a % b, 3.0 // b))
    tnp.check_grads(lambda x, y: x % y + divmod(x, y)[1] + (x // y) * x, [a, b])
    assert np.allclose(tnp.grad(lambda x: tnp.sum(np.ones(4) % x))(b[0]), -np.floor_divide(1.0, b[0]))


def test_values_without_derivatives_are_numpy_data(a):
    def loss(x):
        assert tnp.signbit(x).tolist() == np.signbit(a).tolist() and tnp.all(tnp.isclose(x, a))
        assert tnp.allclose(x, a) and not tnp.any(x != a) and tnp.array_equal(x, a) and tnp.isrealobj(x)
        return tnp.sum(x)

    tnp.grad(loss)(a)
    np.testing.assert_array_equal(tnp.gcd(np.array([12, -18, 0]), 8), np.gcd([12, -18, 0], 8))
    np.testing.assert_array_equal(tnp.lcm(np.array([4, 6]), np.array([6, 10])), [12, 30])
    assert tnp.iscomplexobj(1j) and ours(tnp.iscomplexobj, a + 0j)


def test_refusals_name_the_function(a):
    with pytest.raises(Unsupported, match="nextafter"):
        tnp.grad(lambda x: tnp.sum(tnp.nextafter(x, np.inf)))(a)
    for f in (lambda x: tnp.remainder(x, 1j), lambda x: tnp.floor_divide(x + 1j, 2.0), lambda x: tnp.hypot(x, 1j),
              lambda x: tnp.i0(x + 1j), lambda x: tnp.cbrt(x + 0j), lambda x: tnp.heaviside(x + 0j, 0.5)):
        with pytest.raises(DTypeMismatch):
            tnp.grad(lambda x: tnp.sum(tnp.real(f(x))))(a)
    with pytest.raises(DTypeMismatch, match="gcd: expected integer data"):
        tnp.grad(lambda x: tnp.gcd(x, 2) * 0.0)(a)
    with pytest.raises(DTypeMismatch, match="ldexp: expected integer exponents"):
        tnp.grad(lambda x: tnp.sum(tnp.ldexp(x, 2.0)))(a)
    with pytest.raises(DTypeMismatch, match="signbit"):
        tnp.grad(lambda x: tnp.sum(x) + tnp.signbit(x + 1j).sum())(a)
    with pytest.raises(InvalidArgument, match="split"):
        tnp.grad(lambda x: tnp.sum(tnp.split(x, 3, axis=1)[0]))(a)
    with pytest.raises(InvalidArgument, match="r_"):
        tnp.grad(lambda x: tnp.sum(tnp.r_["0,2", x]))(a)
    with pytest.raises(ShapeMismatch, match="gradient"):
        tnp.grad(lambda x: tnp.sum(tnp.gradient(x[:1], axis=0)))(a)


def test_differences_polynomials_and_products(rng, a, b):
    cases = [
        (lambda x: tnp.diff(x, 2, axis=0, prepend=0.5), lambda x: np.diff(x, 2, axis=0, prepend=0.5)),
        (lambda x: tnp.diff(x, append=x[:, :1]), lambda x: np.diff(x, append=x[:, :1])),
        (lambda x: tnp.gradient(x, 0.5, axis=1, edge_order=2), lambda x: np.gradient(x, 0.5, axis=1, edge_order=2)),
        (lambda x: tnp.gradient(x)[0], lambda x: np.gradient(x)[0]),
        (lambda x: tnp.polyval(x[0], x[1:]), lambda x: np.polyval(x[0], x[1:])),
        (lambda x: tnp.polyval(x[:, :2], 0.3), lambda x: np.polyval(x[:, :2], 0.3)),
        (lambda x: tnp.unwrap(7 * x, axis=0), lambda x: np.unwrap(7 * x, axis=0)),
        (lambda x: tnp.cross(x[:, :3], b[:, :3]), lambda x: np.cross(x[:, :3], b[:, :3])),
        (lambda x: tnp.cross(x[:3, :3], b[:2, :3], axisa=0, axisb=0, axisc=0), lambda x: np.cross(x[:3, :3], b[:2, :3], axisa=0, axisb=0, axisc=0)),
        (lambda x: tnp.cross(x[:, :2], b[:, :2]), lambda x: np.cross(x[:, :2], b[:, :2])),
        (lambda x: tnp.select([a > 0, b > 0], [x, 2 * x], -1.0), lambda x: np.select([a > 0, b > 0], [x, 2 * x], -1.0)),
        (lambda x: tnp.partition(x, 2, axis=1), lambda x: np.partition(x, 2, axis=1)),
        (lambda x: tnp.make_diagonal(x, axis1=-1, axis2=-2), lambda x: x[..., None] * np.eye(4)),
        (lambda x: tnp.make_diagonal(x[0], offset=-1), lambda x: np.diag(x[0], -1)),
    ]
    for f, want in cases:
        same(ours(f, a), want(a))
        tnp.check_grads(f, [a])
    tnp.check_grads(lambda x: tnp.cross(x[:, :3], b[:, :3] + 1j), [a + 1j * b])
    same(ours(lambda x: tnp.diff(x, 0), a), a)
    same(ours(lambda x: tnp.polyval(np.zeros(0), x), a), np.polyval(np.zeros(0), a))


def test_joins_and_splits_are_numpys(a):
    v = a[0]
    cases = [
        lambda x: tnp.array_split(x, 3, axis=1), lambda x: tnp.array_split(x, [1, 5], axis=1),
        lambda x: tnp.split(x, [1, 2]), lambda x: tnp.hsplit(x, 2), lambda x: tnp.vsplit(x, 3),
        lambda x: tnp.dsplit(x[..., None] * np.ones(4), [1]), lambda x: tnp.atleast_1d(x[0, 0]),
        lambda x: tnp.atleast_2d(x[0]), lambda x: tnp.atleast_3d(x[0], x), lambda x: tnp.column_stack([x[0], x[1], v]),
        lambda x: tnp.row_stack([x, x[0]]), lambda x: tnp.dstack([x, x]), lambda x: tnp.rollaxis(x[..., None], 2, 1),
        lambda x: tnp.r_[x[0], v, 1:3, 2.5], lambda x: tnp.c_[x, a, x], lambda x: tnp.c_[x[0], v],
        lambda x: tnp.array_split(x[:0], 2),
    ]
    for f in cases:
        with np.errstate(all="ignore"):
            want = f(a)  # NumPy data outside a session: NumPy's own
        same(ours(f, a), want)
        tnp.check_grads(lambda x: tnp.concatenate([tnp.ravel(o) for o in f(x)]) if isinstance(f(x), (list, tuple))
                        else f(x), [a])
