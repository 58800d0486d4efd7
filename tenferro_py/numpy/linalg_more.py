"""More of numpy.linalg on tnp arrays, composed of tnp's functions and the session's linalg ops (so
their derivatives are those ops' rules): vecdot, cross, multi_dot, tensorinv, tensorsolve, lstsq
of stacks, and matrix_rank (an integer count, computed from the values: no derivative).
"""

from __future__ import annotations

import math
import string
from typing import Any, Sequence

import numpy as np

from ..errors import InvalidArgument, ShapeMismatch
from . import functions as fn
from . import joining as jn
from .array import broadcast_shapes, broadcast_to_shape, lift, result_dtype, session, tracked, value_of, wrap
from .contractions import einsum
from .shaping import normalize_axis

__all__ = ["cross", "lstsq", "matrix_rank", "multi_dot", "tensorinv", "tensorsolve", "vecdot"]


def broadcast_batch(op: str, s: Any, tensors: Sequence[Any], cores: Sequence[int]) -> list:
    """The tensors with their leading (batch) axes broadcast NumPy's way; one without leading axes
    stays as it is (the batched ops share it)."""
    shapes = [t.shape[: t.ndim - c] for t, c in zip(tensors, cores)]
    batch = broadcast_shapes(op, *shapes)
    return [t if not lead or lead == batch else broadcast_to_shape(s, t, batch + t.shape[t.ndim - c:])
            for t, lead, c in zip(tensors, shapes, cores)]


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """Σ conj(x1) x2 along ``axis``, broadcast (numpy.linalg.vecdot)."""
    if not tracked(x1, x2):
        return np.linalg.vecdot(x1, x2, axis=axis)
    return fn.sum(fn.conj(x1) * x2, axis)


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """The cross product of 3-vectors along ``axis``, broadcast (numpy.linalg.cross)."""
    if not tracked(x1, x2):
        return np.linalg.cross(x1, x2, axis=axis)
    a, b = fn.asarray(x1), fn.asarray(x2)
    if a.ndim == 0 or b.ndim == 0 or a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ShapeMismatch("cross", "3-element vectors along axis", f"shapes {list(a.shape)} and {list(b.shape)}")
    a, b = jn.moveaxis(a, axis, -1), jn.moveaxis(b, axis, -1)
    parts = [a[..., i] * b[..., j] - a[..., j] * b[..., i] for i, j in ((1, 2), (2, 0), (0, 1))]
    out = jn.stack(parts, -1)
    return jn.moveaxis(out, -1, normalize_axis("cross", axis, out.ndim))


def multi_dot(arrays: Sequence[Any], *, out: Any = None) -> Any:
    """The product of a chain of matrices (the first and last may be vectors), in the order the
    einsum planning finds cheapest (numpy.linalg.multi_dot)."""
    if out is not None:
        raise InvalidArgument("multi_dot", "out=None", "an out array")
    if not tracked(*arrays):
        return np.linalg.multi_dot(arrays)
    if len(arrays) < 2:
        raise InvalidArgument("multi_dot", "at least two arrays", f"{len(arrays)}")
    ndims = [np.ndim(x) for x in arrays]
    if any(d != 2 for d in ndims[1:-1]) or ndims[0] not in (1, 2) or ndims[-1] not in (1, 2):
        raise ShapeMismatch("multi_dot", "matrices, the first and last possibly vectors", f"ranks {ndims}")
    letters = string.ascii_letters
    terms = [letters[i] + letters[i + 1] for i in range(len(arrays))]
    if ndims[0] == 1:
        terms[0] = terms[0][1]
    if ndims[-1] == 1:
        terms[-1] = terms[-1][0]
    output = (terms[0][0] if ndims[0] == 2 else "") + (terms[-1][-1] if ndims[-1] == 2 else "")
    return einsum(",".join(terms) + "->" + output, *arrays, optimize="optimal" if len(arrays) <= 6 else "greedy")


def tensorinv(a: Any, ind: int = 2) -> Any:
    """numpy.linalg.tensorinv: the inverse of a reshaped to (∏ a.shape[:ind], ∏ a.shape[ind:])."""
    if not tracked(a):
        return np.linalg.tensorinv(a, ind)
    a = fn.asarray(a)
    if ind <= 0:
        raise InvalidArgument("tensorinv", "ind > 0", repr(ind))
    rows = math.prod(a.shape[ind:])
    s = session("tensorinv")
    inverse = wrap(s.inv(fn.reshape(a, (rows, -1)).tensor))
    return fn.reshape(inverse, a.shape[ind:] + a.shape[:ind])


def tensorsolve(a: Any, b: Any, axes: Any = None) -> Any:
    """numpy.linalg.tensorsolve: x with tensordot(a, x, x.ndim) = b."""
    if not tracked(a, b):
        return np.linalg.tensorsolve(a, b, axes)
    a, b = fn.asarray(a), fn.asarray(b)
    if axes is not None:
        moved = [normalize_axis("tensorsolve", k, a.ndim) for k in axes]
        a = jn.moveaxis(a, moved, tuple(range(a.ndim - len(moved), a.ndim)))
    shape = a.shape[b.ndim:]
    size = math.prod(shape)
    if math.prod(a.shape[:b.ndim]) != size:
        raise ShapeMismatch("tensorsolve", f"a whose leading axes hold as many entries as its last ({size})",
                            f"shape {list(a.shape)}")
    s = session("tensorsolve")
    dtype = result_dtype(a, b)
    x = s.solve(lift(s, fn.reshape(a, (size, size)), dtype), lift(s, jn.ravel(b), dtype))
    return fn.reshape(wrap(x), shape)


def matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None) -> Any:  # noqa: N803
    """numpy.linalg.matrix_rank of the values (an integer: no derivative)."""
    return np.linalg.matrix_rank(value_of(A) if tracked(A) else A, tol, hermitian, rtol=rtol)


def lstsq(a: Any, b: Any, rcond: Any = None) -> Any:
    """(x, residuals, rank, s) as NumPy's for a matrix; for stacks (..., m, n) and b (..., m, k) (or a
    vector (m,)), broadcast, each matrix's, stacked: rank an int array, residuals empty unless every
    matrix has them (torch's convention). x differentiates at full rank (below it, in b only)."""
    if not tracked(a, b):
        return np.linalg.lstsq(a, b, rcond)
    s = session("lstsq")
    dtype = result_dtype(a, b)
    a, b = lift(s, a, dtype), lift(s, b, dtype)
    if a.ndim <= 2 and b.ndim <= 2:
        x, residuals, rank, sv = s.lstsq(a, b, rcond)
        return wrap(x), wrap(residuals), rank, wrap(sv)
    core = 1 if b.ndim == 1 else 2
    if a.ndim < 2:
        raise ShapeMismatch("lstsq", "a matrix or a stack of them (..., m, n)", f"shape {list(a.shape)}")
    a, b = broadcast_batch("lstsq", s, [a, b], [2, core])
    batch = broadcast_shapes("lstsq", a.shape[:-2], b.shape[: b.ndim - core])
    (m, n), k = a.shape[-2:], b.shape[b.ndim - core + 1:]
    if not math.prod(batch):  # no matrices
        return (wrap(s.zeros(batch + (n,) + k, dtype)), wrap(s.zeros((0,), np.zeros(0, dtype).real.dtype)),
                np.zeros(batch, int), wrap(s.zeros(batch + (min(m, n),), np.zeros(0, dtype).real.dtype)))
    pieces = [s.lstsq(a if a.ndim == 2 else wrap(a)[index].tensor, b if b.ndim == core else wrap(b)[index].tensor,
                      rcond) for index in np.ndindex(*batch)]
    x, residuals, rank, sv = ([p[i] for p in pieces] for i in range(4))

    def stacked(parts):
        return fn.reshape(jn.stack([wrap(p) for p in parts]), batch + parts[0].shape)
    with_residuals = all(r.shape[0] and r.shape == residuals[0].shape for r in residuals)
    return (stacked(x), stacked(residuals) if with_residuals else wrap(s.zeros((0,), sv[0].dtype)),
            np.array(rank).reshape(batch), stacked(sv))
