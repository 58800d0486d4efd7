"""LU with partial pivoting, A = P L U (LAPACK getrf through SciPy): P a permutation (its
real dtype), L (m, k) unit lower trapezoidal, U (k, n) upper trapezoidal, k = min(m, n).

P is piecewise constant (no derivative). With L₁, U₁ the leading k × k blocks and
F = L₁⁻¹ (Pᵀ dA)₁ U₁⁻¹: for m ≥ n, dU = triu(F) U and dL = (Pᵀ dA − L dU) U⁻¹; for m < n,
dL = L strict_lower(F) and dU = L⁻¹ (Pᵀ dA − dL U). These are triangular solves, so every
order follows; the VJP is their transpose. Where U₁ has a zero pivot the derivative needs U₁⁻¹,
and asking for it is a LinalgError naming lu.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..errors import ShapeMismatch
from ..ops.complex_parts import lift_real
from ..ops.elementwise import real_dtype
from ..tensor import Aval
from .common import RULES, check_finite, columns
from .triangular import solve, triangle


def _abstract(a: Aval) -> tuple[Aval, Aval, Aval]:
    if len(a.shape) != 2:
        raise ShapeMismatch("lu", "a matrix (rank 2)", f"shape {list(a.shape)}")
    m, n = a.shape
    k = min(m, n)
    return Aval((m, m), real_dtype(a.dtype)), Aval((m, k), a.dtype), Aval((k, n), a.dtype)


def _impl(a):
    check_finite("lu", a)
    m, n = a.shape
    if a.size == 0:
        k = min(m, n)
        return np.eye(m, dtype=real_dtype(a.dtype)), np.eye(m, k, dtype=a.dtype), np.zeros((k, n), a.dtype)
    p, l, u = scipy.linalg.lu(a, check_finite=False)
    return p.real.astype(real_dtype(a.dtype)), l.astype(a.dtype), u.astype(a.dtype)


def _swap(s, x):
    return s.transpose(x, (1, 0))


def _right_solve_upper(s, y, u):
    """Y U⁻¹ for an upper triangular U (k × k)."""
    return _swap(s, solve(s, _swap(s, u), _swap(s, y), lower=True, unit=False, caller="lu"))


def _tangents(s, da, outputs):
    """(dL, dU) along dA (the module's docstring)."""
    p, l, u = outputs
    m, n = da.shape
    k = min(m, n)
    dap = s.einsum([lift_real(s, p, da), da], "ji,jb->ib")  # Pᵀ dA
    top = columns(s, columns(s, dap, k, 0), k, 1)
    f = _right_solve_upper(s, solve(s, columns(s, l, k, 0), top, lower=True, unit=True, caller="lu"),
                           columns(s, u, k, 1))
    if m >= n:
        du = s.einsum([triangle(s, f, lower=False, unit=False), u], "ij,jb->ib")
        dl = _right_solve_upper(s, s.sub(dap, s.einsum([l, du], "ai,ib->ab")), u)
    else:
        dl = s.einsum([l, triangle(s, f, lower=True, unit=True)], "ai,ij->aj")
        du = solve(s, l, s.sub(dap, s.einsum([dl, u], "ai,ib->ab")), lower=True, unit=True, caller="lu")
    return dl, du


lu_p = RULES.define(
    "lu",
    _abstract,
    _impl,
    jvp=lambda s, tangents, primals, outputs: (None,) + _tangents(s, tangents[0], outputs),
    vjp=lambda s, cotangents, primals, outputs, needs: s.transpose_linear(
        lambda ts: _tangents(s, ts[0], outputs), primals, cotangents[1:], needs),
    cost=lambda in_avals, out_avals, params: 2.0 * in_avals[0].shape[0] * in_avals[0].shape[1]
    * min(in_avals[0].shape),
    dense_only=True,
)
