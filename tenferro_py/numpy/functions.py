"""NumPy's functions on :class:`~tenferro_py.numpy.ndarray`, each written with session ops.

Every function works two ways: inside a session (``with_eager_session``, ``tnp.session()`` or a
transform) it takes arrays, NumPy data and numbers and returns arrays of the session, with
derivatives; outside one, given only NumPy data, it is NumPy's own function. Rearrangements
NumPy defines by indices (diagonal, roll, repeat, rot90, …) are computed by NumPy on an array
of positions and applied as one gather, so they are NumPy's in every detail.
"""

from __future__ import annotations

import math
import string
import warnings
from typing import Any, Callable

import numpy as np

from .array import (
    as_array,
    binary,
    broadcast_shapes,
    broadcast_to_shape,
    in_session,
    lift,
    ndarray,
    operands,
    power,
    session,
    stack_nested,
    tracked,
    value_of,
    wrap,
)
from .contractions import (
    dot,
    einsum,
    matmul,
    reduce,
    tensordot,
)
from .shaping import (
    normalize_axes,
    normalize_axis,
    reshape,
    squeeze,
    transpose,
)

__all__ = [
    "abs", "absolute", "add", "amax", "amin", "arccos", "arcsin", "arctan", "array", "asarray", "angle",
    "arccosh", "arcsinh", "arctanh", "ceil", "deg2rad", "degrees", "fabs", "floor", "logaddexp", "rad2deg",
    "radians", "clip", "conj", "conjugate", "cos", "cosh", "cumsum", "divide", "dot", "einsum", "exp", "exp2",
    "expm1", "eye", "full", "imag", "linspace", "log", "log10", "log1p", "log2", "matmul", "max", "maximum",
    "mean", "min", "minimum", "multiply", "negative", "ones", "ones_like", "power", "prod", "real",
    "reciprocal", "reshape", "sign", "sin", "sinh", "sqrt", "square", "squeeze", "std", "subtract", "sum",
    "tan", "tanh", "tensordot", "transpose", "true_divide", "var", "where", "zeros", "zeros_like", "arange",
    "nan_to_num", "from_dlpack",
]




# --- elementwise -----------------------------------------------------------------------------------


def _unary(name: str, op: str) -> Callable[[Any], Any]:
    numpy_fn = getattr(np, name)

    def fn(x: Any) -> Any:
        if not tracked(x):
            return numpy_fn(x)
        s = session(name)
        return wrap(getattr(s, op)(lift(s, x)))

    fn.__name__ = name
    fn.__doc__ = f"NumPy's {name}, differentiable."
    return fn


exp, log, sqrt, square = _unary("exp", "exp"), _unary("log", "log"), _unary("sqrt", "sqrt"), _unary("square", "square")
sin, cos, tan = _unary("sin", "sin"), _unary("cos", "cos"), _unary("tan", "tan")
sinh, cosh, tanh = _unary("sinh", "sinh"), _unary("cosh", "cosh"), _unary("tanh", "tanh")
arcsin, arccos, arctan = _unary("arcsin", "arcsin"), _unary("arccos", "arccos"), _unary("arctan", "arctan")
log1p, expm1 = _unary("log1p", "log1p"), _unary("expm1", "expm1")
abs = absolute = _unary("absolute", "abs")  # noqa: A001 (NumPy's name)
sign, negative = _unary("sign", "sign"), _unary("negative", "neg")
conj = conjugate = _unary("conjugate", "conj")
real, imag = _unary("real", "real"), _unary("imag", "imag")


exp2, log2, log10 = _unary("exp2", "exp2"), _unary("log2", "log2"), _unary("log10", "log10")
arcsinh, arccosh, arctanh = _unary("arcsinh", "arcsinh"), _unary("arccosh", "arccosh"), _unary("arctanh", "arctanh")
floor, ceil, fabs = _unary("floor", "floor"), _unary("ceil", "ceil"), _unary("fabs", "fabs")
deg2rad, rad2deg = _unary("deg2rad", "deg2rad"), _unary("rad2deg", "rad2deg")
radians, degrees = _unary("radians", "deg2rad"), _unary("degrees", "rad2deg")


def angle(z: Any, deg: bool = False) -> Any:
    """NumPy's angle (in degrees when ``deg``); its derivative at 0 is taken as 0."""
    if not tracked(z):
        return np.angle(z, deg)
    s = session("angle")
    theta = s.angle(lift(s, z))
    return wrap(s.rad2deg(theta) if deg else theta)


def logaddexp(x1: Any, x2: Any) -> Any:
    """NumPy's logaddexp (real), broadcast; its derivative is the softmax weights."""
    if not tracked(x1, x2):
        return np.logaddexp(x1, x2)
    s, (a, b) = operands("logaddexp", x1, x2)
    return wrap(s.logaddexp(a, b))


def reciprocal(x: Any) -> Any:
    """NumPy's reciprocal, 1/x."""
    return np.reciprocal(x) if not tracked(x) else divide(1.0, x)


def add(a: Any, b: Any) -> Any:
    """NumPy's add, broadcast and promoted as NumPy does."""
    return binary("add", a, b)


def subtract(a: Any, b: Any) -> Any:
    """NumPy's subtract, broadcast and promoted as NumPy does."""
    return binary("sub", a, b)


def multiply(a: Any, b: Any) -> Any:
    """NumPy's multiply, broadcast and promoted as NumPy does."""
    return binary("mul", a, b)


def divide(a: Any, b: Any) -> Any:
    """NumPy's true divide, broadcast and promoted as NumPy does."""
    return binary("div", a, b)


true_divide = divide


def _extremum(name: str) -> Callable[[Any, Any], Any]:
    def fn(a: Any, b: Any) -> Any:
        if not tracked(a, b):
            return getattr(np, name)(a, b)
        s, (x, y) = operands(name, a, b)
        return wrap(getattr(s, name)(x, y))

    fn.__name__ = name
    fn.__doc__ = f"NumPy's {name}; at a tie each operand gets half the derivative (as JAX)."
    return fn


maximum, minimum = _extremum("maximum"), _extremum("minimum")


def where(condition: Any, x: Any, y: Any) -> Any:
    """x where condition holds, else y, broadcast; the condition is a constant for AD."""
    if not tracked(x, y):
        return np.where(condition, x, y)
    s, (a, b) = operands("where", x, y)
    mask = np.asarray(np.asarray(value_of(condition)) != 0, dtype=np.float64)
    shape = broadcast_shapes("where", mask.shape, a.shape)
    cond = broadcast_to_shape(s, lift(s, mask), shape)
    return wrap(s.where(cond, broadcast_to_shape(s, a, shape), broadcast_to_shape(s, b, shape)))


def clip(a: Any, a_min: Any, a_max: Any) -> Any:
    """NumPy's clip, as maximum then minimum (a bound that is None is left out)."""
    if not tracked(a):
        return np.clip(a, a_min, a_max)
    out = a
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


# --- reductions ------------------------------------------------------------------------------------


def sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """NumPy's sum over axis (None: all), keepdims as NumPy's."""
    return reduce("sum", a, axis, keepdims, dtype, out)


def mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """NumPy's mean over axis (None: all), keepdims as NumPy's."""
    return reduce("mean", a, axis, keepdims, dtype, out)


def prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """NumPy's prod over axis (None: all), exact at zeros at every order."""
    return reduce("prod", a, axis, keepdims, dtype, out)


def max(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """NumPy's max; where it is attained more than once the derivative is shared (as JAX). Complex
    numbers in NumPy's lexicographic order, the derivative to the (first) entry attained."""
    return reduce("max", a, axis, keepdims, None, out)


def min(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """NumPy's min; where it is attained more than once the derivative is shared (as JAX). Complex
    numbers in NumPy's lexicographic order, the derivative to the (first) entry attained."""
    return reduce("min", a, axis, keepdims, None, out)


amax, amin = max, min


def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    """NumPy's var: the sum of |a − mean(a)|² over n − ddof; for ddof ≥ n, over 0 (inf, or nan
    where the sum is 0) with NumPy's warning, as NumPy."""
    a = stack_nested(a)
    if not tracked(a):
        return np.var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)
    x = asarray(a)
    axes = normalize_axes("var", axis, x.ndim)
    n = math.prod(x.shape[i] for i in axes)
    deviation = x - mean(x, axes, keepdims=True)
    squared = real(deviation * conj(deviation)) if x.dtype.kind == "c" else deviation * deviation
    if n - ddof <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        return divide(sum(squared, axes, keepdims=keepdims), 0.0)
    return sum(squared, axes, keepdims=keepdims) * (1.0 / (n - ddof))


def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    """NumPy's std, the square root of var; where the variance is 0 (one entry, or all equal) its
    derivative is 0 at every order (exact for one entry; the smallest subgradient, as the norm's at
    0, for equal ones), not 0/0."""
    a = stack_nested(a)
    if not tracked(a):
        return np.std(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)
    variance = var(a, axis, dtype, out, ddof, keepdims)
    zero = value_of(variance) == 0
    return where(zero, 0.0, sqrt(where(zero, 1.0, variance)))


def cumsum(a: Any, axis: Any = None) -> Any:
    """NumPy's cumsum (over the flattened array when axis is None), as a product with a triangle of ones."""
    if not tracked(a):
        return np.cumsum(a, axis=axis)
    x = asarray(a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    axis = normalize_axis("cumsum", axis, x.ndim)
    n = x.shape[axis]
    lower = np.tril(np.ones((n, n), dtype=x.dtype))
    letters = string.ascii_letters[: x.ndim]
    spec = f"{letters},{letters[axis].upper()}{letters[axis]}->" + letters.replace(letters[axis],
                                                                                 letters[axis].upper())
    s = session("cumsum")
    return wrap(s.einsum([x.tensor, lift(s, lower)], spec))


# --- construction ------------------------------------------------------------------------------------


def array(obj: Any, dtype: Any = None) -> Any:
    """NumPy's array; nested sequences that hold arrays of the session are stacked, with derivatives."""
    stacked = stack_nested(obj)
    if isinstance(stacked, ndarray):
        return stacked if dtype is None else stacked.astype(dtype)
    return np.array(stacked, dtype=dtype)


def asarray(obj: Any, dtype: Any = None) -> Any:
    """An array of the session for anything array-like inside one (NumPy data becomes a constant)."""
    out = array(obj, dtype) if not isinstance(obj, ndarray) else (obj if dtype is None else obj.astype(dtype))
    return as_array("asarray", out) if in_session() else out


def from_dlpack(x: Any) -> Any:
    """The values of a DLPack producer (a PyTorch or JAX array, values only): NumPy's view of them
    outside a session, a constant array of the session inside one."""
    view = np.from_dlpack(x)
    return as_array("from_dlpack", view) if in_session() else view


def zeros(shape: Any, dtype: Any = float) -> np.ndarray:
    """NumPy's zeros: a constant."""
    return np.zeros(shape, dtype)


def ones(shape: Any, dtype: Any = float) -> np.ndarray:
    """NumPy's ones: a constant."""
    return np.ones(shape, dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> np.ndarray:
    """NumPy's full: a constant."""
    return np.full(shape, fill_value, dtype)


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = float) -> np.ndarray:
    """NumPy's eye: a constant."""
    return np.eye(n, m, k, dtype)


def arange(*args: Any, **kwargs: Any) -> np.ndarray:
    """NumPy's arange: a constant."""
    return np.arange(*args, **kwargs)


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True) -> Any:
    """NumPy's linspace, differentiable in start and stop."""
    if not tracked(start, stop):
        return np.linspace(start, stop, num, endpoint)
    steps = (num - 1 if endpoint else num) or 1
    fractions = np.arange(num, dtype=float) / steps
    if endpoint and num > 1:
        fractions[-1] = 1.0  # stop exactly, as NumPy
    return add(multiply(asarray(start), 1.0 - fractions), multiply(asarray(stop), fractions))


def nan_to_num(x: Any, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Any:
    """NumPy's nan_to_num: the replaced entries are constants (zero derivative), the others pass."""
    if not tracked(x):
        return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)
    a = asarray(x)
    values = value_of(a)
    return where(np.isfinite(values), a, np.nan_to_num(values, nan=nan, posinf=posinf, neginf=neginf))


def zeros_like(a: Any, dtype: Any = None) -> np.ndarray:
    """Zeros of a's shape and dtype: a constant."""
    return np.zeros(np.shape(a), dtype if dtype is not None else _dtype_of(a))


def ones_like(a: Any, dtype: Any = None) -> np.ndarray:
    """Ones of a's shape and dtype: a constant."""
    return np.ones(np.shape(a), dtype if dtype is not None else _dtype_of(a))


def _dtype_of(a: Any) -> np.dtype:
    return a.dtype if isinstance(a, ndarray) else np.asarray(a).dtype
