"""numpy.linalg's svd, eigh, qr, solve, inv and norm on tnp arrays, as the session's linalg ops.

Their rules are the session's (README, "The SVD and eigh rules"). NumPy's defaults are kept
where they have a derivative: ``svd`` returns (u, s, vh) and computes the thin SVD; the full
one (``full_matrices=True``, NumPy's default) is refused for a rectangular matrix, whose
complement has no derivative, and is the thin one for a square matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgument
from . import functions as fn
from .array import lift, result_dtype, session, tracked, wrap

__all__ = ["eigh", "inv", "norm", "qr", "solve", "svd"]


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True) -> Any:
    if not tracked(a):
        return np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)  # type: ignore[call-overload]
    s = session("svd")
    x = lift(s, a)
    if full_matrices and x.ndim >= 2 and x.shape[-1] != x.shape[-2] and min(x.shape[-2:]) == 0:
        return _svd_of_empty(s, x, compute_uv)
    if full_matrices and x.ndim >= 2 and x.shape[-1] != x.shape[-2]:
        raise InvalidArgument("svd", "full_matrices=False for a rectangular matrix (the full factors' "
                                     "complement has no derivative)", f"shape {list(x.shape)}")
    u, sv, vt = s.svd(x)
    return (wrap(u), wrap(sv), wrap(vt)) if compute_uv else wrap(sv)


def _svd_of_empty(s: Any, x: Any, compute_uv: bool) -> Any:
    """NumPy's full SVD of empty m × n matrices: identities for U and Vh (an empty matrix has no
    entry to differentiate, so the constants lose no derivative) and no singular values."""
    sv = s.svd(x)[1]
    if not compute_uv:
        return wrap(sv)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    u, vt = (fn.broadcast_to(np.eye(size, dtype=x.dtype), batch + (size, size)) for size in (m, n))
    return u, wrap(sv), vt


def eigh(a: Any, UPLO: str = "L") -> Any:  # noqa: N803 (NumPy's name)
    """Eigenvalues (ascending) and eigenvectors of a Hermitian matrix (its Hermitian part is read;
    NumPy reads one triangle, the same for Hermitian input)."""
    if not tracked(a):
        return np.linalg.eigh(a, UPLO)  # type: ignore[call-overload]
    s = session("eigh")
    w, v = s.eigh(lift(s, a))
    return wrap(w), wrap(v)


def qr(a: Any, mode: str = "reduced") -> Any:
    if not tracked(a):
        return np.linalg.qr(a, mode)  # type: ignore[call-overload]
    if mode != "reduced":
        raise InvalidArgument("qr", "mode='reduced' (the thin QR, which has a derivative)", repr(mode))
    s = session("qr")
    q, r = s.qr(lift(s, a))
    return wrap(q), wrap(r)


def solve(a: Any, b: Any) -> Any:
    if not tracked(a, b):
        return np.linalg.solve(a, b)

    s = session("solve")
    dtype = result_dtype(a, b)
    return wrap(s.solve(lift(s, a, dtype), lift(s, b, dtype)))


def inv(a: Any) -> Any:
    if not tracked(a):
        return np.linalg.inv(a)
    s = session("inv")
    return wrap(s.inv(lift(s, a)))


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    """numpy.linalg.norm: of a vector or a matrix (axis None), or vector norms along ``axis``."""
    if not tracked(x):
        return np.linalg.norm(x, ord, axis, keepdims)
    a = fn.asarray(x)
    if axis is None and a.ndim in (1, 2) and not keepdims:
        s = session("norm")
        return wrap(s.norm(a.tensor, ord))
    if axis is None:
        if ord is not None:
            raise InvalidArgument("norm", "ord None for an array of rank > 2 without axis", repr(ord))
        axis = tuple(range(a.ndim))
    magnitude = fn.abs(a)
    if ord in (None, 2):  # at a zero vector the derivative is 0 (as the matrix norm's), not 0/0
        squares = fn.sum(magnitude * magnitude, axis, keepdims=keepdims)
        zero = np.asarray(squares) == 0
        return fn.where(zero, 0.0, fn.sqrt(fn.where(zero, 1.0, squares)))
    if ord == 1:
        return fn.sum(magnitude, axis, keepdims=keepdims)
    if ord == np.inf:
        return fn.max(magnitude, axis, keepdims=keepdims)
    raise InvalidArgument("norm", "ord None, 1, 2 or inf for norms along an axis", repr(ord))
