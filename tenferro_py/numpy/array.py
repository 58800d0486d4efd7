"""The NumPy-style array: a session's tensor with NumPy's operators, broadcasting, dtype
promotion, row-major reshape and indexing, each written with the session's ops.

An :class:`ndarray` holds an :class:`~tenferro_py.EagerTensor` of the session that made it; its
operators and methods run ops on the session running now in this thread (``current_session``),
so derivatives, higher orders, staging and engine widths are those of the session ops. Python
numbers are weak as in NumPy 2 (``x * 2.0`` keeps float32); NumPy arrays and numbers enter as
constants; integer and bool data become float64, as everywhere in the library.
"""

from __future__ import annotations

import string
from typing import Any, Callable

import numpy as np

from ..einsum import numpy_path
from ..errors import DTypeMismatch, InvalidArgument, SessionEnded, ShapeMismatch
from ..ops.structural import SliceConfig
from ..runtime import current_session
from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import SUPPORTED_DTYPES, Tensor
from . import interop, updates


def session(op: str) -> EagerSession:
    """The session running now, for an op on tracked arrays; a clear error when there is none."""
    s = current_session()
    if s is None:
        raise SessionEnded(op, "a call inside a session (with_eager_session, tnp.session or a transform)",
                           "an array of a session that has ended")
    return s


def in_session() -> bool:
    """Whether a session runs in this thread (tnp's functions then return its arrays)."""
    return current_session() is not None


def tracked(*xs: Any) -> bool:
    """Whether a function runs as session ops: inside a session, or given an array of one."""
    return in_session() or any(isinstance(x, ndarray) for x in xs)


def as_array(op: str, x: Any) -> "ndarray":
    """x as an array of the running session (NumPy data and numbers become constants)."""
    if isinstance(x, ndarray):
        return x
    s = session(op)
    return wrap(lift(s, stack_nested(x)))


class ndarray:  # noqa: N801 (NumPy's name, so that isinstance(x, tnp.ndarray) reads as in NumPy)
    """A tensor of the running session with NumPy's semantics; ``.tensor`` is the EagerTensor."""

    __slots__ = ("tensor",)
    __array_priority__ = 100.0

    def __init__(self, tensor: EagerTensor):
        self.tensor = tensor

    # --- what NumPy code reads ----------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, as NumPy's."""
        return self.tensor.shape

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.tensor.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for d in self.tensor.shape:
            n *= d
        return n

    @property
    def dtype(self) -> np.dtype:
        """The dtype (float64, float32, complex128 or complex64)."""
        return self.tensor.dtype

    @property
    def T(self) -> "ndarray":  # noqa: N802
        """The transpose (axes reversed), as NumPy's ``.T``."""
        return transpose(self)

    @property
    def real(self) -> "ndarray":
        """The real part, differentiable."""
        return wrap(session("real").real(self.tensor))

    @property
    def imag(self) -> "ndarray":
        """The imaginary part, differentiable."""
        return wrap(session("imag").imag(self.tensor))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # --- reading values: plain for an untracked array, refused for a tracked one (interop.py) ---

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The value as a NumPy array (its read-only buffer, unless a copy is needed or asked for); a
        tracked array refuses (NumPy would drop its derivative), unless cast to integers or bools
        (``np.int64(x)``), which have no derivative."""
        if self.tensor.is_tracked and not (dtype is not None and np.dtype(dtype).kind in "biu"):
            raise interop.conversion_refused("np.asarray(x)")
        return self.tensor.value().__array__(dtype, copy)

    def __dlpack__(self, **options: Any) -> Any:
        """The value by DLPack (``torch.from_dlpack(x)``, ``jax.numpy.from_dlpack(x)``; as
        :meth:`Tensor.__dlpack__`); values only: a tracked array refuses, as for ``np.asarray``."""
        if self.tensor.is_tracked:
            raise interop.conversion_refused("x.__dlpack__()")
        return self.tensor.value().__dlpack__(**options)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.tensor.value().__dlpack_device__()

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """An operator with a NumPy operand on the left (``np_array + x``) is ours; any other ufunc
        runs on the values (see :func:`interop.numpy_on_values`), naming tnp's for a tracked array."""
        operator = _OPERATORS.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if operator is not None:
            return operator(*inputs)
        op = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        return interop.numpy_on_values(op, getattr(ufunc, method), inputs, kwargs, value_of, is_tracked_array,
                                       interop.tnp_name(ufunc.__name__, "numpy") if method == "__call__" else None)

    def __array_function__(self, func: Callable[..., Any], types: Any, args: tuple, kwargs: dict) -> Any:
        """NumPy's functions that call the array's own method (np.sum(x) is x.sum()) do so, as NumPy
        does for any array-like; others run on the values, naming tnp's for a tracked array."""
        method = _METHOD_FUNCTIONS.get(func.__name__)
        if method is not None and args and isinstance(args[0], ndarray):
            return getattr(args[0], method)(*args[1:], **kwargs)
        module = getattr(func, "__module__", None) or "numpy"
        name = f"{'np' + module[len('numpy'):] if module.startswith('numpy') else module}.{func.__name__}"
        return interop.numpy_on_values(name, func, args, kwargs, value_of, is_tracked_array,
                                       interop.tnp_name(func.__name__, module))

    def item(self) -> Any:
        """The value as a Python number; a tracked array refuses (``TrackedConversion``)."""
        return untracked_value(self, "x.item()").item()

    def tolist(self) -> Any:
        """The values as nested lists; a tracked array refuses (``TrackedConversion``)."""
        return untracked_value(self, "x.tolist()").tolist()

    def __float__(self) -> float:
        return float(untracked_value(self, "float(x)"))

    def __int__(self) -> int:
        """Truncation, of a tracked array too: an integer has no derivative (it is 0 where defined)."""
        return int(value_of(self))

    def __complex__(self) -> complex:
        return complex(untracked_value(self, "complex(x)"))

    def __bool__(self) -> bool:
        """The truth value (``if x > 0:`` and ``if x:``), of a tracked array too: it has no derivative."""
        return bool(value_of(self))

    def __format__(self, spec: str) -> str:
        """f"{x:.3f}" formats the value (a string carries no derivative); f"{x}" is str(x)."""
        return format(value_of(self), spec) if spec else str(self)

    def __repr__(self) -> str:
        return f"tnp.ndarray({value_of(self)!r}, tracked={self.tensor.is_tracked})"

    # --- arithmetic ---------------------------------------------------------------------

    def __add__(self, other):
        return binary("add", self, other)

    def __radd__(self, other):
        return binary("add", other, self)

    def __sub__(self, other):
        return binary("sub", self, other)

    def __rsub__(self, other):
        return binary("sub", other, self)

    def __mul__(self, other):
        return binary("mul", self, other)

    def __rmul__(self, other):
        return binary("mul", other, self)

    def __truediv__(self, other):
        return binary("div", self, other)

    def __rtruediv__(self, other):
        return binary("div", other, self)

    def __pow__(self, other):
        return power(self, other)

    def __rpow__(self, other):
        return power(other, self)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __neg__(self):
        return wrap(session("negative").neg(self.tensor))

    def __pos__(self):
        return self

    def __abs__(self):
        return wrap(session("abs").abs(self.tensor))

    # comparisons: no derivative, so their results are NumPy bool arrays of the values
    def __lt__(self, other):
        return value_of(self) < value_of(other)

    def __le__(self, other):
        return value_of(self) <= value_of(other)

    def __gt__(self, other):
        return value_of(self) > value_of(other)

    def __ge__(self, other):
        return value_of(self) >= value_of(other)

    def __eq__(self, other):  # type: ignore[override]
        return value_of(self) == value_of(other)

    def __ne__(self, other):  # type: ignore[override]
        return value_of(self) != value_of(other)

    __hash__ = None  # type: ignore[assignment]

    # --- methods as NumPy's ---------------------------------------------------------------

    def reshape(self, *shape, order: str = "C") -> "ndarray":
        """NumPy's reshape, row-major by default (``order='F'``: column-major)."""
        return reshape(self, shape[0] if len(shape) == 1 else shape, order=order)

    def ravel(self, order: str = "C") -> "ndarray":
        """The array flattened, row-major by default."""
        return reshape(self, (-1,), order=order)

    def flatten(self, order: str = "C") -> "ndarray":
        """The array flattened, row-major by default (no copy is needed: arrays are immutable)."""
        return reshape(self, (-1,), order=order)

    def transpose(self, *axes) -> "ndarray":
        """NumPy's transpose: axes reversed, or permuted as given."""
        return transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    def conj(self) -> "ndarray":
        """The complex conjugate, differentiable."""
        return wrap(session("conj").conj(self.tensor))

    conjugate = conj

    def astype(self, dtype) -> "ndarray":
        """NumPy's astype, to a float or complex dtype."""
        return astype(self, dtype)

    def copy(self) -> "ndarray":
        """The array itself: arrays never change, so a copy is the same array."""
        return self

    def squeeze(self, axis=None) -> "ndarray":
        """NumPy's squeeze: axes of length 1 removed."""
        return squeeze(self, axis)

    def dot(self, other) -> "ndarray":
        """NumPy's dot with other."""
        return dot(self, other)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **unsupported) -> "ndarray":
        """NumPy's sum over axis (None: all); ``initial=`` and ``where=`` are refused."""
        refuse_options("sum", unsupported)
        return reduce("sum", self, axis, keepdims, dtype, out)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **unsupported) -> "ndarray":
        """NumPy's mean over axis (None: all); ``where=`` is refused."""
        refuse_options("mean", unsupported)
        return reduce("mean", self, axis, keepdims, dtype, out)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **unsupported) -> "ndarray":
        """NumPy's prod over axis (None: all), exact at zeros; ``initial=`` and ``where=`` are refused."""
        refuse_options("prod", unsupported)
        return reduce("prod", self, axis, keepdims, dtype, out)

    def max(self, axis=None, out=None, keepdims=False, **unsupported) -> "ndarray":
        """NumPy's max over axis; a maximum attained more than once shares the derivative."""
        refuse_options("max", unsupported)
        return reduce("max", self, axis, keepdims, None, out)

    def min(self, axis=None, out=None, keepdims=False, **unsupported) -> "ndarray":
        """NumPy's min over axis; a minimum attained more than once shares the derivative."""
        refuse_options("min", unsupported)
        return reduce("min", self, axis, keepdims, None, out)

    def __getitem__(self, key) -> "ndarray":
        return getitem(self, key)

    def __setitem__(self, key, value) -> None:
        raise TypeError("tenferro_py.numpy arrays are immutable (as JAX's): x = x.at[key].set(value) "
                        "(or .add(value)) makes the updated array")

    @property
    def at(self) -> "IndexUpdates":
        """JAX's functional updates: ``x.at[key].set(v)``, ``.add(v)``, ``.get()``, each a new array."""
        return IndexUpdates(self)


class IndexUpdates:
    """``x.at``: indexed by any key ``x[key]`` takes, it gives that key's :class:`IndexUpdate`."""

    __slots__ = ("array",)

    def __init__(self, array: ndarray):
        self.array = array

    def __getitem__(self, key: Any) -> "IndexUpdate":
        return IndexUpdate(self.array, key)


class IndexUpdate:
    """``x.at[key]``: a new array with x's entries at NumPy's ``x[key]`` replaced or added to
    (``values`` broadcast to ``x[key]``'s shape, in x's dtype), differentiable in x and values."""

    __slots__ = ("array", "key")

    def __init__(self, array: ndarray, key: Any):
        self.array, self.key = array, key

    def get(self) -> ndarray:
        """x[key], as JAX's ``x.at[key].get()``."""
        return getitem(self.array, self.key)

    def set(self, values: Any) -> ndarray:
        """A new array: x with x[key] replaced by values, differentiable in both."""
        return self._update("at.set", values, updates.set_at)

    def add(self, values: Any) -> ndarray:
        """A new array: x with values added at x[key] (repeated indices add up), differentiable in both."""
        return self._update("at.add", values, updates.add_at)

    def _update(self, op: str, values: Any, how: Callable[..., EagerTensor]) -> ndarray:
        x = self.array
        s = session(op)
        key = tuple(value_of(k) for k in self.key) if isinstance(self.key, tuple) else value_of(self.key)
        where = updates.positions(x.shape, key)
        if x.dtype.kind != "c" and (isinstance(values, complex) or (not is_weak(values) and
                                                                     host_dtype(values).kind == "c")):
            raise DTypeMismatch(op, f"real values for an array of dtype {x.dtype} (a cast would drop the "
                                    "imaginary part)", "complex values")
        v = broadcast_to_shape(s, lift(s, stack_nested(values), x.dtype), where.shape)
        return wrap(how(s, x.tensor, where, v))


def wrap(t: EagerTensor) -> ndarray:
    """The session's tensor as a tnp array."""
    return ndarray(t)


def refuse_options(op: str, options: dict) -> None:
    """NumPy's options a reduction does not implement (``initial``, ``where``): refused, not ignored."""
    if options:
        raise InvalidArgument(op, "axis, dtype, out=None and keepdims only", ", ".join(sorted(options)))


def value_of(x: Any) -> Any:
    """The value of an array as NumPy data (anything else as it is), read without its derivative:
    for what has none (comparisons, masks, indices, printing)."""
    return x.tensor.value().to_numpy() if isinstance(x, ndarray) else x


def is_tracked_array(x: Any) -> bool:
    """An array a derivative is being taken through (its tensor is tracked)."""
    return isinstance(x, ndarray) and x.tensor.is_tracked


def untracked_value(x: ndarray, op: str) -> np.ndarray:
    """x's value for an implicit conversion (``op``): refused for a tracked array."""
    if x.tensor.is_tracked:
        raise interop.conversion_refused(op)
    return value_of(x)


def stop_gradient(x: Any) -> Any:
    """x's value without its derivative, as JAX's: an array becomes a constant (of its runtime),
    which ``float``, ``np.asarray`` and NumPy's functions take; lists and tuples are mapped; NumPy
    data and numbers, which have no derivative, are returned as they are."""
    if isinstance(x, ndarray):
        return wrap(x.tensor.runtime.constant_from(x.tensor))
    if type(x) in (tuple, list):
        return type(x)(stop_gradient(v) for v in x)
    return x


# --- lifting operands into the session ----------------------------------------------------------


def is_weak(x: Any) -> bool:
    """A Python number: it takes the dtype of the array it meets (NumPy 2's rule)."""
    return isinstance(x, (int, float, complex)) and not isinstance(x, (bool, np.generic))


def host_dtype(x: Any) -> np.dtype:
    """The dtype x has as a library value: integers and bools become float64."""
    dtype = x.dtype if isinstance(x, (ndarray, EagerTensor)) else np.asarray(x).dtype
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype not in SUPPORTED_DTYPES:
        raise DTypeMismatch("tenferro_py.numpy", "float or complex data", str(dtype))
    return dtype


def result_dtype(*xs: Any) -> np.dtype:
    """NumPy 2's promotion of operands: arrays decide, Python numbers follow (a complex number
    makes the result complex of the arrays' precision)."""
    strong = [host_dtype(x) for x in xs if not is_weak(x)]
    dtype = np.result_type(*strong) if strong else np.dtype(np.float64)
    if any(isinstance(x, complex) for x in xs if is_weak(x)) and dtype.kind != "c":
        dtype = np.result_type(dtype, np.complex64)
    return dtype


def lift(s: EagerSession, x: Any, dtype: np.dtype | None = None) -> EagerTensor:
    """x as a tensor of session s (in ``dtype`` when given): an ndarray's tensor, or a constant."""
    if isinstance(x, ndarray):
        t = x.tensor
    elif isinstance(x, EagerTensor):
        t = x
    else:
        t = s.constant_from(Tensor(np.asarray(x, dtype=dtype if dtype is not None else host_dtype(x))))
    return t if dtype is None or t.dtype == dtype else s.convert(t, dtype)


def broadcast_to_shape(s: EagerSession, t: EagerTensor, shape: tuple[int, ...]) -> EagerTensor:
    """t broadcast NumPy's way (aligned at the last axis) to ``shape``."""
    if t.shape == shape:
        return t
    offset = len(shape) - len(t.shape)
    if offset < 0 or any(n not in (1, shape[offset + i]) for i, n in enumerate(t.shape)):
        raise ShapeMismatch("tenferro_py.numpy", f"operands that broadcast to {list(shape)}", f"{list(t.shape)}")
    return s.broadcast_in_dim(t, shape, tuple(range(offset, len(shape))))


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast of shapes, or a ``ShapeMismatch`` naming op."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeMismatch(op, "shapes that broadcast together", " and ".join(str(list(s)) for s in shapes)) from None


def operands(op: str, *xs: Any) -> tuple[EagerSession, list[EagerTensor]]:
    """The operands of an elementwise op, in one dtype and one (broadcast) shape."""
    s = session(op)
    dtype = result_dtype(*xs)
    ts = [lift(s, x, dtype) for x in xs]
    shape = broadcast_shapes(op, *(t.shape for t in ts))
    return s, [broadcast_to_shape(s, t, shape) for t in ts]


def binary(op: str, a: Any, b: Any) -> Any:
    """add, sub, mul or div with NumPy's broadcasting and promotion; plain NumPy outside a session."""
    if not tracked(a, b):
        return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](a, b)
    s, (x, y) = operands(op, a, b)
    return wrap(getattr(s, op)(x, y))


def power(a: Any, b: Any) -> Any:
    """a ** b: a number exponent stays a parameter (so 0**2 and (−2)**3 differentiate everywhere)."""
    if not tracked(a, b):
        return np.power(a, b)
    s = session("power")
    if isinstance(b, (int, float, np.integer, np.floating)) and not isinstance(b, bool):
        x = lift(s, a, result_dtype(a, b))
        exponent = float(b)
        return wrap(s.power(x, int(exponent) if exponent.is_integer() and abs(exponent) < 2**31 else exponent))
    s, (x, y) = operands("power", a, b)
    return wrap(s.pow(x, y))


def astype(x: Any, dtype: Any) -> Any:
    """NumPy's astype, to a float or complex dtype (an int or bool dtype is a ``DTypeMismatch``)."""
    if not isinstance(x, ndarray):
        return np.asarray(x).astype(dtype)
    target = np.dtype(dtype)
    if target.kind in "biu":
        raise DTypeMismatch("astype", "a float or complex dtype (library values are floating)", str(target))
    return wrap(session("astype").convert(x.tensor, target))


# --- shape ----------------------------------------------------------------------------------


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    """axis in [0, ndim), from NumPy's [-ndim, ndim), or an ``InvalidArgument`` naming op."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -ndim <= axis < ndim:
        raise InvalidArgument(op, f"an axis in [{-ndim}, {ndim})", repr(axis))
    return int(axis) % ndim


def normalize_axes(op: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """The axes (None: all) in [0, ndim), each once, or an ``InvalidArgument`` naming op."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(normalize_axis(op, a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise InvalidArgument(op, "axes without repeats", repr(axis))
    return out


def transpose(x: Any, axes: Any = None) -> Any:
    """NumPy's transpose: axes reversed, or permuted as given."""
    if not isinstance(x, ndarray):
        return np.transpose(x, axes)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(normalize_axis("transpose", a, x.ndim)
                                                                      for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise InvalidArgument("transpose", f"a permutation of {x.ndim} axes", repr(axes))
    return x if perm == tuple(range(x.ndim)) else wrap(session("transpose").transpose(x.tensor, perm))


def target_shape(op: str, size: int, shape: Any) -> tuple[int, ...]:
    """A requested shape with its one −1 resolved, checked against the number of elements."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if sum(1 for d in dims if d == -1) > 1 or any(not isinstance(d, (int, np.integer)) or d < -1 for d in dims):
        raise InvalidArgument(op, "a shape of non-negative ints, at most one -1", repr(shape))
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise ShapeMismatch(op, f"a shape that {size} elements fill", repr(shape))
        dims = tuple(size // known if d == -1 else d for d in dims)
    if int(np.prod(dims, dtype=np.int64)) != size:
        raise ShapeMismatch(op, f"a shape of {size} elements", repr(shape))
    return tuple(int(d) for d in dims)


def reshape(x: Any, shape: Any, order: str = "C") -> Any:
    """NumPy's reshape: row-major by default; ``order="F"`` is column-major (the tenferro style's)."""
    if not isinstance(x, ndarray):
        return np.reshape(x, shape, order=order)  # type: ignore[call-overload]
    if order not in ("C", "F"):
        raise InvalidArgument("reshape", "order 'C' or 'F'", repr(order))
    dims = target_shape("reshape", x.size, shape)
    return x if dims == x.shape else wrap(session("reshape").reshape(x.tensor, dims, order))


# --- reductions ---------------------------------------------------------------------------------

_REDUCERS = {"sum": "reduce_sum", "mean": "mean", "prod": "reduce_prod", "max": "reduce_max", "min": "reduce_min"}


def reduce(op: str, x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None, out: Any = None) -> Any:
    """sum, mean, prod, max or min over ``axis`` (None: all; an int or a tuple), NumPy's keepdims.
    ``dtype`` and ``out`` are NumPy's (which passes them to an array's method); ``out`` must be None."""
    x = stack_nested(x)
    if not tracked(x):
        return getattr(np, op)(x, axis=axis, keepdims=keepdims, dtype=dtype, out=out)
    if out is not None:
        raise InvalidArgument(op, "out=None (arrays are immutable)", type(out).__name__)
    s = session(op)
    t = lift(s, x, None if dtype is None else np.dtype(dtype))
    axes = normalize_axes(op, axis, t.ndim)
    if op in ("max", "min") and t.dtype.kind == "c":
        return _complex_extremum(op, wrap(t), axes, keepdims)
    out = getattr(s, _REDUCERS[op])(t, axes)
    if keepdims:
        kept = tuple(1 if a in axes else n for a, n in enumerate(t.shape))
        out = s.reshape(out, kept)  # only size-1 axes are added: the order of elements is unchanged
    return wrap(out)


def _complex_extremum(op: str, x: ndarray, axes: tuple[int, ...], keepdims: bool) -> ndarray:
    """NumPy's max or min of complex numbers, in its lexicographic order (real part, then imaginary):
    the entry attained, gathered, so the derivative goes to it (to the first, where it is tied)."""
    if any(x.shape[a] == 0 for a in axes):
        raise InvalidArgument(op, "axes of size >= 1 (an empty reduction has no value)",
                              f"axes {list(axes)} of shape {list(x.shape)}")
    values = value_of(x)
    kept = [a for a in range(x.ndim) if a not in axes]
    out_shape = tuple(1 if a in axes else n for a, n in enumerate(x.shape)) if keepdims else \
        tuple(x.shape[a] for a in kept)

    def attained(positions: np.ndarray) -> np.ndarray:
        def flat(a: np.ndarray) -> np.ndarray:
            return np.transpose(a, kept + list(axes)).reshape(tuple(x.shape[k] for k in kept) + (-1,))
        index = (np.argmax if op == "max" else np.argmin)(flat(values), axis=-1)
        return np.take_along_axis(flat(positions), index[..., None], -1).reshape(out_shape)

    return rearranged(op, x, attained)


# --- matmul ---------------------------------------------------------------------------------------


def matmul(a: Any, b: Any) -> Any:
    """NumPy's matmul: vectors promoted and demoted, leading axes broadcast."""
    if not tracked(a, b):
        return np.matmul(a, b)
    s = session("matmul")
    dtype = result_dtype(a, b)
    x, y = lift(s, a, dtype), lift(s, b, dtype)
    if x.ndim == 0 or y.ndim == 0:
        raise InvalidArgument("matmul", "operands of rank >= 1 (use * for scalars)", f"ranks {x.ndim} and {y.ndim}")
    if x.ndim == 1 and y.ndim == 1:
        return wrap(s.einsum([x, y], "i,i->"))
    if x.ndim == 1:
        return wrap(s.einsum([x, y], "...j,...jk->...k"))
    if y.ndim == 1:
        return wrap(s.einsum([x, y], "...ij,j->...i"))
    batch = broadcast_shapes("matmul", x.shape[:-2], y.shape[:-2])
    x = broadcast_to_shape(s, x, batch + x.shape[-2:])
    y = broadcast_to_shape(s, y, batch + y.shape[-2:])
    return wrap(s.einsum([x, y], "...ij,...jk->...ik"))


#: NumPy's functions that NumPy runs as the array's own method (``np.sum(x)`` is ``x.sum()``).
_METHOD_FUNCTIONS = {"sum": "sum", "mean": "mean", "prod": "prod", "max": "max", "amax": "max", "min": "min",
                     "amin": "min", "reshape": "reshape", "transpose": "transpose", "squeeze": "squeeze"}

#: The ufuncs of Python's operators: ``np_array + x`` reaches x as ``np.add(np_array, x)``.
_OPERATORS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: binary("add", a, b), "subtract": lambda a, b: binary("sub", a, b),
    "multiply": lambda a, b: binary("mul", a, b), "divide": lambda a, b: binary("div", a, b),
    "power": lambda a, b: power(a, b), "matmul": lambda a, b: matmul(a, b),
}


# --- indexing -------------------------------------------------------------------------------------


def _basic_key(key: tuple) -> bool:
    return all(k is None or k is Ellipsis or isinstance(k, slice) or (isinstance(k, (int, np.integer))
                                                                       and not isinstance(k, bool)) for k in key)


def getitem(x: ndarray, key: Any) -> ndarray:
    """NumPy's indexing: basic (ints, slices with any step, None, Ellipsis) by slices, reverses and
    reshapes; advanced (int or bool arrays, lists) by a gather of the row-major flattening at the
    positions NumPy's own indexing picks, so the result is NumPy's in every case."""
    key = key if isinstance(key, tuple) else (key,)
    if _basic_key(key):
        return _basic_index(x, key)
    return rearranged("getitem", x, lambda p: p[tuple(value_of(k) for k in key)])


def rearranged(op: str, x: ndarray, by_positions: Callable[[np.ndarray], np.ndarray]) -> ndarray:
    """The array NumPy's ``by_positions`` makes of x (an index-only rearrangement, given the array
    of x's row-major positions), as one gather."""
    positions = by_positions(np.arange(x.size).reshape(x.shape))
    s = session(op)
    flat = reshape(x, (-1,)).tensor
    return reshape(wrap(s.take(flat, positions.ravel().tolist(), 0)), positions.shape)


def _basic_index(x: ndarray, key: tuple) -> ndarray:
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise InvalidArgument("getitem", "at most one Ellipsis", repr(key))
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > x.ndim:
        raise InvalidArgument("getitem", f"at most {x.ndim} indices", f"{used}")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (x.ndim - used) + key[at + 1:]
    else:
        key = key + (slice(None),) * (x.ndim - used)
    s = session("getitem")
    t = x.tensor
    starts, limits, strides, flips, out_shape = [], [], [], [], []
    axis = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        n = t.shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if step < 0:  # reversed: the same entries, read from the other end
                start, step = start + (count - 1) * step, -step
                flips.append(axis)
            starts.append(start)
            limits.append(start + (count - 1) * step + 1 if count else start)
            strides.append(step)
            out_shape.append(count)
        else:
            if not -n <= k < n:
                raise InvalidArgument("getitem", f"an index in [{-n}, {n}) on axis {axis}", repr(k))
            i = int(k) % n
            starts.append(i)
            limits.append(i + 1)
            strides.append(1)
        axis += 1
    if (starts, limits) != ([0] * t.ndim, list(t.shape)) or any(st != 1 for st in strides):
        t = s.slice(t, SliceConfig(starts, limits, strides))
    if flips:
        t = s.rev(t, flips)
    if tuple(out_shape) != t.shape:
        t = s.reshape(t, tuple(out_shape))  # drops or adds size-1 axes only: order unchanged
    return wrap(t)


def stack_nested(obj: Any) -> Any:
    """np.array of nested lists that hold arrays of the session: stacked along new leading axes."""
    if isinstance(obj, ndarray):
        return obj
    if isinstance(obj, (list, tuple)):
        items = [stack_nested(o) for o in obj]
        if any(isinstance(i, ndarray) for i in items):
            s = session("array")
            dtype = result_dtype(*items)
            ts = [lift(s, i, dtype) for i in items]
            shape = ts[0].shape
            if any(t.shape != shape for t in ts):
                raise ShapeMismatch("array", "nested sequences of one shape", str([list(t.shape) for t in ts]))
            return wrap(s.concatenate([s.reshape(t, (1,) + shape) for t in ts], 0))
        return np.asarray(items)
    return obj



# --- squeeze and the products built on einsum -----------------------------------------------------


def squeeze(a: Any, axis: Any = None) -> Any:
    """NumPy's squeeze: axes of length 1 removed (those of axis, or all)."""
    if not tracked(a):
        return np.squeeze(a, axis)
    x = as_array("squeeze", a)
    axes = tuple(i for i, n in enumerate(x.shape) if n == 1) if axis is None else normalize_axes("squeeze", axis,
                                                                                                   x.ndim)
    if any(x.shape[i] != 1 for i in axes):
        raise ShapeMismatch("squeeze", "axes of size 1", str([x.shape[i] for i in axes]))
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in axes))


def einsum(*operands: Any, optimize: Any = None) -> Any:
    """NumPy's einsum (the operands promoted to one dtype): ``einsum(subscripts, *operands)`` or NumPy's
    interleaved form ``einsum(x, labels, y, labels, ..., [output])`` (labels: ints and Ellipsis).
    ``optimize`` as NumPy's (False, True, 'greedy', 'optimal', (strategy, memory limit), or a path
    from einsum_path; also opt_einsum's other strategies, and path optimisers: opt_einsum's,
    cotengra's HyperOptimizer and ReusableHyperOptimizer); None: opt_einsum's 'auto' path."""
    if operands and not isinstance(operands[0], str):
        subscripts, operands = _interleaved_subscripts(operands)
    else:
        subscripts, operands = (operands[0], operands[1:]) if operands else (None, ())
    if not isinstance(subscripts, str):
        raise InvalidArgument("einsum", "subscripts as a str such as 'ij,jk->ik', or NumPy's interleaved "
                                        "operands and labels", repr(subscripts))
    if not tracked(*operands):
        if callable(optimize):  # a path optimiser (opt_einsum's, cotengra's): its path, as NumPy takes one
            optimize = numpy_path(subscripts, [np.shape(x) for x in operands], optimize)
        return np.einsum(subscripts, *operands, **({} if optimize is None else {"optimize": optimize}))
    s = session("einsum")
    dtype = result_dtype(*operands)
    return wrap(s.einsum([lift(s, stack_nested(x), dtype) for x in operands], subscripts,
                         "auto" if optimize is None else optimize))


def _interleaved_subscripts(args: tuple) -> tuple[str, tuple]:
    """(subscripts, operands) of NumPy's interleaved einsum(x, [0, 1], y, [1, 2], [0, 2]): each label a
    letter (in the labels' order), Ellipsis '...'; without the output list, NumPy's implicit output
    (the labels that appear once, in increasing order, after the broadcast axes)."""
    pairs, output = list(zip(args[0::2], args[1::2])), (args[-1] if len(args) % 2 else None)
    for labels in [labels for _, labels in pairs] + ([] if output is None else [output]):
        if not isinstance(labels, (list, tuple, np.ndarray)) or not all(
                label is Ellipsis or (isinstance(label, (int, np.integer)) and not isinstance(label, bool))
                for label in labels):
            raise InvalidArgument("einsum", "subscripts as a str such as 'ij,jk->ik', or NumPy's interleaved "
                                            "operands and labels (lists of ints and Ellipsis)", repr(labels))
    names = sorted({label for _, labels in pairs for label in labels if label is not Ellipsis})
    letters = [c for c in map(chr, range(65, 0x2FF)) if c.isalpha()]
    if len(names) > len(letters):
        raise InvalidArgument("einsum", f"at most {len(letters)} distinct labels", f"{len(names)}")
    letter = dict(zip(names, letters))

    def term(labels: Any) -> str:
        return "".join("..." if label is Ellipsis else letter[label] for label in labels)

    if output is None:
        counts = [label for _, labels in pairs for label in labels if label is not Ellipsis]
        ellipsis = any(label is Ellipsis for _, labels in pairs for label in labels)
        output = [Ellipsis] * ellipsis + [label for label in names if counts.count(label) == 1]
    return ",".join(term(labels) for _, labels in pairs) + "->" + term(output), tuple(x for x, _ in pairs)


def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """NumPy's tensordot: the last ``axes`` of a against the first of b, or the listed pairs."""
    if not tracked(a, b):
        return np.tensordot(a, b, axes)
    x, y = as_array("tensordot", a), as_array("tensordot", b)
    if isinstance(axes, (int, np.integer)):
        left, right = list(range(x.ndim - int(axes), x.ndim)), list(range(int(axes)))
    else:
        left, right = ([int(axes[0])] if isinstance(axes[0], (int, np.integer)) else list(axes[0]),
                       [int(axes[1])] if isinstance(axes[1], (int, np.integer)) else list(axes[1]))
    left = [normalize_axis("tensordot", i, x.ndim) for i in left]
    right = [normalize_axis("tensordot", i, y.ndim) for i in right]
    if len(left) != len(right):
        raise InvalidArgument("tensordot", "as many axes of a as of b", f"{len(left)} and {len(right)}")
    letters = string.ascii_letters[: x.ndim + y.ndim]
    sub_x, sub_y = list(letters[: x.ndim]), list(letters[x.ndim:])
    for i, j in zip(left, right):
        sub_y[j] = sub_x[i]
    out = [c for k, c in enumerate(sub_x) if k not in left] + [c for k, c in enumerate(sub_y) if k not in right]
    return einsum(f"{''.join(sub_x)},{''.join(sub_y)}->{''.join(out)}", x, y)


def dot(a: Any, b: Any) -> Any:
    """NumPy's dot: a product with a scalar; else the last axis of a against the second-to-last
    of b (the only one of a vector)."""
    if not tracked(a, b):
        return np.dot(a, b)
    x, y = as_array("dot", a), as_array("dot", b)
    if x.ndim == 0 or y.ndim == 0:
        return binary("mul", x, y)
    return tensordot(x, y, ([x.ndim - 1], [0 if y.ndim == 1 else y.ndim - 2]))
