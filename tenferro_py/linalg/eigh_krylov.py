"""The truncated eigh: eigh(x, k=k), the k eigenpairs of largest |λ| of x's Hermitian part, ordered
by |λ| descending, by slicing the full eigh (method "full") or by a block Krylov method (method
"krylov", :mod:`tenferro_py.krylov_eigh`), with the same derivatives.

``eigh_krylov`` gives the kept pairs (w, V) and deflation pairs (zeros pad them to a fixed width;
they only speed up the solve below, whose solution does not depend on them, and carry no
derivative). Its JVP is the full eigh's rule for the kept pairs: with H = herm(x) and
P = Vᴴ herm(dx) V, dw = Re diag P and dV = V (F ∘ P) + Y, F the broadened 1/(w_j − w_i) among
the kept, and Y the discarded subspace's share, y_j = r(w_j − H) (I − VVᴴ) herm(dx) v_j with r
the same broadened reciprocal, by ``eigh_complement_solve`` (products with H only). That solve
is a primitive whose own JVP and VJP solve again, all in session ops, so every order follows;
eigh_krylov's VJP is its JVP's transpose.
"""

from __future__ import annotations

import math

import numpy as np

from .. import krylov_eigh
from ..errors import InvalidArgument, LinalgError, ShapeMismatch
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj, real_dtype
from ..rules import vjp_from_linear_jvp
from ..tensor import Aval, Tensor, is_integer
from .common import RULES, check_finite, check_square, eps_of, hermitian_part
from .eigh import eigh_p
from .spectral import gap_coefficients


def deflation_width(n: int, k: int) -> int:
    """How many deflation pairs eigh_krylov returns (padded with zero columns)."""
    return max(0, min(n - k, k + 8))


# --- the discarded subspace's solve ------------------------------------------------------------
#
# Y = S(H, V, w, G): column j solves M_j y_j = g_j on the complement of V (Vᴴ y_j = 0), with
# M_j = B_j = w_j − H, or M_j = B_j (I − VVᴴ) B_j + η² where ``squared[j]`` (krylov_eigh.complement_solve).
# Differentiating M y − g = V c, Vᴴ y = 0 at a point where H V = V diag(w) (every point it is used
# at), and dropping what lies in span(V) (the solve projects it out):
#     dY = S[dG − dM·Y − dV VᴴG] − V dVᴴY,
# dM_j y_j = dB_j y_j, or dB_j B_j y_j + B_j dB_j y_j, with dB_j = dw_j − dH. The VJP is its transpose.


def _solve_abstract(h: Aval, v: Aval, w: Aval, g: Aval, z: Aval, zw: Aval, eps, squared) -> tuple[Aval]:
    return (g,)


def _solve_impl(h, v, w, g, z, zw, eps, squared):
    return (krylov_eigh.complement_solve(h, v, w, g, z, zw, eps, squared),)


def _solve(s, h, v, w, g, deflation, eps, squared):
    """S(H, V, w, g); ``deflation`` = (Z, their eigenvalues): constants."""
    return s.bind(eigh_complement_solve_p, h, v, w, g, *deflation, eps=eps, squared=squared)[0]


def _column_scaled(s, x, vec):
    """x times vec[j] in column j (vec real)."""
    return s.einsum([x, lift_real(s, vec, x)], "ai,i->ai")


def _shifted(s, h, w, x):
    """(w_j − H) x_j, column by column."""
    return s.sub(_column_scaled(s, x, w), s.einsum([h, x], "ab,bj->aj"))


def _shift_change(s, dh, dw, y):
    """(dw_j − dH) y_j, with None a zero tangent (None if both are)."""
    change = None if dw is None else _column_scaled(s, y, dw)
    if dh is not None:
        product = s.einsum([dh, y], "ab,bj->aj")
        change = s.neg(product) if change is None else s.sub(change, product)
    return change


def _masks(s, squared, dtype):
    """The constant 0/1 vectors of the columns that are squared, and of those that are not."""
    twice = np.array(squared, dtype=dtype)
    return s.constant_from(Tensor.adopt(twice)), s.constant_from(Tensor.adopt(1.0 - twice))


def _solve_jvp(s, tangents, primals, outputs, eps, squared):
    (dh, dv, dw, dg), (h, v, w, g), deflation, (y,) = tangents[:4], primals[:4], primals[4:], outputs
    rhs = dg
    change = _shift_change(s, dh, dw, y)
    if change is not None:  # − dM·Y
        twice, once = _masks(s, squared, w.dtype)
        term = _column_scaled(s, change, once)
        if any(squared):
            both = s.add(_shift_change(s, dh, dw, _shifted(s, h, w, y)), _shifted(s, h, w, change))
            term = s.add(term, _column_scaled(s, both, twice))
        rhs = s.neg(term) if rhs is None else s.sub(rhs, term)
    back = None
    if dv is not None:  # − dV VᴴG, and V C with C = −dVᴴY
        overlap = s.einsum([dv, cj(s, v), g], "ai,bi,bj->aj")
        rhs = s.neg(overlap) if rhs is None else s.sub(rhs, overlap)
        back = s.neg(s.einsum([v, cj(s, dv), y], "ai,bi,bj->aj"))
    if rhs is None:
        return (back,)
    return (s.accumulate(_solve(s, h, v, w, rhs, deflation, eps, squared), back),)


def _solve_vjp(s, cotangents, primals, outputs, needs, eps, squared):
    """Λ = S[Ȳ] (S is self-adjoint): Ḡ = Λ, V̄ = −Λ GᴴV − Y ȲᴴV; plain columns give H̄ = Λ Yᴴ and
    w̄ = −Re diag(ΛᴴY), squared ones H̄ = Λ (BY)ᴴ + (BΛ) Yᴴ and w̄ = −2 Re diag(Λᴴ BY)."""
    (yb,), (h, v, w, g), deflation, (y,) = cotangents, primals[:4], primals[4:], outputs
    lam = _solve(s, h, v, w, yb, deflation, eps, squared)
    h_bar = w_bar = v_bar = None
    if needs[0] or needs[2]:
        twice, once = _masks(s, squared, w.dtype)
        lam_once = _column_scaled(s, lam, once)
        h_bar = s.einsum([lam_once, cj(s, y)], "ai,bi->ab")
        w_bar = s.neg(s.real(s.einsum([cj(s, lam_once), y], "ai,ai->i")))
        if any(squared):
            lam_twice = _column_scaled(s, lam, twice)
            by = _shifted(s, h, w, y)
            h_bar = s.add(h_bar, s.add(s.einsum([lam_twice, cj(s, by)], "ai,bi->ab"),
                                       s.einsum([_shifted(s, h, w, lam_twice), cj(s, y)], "ai,bi->ab")))
            w_bar = s.sub(w_bar, s.scale_real(s.real(s.einsum([cj(s, lam_twice), by], "ai,ai->i")), 2.0))
    if needs[1]:
        v_bar = s.neg(s.add(s.einsum([lam, cj(s, g), v], "ai,bi,bj->aj"), s.einsum([y, cj(s, yb), v], "ai,bi,bj->aj")))
    return (h_bar if needs[0] else None, v_bar, w_bar if needs[2] else None, lam if needs[3] else None, None, None)


def _solve_cost(in_avals, out_avals, params) -> float:
    """A dozen steps of conjugate gradients, a product with H each (two for squared columns)."""
    n, k = in_avals[3].shape
    return 24.0 * n * n * k


eigh_complement_solve_p = RULES.define(
    "eigh_complement_solve",
    _solve_abstract,
    _solve_impl,
    _solve_jvp,
    _solve_vjp,
    cost=_solve_cost,
)


# --- eigh_krylov -------------------------------------------------------------------------------


def _krylov_abstract(a: Aval, k, derivative_eps) -> tuple[Aval, ...]:
    n = check_square("eigh", a)
    if not 1 <= k <= n:
        raise InvalidArgument("eigh", f"k in [1, {n}] for a {n} × {n} matrix", repr(k))
    p = deflation_width(n, k)
    real = real_dtype(a.dtype)
    return Aval((k,), real), Aval((n, k), a.dtype), Aval((p,), real), Aval((n, p), a.dtype)


def _krylov_impl(a, k, derivative_eps):
    """krylov_eigh.truncated_eigh of (A + Aᴴ)/2 (A itself, bit for bit, when A is Hermitian, as the
    full eigh reads it), deterministic (a fixed start block)."""
    check_finite("eigh", a)
    try:
        w, v, zw, z = krylov_eigh.truncated_eigh((a + a.conj().T) * 0.5, k)
    except np.linalg.LinAlgError as err:  # the fallback's LAPACK call
        raise LinalgError("eigh", "LAPACK syevd/heevd to converge", str(err)) from None
    n, p = a.shape[0], deflation_width(a.shape[0], k)
    used = min(p, len(zw))
    zw_padded, z_padded = np.zeros(p, w.dtype), np.zeros((n, p), a.dtype)
    zw_padded[:used], z_padded[:, :used] = zw[:used], z[:, :used]
    return w, v, zw_padded, z_padded


def _krylov_jvp(s, tangents, primals, outputs, k, derivative_eps):
    """dw = Re diag P, dV = V (F ∘ P) + S(H, V, w, R) with P = Vᴴ dH V, dH = herm(dx), and
    R = (I − VVᴴ) dH V, or (w_j − H) times it in the squared columns."""
    (da,), (a,), (w, v, zw, z) = tangents, primals, outputs
    eps = eps_of(s, derivative_eps)
    h, dh = hermitian_part(s, a), hermitian_part(s, da)
    dh_v = s.einsum([dh, v], "ab,bj->aj")
    p = s.einsum([cj(s, v), dh_v], "ai,aj->ij")
    minus, _, _ = gap_coefficients(s, w, eps, k, sums=False)
    rest = s.sub(dh_v, s.einsum([v, p], "ai,ij->aj"))
    squared = krylov_eigh.squared_columns(w.value().to_numpy(), eps)
    if any(squared):
        twice, once = _masks(s, squared, w.dtype)
        rest = s.add(_column_scaled(s, rest, once), _column_scaled(s, _shifted(s, h, w, rest), twice))
    y = _solve(s, h, v, w, rest, (z, zw), eps, squared)
    dv = s.add(s.einsum([v, s.mul(lift_real(s, minus, v), p)], "ai,ij->aj"), y)
    return s.real(s.einsum([p], "ii->i")), dv, None, None


eigh_krylov_p = RULES.define(
    "eigh_krylov",
    _krylov_abstract,
    _krylov_impl,
    _krylov_jvp,
    vjp_from_linear_jvp(_krylov_jvp),
    cost=lambda in_avals, out_avals, params: 30.0 * math.prod(in_avals[0].shape) * out_avals[0].shape[0],
)


# --- the session op -----------------------------------------------------------------------------


def truncated_eigh(s, x, k, method, derivative_eps):
    """(w, V): the k eigenpairs of largest |λ| of x's Hermitian part (a matrix), by |λ| descending
    (the positive one first at a tie); ``method`` "full" slices the full eigh, "krylov" binds
    eigh_krylov (k = n, nothing to discard, is the full eigh's)."""
    if not is_integer(k) or isinstance(k, bool):
        raise InvalidArgument("eigh", "k: an int", repr(k))
    if x.ndim != 2:
        raise ShapeMismatch("eigh", "a matrix (rank 2) for a truncated eigh (k given)", f"shape {list(x.shape)}")
    n = check_square("eigh", x.aval)
    if not 1 <= k <= n:
        raise InvalidArgument("eigh", f"k in [1, {n}] for a {n} × {n} matrix", repr(k))
    if method == "krylov" and k < n:
        return s.bind(eigh_krylov_p, x, k=int(k), derivative_eps=derivative_eps)[:2]
    w, v = s.bind(eigh_p, x, derivative_eps=derivative_eps)
    kept = [int(i) for i in krylov_eigh.largest_magnitude_order(w.value().to_numpy())[:k]]
    return s.take(w, kept, 0), s.take(v, kept, 1)
