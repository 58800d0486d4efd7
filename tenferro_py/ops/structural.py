"""Shape ops: broadcast_in_dim, transpose, reshape, slice, pad, concatenate, rev, take, scatter_add.

All are linear (``RuleSet.define_linear``): each declares its transpose, its JVP being the op
itself on the tangents. broadcast and reduce_sum (in :mod:`.reductions`) transpose each other, as do slice and pad,
take and scatter_add; concatenate's transpose slices its pieces back. Reshape is column-major
throughout.

Each keeps structured values where the structure survives it (see
:mod:`tenferro_py.structure`): a block inside zeros stays one under transpose, slice
and a reshape that keeps the block a box; a matrix product stays one under
transpose and slice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, ShapeMismatch
from ..rules import RuleSet
from ..structure import Embedded, Product, dense, embedded, intersect
from ..tensor import Aval, check_shape, is_integer

RULES = RuleSet()


def check_axes(op: str, what: str, axes: object, rank: int) -> tuple[int, ...]:
    """Distinct axes in [0, rank), or InvalidArgument naming the op."""
    if type(axes) is tuple and all([type(a) is int and 0 <= a < rank for a in axes]) and len(set(axes)) == len(axes):
        return axes
    try:
        out: tuple = tuple(axes)  # type: ignore[call-overload, arg-type]
    except TypeError:
        raise InvalidArgument(op, f"{what}: a sequence of axes", repr(axes)) from None
    for a in out:
        if not is_integer(a) or not 0 <= a < rank:
            raise InvalidArgument(op, f"{what} in [0, {rank})", repr(list(out)))
    if len(set(out)) != len(out):
        raise InvalidArgument(op, f"{what} without repeats", repr(list(out)))
    return tuple(int(a) for a in out)


def check_indices(op: str, indices: object) -> tuple[int, ...]:
    """A sequence of ints (bounds are checked by the op against its axis), or InvalidArgument."""
    try:
        out: tuple = tuple(indices)  # type: ignore[call-overload, arg-type]
    except TypeError:
        raise InvalidArgument(op, "indices: a sequence of ints", repr(indices)) from None
    if not all(is_integer(i) for i in out):
        raise InvalidArgument(op, "indices: a sequence of ints", repr(indices))
    return tuple(int(i) for i in out)


# --- broadcast_in_dim ------------------------------------------------------


def _broadcast_abstract(x: Aval, shape, dims) -> tuple[Aval]:
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise ShapeMismatch(
                "broadcast_in_dim",
                f"input axis {i} of size 1 or {shape[d]} (output axis {d})",
                f"size {x.shape[i]}",
            )
    return (Aval(shape, x.dtype),)


def _broadcast_impl(x, shape, dims):
    """A read-only view of x with stride 0 along the new and the stretched axes (made directly on a
    C-contiguous x: numpy.broadcast_to's checks cost several times the view)."""
    placed = [1] * len(shape)
    for i, d in enumerate(dims):
        placed[d] = x.shape[i]
    if list(dims) != sorted(dims):
        x = np.transpose(x, np.argsort(dims))
    x = x.reshape(placed)
    if not x.flags.c_contiguous:
        return (np.broadcast_to(x, shape),)
    strides = tuple(0 if n != m else stride for n, m, stride in zip(x.shape, shape, x.strides))
    view = np.ndarray(shape, x.dtype, x, 0, strides)
    view.flags.writeable = False
    return (view,)


def _broadcast_transpose(s, cotangents, primals, needs, shape, dims):
    (ct,), (x,) = cotangents, primals
    kept = {d: x.shape[i] for i, d in enumerate(dims)}
    summed = [a for a in range(len(shape)) if a not in kept or kept[a] != shape[a]]  # new axes, and size 1 → n
    g = s.reduce_sum(ct, summed) if summed else ct
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    g = s.reshape(g, [x.shape[i] for i in order])
    if order != sorted(order):
        g = s.transpose(g, list(np.argsort(order)))
    return (g,)


broadcast_in_dim = RULES.define_linear(
    "broadcast_in_dim",
    _broadcast_abstract,
    _broadcast_impl,
    transpose=_broadcast_transpose,
)


# --- transpose / reshape --------------------------------------------------


def _transpose_structured(s, x, perm):
    """A block's transpose is the transposed block; a product's (a matrix) is the product of the
    transposed factors, swapped."""
    if type(x) is Embedded:
        return (Embedded(s.transpose(x.block, perm), tuple(x.shape[p] for p in perm),
                         tuple(x.starts[p] for p in perm), tuple(x.strides[p] for p in perm)),)
    if type(x) is Product:
        if perm == (0, 1):
            return (x,)
        return (Product(s.transpose(x.right, (1, 0)), s.transpose(x.left, (1, 0))),)
    return NotImplemented


transpose = RULES.define_linear(
    "transpose",
    lambda x, perm: (Aval(tuple(x.shape[p] for p in perm), x.dtype),),
    lambda x, perm: (np.transpose(x, perm),),
    transpose=lambda s, c, p, needs, perm: (s.transpose(c[0], list(np.argsort(perm))),),
    structured=_transpose_structured,
)


def _reshape_abstract(x: Aval, shape, order) -> tuple[Aval]:
    if math.prod(shape) != math.prod(x.shape):
        raise ShapeMismatch("reshape", f"a shape of {math.prod(x.shape)} elements", f"{list(shape)}")
    return (Aval(shape, x.dtype),)


def axis_groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[tuple[range, range]]:
    """The runs of consecutive axes that a column-major reshape from ``old`` to ``new`` merges or splits:
    pairs (old axes, new axes) of equal size, the fastest axes first (no axis of size 0)."""
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        i0, j0, size_old, size_new = i, j, 1, 1
        if i < len(old):
            size_old, i = old[i], i + 1
        if j < len(new):
            size_new, j = new[j], j + 1
        while size_old != size_new:
            if size_old < size_new:
                size_old, i = size_old * old[i], i + 1
            else:
                size_new, j = size_new * new[j], j + 1
        groups.append((range(i0, i), range(j0, j)))
    return groups


def reshaped_box(box: tuple[tuple[int, int], ...], old: tuple[int, ...], new: tuple[int, ...]):
    """The box of ``new`` that a column-major reshape takes ``box`` of ``old`` to, or None when it is no box.

    Within each run of merged axes the block must be one contiguous range of the run (full on
    all of its axes but the slowest), and that range must be a box of the new axes (full on all
    of them but the slowest).
    """
    if 0 in old or any(hi <= lo for lo, hi in box):
        return None
    out: list[tuple[int, int]] = []
    for axes_old, axes_new in axis_groups(old, new):
        inner = math.prod(old[a] for a in axes_old[:-1]) if len(axes_old) else 1
        if any(box[a] != (0, old[a]) for a in axes_old[:-1]):
            return None
        lo, hi = (box[axes_old[-1]][0] * inner, box[axes_old[-1]][1] * inner) if len(axes_old) else (0, 1)
        inner_new = math.prod(new[a] for a in axes_new[:-1]) if len(axes_new) else 1
        if lo % inner_new or hi % inner_new:
            return None
        out.extend((0, new[a]) for a in axes_new[:-1])
        if len(axes_new):
            out.append((lo // inner_new, hi // inner_new))
    return tuple(out)


def _reshape_structured(s, x, shape, order):
    """A block stays a block where the reshape keeps it a box (a row-major reshape is the
    column-major one of the reversed axes)."""
    if type(x) is not Embedded or not x.contiguous:
        return NotImplemented
    if order == "F":
        box = reshaped_box(x.box(), x.shape, shape)
    else:
        flipped = reshaped_box(x.box()[::-1], x.shape[::-1], tuple(shape)[::-1])
        box = None if flipped is None else flipped[::-1]
    if box is None:
        return NotImplemented
    return (embedded(s.reshape(x.block, [hi - lo for lo, hi in box], order), shape, box),)


# order "F": column-major, tenferro's (the default); "C": row-major, NumPy's.
reshape = RULES.define_linear(
    "reshape",
    _reshape_abstract,
    lambda x, shape, order: (np.reshape(x, shape, order=order),),
    transpose=lambda s, c, p, needs, shape, order: (s.reshape(c[0], p[0].shape, order),),
    structured=_reshape_structured,
)


# --- slice / pad ----------------------------------------------------------


@dataclass(frozen=True)
class SliceConfig:
    """StableHLO slice: per axis ``starts`` (inclusive), ``limits`` (exclusive), ``strides`` (default 1)."""

    starts: Sequence[int]
    limits: Sequence[int]
    strides: Sequence[int] | None = None


def _extent(start: int, limit: int, stride: int) -> int:
    return max(0, -(-(limit - start) // stride))


def check_slice(config: object, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Validated (starts, limits, strides) of a SliceConfig against ``shape``."""
    if not isinstance(config, SliceConfig):
        raise InvalidArgument("slice", "a SliceConfig(starts, limits, strides)", type(config).__name__)
    rank = len(shape)
    starts = check_shape("slice", config.starts)
    limits = check_shape("slice", config.limits)
    strides = check_shape("slice", config.strides) if config.strides is not None else (1,) * rank
    if len(starts) == len(limits) == len(strides) == rank and all(
        [0 <= st <= lim <= n and sd >= 1 for st, lim, sd, n in zip(starts, limits, strides, shape)]
    ):
        return starts, limits, strides
    for name, v in (("starts", starts), ("limits", limits), ("strides", strides)):
        if len(v) != rank:
            raise InvalidArgument("slice", f"{rank} {name} (one per axis of shape {list(shape)})", f"{list(v)}")
    for a in range(rank):
        if not (starts[a] <= limits[a] <= shape[a]) or strides[a] < 1:
            raise InvalidArgument(
                "slice",
                f"0 <= start <= limit <= {shape[a]} and stride >= 1 on axis {a}",
                f"start {starts[a]}, limit {limits[a]}, stride {strides[a]}",
            )
    return starts, limits, strides


def _slice_abstract(x: Aval, starts, limits, strides) -> tuple[Aval]:
    return (Aval(tuple(_extent(*t) for t in zip(starts, limits, strides)), x.dtype),)


def _slice_structured(s, x, starts, limits, strides):
    """Of a block, the part inside the slice; of a product (a matrix), rows from the left
    factor and columns from the right."""
    if type(x) is Product:
        (rows, inner), cols = x.left.shape, x.right.shape[1]
        left = x.left if (starts[0], limits[0], strides[0]) == (0, rows, 1) else s.slice(
            x.left, SliceConfig([starts[0], 0], [limits[0], inner], [strides[0], 1]))
        right = x.right if (starts[1], limits[1], strides[1]) == (0, cols, 1) else s.slice(
            x.right, SliceConfig([0, starts[1]], [inner, limits[1]], [1, strides[1]]))
        return (Product(left, right),)
    if type(x) is not Embedded or not x.contiguous or any(sd != 1 for sd in strides):
        return NotImplemented
    window = tuple(zip(starts, limits))
    common = intersect(x.box(), window)
    block = x.block
    if common != x.box():  # where the window misses the block on an axis, an empty range of it
        lows = [min(lo - st, n) for (lo, _), st, n in zip(common, x.starts, block.shape)]
        block = s.slice(block, SliceConfig(lows, [max(low, min(hi - st, n)) for (_, hi), st, n, low
                                                  in zip(common, x.starts, block.shape, lows)]))
    out_shape = tuple(hi - lo for lo, hi in window)
    return (embedded(block, out_shape, tuple((lo - w, hi - w) for (lo, hi), (w, _) in zip(common, window))),)


def _slice_transpose(s, cotangents, primals, needs, starts, limits, strides):
    """The cotangent placed back where the slice took it from: a block inside zeros."""
    (ct,) = cotangents
    if type(ct) is Embedded and ct.contiguous and all(sd == 1 for sd in strides):
        return (Embedded(ct.block, primals[0].shape, tuple(a + b for a, b in zip(starts, ct.starts))),)
    return (Embedded(dense(s, ct), primals[0].shape, starts, strides),)


slice_ = RULES.define_linear(
    "slice",
    _slice_abstract,
    lambda x, starts, limits, strides: (x[tuple(map(slice, starts, limits, strides))],),
    transpose=_slice_transpose,
    structured=_slice_structured,
)


def _pad_abstract(x: Aval, shape, starts, strides) -> tuple[Aval]:
    if len(shape) != len(x.shape) or len(starts) != len(x.shape) or len(strides) != len(x.shape):
        raise InvalidArgument("pad", f"shape, starts and strides of rank {len(x.shape)}", f"{shape}, {starts}, {strides}")
    for a, n in enumerate(x.shape):
        if strides[a] < 1 or (n and starts[a] + (n - 1) * strides[a] >= shape[a]):
            raise InvalidArgument(
                "pad", f"{n} elements from {starts[a]} by {strides[a]} inside {shape[a]} on axis {a}", "out of bounds"
            )
    return (Aval(shape, x.dtype),)


def pad_limits(x_shape, starts, strides) -> tuple[int, ...]:
    """The slice limits that select what ``pad`` placed."""
    return tuple(st + (n - 1) * sd + 1 if n else st for n, st, sd in zip(x_shape, starts, strides))


def _pad_impl(x, shape, starts, strides):
    out = np.zeros(shape, dtype=x.dtype, order="F")
    out[tuple(map(slice, starts, pad_limits(x.shape, starts, strides), strides))] = x
    return (out,)


pad = RULES.define_linear(
    "pad",
    _pad_abstract,
    _pad_impl,
    transpose=lambda s, c, p, needs, shape, starts, strides: (
        s.slice(c[0], SliceConfig(starts, pad_limits(p[0].shape, starts, strides), strides)),
    ),
)


def _concatenate_abstract(*xs: Aval, axis) -> tuple[Aval]:
    first = xs[0]
    for k, x in enumerate(xs[1:], 1):
        if x.dtype != first.dtype:
            raise DTypeMismatch("concatenate", f"operands of one dtype ({first.dtype})", f"{x.dtype} in operand {k}")
        if len(x.shape) != len(first.shape) or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != axis):
            raise ShapeMismatch("concatenate", f"shapes that differ only on axis {axis} ({list(first.shape)})",
                                f"{list(x.shape)} in operand {k}")
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return (Aval(tuple(shape), first.dtype),)


def _concatenate_transpose(s, cotangents, primals, needs, axis):
    (ct,) = cotangents
    pieces, start = [], 0
    for p, need in zip(primals, needs):
        stop = start + p.shape[axis]
        if need:
            starts = [0] * p.ndim
            limits = list(ct.shape)
            starts[axis], limits[axis] = start, stop
            pieces.append(s.slice(ct, SliceConfig(starts, limits)))
        else:
            pieces.append(None)
        start = stop
    return tuple(pieces)


concatenate = RULES.define_linear(
    "concatenate",
    _concatenate_abstract,
    lambda *xs, axis: (np.concatenate(xs, axis=axis),),
    transpose=_concatenate_transpose,
)


# --- reverse, take, scatter_add ---------------------------------------------
# rev flips axes (a step of −1); take gathers entries along an axis by index, and its transpose
# scatter_add sums entries into their indices (repeated indices add up).

rev = RULES.define_linear(
    "rev",
    lambda x, axes: (x,),
    lambda x, axes: (np.flip(x, axes),),
    transpose=lambda s, c, p, needs, axes: (s.rev(c[0], axes),),
)


def _take_abstract(x: Aval, indices, axis) -> tuple[Aval]:
    n = x.shape[axis]
    bad = [i for i in indices if not -n <= i < n]
    if bad:
        raise InvalidArgument("take", f"indices in [{-n}, {n}) (axis {axis} of size {n})", repr(bad))
    shape = list(x.shape)
    shape[axis] = len(indices)
    return (Aval(tuple(shape), x.dtype),)


take = RULES.define_linear(
    "take",
    _take_abstract,
    lambda x, indices, axis: (np.take(x, indices, axis=axis),),
    transpose=lambda s, c, p, needs, indices, axis: (s.scatter_add(c[0], indices, axis, p[0].shape[axis]),),
)


def _scatter_abstract(y: Aval, indices, axis, size) -> tuple[Aval]:
    if y.shape[axis] != len(indices):
        raise ShapeMismatch("scatter_add", f"axis {axis} of size {len(indices)} (one entry per index)",
                            f"size {y.shape[axis]}")
    bad = [i for i in indices if not -size <= i < size]
    if bad:
        raise InvalidArgument("scatter_add", f"indices in [{-size}, {size})", repr(bad))
    shape = list(y.shape)
    shape[axis] = size
    return (Aval(tuple(shape), y.dtype),)


def _scatter_impl(y, indices, axis, size):
    shape = list(y.shape)
    shape[axis] = size
    out = np.zeros(shape, y.dtype)
    np.add.at(np.moveaxis(out, axis, 0), list(indices), np.moveaxis(y, axis, 0))
    return (out,)


scatter_add = RULES.define_linear(
    "scatter_add",
    _scatter_abstract,
    _scatter_impl,
    transpose=lambda s, c, p, needs, indices, axis, size: (s.take(c[0], indices, axis),),
)
