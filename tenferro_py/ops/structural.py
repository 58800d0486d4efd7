"""Shape ops: broadcast_in_dim, reduce_sum, transpose, reshape, slice, pad.

All are linear, so each JVP applies the op itself to the tangent and each VJP
is its transpose: broadcast and reduce_sum transpose each other, as do slice
and pad. Reshape is column-major throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import InvalidArgument, ShapeMismatch
from ..rules import RuleSet
from ..tape import Embedded, Product
from ..tensor import Aval, check_shape, is_integer

RULES = RuleSet()


def check_axes(op: str, what: str, axes: object, rank: int) -> tuple[int, ...]:
    """Distinct axes in [0, rank), or InvalidArgument naming the op."""
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


# --- broadcast_in_dim / reduce_sum ---------------------------------------


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
    placed = [1] * len(shape)
    for i, d in enumerate(dims):
        placed[d] = x.shape[i]
    if list(dims) != sorted(dims):
        x = np.transpose(x, np.argsort(dims))
    return (np.broadcast_to(x.reshape(placed), shape),)


def _broadcast_vjp(s, cotangents, primals, outputs, needs, shape, dims):
    (ct,), (x,) = cotangents, primals
    kept = {d: x.shape[i] for i, d in enumerate(dims)}
    summed = [a for a in range(len(shape)) if kept.get(a, 0) != shape[a]]
    g = s.reduce_sum(ct, summed) if summed else ct
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    g = s.reshape(g, [x.shape[i] for i in order])
    if order != sorted(order):
        g = s.transpose(g, list(np.argsort(order)))
    return (g,)


broadcast_in_dim = RULES.define(
    "broadcast_in_dim",
    _broadcast_abstract,
    _broadcast_impl,
    jvp=lambda s, t, p, o, shape, dims: (s.broadcast_in_dim(t[0], shape, dims),),
    vjp=_broadcast_vjp,
)


def _reduce_abstract(x: Aval, axes) -> tuple[Aval]:
    return (Aval(tuple(n for a, n in enumerate(x.shape) if a not in axes), x.dtype),)


def _reduce_vjp(s, cotangents, primals, outputs, needs, axes):
    (ct,), (x,) = cotangents, primals
    kept = [a for a in range(x.ndim) if a not in axes]
    return (s.broadcast_in_dim(ct, x.shape, kept),)


reduce_sum = RULES.define(
    "reduce_sum",
    _reduce_abstract,
    lambda x, axes: (np.asarray(np.sum(x, axis=axes)),),
    jvp=lambda s, t, p, o, axes: (s.reduce_sum(t[0], axes),),
    vjp=_reduce_vjp,
)


# --- transpose / reshape --------------------------------------------------

def _transpose_jvp(s, tangents, primals, outputs, perm):
    """The tangent transposed; of a Product (a matrix), the transposed factors swapped."""
    (t,) = tangents
    if type(t) is Product:
        return (Product(s.transpose(t.right, (1, 0)), s.transpose(t.left, (1, 0))) if perm[0] == 1 else t,)
    return (s.transpose(t, perm),)


transpose = RULES.define(
    "transpose",
    lambda x, perm: (Aval(tuple(x.shape[p] for p in perm), x.dtype),),
    lambda x, perm: (np.transpose(x, perm),),
    jvp=_transpose_jvp,
    vjp=lambda s, c, p, o, needs, perm: (s.transpose(c[0], list(np.argsort(perm))),),
    factored_tangents=True,
)


def _reshape_abstract(x: Aval, shape) -> tuple[Aval]:
    if math.prod(shape) != math.prod(x.shape):
        raise ShapeMismatch("reshape", f"a shape of {math.prod(x.shape)} elements", f"{list(shape)}")
    return (Aval(shape, x.dtype),)


reshape = RULES.define(
    "reshape",
    _reshape_abstract,
    lambda x, shape: (np.reshape(x, shape, order="F"),),
    jvp=lambda s, t, p, o, shape: (s.reshape(t[0], shape),),
    vjp=lambda s, c, p, o, needs, shape: (s.reshape(c[0], p[0].shape),),
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


def _slice_vjp(s, cotangents, primals, outputs, needs, starts, limits, strides):
    return (Embedded(cotangents[0], primals[0].shape, starts, strides),)


def _slice_jvp(s, tangents, primals, outputs, starts, limits, strides):
    """The tangent sliced; of a Product (a matrix), its rows from the left factor, columns from the right."""
    (t,) = tangents
    if type(t) is not Product:
        return (s.slice(t, SliceConfig(starts, limits, strides)),)
    (n, inner), m = t.left.shape, t.right.shape[1]
    left = t.left if (starts[0], limits[0], strides[0]) == (0, n, 1) else s.slice(
        t.left, SliceConfig([starts[0], 0], [limits[0], inner], [strides[0], 1]))
    right = t.right if (starts[1], limits[1], strides[1]) == (0, m, 1) else s.slice(
        t.right, SliceConfig([0, starts[1]], [inner, limits[1]], [1, strides[1]]))
    return (Product(left, right),)


def _slice_demand(out_extents, primals, starts, limits, strides):
    """A slice reads the box of its input that its demanded output box comes from."""
    (box,) = out_extents
    if box is None:
        return (None,)
    return (tuple((st + lo * sd, st + (hi - 1) * sd + 1) if hi > lo else (st, st)
                  for (lo, hi), st, sd in zip(box, starts, strides)),)


slice_ = RULES.define(
    "slice",
    _slice_abstract,
    lambda x, starts, limits, strides: (x[tuple(map(slice, starts, limits, strides))],),
    jvp=_slice_jvp,
    vjp=_slice_vjp,
    demand=_slice_demand,
    factored_tangents=True,
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


pad = RULES.define(
    "pad",
    _pad_abstract,
    _pad_impl,
    jvp=lambda s, t, p, o, shape, starts, strides: (s.pad(t[0], shape, starts, strides),),
    vjp=lambda s, c, p, o, needs, shape, starts, strides: (
        s.slice(c[0], SliceConfig(starts, pad_limits(p[0].shape, starts, strides), strides)),
    ),
)
