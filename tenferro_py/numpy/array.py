"""The NumPy-style array: a session's tensor with NumPy's arithmetic, broadcasting and dtype
promotion, and the lifting of NumPy data and Python numbers into the session.

Its methods that reshape, index, reduce and multiply (``x.T``, ``x[key]``, ``x.sum()``, ``x @ y``,
NumPy's ``__array_ufunc__`` and ``__array_function__``) are written in the modules above this one
(:mod:`.shaping`, :mod:`.contractions`) and set on the class by :mod:`.methods`, as JAX sets its
array's methods, so that each module imports only downward.

An :class:`ndarray` holds an :class:`~tenferro_py.EagerTensor` of the session that made it; its
operators and methods run ops on the session running now in this thread (``current_session``),
so derivatives, higher orders, staging and engine widths are those of the session ops. Python
numbers are weak as in NumPy 2 (``x * 2.0`` keeps float32); NumPy arrays and numbers enter as
constants; integer and bool data become float64, as everywhere in the library.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, SessionEnded, ShapeMismatch
from ..runtime import current_session
from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import SUPPORTED_DTYPES, Tensor
from . import interop


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
        return observed(int, self)

    def __complex__(self) -> complex:
        return complex(untracked_value(self, "complex(x)"))

    def __bool__(self) -> bool:
        """The truth value (``if x > 0:`` and ``if x:``), of a tracked array too: it has no derivative."""
        return observed(bool, self)

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

    def __neg__(self):
        return wrap(session("negative").neg(self.tensor))

    def __pos__(self):
        return self

    def __abs__(self):
        return wrap(session("abs").abs(self.tensor))

    # comparisons: no derivative, so their results are NumPy bool arrays of the values
    def __lt__(self, other):
        return observed(np.less, self, other)

    def __le__(self, other):
        return observed(np.less_equal, self, other)

    def __gt__(self, other):
        return observed(np.greater, self, other)

    def __ge__(self, other):
        return observed(np.greater_equal, self, other)

    def __eq__(self, other):  # type: ignore[override]
        return observed(np.equal, self, other)

    def __ne__(self, other):  # type: ignore[override]
        return observed(np.not_equal, self, other)

    __hash__ = None  # type: ignore[assignment]

    # --- methods (those that reshape, index, reduce or multiply: numpy/methods.py) ----------

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

    def __setitem__(self, key, value) -> None:
        raise TypeError("tenferro_py.numpy arrays are immutable (as JAX's): x = x.at[key].set(value) "
                        "(or .add(value)) makes the updated array")


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


_AN_ARRAY = object()  # where observed's function takes an array's value


def observed(fn: Callable[..., Any], *xs: Any) -> Any:
    """``fn`` of the values of the arrays among ``xs`` (the rest passed as they are): a read whose
    result steers what runs next (a comparison, a truth value, an argmax), which a recorded program
    replays as a guard (``runtime.observe``); ``fn`` must depend on its arguments alone."""
    tensors = [x.tensor for x in xs if isinstance(x, ndarray)]
    if not tensors:
        return fn(*xs)
    template = tuple(_AN_ARRAY if isinstance(x, ndarray) else x for x in xs)
    return tensors[0].runtime.observe(functools.partial(_filled, fn, template), *tensors)


def _filled(fn: Callable[..., Any], template: tuple, *arrays: np.ndarray) -> Any:
    values = iter(arrays)
    return fn(*[next(values) if x is _AN_ARRAY else x for x in template])


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
