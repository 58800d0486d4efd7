"""NumPy's shape functions on tnp arrays: axes, transpose, reshape and squeeze, indexing (basic by
slices, advanced by one gather), and JAX's functional updates ``x.at[key]``."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, ShapeMismatch
from ..ops.structural import SliceConfig
from ..tape import EagerTensor
from . import updates
from .array import (
    as_array,
    broadcast_to_shape,
    host_dtype,
    is_weak,
    lift,
    ndarray,
    session,
    stack_nested,
    tracked,
    value_of,
    wrap,
)


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
