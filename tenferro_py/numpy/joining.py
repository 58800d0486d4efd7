"""NumPy's routines that join and split arrays and change their rank (concatenate, stack and its
kin, append, split and its kin, atleast_1d/2d/3d, moveaxis, rollaxis, expand_dims, and the index
tricks ``r_`` and ``c_``), written with session ops and working both ways, as :mod:`.functions`'
do. Splits are slices, so each piece's derivative is the slice's."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import InvalidArgument, ShapeMismatch
from .array import lift, result_dtype, session, tracked, wrap
from .functions import asarray
from .shaping import normalize_axes, normalize_axis, reshape, transpose

__all__ = [
    "append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "c_", "column_stack", "concatenate",
    "dsplit", "dstack", "expand_dims", "hsplit", "hstack", "moveaxis", "r_", "ravel", "rollaxis", "row_stack", "split",
    "stack", "vsplit", "vstack",
]


def ravel(a: Any) -> Any:
    """The array flattened, row-major."""
    return reshape(a, (-1,))


def moveaxis(a: Any, source: Any, destination: Any) -> Any:
    """NumPy's moveaxis: the source axes to the destinations, the others in order."""
    if not tracked(a):
        return np.moveaxis(a, source, destination)
    x = asarray(a)
    sources = normalize_axes("moveaxis", source, x.ndim)
    destinations = normalize_axes("moveaxis", destination, x.ndim)
    if len(sources) != len(destinations):
        raise InvalidArgument("moveaxis", "as many destinations as sources", f"{len(destinations)} and {len(sources)}")
    order = [i for i in range(x.ndim) if i not in sources]
    for dest, src in sorted(zip(destinations, sources)):
        order.insert(dest, src)
    return transpose(x, order)


def expand_dims(a: Any, axis: Any) -> Any:
    """NumPy's expand_dims: axes of length 1 inserted."""
    if not tracked(a):
        return np.expand_dims(a, axis)
    x = asarray(a)
    return reshape(x, np.expand_dims(np.empty(x.shape, dtype=np.bool_), axis).shape)


def concatenate(arrays: Sequence[Any], axis: int = 0) -> Any:
    """NumPy's concatenate along axis, dtypes promoted as NumPy does."""
    if not tracked(*arrays):
        return np.concatenate(arrays, axis)
    s = session("concatenate")
    dtype = result_dtype(*arrays)
    ts = [lift(s, a, dtype) for a in arrays]
    if any(t.ndim == 0 for t in ts):
        raise InvalidArgument("concatenate", "arrays of rank >= 1", "a 0-d array")
    return wrap(s.concatenate(ts, normalize_axis("concatenate", axis, ts[0].ndim)))


def stack(arrays: Sequence[Any], axis: int = 0) -> Any:
    """NumPy's stack: the arrays joined along a new axis."""
    if not tracked(*arrays):
        return np.stack(arrays, axis)
    xs = [asarray(a) for a in arrays]
    axis = normalize_axis("stack", axis, xs[0].ndim + 1)
    return concatenate([expand_dims(x, axis) for x in xs], axis)


def hstack(arrays: Sequence[Any]) -> Any:
    """NumPy's hstack."""
    if not tracked(*arrays):
        return np.hstack(arrays)
    xs = [asarray(a) for a in arrays]
    xs = [reshape(x, (1,)) if x.ndim == 0 else x for x in xs]
    return concatenate(xs, 0 if xs[0].ndim == 1 else 1)


def vstack(arrays: Sequence[Any]) -> Any:
    """NumPy's vstack."""
    if not tracked(*arrays):
        return np.vstack(arrays)
    xs = [asarray(a) for a in arrays]
    return concatenate([reshape(x, (1, -1)) if x.ndim < 2 else x for x in xs], 0)


def append(arr: Any, values: Any, axis: Any = None) -> Any:
    """NumPy's append: both flattened and joined when axis is None."""
    if not tracked(arr, values):
        return np.append(arr, values, axis)
    a, v = asarray(arr), asarray(values)
    if axis is None:
        return concatenate([ravel(a), ravel(v)], 0)
    return concatenate([a, v], axis)




def column_stack(tup: Sequence[Any]) -> Any:
    """NumPy's column_stack: vectors as columns, joined along axis 1."""
    if not tracked(*tup):
        return np.column_stack(tup)
    xs = [asarray(a) for a in tup]
    return concatenate([reshape(x, (-1, 1)) if x.ndim < 2 else x for x in xs], 1)


row_stack = vstack


def dstack(tup: Sequence[Any]) -> Any:
    """NumPy's dstack: joined along the third axis, each at least 3-D."""
    if not tracked(*tup):
        return np.dstack(tup)
    return concatenate([atleast_3d(a) for a in tup], 2)


def _at_least(name: str, arys: tuple, shape_of) -> Any:
    if not tracked(*arys):
        return getattr(np, name)(*arys)
    out = tuple(reshape(x, shape_of(x.shape)) for x in (asarray(a) for a in arys))
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys: Any) -> Any:
    """NumPy's atleast_1d: a number becomes a vector of one (several arrays: a tuple)."""
    return _at_least("atleast_1d", arys, lambda n: n or (1,))


def atleast_2d(*arys: Any) -> Any:
    """NumPy's atleast_2d: a vector becomes one row."""
    return _at_least("atleast_2d", arys, lambda n: ((1,) * (2 - len(n)) + n) if len(n) < 2 else n)


def atleast_3d(*arys: Any) -> Any:
    """NumPy's atleast_3d: (n,) becomes (1, n, 1) and (m, n) becomes (m, n, 1)."""
    return _at_least("atleast_3d", arys, lambda n: {0: (1, 1, 1), 1: (1,) + n + (1,), 2: n + (1,)}.get(len(n), n))


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """NumPy's rollaxis: ``axis`` moved to lie before ``start``."""
    if not tracked(a):
        return np.rollaxis(a, axis, start)
    x = asarray(a)
    axis = normalize_axis("rollaxis", axis, x.ndim)
    if not -x.ndim <= start <= x.ndim:
        raise InvalidArgument("rollaxis", f"a start in [{-x.ndim}, {x.ndim}]", str(start))
    start = start + x.ndim if start < 0 else start
    order = [i for i in range(x.ndim) if i != axis]
    order.insert(start - 1 if axis < start else start, axis)
    return transpose(x, order)


# --- splits -------------------------------------------------------------------------------------------


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """NumPy's array_split: pieces along axis, at the given indices or as even as they come."""
    if not tracked(ary):
        return np.array_split(ary, indices_or_sections, axis)
    x = asarray(ary)
    axis = normalize_axis("array_split", axis, x.ndim)
    n = x.shape[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise InvalidArgument("array_split", "a number of sections > 0", str(sections))
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        bounds = [0] + np.cumsum(sizes).tolist()
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    before = (slice(None),) * axis
    return [x[before + (slice(lo, hi),)] for lo, hi in zip(bounds[:-1], bounds[1:])]


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """NumPy's split: array_split, where a number of sections must divide the axis."""
    if not tracked(ary):
        return np.split(ary, indices_or_sections, axis)
    x = asarray(ary)
    n = x.shape[normalize_axis("split", axis, x.ndim)]
    if np.ndim(indices_or_sections) == 0 and (int(indices_or_sections) <= 0 or n % int(indices_or_sections)):
        raise InvalidArgument("split", f"a number of sections that divides {n}", str(indices_or_sections))
    return array_split(x, indices_or_sections, axis)


def _split_along(name: str, least: int, axis_of):
    def fn(ary: Any, indices_or_sections: Any) -> list:
        if not tracked(ary):
            return getattr(np, name)(ary, indices_or_sections)
        x = asarray(ary)
        if x.ndim < least:
            raise ShapeMismatch(name, f"an array of rank >= {least}", f"rank {x.ndim}")
        return split(x, indices_or_sections, axis_of(x.ndim))

    fn.__name__, fn.__doc__ = name, f"NumPy's {name}: split along axis {axis_of(3)} (of a vector: 0)."
    return fn


hsplit = _split_along("hsplit", 1, lambda ndim: 0 if ndim == 1 else 1)
vsplit = _split_along("vsplit", 2, lambda ndim: 0)
dsplit = _split_along("dsplit", 3, lambda ndim: 2)


# --- index tricks ---------------------------------------------------------------------------------------


class _Joiner:
    """``r_[...]`` (along axis 0, each item at least 1-D) and ``c_[...]`` (along the last axis, each at
    least 2-D, a vector as a column); a slice is NumPy's range of it. Directive strings are refused."""

    def __init__(self, name: str, columns: bool):
        self.name, self.columns = name, columns

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, str) for k in items):
            raise InvalidArgument(self.name, "arrays, numbers and slices (no directive strings)", repr(key))
        if not tracked(*items):
            return (np.c_ if self.columns else np.r_)[key]
        parts = [np.r_[k] if isinstance(k, slice) else k for k in items]
        if not self.columns:
            return concatenate([atleast_1d(p) for p in parts], 0)
        xs = [asarray(p) for p in parts]
        return concatenate([reshape(x, (-1, 1)) if x.ndim < 2 else x for x in xs], -1)


r_ = _Joiner("r_", columns=False)
c_ = _Joiner("c_", columns=True)
