"""numpy.linalg's functions on tnp arrays (svd, eigh, qr, solve, inv, norm, det, slogdet, cholesky,
lstsq, pinv, eig, ...), as the session's linalg ops.

Their rules are the session's (docs/spectral.md). ``svd`` returns (u, s, vh)
as NumPy's: ``full_matrices=True`` (NumPy's default) completes a rectangular matrix's thin
factors with an orthonormal basis of their complement, which has no derivative (any rotation
of it is as good), so a derivative through it is refused (Unsupported, saying why); use
``full_matrices=False`` for the thin SVD and its derivatives.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import InvalidArgument, ShapeMismatch
from ..linalg.complement import orthogonal_complement
from . import functions as fn
from . import manipulation as mp
from .array import lift, result_dtype, session, tracked, wrap
from .linalg_more import broadcast_batch, cross, lstsq, matrix_rank, multi_dot, tensorinv, tensorsolve, vecdot
from .linalg_norms import cond, matrix_norm, norm, vector_norm

__all__ = ["eig", "eigh", "eigvals", "inv", "norm", "pinv", "qr", "solve", "svd"]
__all__ += ["cholesky", "det", "eigvalsh", "lstsq", "matrix_power", "slogdet", "svdvals"]
__all__ += ["cond", "cross", "matrix_norm", "matrix_rank", "multi_dot", "tensorinv", "tensorsolve", "vecdot",
            "vector_norm"]


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    """NumPy's svd; differentiate through u and vh with ``full_matrices=False`` (the added columns have none).
    ``hermitian`` is accepted; the result is the SVD of ``a`` itself (NumPy's, up to the factors'
    phases, for a Hermitian a)."""
    if not tracked(a):
        return np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,  # type: ignore[call-overload]
                             hermitian=hermitian)
    s = session("svd")
    x = lift(s, a)
    if full_matrices and x.ndim >= 2 and x.shape[-1] != x.shape[-2] and min(x.shape[-2:]) == 0:
        return _svd_of_empty(s, x, compute_uv)
    u, sv, vt = s.svd(x)
    if not compute_uv:
        return wrap(sv)
    m, n = x.shape[-2:]
    if full_matrices and m > n:
        u = s.concatenate([u, orthogonal_complement(s, u)], x.ndim - 1)
    elif full_matrices and m < n:
        rows = s.conj(_swap_last(s, orthogonal_complement(s, s.conj(_swap_last(s, vt)))))
        vt = s.concatenate([vt, rows], x.ndim - 2)
    return wrap(u), wrap(sv), wrap(vt)


def _swap_last(s: Any, x: Any) -> Any:
    """x with its last two axes swapped."""
    return s.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _svd_of_empty(s: Any, x: Any, compute_uv: bool) -> Any:
    """NumPy's full SVD of empty m × n matrices: identities for U and Vh (an empty matrix has no
    entry to differentiate, so the constants lose no derivative) and no singular values."""
    sv = s.svd(x)[1]
    if not compute_uv:
        return wrap(sv)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    u, vt = (mp.broadcast_to(np.eye(size, dtype=x.dtype), batch + (size, size)) for size in (m, n))
    return u, wrap(sv), vt


def _from_triangle(op: str, s: Any, x: Any, lower: bool) -> Any:
    """The Hermitian matrix (of each of a stack) that x's lower (or upper) triangle describes, as
    NumPy's Hermitian routines read it: the strict triangle, its conjugate transpose, and the real
    part of the diagonal. A square x is required."""
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeMismatch(op, "a square matrix or a stack of them (..., n, n)", f"shape {list(x.shape)}")
    n = x.shape[-1]
    strict = np.tril(np.ones((n, n)), -1) if lower else np.triu(np.ones((n, n)), 1)
    mask = s.broadcast_in_dim(lift(s, strict.astype(x.dtype)), x.shape, (x.ndim - 2, x.ndim - 1))
    eye = s.broadcast_in_dim(lift(s, np.eye(n, dtype=x.dtype)), x.shape, (x.ndim - 2, x.ndim - 1))
    part = s.mul(x, mask)
    diagonal = s.mul(x, eye)
    if x.dtype.kind == "c":
        diagonal = s.complex(s.real(diagonal), s.zeros(x.shape, s.real(diagonal).dtype))
    return s.add(s.add(part, s.conj(_swap_last(s, part))), diagonal)


def _triangle(op: str, UPLO: str) -> bool:  # noqa: N803 (NumPy's name)
    """True for the lower triangle ('L'), False for the upper ('U'); else InvalidArgument."""
    if UPLO not in ("L", "U"):
        raise InvalidArgument(op, "UPLO 'L' or 'U'", repr(UPLO))
    return UPLO == "L"


def eigh(a: Any, UPLO: str = "L") -> Any:  # noqa: N803 (NumPy's name)
    """NumPy's eigh: the eigenvalues (ascending) and eigenvectors of the Hermitian matrix that a's
    lower (UPLO='L') or upper triangle describes, as NumPy reads it."""
    if not tracked(a):
        return np.linalg.eigh(a, UPLO)  # type: ignore[call-overload]
    s = session("eigh")
    w, v = s.eigh(_from_triangle("eigh", s, lift(s, a), _triangle("eigh", UPLO)))
    return wrap(w), wrap(v)


def qr(a: Any, mode: str = "reduced") -> Any:
    """NumPy's qr, modes 'reduced' (or its old name 'full'), 'complete' and 'r', with R's diagonal real
    and ≥ 0 (the derivative's convention). 'complete' of a tall matrix adds an orthonormal basis of the complement to Q, which
    has no derivative (refused, Unsupported, as svd's full_matrices=True); R gets zero rows."""
    if not tracked(a):
        return np.linalg.qr(a, mode)  # type: ignore[call-overload]
    if mode not in ("reduced", "full", "complete", "r"):
        raise InvalidArgument("qr", "mode='reduced', 'complete' or 'r' (the thin QR, which has a derivative, or "
                                    "its completion)", repr(mode))
    s = session("qr")
    x = lift(s, a)
    q, r = s.qr(x)
    if mode == "r":
        return wrap(r)
    m, n = x.shape[-2:]
    if mode == "complete" and m > n:
        q = s.concatenate([q, orthogonal_complement(s, q, "qr")], x.ndim - 1)
        r = s.concatenate([r, s.zeros(x.shape[:-2] + (m - n, n), r.dtype)], x.ndim - 2)
    return wrap(q), wrap(r)


def solve(a: Any, b: Any) -> Any:
    """NumPy's solve: x with a x = b (b a vector only when 1-D, as NumPy ≥ 2), leading axes broadcast."""
    if not tracked(a, b):
        return np.linalg.solve(a, b)

    s = session("solve")
    dtype = result_dtype(a, b)
    a, b = lift(s, a, dtype), lift(s, b, dtype)
    return wrap(s.solve(*broadcast_batch("solve", s, [a, b], [2, 1 if b.ndim == 1 else 2])))


def inv(a: Any) -> Any:
    """NumPy's inv; a singular matrix is a ``LinalgError``."""
    if not tracked(a):
        return np.linalg.inv(a)
    s = session("inv")
    return wrap(s.inv(lift(s, a)))


def det(a: Any) -> Any:
    """The determinant (of each of a stack); its derivative is exact at a singular matrix too."""
    if not tracked(a):
        return np.linalg.det(a)
    s = session("det")
    return wrap(s.det(lift(s, a)))


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


def slogdet(a: Any) -> Any:
    """(sign, logabsdet), as NumPy's; the derivative at a singular matrix is a LinalgError."""
    if not tracked(a):
        return np.linalg.slogdet(a)
    s = session("slogdet")
    sign, logabs = s.slogdet(lift(s, a))
    return SlogdetResult(wrap(sign), wrap(logabs))


def cholesky(a: Any, /, *, upper: bool = False) -> Any:
    """NumPy's cholesky: L with L Lᴴ = H (Lᴴ when ``upper``) for the Hermitian positive-definite H
    that a's lower (upper, when ``upper``) triangle describes, as NumPy reads it."""
    if not tracked(a):
        return np.linalg.cholesky(a, upper=upper)
    s = session("cholesky")
    low = wrap(s.cholesky(_from_triangle("cholesky", s, lift(s, a), not upper)))
    return fn.conj(mp.swapaxes(low, -1, -2)) if upper else low


def eigvalsh(a: Any, UPLO: str = "L") -> Any:  # noqa: N803 (NumPy's name)
    """NumPy's eigvalsh: the eigenvalues (ascending) of the Hermitian matrix a's triangle describes, as in eigh."""
    if not tracked(a):
        return np.linalg.eigvalsh(a, UPLO)  # type: ignore[call-overload]
    s = session("eigvalsh")
    return wrap(s.eigvalsh(_from_triangle("eigvalsh", s, lift(s, a), _triangle("eigvalsh", UPLO))))


def svdvals(x: Any, /) -> Any:
    """The singular values (descending)."""
    if not tracked(x):
        return np.linalg.svdvals(x)
    s = session("svdvals")
    return wrap(s.svdvals(lift(s, x)))


def matrix_power(a: Any, n: int) -> Any:
    """a**n for an int n (of each of a stack), by repeated squaring; n < 0 through inv."""
    if not tracked(a):
        return np.linalg.matrix_power(a, n)
    s = session("matrix_power")
    return wrap(s.matrix_power(lift(s, a), n))


_UNSET = object()


def pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _UNSET) -> Any:
    """numpy.linalg.pinv with NumPy 2's cutoff: ``rcond`` (default 1e-15) or ``rtol`` (None:
    max(m, n)·ε) times the largest singular value. ``hermitian`` is accepted; the result is
    the pseudo-inverse of ``a`` itself (NumPy's, for a Hermitian ``a``)."""
    if not tracked(a):
        return np.linalg.pinv(a, rcond, hermitian, **({} if rtol is _UNSET else {"rtol": rtol}))
    if rcond is not None and rtol is not _UNSET:
        raise InvalidArgument("pinv", "rcond or rtol, not both", f"rcond={rcond!r}, rtol={rtol!r}")
    s = session("pinv")
    x = lift(s, a)
    return wrap(s.pinv(x, 1e-15 if rcond is None and rtol is _UNSET else rcond if rcond is not None else rtol))


def eig(a: Any) -> Any:
    """numpy.linalg.eig's (w, v): complex always (NumPy's are real where every eigenvalue is), each
    column of v of unit norm with its largest entry real and positive."""
    if not tracked(a):
        return np.linalg.eig(a)
    s = session("eig")
    w, v = s.eig(lift(s, a))
    return wrap(w), wrap(v)


def eigvals(a: Any) -> Any:
    """numpy.linalg.eigvals, complex always."""
    if not tracked(a):
        return np.linalg.eigvals(a)
    s = session("eigvals")
    return wrap(s.eigvals(lift(s, a)))

