"""scipy.linalg's solve_triangular, lu, lu_factor, lu_solve, cho_solve, polar and eig (with left
eigenvectors) on tnp arrays, composed of the session's ops (triangular solves and LU:
tenferro_py/linalg/triangular.py and lu.py; svd, eig, inv), so their derivatives are those ops'
rules. Stacks (..., n, n) broadcast their leading axes; b is a vector only when it is 1-D.

schur and funm give SciPy's values and refuse derivatives (docs/linalg.md says why).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from ...batching import bind_batched
from ...errors import InvalidArgument, ShapeMismatch
from ...linalg.least_squares import refused_derivative_p
from ...linalg.lu import lu_p
from ...linalg.triangular import triangular_solve_p
from ...tensor import Tensor
from .. import functions as fn
from .. import manipulation as mp
from ..array import lift, result_dtype, session, stop_gradient, tracked, value_of, wrap
from ..contractions import matmul
from ..linalg_more import broadcast_batch

__all__ = ["cho_solve", "eig", "funm", "lu", "lu_factor", "lu_solve", "polar", "schur", "solve_triangular"]

_TRANS = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}


def _square(op: str, x: Any) -> int:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeMismatch(op, "a square matrix or a stack of them (..., n, n)", f"shape {list(x.shape)}")
    return x.shape[-1]


def _swap(s: Any, x: Any) -> Any:
    return s.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _op(s: Any, x: Any, trans: int) -> Any:
    """x, xᵀ (trans 1) or xᴴ (trans 2)."""
    if trans == 0:
        return x
    y = _swap(s, x)
    return s.conj(y) if trans == 2 and y.dtype.kind == "c" else y


def _trans(op: str, trans: Any) -> int:
    if isinstance(trans, (int, str)) and trans in _TRANS and not isinstance(trans, bool):
        return _TRANS[trans]
    raise InvalidArgument(op, "trans 0, 1, 2 or 'N', 'T', 'C'", repr(trans))


def _triangular(s: Any, op: str, t: Any, b: Any, lower: bool, unit: bool) -> Any:
    """T⁻¹ b for each matrix of the stack t (its lower or upper triangle), leading axes broadcast."""
    core = 1 if b.ndim == 1 else 2
    t, b = broadcast_batch(op, s, [t, b], [2, core])
    return bind_batched(s, op, triangular_solve_p, [t, b], [2, core], lower=lower, unit=unit, caller=op)[0]


def _operands(op: str, a: Any, b: Any) -> tuple:
    s = session(op)
    dtype = result_dtype(a, b)
    a, b = lift(s, a, dtype), lift(s, b, dtype)
    _square(op, a)
    return s, a, b


def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """x with op(a) x = b, a's lower (upper) triangle, op per ``trans`` (0 'N', 1 'T', 2 'C'); a zero on
    the diagonal (not ``unit_diagonal``) is a LinalgError."""
    if not tracked(a, b):
        return scipy.linalg.solve_triangular(a, b, trans, lower, unit_diagonal, overwrite_b, check_finite)
    trans = _trans("solve_triangular", trans)
    s, a, b = _operands("solve_triangular", a, b)
    return wrap(_triangular(s, "solve_triangular", _op(s, a, trans), b, lower != (trans != 0), unit_diagonal))


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True,
       p_indices: bool = False) -> Any:
    """(p, l, u) with a = p l u (partial pivoting); (p l, u) when ``permute_l``; p as the row indices
    (a = (l u)[p]) when ``p_indices``. p has no derivative; l and u differentiate where u's leading
    k × k block is nonsingular (LinalgError otherwise)."""
    if not tracked(a):
        return scipy.linalg.lu(a, permute_l, overwrite_a, check_finite, p_indices)
    s = session("lu")
    x = lift(s, a)
    if x.ndim < 2:
        raise ShapeMismatch("lu", "a matrix or a stack of them (..., m, n)", f"shape {list(x.shape)}")
    p, l, u = (wrap(t) for t in bind_batched(s, "lu", lu_p, [x], [2]))
    if permute_l:
        return matmul(p, l), u
    return (np.argmax(value_of(p), axis=-1) if p_indices else p), l, u


def _pivots(rows: np.ndarray, k: int) -> np.ndarray:
    """LAPACK's pivots (row i swapped with piv[i], in turn) of the row order ``rows`` (Pᵀa = a[rows])."""
    current, piv = list(range(rows.shape[0])), np.zeros(k, dtype=np.int32)
    for i in range(k):
        j = current.index(rows[i], i)
        piv[i] = j
        current[i], current[j] = current[j], current[i]
    return piv


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """(lu, piv): l's strict lower triangle and u in one matrix, and LAPACK's pivots (0-based)."""
    if not tracked(a):
        return scipy.linalg.lu_factor(a, overwrite_a, check_finite)
    p, l, u = lu(a)
    m, n, k = l.shape[-2], u.shape[-1], u.shape[-2]
    lead = ((0, 0),) * (l.ndim - 2)
    combined = mp.pad(mp.tril(l, -1), lead + ((0, 0), (0, n - k))) + mp.pad(mp.triu(u), lead + ((0, m - k), (0, 0)))
    rows = np.argmax(value_of(p), axis=-2) if m else np.zeros(p.shape[:-1], int)
    piv = np.zeros(rows.shape[:-1] + (k,), dtype=np.int32)
    for index in np.ndindex(*rows.shape[:-1]):
        piv[index] = _pivots(rows[index], k)
    return combined, piv


def _permutation(piv: np.ndarray, n: int, dtype: np.dtype) -> np.ndarray:
    """P (..., n, n) with a = P l u, from LAPACK's pivots."""
    out = np.zeros(piv.shape[:-1] + (n, n), dtype=dtype)
    for index in np.ndindex(*piv.shape[:-1]):
        rows = list(range(n))
        for i, j in enumerate(piv[index]):
            rows[i], rows[j] = rows[j], rows[i]
        out[index + (np.array(rows, dtype=int), np.arange(n))] = 1
    return out


def _as_columns(s: Any, b: Any) -> Any:
    return s.reshape(b, b.shape + (1,)) if b.ndim == 1 else b


def _columns_back(s: Any, x: Any, b: Any) -> Any:
    return wrap(s.reshape(x, x.shape[:-1]) if b.ndim == 1 else x)


def lu_solve(lu_and_piv: Any, b: Any, trans: Any = 0, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """x with op(a) x = b for a = p l u given as lu_factor's (lu, piv); differentiable in lu and b."""
    factor, piv = lu_and_piv
    if not tracked(factor, b):
        return scipy.linalg.lu_solve((factor, piv), b, trans, overwrite_b, check_finite)
    trans = _trans("lu_solve", trans)
    s, f, rhs = _operands("lu_solve", factor, b)
    p = wrap(s.constant_from(Tensor(_permutation(np.asarray(piv), f.shape[-1], f.dtype))))
    y = _as_columns(s, rhs)
    if trans == 0:  # u⁻¹ l⁻¹ pᵀ b
        y = _triangular(s, "lu_solve", f, matmul(mp.swapaxes(p, -1, -2), wrap(y)).tensor, lower=True, unit=True)
        x = _triangular(s, "lu_solve", f, y, lower=False, unit=False)
    else:  # p op(l)⁻¹ op(u)⁻¹ b
        g = _op(s, f, trans)
        y = _triangular(s, "lu_solve", g, _triangular(s, "lu_solve", g, y, lower=True, unit=False), False, True)
        x = matmul(p, wrap(y)).tensor
    return _columns_back(s, x, rhs)


def cho_solve(c_and_lower: Any, b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """x with a x = b for a = c cᴴ (``lower``) or cᴴ c, c cho_factor's (its triangle is read)."""
    c, lower = c_and_lower
    if not tracked(c, b):
        return scipy.linalg.cho_solve((c, lower), b, overwrite_b, check_finite)
    s, c, rhs = _operands("cho_solve", c, b)
    first, second = (c, _op(s, c, 2)) if lower else (_op(s, c, 2), c)
    y = _triangular(s, "cho_solve", first, _as_columns(s, rhs), lower=True, unit=False)
    return _columns_back(s, _triangular(s, "cho_solve", second, y, lower=False, unit=False), rhs)


def polar(a: Any, side: str = "right") -> Any:
    """(u, p) with a = u p (``side='right'``) or p u ('left'): SciPy's values (from the SVD w s vᴴ,
    u = w vᴴ), and the derivatives of u = a (aᴴa)^(-1/2) (tall) or (a aᴴ)^(-1/2) a (wide), p = uᴴ a
    (a uᴴ) by inv_sqrtm, exact at repeated singular values. Where s_K ≤ 10 √(max(m, n) ε) s₁ (rank
    deficient, where u is not unique and p has a kink, or near it) a derivative is a LinalgError."""
    if not tracked(a):
        return scipy.linalg.polar(a, side)
    if side not in ("right", "left"):
        raise InvalidArgument("polar", "side 'right' or 'left'", repr(side))
    s = session("polar")
    x = wrap(lift(s, a))
    if x.ndim < 2:
        raise ShapeMismatch("polar", "a matrix or a stack of them (..., m, n)", f"shape {list(x.shape)}")
    val = value_of(x)
    w, sv, vh = np.linalg.svd(val, full_matrices=False)
    u_val = w @ vh
    p_val = (np.conj(np.swapaxes(vh, -1, -2)) * sv[..., None, :]) @ vh if side == "right" else \
        (w * sv[..., None, :]) @ np.conj(np.swapaxes(w, -1, -2))
    m, n = val.shape[-2:]
    if sv.size and np.all(sv[..., -1] > 10 * np.sqrt(max(m, n) * np.finfo(sv.dtype).eps) * sv[..., 0]):
        top = np.max(np.abs(val), axis=(-2, -1), keepdims=True)
        scaled = x * (2.0 ** -np.round(np.log2(top)))  # exact, so that the Gram matrix neither overflows nor underflows
        adjoint = fn.conj(mp.swapaxes(scaled, -1, -2))
        u = (matmul(scaled, wrap(s.inv_sqrtm(matmul(adjoint, scaled).tensor))) if m >= n
             else matmul(wrap(s.inv_sqrtm(matmul(scaled, adjoint).tensor)), scaled))
        p = matmul(fn.conj(mp.swapaxes(u, -1, -2)), x) if side == "right" else matmul(x, fn.conj(mp.swapaxes(u, -1, -2)))
        return tuple(wrap(s.constant_from(Tensor(v))) + (t - stop_gradient(t)) for v, t in ((u_val, u), (p_val, p)))
    return tuple(wrap(s.add(s.constant_from(Tensor(v)), s.bind(
        refused_derivative_p, x.tensor, shape=v.shape, dtype=v.dtype, op="polar",
        expected="a matrix of full rank, s_K > 10 √(max(m, n) ε) s₁, for the derivative (u is not unique, p has a "
                 "kink at a rank-deficient one)", got="one rank-deficient or nearly")[0])) for v in (u_val, p_val))


def _left_eigenvectors(s: Any, v: Any) -> Any:
    """The columns of (v⁻¹)ᴴ, each of unit norm with its largest entry real and positive (eig's convention)."""
    z = wrap(s.conj(_swap(s, s.inv(v))))
    if not z.size:
        return z
    top = np.argmax(np.abs(value_of(z)), axis=-2)[..., None, :]
    pivot = mp.take_along_axis(z, top, -2)
    norms = fn.sqrt(fn.sum(fn.real(z * fn.conj(z)), -2, keepdims=True))
    return z * (fn.conj(pivot) / (fn.abs(pivot) * norms))


def eig(a: Any, b: Any = None, left: bool = False, right: bool = True, overwrite_a: bool = False,
        overwrite_b: bool = False, check_finite: bool = True, homogeneous_eigvals: bool = False) -> Any:
    """scipy.linalg.eig of the standard problem: w, and (as asked) the left eigenvectors vl (vlᴴ a =
    w vlᴴ, the columns of (v⁻¹)ᴴ normalised as v's) and the right ones v (tnp.linalg.eig's)."""
    if not tracked(a):
        return scipy.linalg.eig(a, b, left, right, overwrite_a, overwrite_b, check_finite, homogeneous_eigvals)
    if b is not None or homogeneous_eigvals:
        raise InvalidArgument("eig", "b=None and homogeneous_eigvals=False (the standard problem)",
                              "a generalized or homogeneous one")
    s = session("eig")
    x = lift(s, a)
    if not (left or right):
        return wrap(s.eigvals(x))
    w, v = s.eig(x)
    return (wrap(w),) + ((_left_eigenvectors(s, v),) if left else ()) + ((wrap(v),) if right else ())


def _refused(op: str, a: Any, values: Any, reason: str) -> Any:
    """SciPy's values (arrays and other results) of op(a), whose derivative with respect to a is refused."""
    s = session(op)
    x = lift(s, a)

    def one(v: Any) -> Any:
        if not isinstance(v, np.ndarray):
            return v
        zero = s.bind(refused_derivative_p, x, shape=v.shape, dtype=v.dtype, op=op, expected=reason,
                      got="a derivative asked for")[0]
        return wrap(s.add(s.constant_from(Tensor(v)), zero))
    return tuple(one(v) for v in values) if isinstance(values, tuple) else one(values)


def schur(a: Any, output: str = "real", lwork: Any = None, overwrite_a: bool = False, sort: Any = None,
          check_finite: bool = True) -> Any:
    """scipy.linalg.schur's values; no derivative (the Schur vectors are unique only up to phases, and the
    order of the eigenvalues is LAPACK's: no convention fixes them here; use eig, eigh or a matrix function)."""
    values = scipy.linalg.schur(value_of(a) if tracked(a) else a, output, lwork, overwrite_a, sort, check_finite)
    if not tracked(a):
        return values
    return _refused("schur", a, values, "no derivative of the Schur form (its vectors' phases and the eigenvalues' "
                                        "order are not fixed by a convention; use eig, eigh or a matrix function)")


def funm(A: Any, func: Any, disp: bool = True) -> Any:  # noqa: N803 (SciPy's name)
    """scipy.linalg.funm's values; no derivative (func's derivative is not given: use eigh_function with
    fprime, or expm, sqrtm, logm)."""
    values = scipy.linalg.funm(value_of(A) if tracked(A) else A, func, disp)
    if not tracked(A):
        return values
    return _refused("funm", A, values, "no derivative of funm (func's derivative is not given; use eigh_function "
                                       "with fprime, or expm, sqrtm, logm)")
