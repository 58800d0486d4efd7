"""The truncated SVD by a Krylov method (svd_krylov) and the solve of its derivative.

svd_krylov gives the k leading triplets (krylov.truncated_svd), and deflation triplets: those
of the next values it converged (zeros pad them to a fixed width; they only speed up the
solve below, whose solution does not depend on them, and carry no derivative). Its JVP is
exact: with C = Uᴴ dA V, the kept pairs couple as in the full rule, and the discarded subspace
enters through (X, W) = complement_solve(A, U, V, s, dA V, dAᴴ U), the solution of the coupled
system s_i x_i − A w_i = dA v_i, s_i w_i − Aᴴ x_i = dAᴴ u_i on the complements of U and V:
dU = U J + X, dV = V(−J'ᴴ) + W. No power of A or s, and no division by s, enters, so the
digits of small kept values are kept. Everything is written in session ops, complement_solve's
own rules included, so the VJP is the JVP's transpose and every order follows.
"""

from __future__ import annotations

import math

import numpy as np

from .. import krylov
from ..errors import InvalidArgument
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj, real_dtype
from ..rules import vjp_from_linear_jvp
from ..tensor import Aval
from .common import RULES, check_finite, eps_of
from .spectral import exact_unit, spectrum_scale, times
from .svd import pair_tangent


def deflation_width(m: int, n: int, k: int) -> int:
    """How many deflation vectors svd_krylov returns (padded with zero columns)."""
    return max(0, min(min(m, n) - k, k + 8))


def _complement_solve_abstract(
    a: Aval, u: Aval, vt: Aval, sv: Aval, gu: Aval, gv: Aval, z: Aval, zt: Aval, zv: Aval, eps
) -> tuple[Aval, Aval]:
    return gu, gv


def _complement_solve_impl(a, u, vt, sv, gu, gv, z, zt, zv, eps):
    return krylov.complement_solve(a, u, vt, sv, gu, gv, z, zt, zv, eps)


def _complement_solve_cost(in_avals, out_avals, params) -> float:
    """A dozen steps of conjugate gradients, two products with A each."""
    (m, n), k = in_avals[0].shape, in_avals[4].shape[1]
    return 48.0 * m * n * k


def _complement_solve(s, a, u, vt, sv, gu, gv, rest, eps):
    """complement_solve of (gu, gv); ``rest`` = (deflation triplets Z, Zᴴ-side, values): constants."""
    return s.bind(complement_solve_p, a, u, vt, sv, gu, gv, *rest, eps=eps)


def _column_scaled(s, x, vec):
    """x times vec[j] in column j."""
    return s.einsum([x, lift_real(s, vec, x)], "ai,i->ai")


def _coupled(s, a, sv, x, w):
    """The system's operator L on (x, w), column i: (s_i x − A w, s_i w − Aᴴ x)."""
    return (s.sub(_column_scaled(s, x, sv), s.einsum([a, w], "ab,bi->ai")),
            s.sub(_column_scaled(s, w, sv), s.einsum([cj(s, a), x], "ab,ai->bi")))


def _complement_solve_jvp(s, tangents, primals, outputs, eps):
    """(dX, dW) = solve(dG − dL Y − L B + (dU Uᴴ R_u, dV Vᴴ R_v)) + B: the projected equation
    Π L Y = Π G differentiated, with Y = (X, W), R = L Y − G (in the kept spaces), and
    B = (−U dUᴴ X, −V dVᴴ W) the part that keeps Y on the moving complements."""
    (da, du, dvt, dsv, dgu, dgv), (a, u, vt, sv, gu, gv), rest, (x, w) = tangents[:6], primals[:6], primals[6:], outputs
    terms_x, terms_w = [dgu], [dgv]
    if da is not None:
        terms_x.append(s.einsum([da, w], "ab,bi->ai"))
        terms_w.append(s.einsum([cj(s, da), x], "ab,ai->bi"))
    if dsv is not None:
        terms_x.append(s.neg(_column_scaled(s, x, dsv)))
        terms_w.append(s.neg(_column_scaled(s, w, dsv)))
    back_x = None if du is None else s.neg(s.einsum([u, cj(s, du), x], "ai,bi,bj->aj"))
    back_w = None if dvt is None else s.neg(s.einsum([cj(s, vt), dvt, w], "ia,ib,bj->aj"))
    if back_x is not None or back_w is not None:
        lx, lw = _coupled(s, a, sv, *(b if b is not None else s.zeros(y.shape, y.dtype)
                                      for b, y in ((back_x, x), (back_w, w))))
        terms_x.append(s.neg(lx))
        terms_w.append(s.neg(lw))
    if du is not None or dvt is not None:
        rx, rw = _coupled(s, a, sv, x, w)
        if du is not None:
            terms_x.append(s.einsum([du, cj(s, u), s.sub(rx, gu)], "ai,bi,bj->aj"))
        if dvt is not None:
            terms_w.append(s.einsum([cj(s, dvt), vt, s.sub(rw, gv)], "ib,ic,cj->bj"))
    rhs_x, rhs_w = (_sum_or_zeros(s, terms, y) for terms, y in ((terms_x, x), (terms_w, w)))
    dx, dw = _complement_solve(s, a, u, vt, sv, rhs_x, rhs_w, rest, eps)
    return s.accumulate(dx, back_x), s.accumulate(dw, back_w)


def _sum_or_zeros(s, terms, like):
    total = None
    for t in terms:
        total = s.accumulate(total, t)
    return total if total is not None else s.zeros(like.shape, like.dtype)


def _complement_solve_vjp(s, cotangents, primals, outputs, needs, eps):
    """Λ = solve(Ȳ) (the operator is self-adjoint on the complements): Ḡ = Λ, Ā = Λ_x Wᴴ + X Λ_wᴴ,
    s̄ = −Re diag(Λ_xᴴ X + Λ_wᴴ W), Ū = Λ_x R_uᴴ U − X T_uᴴ U, V̄ = Λ_w R_vᴴ V − W T_wᴴ V, with
    T = Ȳ − L Λ and R = L Y − G."""
    (a, u, vt, sv, gu, gv), rest, (x, w) = primals[:6], primals[6:], outputs
    xb, wb = (c if c is not None else s.zeros(y.shape, y.dtype) for c, y in zip(cotangents, (x, w)))
    lam_x, lam_w = _complement_solve(s, a, u, vt, sv, xb, wb, rest, eps)
    a_bar = u_bar = vt_bar = sv_bar = None
    if needs[0]:
        a_bar = s.add(s.einsum([lam_x, cj(s, w)], "ai,bi->ab"), s.einsum([x, cj(s, lam_w)], "ai,bi->ab"))
    if needs[1] or needs[2]:
        rx, rw = _coupled(s, a, sv, x, w)
        lx, lw = _coupled(s, a, sv, lam_x, lam_w)
        if needs[1]:
            u_bar = s.sub(s.einsum([lam_x, cj(s, s.sub(rx, gu)), u], "ai,bi,bj->aj"),
                          s.einsum([x, cj(s, s.sub(xb, lx)), u], "ai,bi,bj->aj"))
        if needs[2]:
            vt_bar = s.sub(s.einsum([vt, s.sub(rw, gv), cj(s, lam_w)], "ib,bj,aj->ia"),
                           s.einsum([vt, s.sub(wb, lw), cj(s, w)], "ib,bj,aj->ia"))
    if needs[3]:
        sv_bar = s.neg(s.real(s.add(s.einsum([cj(s, lam_x), x], "ai,ai->i"), s.einsum([cj(s, lam_w), w], "bi,bi->i"))))
    return (a_bar, u_bar, vt_bar, sv_bar, lam_x if needs[4] else None, lam_w if needs[5] else None, None, None, None)


complement_solve_p = RULES.define(
    "complement_solve",
    _complement_solve_abstract,
    _complement_solve_impl,
    _complement_solve_jvp,
    _complement_solve_vjp,
    cost=_complement_solve_cost,
    dense_only=True,
)


def _krylov_abstract(a: Aval, k, derivative_eps) -> tuple[Aval, ...]:
    m, n = a.shape
    if not 1 <= k <= min(m, n):
        raise InvalidArgument("svd", f"k in [1, {min(m, n)}] for a {m} × {n} matrix", repr(k))
    p = deflation_width(m, n, k)
    real = real_dtype(a.dtype)
    return (Aval((m, k), a.dtype), Aval((k,), real), Aval((k, n), a.dtype), Aval((m, p), a.dtype),
            Aval((p, n), a.dtype), Aval((p,), real))


def _krylov_impl(a, k, derivative_eps):
    """krylov.truncated_svd, deterministic (a fixed start block; BLAS on one thread)."""
    check_finite("svd", a)
    u, sv, vt, z, zt, zv = krylov.truncated_svd(a, k)
    p = deflation_width(a.shape[0], a.shape[1], k)
    used = min(p, len(zv))
    z_padded, zt_padded, zv_padded = np.zeros((a.shape[0], p), a.dtype), np.zeros((p, a.shape[1]), a.dtype), \
        np.zeros(p, sv.dtype)
    z_padded[:, :used], zt_padded[:used], zv_padded[:used] = z[:, :used], zt[:used], zv[:used]
    return u, sv, vt, z_padded, zt_padded, zv_padded


def _krylov_jvp(s, tangents, primals, outputs, k, derivative_eps):
    (da,), (a,), (u, sv, vt, z, zt, zv) = tangents, primals, outputs
    eps = eps_of(s, derivative_eps)
    unit, reciprocal = exact_unit(s, spectrum_scale(s, sv))
    c, ju, jv_h, _ = pair_tangent(s, u, times(s, sv, reciprocal), vt, times(s, da, reciprocal), eps)
    gu = s.einsum([da, cj(s, vt)], "ab,ib->ai")  # dA V
    gv = s.einsum([cj(s, da), u], "ba,bi->ai")  # dAᴴ U
    x, w = _complement_solve(s, a, u, vt, sv, gu, gv, (z, zt, zv), eps)
    du = s.add(s.einsum([u, ju], "ai,ij->aj"), x)
    ds = times(s, s.real(s.einsum([c], "ii->i")), unit)
    dvt = s.add(s.einsum([jv_h, vt], "ji,ib->jb"), s.transpose(cj(s, w), (1, 0)))
    return du, ds, dvt, None, None, None


svd_krylov_p = RULES.define(
    "svd_krylov",
    _krylov_abstract,
    _krylov_impl,
    _krylov_jvp,
    vjp_from_linear_jvp(_krylov_jvp),
    cost=lambda in_avals, out_avals, params: 40.0 * math.prod(in_avals[0].shape) * out_avals[1].shape[0],
    dense_only=True,
)
