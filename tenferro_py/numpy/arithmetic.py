"""More of NumPy's mathematical functions on tnp arrays: remainders and rounding, functions of two
reals (arctan2, hypot, copysign, heaviside, fmax, fmin, logaddexp2), special functions (cbrt, sinc,
i0), polynomials and differences (polyval, diff, gradient, cross, select, unwrap), and the tests
whose results hold no float (signbit, isclose, all, any, isrealobj, gcd, lcm: NumPy data of the
values, as comparisons give). Each works both ways, as :mod:`.functions`' do.

Piecewise constant functions (floor_divide, rint, trunc, fix, spacing, modf's integral part) have zero
derivative; remainders have derivative 1 in the dividend and minus the integer quotient in the
divisor; ``nextafter`` is not differentiable (``Unsupported``, as JAX has no rule).
"""

from __future__ import annotations

import builtins
import functools
import math
from typing import Any, Sequence

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, ShapeMismatch
from ..ops import extrema, special
from ..ops.elementwise import full_like, zero_mask
from .array import lift, ndarray, observed, operands, power, result_dtype, session, tracked, value_of, wrap
from .functions import asarray, divide, multiply, real, subtract, where
from .joining import concatenate, moveaxis, stack
from .shaping import normalize_axes, normalize_axis
from .ufuncs import binary_ufunc, divmod_, floor_divide, fmod, mod, remainder, unary_ufunc

__all__ = [
    "all", "allclose", "any", "arctan2", "array_equal", "cbrt", "copysign", "cross", "diff", "divmod", "fix", "float_power", "floor_divide",
    "fmax", "fmin", "fmod", "gcd", "gradient", "heaviside", "hypot", "i0", "iscomplexobj", "isclose", "isrealobj",
    "lcm", "ldexp", "logaddexp2", "mod", "modf", "nextafter", "polyval", "real_if_close", "remainder", "rint",
    "select", "signbit", "sinc", "spacing", "trunc", "unwrap",
]

divmod = divmod_  # noqa: A001 (NumPy's name)

# --- one primitive each ----------------------------------------------------------------------------

arctan2 = binary_ufunc("arctan2", extrema.arctan2, "NumPy's arctan2(y, x), real; its derivative is NaN at the origin.")
hypot = binary_ufunc("hypot", extrema.hypot, "NumPy's hypot, real; its derivative at the origin is taken as 0 (as |x|'s).")
fmax = binary_ufunc("fmax", extrema.fmax, "NumPy's fmax, real: a NaN loses; a tie splits the derivative.")
fmin = binary_ufunc("fmin", extrema.fmin, "NumPy's fmin, real: a NaN loses; a tie splits the derivative.")
logaddexp2 = binary_ufunc("logaddexp2", extrema.logaddexp2, "NumPy's logaddexp2, real; derivative: base-2 softmax weights.")
nextafter = binary_ufunc("nextafter", special.nextafter, "NumPy's nextafter, real; not differentiable (Unsupported).")
cbrt = unary_ufunc("cbrt", special.cbrt, "NumPy's cbrt, real; its derivative is infinite at 0 (0 where no tangent flows).")
rint = unary_ufunc("rint", special.rint, "NumPy's rint (real or complex); zero derivative.")
trunc = unary_ufunc("trunc", special.trunc, "NumPy's trunc, real; zero derivative.")
fix = unary_ufunc("fix", special.trunc, "NumPy's fix (rounds toward zero), real; zero derivative.")
spacing = unary_ufunc("spacing", special.spacing, "NumPy's spacing, real; zero derivative.")
i0 = unary_ufunc("i0", special.bessel_i, "NumPy's i0, real; derivative I₁, and so on by I_n' = (I_{n−1} + I_{n+1})/2.",
                 order=0)


def _real(op: str, t: Any) -> Any:
    if t.dtype.kind == "c":
        raise DTypeMismatch(op, "real operands (float64 or float32)", str(t.dtype))
    return t


def modf(x: Any) -> tuple[Any, Any]:
    """NumPy's modf: (x − trunc(x), trunc(x)), ±0 and ±inf at infinities; derivatives 1 and 0."""
    if not tracked(x):
        return np.modf(x)
    s = session("modf")
    t = lift(s, x)
    return wrap(s.bind(special.modf_fraction, t)[0]), wrap(s.bind(special.trunc, _real("modf", t))[0])


def sinc(x: Any) -> Any:
    """NumPy's sinc, sin(πx)/(πx) (1 at 0), real or complex; exact at 0 at every order (as JAX's)."""
    if not tracked(x):
        return np.sinc(x)
    s = session("sinc")
    return wrap(special.sinc(s, lift(s, x)))


def heaviside(x1: Any, x2: Any) -> Any:
    """NumPy's heaviside: 0 below 0, x2 at 0, 1 above, real; derivative 0 in x1, 1 in x2 where x1 = 0."""
    if not tracked(x1, x2):
        return np.heaviside(x1, x2)
    s, (a, b) = operands("heaviside", x1, x2)
    step = s.scale_real(s.add(s.sign(_real("heaviside", a)), full_like(s, a, 1)), 0.5)
    return wrap(s.where(s.bind(zero_mask, a)[0], b, step))


def copysign(x1: Any, x2: Any) -> Any:
    """NumPy's copysign, real: |x1| with x2's sign bit; derivative ±sign(x1) in x1 (0 at 0), 0 in x2."""
    if not tracked(x1, x2):
        return np.copysign(x1, x2)
    s, (a, b) = operands("copysign", x1, x2)
    magnitude = s.abs(_real("copysign", a))
    return wrap(s.where(s.bind(special.mask, b, test="signbit")[0], s.neg(magnitude), magnitude))


def float_power(x1: Any, x2: Any) -> Any:
    """NumPy's float_power: power in float64 (complex128 for complex operands)."""
    if not tracked(x1, x2):
        return np.float_power(x1, x2)
    dtype = np.result_type(result_dtype(x1, x2), np.float64)
    s = session("float_power")
    base = wrap(lift(s, x1, dtype))
    return power(base, x2 if isinstance(x2, (int, float)) and not isinstance(x2, bool) else wrap(lift(s, x2, dtype)))


def ldexp(x1: Any, x2: Any) -> Any:
    """NumPy's ldexp, x1·2**x2 for integer x2 (NumPy data: tnp arrays are floating), exact; linear in x1."""
    if not tracked(x1, x2):
        return np.ldexp(x1, x2)
    exponents = np.asarray(x2) if not isinstance(x2, ndarray) else None
    if exponents is None or exponents.dtype.kind not in "biu":
        raise DTypeMismatch("ldexp", "integer exponents (NumPy data; tnp arrays are floating)",
                            str(x2.dtype if isinstance(x2, ndarray) else exponents.dtype))
    s = session("ldexp")
    dtype = result_dtype(x1)
    _, (a, n) = operands("ldexp", lift(s, x1, dtype), lift(s, exponents, dtype))
    return wrap(s.bind(special.ldexp, _real("ldexp", a), n)[0])


def unwrap(p: Any, discont: Any = None, axis: int = -1, *, period: float = 2 * math.pi) -> Any:
    """NumPy's unwrap, real: p plus multiples of period (a constant for AD), so its derivative is 1."""
    if not tracked(p):
        return np.unwrap(p, discont, axis, period=period)
    x = asarray(p)
    s = session("unwrap")
    correction = s.bind(special.unwrap_correction, x.tensor, axis=normalize_axis("unwrap", axis, x.ndim),
                        discont=float(period / 2 if discont is None else discont), period=float(period))[0]
    return wrap(s.add(x.tensor, correction))


# --- tests of the values: NumPy data, no derivative --------------------------------------------------


def signbit(x: Any) -> Any:
    """NumPy's signbit, of the values (real)."""
    if isinstance(x, ndarray) and x.dtype.kind == "c":
        raise DTypeMismatch("signbit", "a real array", str(x.dtype))
    return observed(np.signbit, x)


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    """NumPy's isclose, of the values."""
    return observed(functools.partial(np.isclose, rtol=rtol, atol=atol, equal_nan=equal_nan), a, b)


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """NumPy's allclose, of the values."""
    return bool(observed(functools.partial(np.allclose, rtol=rtol, atol=atol, equal_nan=equal_nan), a, b))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> bool:
    """NumPy's array_equal, of the values."""
    return bool(observed(functools.partial(np.array_equal, equal_nan=equal_nan), a1, a2))


def all(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """NumPy's all, of the values."""
    return observed(functools.partial(np.all, axis=axis, keepdims=keepdims), a)


def any(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """NumPy's any, of the values."""
    return observed(functools.partial(np.any, axis=axis, keepdims=keepdims), a)


def isrealobj(x: Any) -> bool:
    """NumPy's isrealobj: whether the dtype is not complex."""
    return not iscomplexobj(x)


def iscomplexobj(x: Any) -> bool:
    """NumPy's iscomplexobj: whether the dtype is complex."""
    return x.dtype.kind == "c" if isinstance(x, ndarray) else np.iscomplexobj(x)


def _integers(op: str, *xs: Any) -> None:
    for x in xs:
        if isinstance(x, ndarray) or np.asarray(x).dtype.kind not in "biu":
            raise DTypeMismatch(op, "integer data (NumPy's; tnp arrays are floating)",
                                str(x.dtype if isinstance(x, ndarray) else np.asarray(x).dtype))


def gcd(x1: Any, x2: Any) -> Any:
    """NumPy's gcd of integer data (a NumPy result: integers have no derivative)."""
    _integers("gcd", x1, x2)
    return np.gcd(x1, x2)


def lcm(x1: Any, x2: Any) -> Any:
    """NumPy's lcm of integer data (a NumPy result: integers have no derivative)."""
    _integers("lcm", x1, x2)
    return np.lcm(x1, x2)


def real_if_close(a: Any, tol: float = 100) -> Any:
    """NumPy's real_if_close: the real part when every imaginary part is within tol (times the dtype's
    eps, for tol > 1) of 0, else a; which one depends on the values, as NumPy's."""
    if not tracked(a):
        return np.real_if_close(a, tol)
    x = asarray(a)
    if x.dtype.kind != "c":
        return x
    bound = tol * np.finfo(x.dtype).eps if tol > 1 else tol
    return real(x) if np.all(np.abs(value_of(x).imag) < bound) else x


# --- polynomials and differences ---------------------------------------------------------------------


def polyval(p: Any, x: Any) -> Any:
    """NumPy's polyval by Horner's rule (coefficients from the highest power, along p's first axis,
    each broadcast against x, as NumPy's), differentiable in both."""
    if not tracked(p, x):
        return np.polyval(p, x)
    coefficients, xs = asarray(p), asarray(x)
    if coefficients.ndim == 0:
        raise ShapeMismatch("polyval", "coefficients along a first axis", "a 0-d array")
    y = np.zeros(xs.shape, xs.dtype)
    for i in range(coefficients.shape[0]):
        y = multiply(y, xs) + coefficients[i]
    return y


def _along(x: Any, axis: int, key: Any) -> Any:
    return x[(slice(None),) * axis + (key,)]


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """NumPy's diff: the n-th differences along axis (prepend and append joined first)."""
    if not tracked(a, prepend, append):
        kwargs = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
        return np.diff(a, n, axis, **kwargs)
    x = asarray(a)
    axis = normalize_axis("diff", axis, x.ndim)
    if n < 0:
        raise InvalidArgument("diff", "an order n >= 0", str(n))
    edge = list(x.shape)
    edge[axis] = 1
    parts = [np.broadcast_to(v, edge) if v is not None and np.ndim(value_of(v)) == 0 else v for v in (prepend, append)]
    x = concatenate([v for v in (parts[0], x, parts[1]) if v is not None], axis)
    for _ in range(n):
        x = subtract(_along(x, axis, slice(1, None)), _along(x, axis, slice(None, -1)))
    return x


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """NumPy's gradient with uniform spacings (one number, or one per axis): central differences
    inside, one-sided ones of ``edge_order`` (1 or 2) at the ends; a tuple for several axes."""
    if not tracked(f):
        return np.gradient(f, *varargs, axis=axis, edge_order=edge_order)
    x = asarray(f)
    axes = normalize_axes("gradient", axis, x.ndim)
    spacings = list(varargs) * len(axes) if len(varargs) == 1 else list(varargs) or [1.0] * len(axes)
    if len(spacings) != len(axes) or builtins.any(np.ndim(value_of(h)) != 0 for h in spacings):
        raise InvalidArgument("gradient", f"no spacing, one number or {len(axes)} numbers", repr(varargs))
    if edge_order not in (1, 2):
        raise InvalidArgument("gradient", "edge_order 1 or 2", str(edge_order))
    out = []
    for ax, h in zip(axes, spacings):
        if x.shape[ax] < edge_order + 1:
            raise ShapeMismatch("gradient", f"at least {edge_order + 1} entries along axis {ax}", str(x.shape[ax]))
        at = lambda i: _along(x, ax, slice(i, i + 1 if i != -1 else None))  # noqa: E731
        inner = _along(x, ax, slice(2, None)) - _along(x, ax, slice(None, -2))
        if edge_order == 1:
            first, last = (at(1) - at(0)) * 2.0, (at(-1) - at(-2)) * 2.0
        else:
            first, last = at(0) * -3.0 + at(1) * 4.0 - at(2), at(-1) * 3.0 - at(-2) * 4.0 + at(-3)
        out.append(divide(concatenate([first, inner, last], ax), 2.0 * value_of(h)))
    return out[0] if len(out) == 1 else tuple(out)


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None) -> Any:
    """NumPy's cross of vectors of 3 (or 2) components, the other axes broadcast."""
    if not tracked(a, b):
        return np.cross(a, b, axisa, axisb, axisc, axis)
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = moveaxis(asarray(a), axisa, -1), moveaxis(asarray(b), axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise ShapeMismatch("cross", "vectors of 2 or 3 components", f"{x.shape[-1]} and {y.shape[-1]}")
    if x.shape[-1] == y.shape[-1] == 2:
        return x[..., 0] * y[..., 1] - x[..., 1] * y[..., 0]
    u, v = (concatenate([w, np.zeros(w.shape[:-1] + (1,), w.dtype)], -1) if w.shape[-1] == 2 else w for w in (x, y))
    parts = [u[..., 1] * v[..., 2] - u[..., 2] * v[..., 1], u[..., 2] * v[..., 0] - u[..., 0] * v[..., 2],
             u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]]
    return moveaxis(stack(parts, -1), -1, axisc)


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """NumPy's select: the choice of the first condition that holds, else default (conditions are
    constants for AD)."""
    if not tracked(*choicelist, default):
        return np.select(condlist, choicelist, default)
    if len(condlist) != len(choicelist):
        raise InvalidArgument("select", "as many conditions as choices", f"{len(condlist)} and {len(choicelist)}")
    out = default
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        out = where(condition, choice, out)
    return asarray(out)

