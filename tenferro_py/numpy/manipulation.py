"""NumPy's array manipulation routines on tnp arrays (swapaxes, broadcast_to, diagonal, trace, diag,
make_diagonal, triu, tril, flip, roll, rot90, repeat, tile, sort, partition, pad), the products inner,
outer, kron and vdot, each written with session ops and working both ways, as :mod:`.functions`' do.
Rearrangements NumPy defines by indices are one gather of the positions NumPy's own function picks."""

from __future__ import annotations

import builtins
import functools
import math
import string
from typing import Any, Sequence

import numpy as np

from ..errors import InvalidArgument
from .array import broadcast_to_shape, lift, observed, session, tracked, value_of, wrap
from .contractions import dot, einsum, tensordot
from .functions import add, asarray, conj, multiply, sum, where
from .joining import concatenate, ravel
from .shaping import normalize_axes, normalize_axis, rearranged, reshape, transpose

__all__ = [
    "argmax", "argmin", "argpartition", "argsort", "broadcast_to", "diag", "diagonal", "flip", "fliplr", "flipud",
    "indices", "inner", "kron", "make_diagonal", "outer", "pad", "partition", "repeat", "roll", "rot90",
    "sort", "swapaxes", "take_along_axis", "tile", "trace", "tril", "triu", "vdot",
]


# --- shape -------------------------------------------------------------------------------------------


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    """NumPy's swapaxes."""
    if not tracked(a):
        return np.swapaxes(a, axis1, axis2)
    x = asarray(a)
    perm = list(range(x.ndim))
    i, j = normalize_axis("swapaxes", axis1, x.ndim), normalize_axis("swapaxes", axis2, x.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


def broadcast_to(a: Any, shape: Any) -> Any:
    """NumPy's broadcast_to; the derivative sums over the broadcast axes."""
    if not tracked(a):
        return np.broadcast_to(a, shape)
    s = session("broadcast_to")
    return wrap(broadcast_to_shape(s, lift(s, a), tuple(shape)))


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """NumPy's diagonal (offset, axis1, axis2), as a gather of its positions."""
    if not tracked(a):
        return np.diagonal(a, offset, axis1, axis2)
    return rearranged("diagonal", asarray(a), lambda p: np.diagonal(p, offset, axis1, axis2))


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """NumPy's trace: the sum of the diagonal."""
    if not tracked(a):
        return np.trace(a, offset, axis1, axis2)
    return sum(diagonal(a, offset, axis1, axis2), -1)


def diag(v: Any, k: int = 0) -> Any:
    """NumPy's diag: the k-th diagonal of a matrix, or the matrix with a vector on it."""
    if not tracked(v):
        return np.diag(v, k)
    x = asarray(v)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise InvalidArgument("diag", "a vector or a matrix", f"shape {list(x.shape)}")
    n = x.shape[0] + (k if k >= 0 else -k)
    rows = np.arange(x.shape[0]) + (0 if k >= 0 else -k)
    cols = rows + k
    place = np.zeros((x.shape[0], n * n))
    place[np.arange(x.shape[0]), rows * n + cols] = 1.0
    return reshape(dot(x, place.astype(x.dtype)), (n, n))


def triu(m: Any, k: int = 0) -> Any:
    """NumPy's triu: the upper triangle from the k-th diagonal, zeros below."""
    if not tracked(m):
        return np.triu(m, k)
    x = asarray(m)
    return where(np.triu(np.ones(x.shape[-2:]), k), x, 0.0)


def tril(m: Any, k: int = 0) -> Any:
    """NumPy's tril: the lower triangle to the k-th diagonal, zeros above."""
    if not tracked(m):
        return np.tril(m, k)
    x = asarray(m)
    return where(np.tril(np.ones(x.shape[-2:]), k), x, 0.0)


def flip(m: Any, axis: Any = None) -> Any:
    """NumPy's flip along axis (None: all)."""
    if not tracked(m):
        return np.flip(m, axis)
    x = asarray(m)
    return wrap(session("flip").rev(x.tensor, normalize_axes("flip", axis, x.ndim)))


def flipud(m: Any) -> Any:
    """NumPy's flipud: flip along axis 0."""
    return flip(m, 0) if tracked(m) else np.flipud(m)


def fliplr(m: Any) -> Any:
    """NumPy's fliplr: flip along axis 1."""
    return flip(m, 1) if tracked(m) else np.fliplr(m)


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """NumPy's roll, as a gather of the rolled positions."""
    if not tracked(a):
        return np.roll(a, shift, axis)
    return rearranged("roll", asarray(a), lambda p: np.roll(p, shift, axis))


def rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> Any:
    """NumPy's rot90, as a gather of the rotated positions."""
    if not tracked(m):
        return np.rot90(m, k, axes)
    return rearranged("rot90", asarray(m), lambda p: np.rot90(p, k, axes))


def repeat(a: Any, repeats: Any, axis: Any = None) -> Any:
    """NumPy's repeat, as a gather (its derivative sums the repeats)."""
    if not tracked(a):
        return np.repeat(a, repeats, axis)
    return rearranged("repeat", asarray(a), lambda p: np.repeat(p, repeats, axis))


def tile(a: Any, reps: Any) -> Any:
    """NumPy's tile, as a gather (its derivative sums the tiles)."""
    if not tracked(a):
        return np.tile(a, reps)
    return rearranged("tile", asarray(a), lambda p: np.tile(p, reps))


# --- products -----------------------------------------------------------------------------------------


def inner(a: Any, b: Any) -> Any:
    """NumPy's inner: the sum over the last axes of a and b."""
    if not tracked(a, b):
        return np.inner(a, b)
    x, y = asarray(a), asarray(b)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    return tensordot(x, y, ([x.ndim - 1], [y.ndim - 1]))


def outer(a: Any, b: Any) -> Any:
    """NumPy's outer of the flattened a and b."""
    if not tracked(a, b):
        return np.outer(a, b)
    return einsum("i,j->ij", ravel(asarray(a)), ravel(asarray(b)))


def kron(a: Any, b: Any) -> Any:
    """NumPy's kron of two matrices."""
    if not tracked(a, b):
        return np.kron(a, b)
    x, y = asarray(a), asarray(b)
    rank = builtins.max(x.ndim, y.ndim)  # NumPy's: the lower rank padded with leading axes of size 1
    x, y = reshape(x, (1,) * (rank - x.ndim) + x.shape), reshape(y, (1,) * (rank - y.ndim) + y.shape)
    left, right = string.ascii_lowercase[:rank], string.ascii_uppercase[:rank]
    interleaved = "".join(i + j for i, j in zip(left, right))
    return reshape(einsum(f"{left},{right}->{interleaved}", x, y), tuple(m * n for m, n in zip(x.shape, y.shape)))



def vdot(a: Any, b: Any) -> Any:
    """NumPy's vdot: Σ conj(a)·b over the flattened arrays."""
    if not tracked(a, b):
        return np.vdot(a, b)
    return sum(multiply(conj(ravel(asarray(a))), ravel(asarray(b))))


# --- by position: sorting, gathering, padding ---------------------------------------------------------


def argmax(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """NumPy's argmax, of the values (an index has no derivative)."""
    return observed(functools.partial(np.argmax, axis=axis, keepdims=keepdims), a)


def argmin(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """NumPy's argmin, of the values."""
    return observed(functools.partial(np.argmin, axis=axis, keepdims=keepdims), a)


def argsort(a: Any, axis: Any = -1, kind: Any = None) -> Any:
    """NumPy's argsort, of the values."""
    return observed(functools.partial(np.argsort, axis=axis, kind=kind), a)


def indices(dimensions: Sequence[int], dtype: Any = int, sparse: bool = False) -> Any:
    """NumPy's indices (a grid of positions: NumPy data)."""
    return np.indices(dimensions, dtype=dtype, sparse=sparse)


def take_along_axis(arr: Any, indices: Any, axis: Any) -> Any:
    """NumPy's take_along_axis: arr's entries at the integer ``indices`` along ``axis`` (None: of the
    flattened arr), the other axes broadcast against each other; one gather, differentiable in arr."""
    positions = np.asarray(value_of(indices))
    if not tracked(arr):
        return np.take_along_axis(arr, positions, axis)
    x = asarray(arr)
    if axis is None:
        x, positions, axis = ravel(x), positions.ravel(), 0
    axis = normalize_axis("take_along_axis", axis, x.ndim)
    if positions.ndim != x.ndim or positions.dtype.kind not in "iu":
        raise InvalidArgument("take_along_axis", f"integer indices of the array's rank {x.ndim}",
                              f"{positions.dtype} of rank {positions.ndim}")
    try:
        shape = np.broadcast_shapes(tuple(1 if d == axis else n for d, n in enumerate(x.shape)), positions.shape)
    except ValueError:
        raise InvalidArgument("take_along_axis", f"indices that broadcast with shape {list(x.shape)} off the axis",
                              f"shape {list(positions.shape)}") from None
    x = broadcast_to(x, tuple(x.shape[d] if d == axis else n for d, n in enumerate(shape)))
    grids = list(np.ix_(*[np.arange(n) for n in shape]))
    grids[axis] = np.broadcast_to(positions, shape)
    return x[tuple(grids)]


def sort(a: Any, axis: Any = -1, kind: Any = None) -> Any:
    """NumPy's sort (None: of the flattened a): the entries in the order argsort gives (stable), so
    the derivative follows each entry to its place."""
    if not tracked(a):
        return np.sort(a, axis=axis, kind=kind)
    x = asarray(a)
    if axis is None:
        x, axis = ravel(x), 0
    return take_along_axis(x, observed(functools.partial(np.argsort, axis=axis, kind="stable"), x), axis)


def pad(array: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Any:
    """NumPy's pad with mode 'constant' (``constant_values`` one number); other modes are refused."""
    if not tracked(array, constant_values):
        return np.pad(array, pad_width, mode=mode, constant_values=constant_values)
    if mode != "constant":
        raise InvalidArgument("pad", "mode='constant'", repr(mode))
    x = asarray(array)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (x.ndim, 2))
    if (widths < 0).any():
        raise InvalidArgument("pad", "pad widths ≥ 0", repr(pad_width))
    s = session("pad")
    shape = tuple(int(n + lo + hi) for n, (lo, hi) in zip(x.shape, widths))
    padded = wrap(s.pad(lift(s, x), shape, tuple(int(lo) for lo, _ in widths)))
    if np.ndim(value_of(constant_values)) != 0:
        raise InvalidArgument("pad", "constant_values: one number", repr(constant_values))
    outside = np.pad(np.zeros(x.shape), widths, constant_values=1.0)
    return padded if not np.any(value_of(constant_values)) else add(padded, multiply(constant_values, outside))


def argpartition(a: Any, kth: Any, axis: Any = -1) -> Any:
    """NumPy's argpartition, of the values."""
    return np.argpartition(value_of(a), kth, axis=axis)


def partition(a: Any, kth: Any, axis: Any = -1) -> Any:
    """NumPy's partition: the entries in the order argpartition gives, so the derivative follows each
    entry to its place."""
    if not tracked(a):
        return np.partition(a, kth, axis=axis)
    x = asarray(a)
    if axis is None:
        x, axis = ravel(x), 0
    return take_along_axis(x, np.argpartition(value_of(x), kth, axis=axis), axis)


def make_diagonal(D: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """autograd's make_diagonal, the adjoint of diagonal: zeros with D's last axis on the ``offset``
    diagonal of the output's axes ``axis1`` and ``axis2``, D's other axes in the others (autograd's own
    takes offset 0, axis1 −1, axis2 −2 only)."""
    x = asarray(D) if tracked(D) else np.asarray(D)
    if x.ndim == 0:
        raise InvalidArgument("make_diagonal", "an array of rank >= 1", "a 0-d array")
    i, j = normalize_axis("make_diagonal", axis1, x.ndim + 1), normalize_axis("make_diagonal", axis2, x.ndim + 1)
    if i == j:
        raise InvalidArgument("make_diagonal", "two different axes", f"{axis1} and {axis2}")
    n = x.shape[-1] + builtins.abs(offset)
    shape = list(x.shape[:-1])
    for axis in sorted((i, j)):
        shape.insert(axis, n)
    slots = np.full(math.prod(shape), x.size, dtype=np.int64)  # x.size: the zero appended below
    slots[np.diagonal(np.arange(len(slots)).reshape(shape), offset, i, j)] = np.arange(x.size).reshape(x.shape)
    if not tracked(x):
        return np.append(x.ravel(), 0.0)[slots.reshape(shape)]
    return concatenate([ravel(x), np.zeros(1, x.dtype)], 0)[slots.reshape(shape)]
