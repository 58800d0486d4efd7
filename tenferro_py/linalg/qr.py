"""The thin QR, with R's diagonal real and ≥ 0, and the unit-triangular solve its rules (and
cholesky's) are written with. Its rules' 1/R_jj are broadened as the SVD's 1/s
(:mod:`.spectral`), relative to max |R_jj|, so they stay finite at a zero pivot.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from ..errors import ShapeMismatch
from ..ops.complex_parts import lift_real, times_i
from ..ops.elementwise import cj, minus
from ..tensor import Aval, Tensor
from . import degenerate
from .common import RULES, check_finite, columns, eps_of, extend, on_diagonal
from .spectral import exact_unit, lorentzian, scale_or_one, times


# --- triangular solves -------------------------------------------------------------------
#
# (I + S) X = B or X (I + S) = B for S strictly triangular (the op reads only that triangle
# of its first input): LAPACK trtrs with a unit diagonal, never singular. dX follows from
# d(I + S) = strict(dT); the VJP solves with (I + S)ᴴ, the other triangle.


def _strict_mask(k: int, lower: bool, dtype: np.dtype) -> Tensor:
    ones = np.ones((k, k), dtype=dtype)
    return Tensor.adopt(np.tril(ones, -1) if lower else np.triu(ones, 1))


def _strict(s, x, lower):
    """x's strictly lower (or upper) triangle."""
    return s.mul(x, s.constant_from(_strict_mask(x.shape[0], lower, x.dtype)))


def _unit_solve_abstract(t: Aval, b: Aval, lower, right) -> tuple[Aval]:
    k = t.shape[0] if t.shape else 0
    if len(b.shape) != 2 or t.shape != (k, k) or b.shape[1 if right else 0] != k or t.dtype != b.dtype:
        side = f"[m, {k}]" if right else f"[{k}, m]"
        raise ShapeMismatch("unit_triangular_solve", f"a square matrix and a matrix {side} of its dtype",
                            f"{list(t.shape)} of {t.dtype} and {list(b.shape)} of {b.dtype}")
    return (b,)


def _unit_solve_impl(t, b, lower, right):
    if right:  # X (I + S) = B  ⟺  (I + S)ᵀ Xᵀ = Bᵀ
        return (scipy.linalg.solve_triangular(t, b.T, trans="T", lower=lower, unit_diagonal=True,
                                              check_finite=False).T,)
    return (scipy.linalg.solve_triangular(t, b, lower=lower, unit_diagonal=True, check_finite=False),)


def _unit_solve(s, t, b, lower, right):
    return s.bind(unit_solve_p, t, b, lower=lower, right=right)[0]


def _unit_solve_jvp(s, tangents, primals, outputs, lower, right):
    """dX = (I + S)⁻¹ (dB − strict(dT) X), or (dB − X strict(dT)) (I + S)⁻¹."""
    (dt, db), (t, _), (x,) = tangents, primals, outputs
    if dt is not None:
        ds = _strict(s, dt, lower)
        db = minus(s, db, s.einsum([x, ds], "ai,ij->aj") if right else s.einsum([ds, x], "ij,jb->ib"))
    return (_unit_solve(s, t, db, lower, right),)


def _unit_solve_vjp(s, cotangents, primals, outputs, needs, lower, right):
    """B̄ = (I + S)⁻ᴴ X̄ (X̄ (I + S)⁻ᴴ), T̄ = −strict(B̄ Xᴴ) (−strict(Xᴴ B̄))."""
    (xb,), (t, _), (x,) = cotangents, primals, outputs
    bb = _unit_solve(s, s.transpose(cj(s, t), (1, 0)), xb, not lower, right)
    if not needs[0]:
        return None, bb
    outer = s.einsum([cj(s, x), bb], "ai,aj->ij") if right else s.einsum([bb, cj(s, x)], "ib,jb->ij")
    return s.neg(_strict(s, outer, lower)), bb


unit_solve_p = RULES.define(
    "unit_triangular_solve",
    _unit_solve_abstract,
    _unit_solve_impl,
    _unit_solve_jvp,
    _unit_solve_vjp,
    cost=lambda in_avals, out_avals, params: float(in_avals[0].shape[0] * math.prod(in_avals[1].shape)),
    dense_only=True,
)


# --- qr ------------------------------------------------------------------------------------
#
# A = Q R thin (k = min(m, n)), R's diagonal real and ≥ 0, so that Q and R are smooth where R's
# leading k × k block R₁ is invertible. With dA₁ = dA[:, :k], Y = dA₁ R₁⁻¹ and X = Qᴴ Y:
# Ω = Qᴴ dQ is anti-Hermitian with X's strictly lower triangle below the diagonal and i Im X_jj
# on it (dR R₁⁻¹ = X − Ω is upper triangular with a real diagonal), dQ = Y − Q (X − Ω)
# (= Q Ω + (I − QQᴴ) dA₁ R₁⁻¹), dR = Qᴴ dA − Ω R. Every R₁⁻¹ is a back substitution whose pivot
# reciprocals 1/R_jj are broadened as the SVD's 1/s, relative to max |R_jj|.


def _qr_abstract(a: Aval, derivative_eps) -> tuple[Aval, Aval]:
    if len(a.shape) != 2:
        raise ShapeMismatch("qr", "a matrix (rank 2)", f"shape {list(a.shape)}")
    m, n = a.shape
    k = min(m, n)
    return Aval((m, k), a.dtype), Aval((k, n), a.dtype)


def _qr_impl(a, derivative_eps):
    """Householder QR (geqrf, orgqr) through NumPy, then each column of Q and row of R multiplied
    by the phase that makes R's diagonal real and ≥ 0 (LAPACK leaves its signs to the reflectors):
    the factorisation is then unique, and smooth, wherever R₁ is invertible. Input with inf or NaN
    raises LinalgError."""
    check_finite("qr", a)
    q, r = np.linalg.qr(a, mode="reduced")
    d = np.diagonal(r)
    size = np.abs(d)
    phase = np.ones_like(d)  # d/|d| by parts: NumPy's complex division overflows by a subnormal |d|
    np.divide(d.real, size, out=phase.real, where=size > 0)
    if d.dtype.kind == "c":
        np.divide(d.imag, size, out=phase.imag, where=size > 0)
    return q * phase, np.conj(phase)[:, None] * r


def _pivot_reciprocals(s, r1, eps):
    """The broadened 1/R_jj of R₁'s (real) diagonal, as :func:`.spectral.gap_coefficients`' 1/s: the
    Lorentzian of R_jj / c over c, for c = max |R_jj| (a constant): 0 at a zero pivot, never inf.
    Where every pivot is zero (A = 0) c is 1 (:func:`.spectral.scale_or_one`), so that the
    derivatives of the coefficients stay finite too."""
    d = s.real(s.einsum([r1], "ii->i"))
    if d.shape[0] == 0:  # no pivots (an empty A)
        return d
    scale = s.broadcast_in_dim(scale_or_one(s, s.reduce_max(s.abs(d))), d.shape, ())
    return s.div(lorentzian(s, s.div(d, scale), eps), scale)


def _right_solve_r(s, w, r1, eps, adjoint):
    """W R₁⁻¹ (W R₁⁻ᴴ when ``adjoint``) by back substitution with the broadened pivot reciprocals
    P = diag(ρ): W P (I + N P)⁻¹ with N the strict triangle of R₁ (of R₁ᴴ), one unit-diagonal
    LAPACK solve. The adjoint is exactly the transpose of the other (P (I + NᴴP)⁻¹ =
    (I + P Nᴴ)⁻¹ P)."""
    if r1.shape[0]:  # that of W/c and R₁/c, c the power of two nearest max |R_jj|
        reciprocal = exact_unit(s, s.reduce_max(s.abs(s.einsum([r1], "ii->i"))))[1]
        w, r1 = times(s, w, reciprocal), times(s, r1, reciprocal)
    rho = lift_real(s, _pivot_reciprocals(s, r1, eps), w)
    strict = _strict(s, r1, lower=False)
    if adjoint:
        strict = s.transpose(cj(s, strict), (1, 0))
    scaled = s.einsum([strict, rho], "ij,j->ij")
    return _unit_solve(s, scaled, s.einsum([w, rho], "aj,j->aj"), lower=adjoint, right=True)


def _imaginary_diagonal(s, x):
    """i Im diag(x) as a matrix (None for a real x)."""
    if x.dtype.kind != "c":
        return None
    return on_diagonal(s, times_i(s, s.imag(s.einsum([x], "ii->i"))), x.shape[0])


def _rotation(s, x):
    """Ω from X: X's strictly lower triangle L, Ω = L − Lᴴ + i Im diag X."""
    low = _strict(s, x, lower=True)
    return s.accumulate(s.sub(low, s.transpose(cj(s, low), (1, 0))), _imaginary_diagonal(s, x))


def _rotation_transpose(s, m):
    """The adjoint of :func:`_rotation` under Re⟨·,·⟩: strictly_lower(M − Mᴴ) + i Im diag M."""
    low = _strict(s, s.sub(m, s.transpose(cj(s, m), (1, 0))), lower=True)
    return s.accumulate(low, _imaginary_diagonal(s, m))


def _qr_jvp(s, tangents, primals, outputs, derivative_eps):
    """dQ = Y − Q (X − Ω), dR = Qᴴ dA − Ω R (the section's comment)."""
    (da,), (q, r) = tangents, outputs
    degenerate.qr_pivots(r, eps_of(s, derivative_eps), [da])
    k = r.shape[0]
    y = _right_solve_r(s, columns(s, da, k, 1), columns(s, r, k, 1), eps_of(s, derivative_eps), adjoint=False)
    x = s.einsum([cj(s, q), y], "ai,aj->ij")
    omega = _rotation(s, x)
    dq = s.sub(y, s.einsum([q, s.sub(x, omega)], "ai,ij->aj"))
    dr = s.sub(s.einsum([cj(s, q), da], "ai,ab->ib"), s.einsum([omega, r], "ij,jb->ib"))
    return dq, dr


def _qr_vjp(s, cotangents, primals, outputs, needs, derivative_eps):
    """The JVP's transpose: with M = QᴴQ̄ − R̄Rᴴ (Ω's cotangent), Ȳ = Q̄ − Q QᴴQ̄ + Q Ω*(M) for Ω*
    the adjoint of X ↦ Ω, and Ā = Q R̄ + [Ȳ R₁⁻ᴴ, 0]."""
    (qb, rb), (q, r) = cotangents, outputs
    degenerate.qr_pivots(r, eps_of(s, derivative_eps), [qb, rb])
    k, n = r.shape
    p = None if qb is None else s.einsum([cj(s, q), qb], "ai,aj->ij")
    m = minus(s, p, None if rb is None else s.einsum([rb, cj(s, r)], "ib,jb->ij"))
    yb = s.einsum([q, _rotation_transpose(s, m)], "ai,ij->aj")
    if qb is not None:
        yb = s.add(yb, s.sub(qb, s.einsum([q, p], "ai,ij->aj")))
    ab = extend(s, _right_solve_r(s, yb, columns(s, r, k, 1), eps_of(s, derivative_eps), adjoint=True), n, 1)
    if rb is not None:
        ab = s.add(ab, s.einsum([q, rb], "ai,ib->ab"))
    return (ab,)


qr_p = RULES.define(
    "qr",
    _qr_abstract,
    _qr_impl,
    _qr_jvp,
    _qr_vjp,
    cost=lambda in_avals, out_avals, params: 4.0 * math.prod(in_avals[0].shape) * out_avals[1].shape[0],
    dense_only=True,
)
