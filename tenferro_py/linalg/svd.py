"""The thin SVD, A = U S Vᴴ (K = min(m, n)), with JVP and VJP rules written in session ops, each
one composite kernel (:mod:`tenferro_py.composite`) that differentiates again.

The rules couple singular values i ≠ j by (s_j C_ij + s_i C̄_ji)/(s_j² − s_i²) =
H_ij/(s_j − s_i) + A_ij/(s_j + s_i), C = Uᴴ dA V, with H and A the Hermitian and
anti-Hermitian parts of C; each reciprocal is broadened relative to s₁ (:mod:`.spectral`).

At exactly repeated (or zero) values the rules give the exact derivative of every
gauge-invariant loss along the part of dA that keeps the degeneracy, and drop the part that
splits it: no rule that sees only the factors and their cotangents can do better, since two
losses with equal cotangents there can have different derivatives (docs/design.md).

The VJP exploits cotangents that are zero beyond column k (what slicing the factors to k
leaves): the work is then O(m n k), not O(m n K).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from ..composite import composite
from ..errors import LinalgError, ShapeMismatch
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj, real_dtype
from ..ops.structural import SliceConfig
from ..structure import Embedded, Product, dense
from ..tensor import Aval
from . import degenerate
from .common import RULES, check_finite, columns, eps_of, extend, on_diagonal
from .spectral import exact_unit, gap_coefficients, phase_term, spectrum_scale, times


def _svd_abstract(a: Aval, derivative_eps, within_split=False) -> tuple[Aval, Aval, Aval]:
    if len(a.shape) != 2:
        raise ShapeMismatch("svd", "a matrix (rank 2)", f"shape {list(a.shape)}")
    m, n = a.shape
    k = min(m, n)
    return Aval((m, k), a.dtype), Aval((k,), real_dtype(a.dtype)), Aval((k, n), a.dtype)


def _svd_impl(a, derivative_eps, within_split=False):
    """gesdd through NumPy (it releases the GIL); gesvd when gesdd does not converge. Input with
    inf or NaN raises LinalgError (LAPACK's answer to it would be undefined)."""
    check_finite("svd", a)
    try:
        return tuple(np.linalg.svd(a, full_matrices=False))
    except np.linalg.LinAlgError:
        try:
            return tuple(scipy.linalg.svd(a, full_matrices=False, lapack_driver="gesvd", check_finite=False))
        except (np.linalg.LinAlgError, ValueError) as err:
            raise LinalgError("svd", "LAPACK gesdd or gesvd to converge", str(err)) from None


def _anti_hermitian_columns(s, x):
    """Columns [0, kk) of (X − Xᴴ)/2, where X = [x, 0] (x: K × kk): (x − [x[:kk]ᴴ; 0])/2."""
    k, kk = x.shape
    head_h = s.transpose(cj(s, columns(s, x, kk, 0)), (1, 0))
    return s.scale_real(s.sub(x, extend(s, head_h, k, 0)), 0.5)


def _leading_block(s, ct, axis):
    """(block, k): a cotangent that is zero from index k on along ``axis``, as its first k entries."""
    if ct is None:
        return None, 0
    whole = type(ct) is Embedded and ct.contiguous and all(
        st == 0 and b == n for a, (st, b, n) in enumerate(zip(ct.starts, ct.block.shape, ct.shape)) if a != axis
    )
    if not whole:
        ct = dense(s, ct)
        return ct, ct.shape[axis]
    stop = ct.starts[axis] + ct.block.shape[axis]
    shape = list(ct.shape)
    shape[axis] = stop
    return s.pad(ct.block, shape, ct.starts, ct.strides) if ct.starts[axis] else ct.block, stop


def pair_tangent(s, u, sv, vt, da, eps):
    """(C, J, J', the broadened 1/s) for the k triplets (u, sv, vt): C = Uᴴ dA V, J = H∘F⁻ + A∘F⁺
    (+ diag(i Im C_ii/s_i) for complex A, JAX's gauge) and J' = A∘F⁺ − H∘F⁻, with H and A the
    Hermitian and anti-Hermitian parts of C and F∓ the broadened 1/(s_j ∓ s_i): how the triplets
    turn into each other, the part of the SVD's JVP that the full and the truncated SVD share."""
    k = sv.shape[0]
    lift = lambda x: lift_real(s, x, u)  # noqa: E731
    minus, plus, inverse = gap_coefficients(s, sv, eps, k)
    c = s.einsum([cj(s, u), da, cj(s, vt)], "ai,ab,jb->ij")  # Uᴴ dA V
    c_h = s.transpose(cj(s, c), (1, 0))
    hermitian = s.mul(lift(minus), s.scale_real(s.add(c, c_h), 0.5))  # H∘F⁻
    anti = s.mul(lift(plus), s.scale_real(s.sub(c, c_h), 0.5))  # A∘F⁺
    ju, jv_h = s.add(anti, hermitian), s.sub(anti, hermitian)
    phase = phase_term(s, c, inverse)
    if phase is not None:
        ju = s.add(ju, s.transpose(on_diagonal(s, phase, k), (1, 0)))
    return c, ju, jv_h, inverse


def _svd_tangent(s, u, sv, vt, da, *, eps):
    """The SVD's JVP from C = Uᴴ dA V, H and A its Hermitian and anti-Hermitian parts: (dU, dS, dVᴴ),
    except that where U (or Vᴴ) is square it gives J with dU = U·J (J' with dVᴴ = J'·Vᴴ).

    J = H∘F⁻ + A∘F⁺ (Uᴴ dU), J' = A∘F⁺ − H∘F⁻ ((Vᴴ dV)ᴴ), with F⁻ and F⁺ the broadened
    1/(s_j − s_i) and 1/(s_j + s_i); dS = Re diag C. For complex A, J also gets
    diag(i Im C_ii/s_i) (JAX's gauge); a tall A adds (I − UUᴴ) dA V S⁻¹ to dU, a wide one
    S⁻¹ Uᴴ dA (I − VVᴴ) to dVᴴ.
    """
    m, k = u.shape
    n = vt.shape[1]
    lift = lambda x: lift_real(s, x, u)  # noqa: E731
    unit, reciprocal = exact_unit(s, spectrum_scale(s, sv))
    sv, da = times(s, sv, reciprocal), times(s, da, reciprocal)  # dU, dVᴴ are those of A/c along dA/c
    c, ju, jv_h, inverse = pair_tangent(s, u, sv, vt, da, eps)
    if m > k:  # U J + (I − UUᴴ) dA V S⁻¹
        rest = s.sub(s.einsum([da, cj(s, vt)], "ab,jb->aj"), s.einsum([u, c], "ai,ij->aj"))
        ju = s.add(s.einsum([u, ju], "ai,ij->aj"), s.einsum([rest, lift(inverse)], "aj,j->aj"))
    ds = times(s, s.real(s.einsum([c], "ii->i")), unit)
    if n > k:  # J' Vᴴ + S⁻¹ Uᴴ dA (I − VVᴴ)
        rest = s.sub(s.einsum([cj(s, u), da], "ai,ab->ib"), s.einsum([c, vt], "ij,jb->ib"))
        jv_h = s.add(s.einsum([jv_h, vt], "ji,ib->jb"), s.einsum([lift(inverse), rest], "i,ib->ib"))
    return ju, ds, jv_h


def _tangent_abstract(u: Aval, sv: Aval, vt: Aval, da: Aval, *, eps) -> tuple[Aval, Aval, Aval]:
    (m, k), n = u.shape, vt.shape[1]
    return Aval((m, k), u.dtype), sv, Aval((k, n), u.dtype)


def _tangent_cost(in_avals, out_avals, params) -> float:
    """Its products: dP = Uᴴ dA V, and the rectangular terms."""
    (m, k), n = in_avals[0].shape, in_avals[2].shape[1]
    return 2.0 * m * n * k + 4.0 * k * k * k


svd_tangent_p = RULES.define("svd_tangent", _tangent_abstract,
                             **composite(_svd_tangent, _tangent_cost, shape_determined=True))


def svd_jvp(s, tangents, primals, outputs, derivative_eps, within_split=False, checked=True):
    """dU, dS, dVᴴ by :func:`_svd_tangent`, one kernel. Where U (or Vᴴ) is square, dU = U·J
    (dVᴴ = J'·Vᴴ) is returned as a :class:`Product`, so that thin products with it never form
    the K × K product."""
    (da,), (a,), (u, sv, vt) = tangents, primals, outputs
    m, n = a.shape
    k = sv.shape[0]
    eps = eps_of(s, derivative_eps)
    if checked and not within_split:  # split's rules repair what this one drops (and check for themselves)
        degenerate.svd_tangent("svd", u, sv, vt, da, eps)
    du, ds, dvt = s.bind(svd_tangent_p, u, sv, vt, da, eps=eps)
    return (du if m > k else Product(u, du)), ds, (dvt if n > k else Product(dvt, vt))


def _svd_pullback(s, u, sv, vt, *blocks, eps, parts):
    """Ā for the SVD's cotangents, given as their blocks before index kk (zero beyond):
    Ū[:, :kk], S̄[:kk] and V̄ᴴ[:kk, :], those of ``parts`` = (has Ū, has S̄, has V̄ᴴ) present (Ū or
    V̄ᴴ among them: S̄ alone couples nothing, :func:`svd_vjp`).

    The transpose of the JVP under Re⟨·,·⟩: Ā = U M Vᴴ (+ rectangular terms) with
    M = diag(S̄) + F⁻∘AH(P + Q) + F⁺∘AH(P − Q) (+ i Im(diag P)/s for complex A), P = UᴴŪ,
    Q = VᴴV̄ and AH(X) = (X − Xᴴ)/2. The F⁻ term is Hermitian and the F⁺ term anti-Hermitian,
    and both are zero outside M's first kk rows and columns, so only M[:, :kk] and M[:kk, :]
    are formed, and Ā = U_k (M[:kk, :] Vᴴ + S_k⁻¹ (V̄ᴴ − V̄ᴴ V Vᴴ)) + (U_rest M[kk:, :kk] +
    (Ū − U UᴴŪ) S_k⁻¹) V_kᴴ, the last sum one product of [U_k, ·] (m × 2kk) and [·; V_kᴴ]
    (2kk × n): O(m n kk) in all.
    """
    found = iter(blocks)
    ub, sb, vb = (next(found) if present else None for present in parts)
    m, k = u.shape
    n = vt.shape[1]
    kk = blocks[0].shape[1] if parts[0] else blocks[0].shape[0]
    uk, vtk = columns(s, u, kk, 1), columns(s, vt, kk, 0)
    lift = lambda x: lift_real(s, x, u)  # noqa: E731
    reciprocal = exact_unit(s, spectrum_scale(s, sv))[1]  # Ā is that of A/c for Ū/c, S̄, V̄/c
    sv, ub, vb = (None if x is None else times(s, x, reciprocal) for x in (sv, ub, vb))
    minus, plus, inverse = gap_coefficients(s, sv, eps, kk)  # K × kk, K × kk, kk
    p = None if ub is None else s.einsum([cj(s, u), ub], "ai,aj->ij")  # UᴴŪ: K × kk
    q = None if vb is None else s.einsum([vt, cj(s, vb)], "ib,jb->ij")  # VᴴV̄: K × kk
    total = s.accumulate(p, q)
    difference = p if q is None else (s.neg(q) if p is None else s.sub(p, q))
    m_left = m_top = None
    if total is not None:  # M[:, :kk] directly; M[:kk, :] as its mirror's conjugate transpose
        hermitian = s.mul(lift(minus), _anti_hermitian_columns(s, total))
        anti = s.mul(lift(plus), _anti_hermitian_columns(s, difference))
        m_left = s.add(hermitian, anti)
        m_top = s.transpose(cj(s, s.sub(hermitian, anti)), (1, 0))
        phase = None if p is None else phase_term(s, columns(s, p, kk, 0), inverse)
        if phase is not None:
            m_top = s.add(m_top, on_diagonal(s, phase, k))
    if sb is not None:  # diag(S̄) sits in M's first kk rows
        m_top = s.accumulate(m_top, on_diagonal(s, lift(sb), k))
    right = None if m_top is None else s.einsum([m_top, vt], "ij,jb->ib")  # M[:kk, :] Vᴴ
    if n > k and vb is not None:  # + S⁻¹ V̄ᴴ (I − VVᴴ)
        rest = s.sub(vb, s.einsum([cj(s, q), vt], "ij,ib->jb"))
        right = s.accumulate(right, s.einsum([lift(inverse), rest], "j,jb->jb"))
    left = None
    if m_left is not None and kk < k:  # U_rest M[kk:, :kk]
        left = s.einsum([s.slice(u, SliceConfig([0, kk], [m, k])), s.slice(m_left, SliceConfig([kk, 0], [k, kk]))],
                        "ai,ij->aj")
    if m > k and ub is not None:  # + (I − UUᴴ) Ū S⁻¹
        rest = s.sub(ub, s.einsum([u, p], "ai,ij->aj"))
        left = s.accumulate(left, s.einsum([rest, lift(inverse)], "aj,j->aj"))
    if right is not None and left is not None:  # one product: [U_k, left] [right; V_kᴴ]
        return (s.einsum([s.concatenate([uk, left], 1), s.concatenate([right, vtk], 0)], "ai,ib->ab"),)
    if right is not None:
        return (s.einsum([uk, right], "ai,ib->ab"),)
    if left is not None:
        return (s.einsum([left, vtk], "aj,jb->ab"),)
    return (s.zeros((m, n), u.dtype),)


def _pullback_abstract(u: Aval, sv: Aval, vt: Aval, *blocks: Aval, eps, parts) -> tuple[Aval]:
    return (Aval((u.shape[0], vt.shape[1]), u.dtype),)


def _pullback_cost(in_avals, out_avals, params) -> float:
    """Its products: two K × kk Gram blocks and four (m × kk)(kk × n)-sized ones."""
    (m, k), n = in_avals[0].shape, in_avals[2].shape[1]
    kk = in_avals[3].shape[-1] if params["parts"][0] else in_avals[3].shape[0]
    return 2.0 * k * kk * (m + n) + 4.0 * m * kk * n


svd_pullback_p = RULES.define("svd_pullback", _pullback_abstract,
                              **composite(_svd_pullback, _pullback_cost, shape_determined=True))


def svd_vjp(s, cotangents, primals, outputs, needs, derivative_eps, within_split=False, checked=True):
    """Ā by :func:`_svd_pullback`, one kernel, on the leading blocks of the cotangents: those a slice
    leaves zero beyond index k are cut to k, so the work is O(m n k), not O(m n K). S̄ alone gives
    the product U_k diag(S̄) V_kᴴ, two ops that need no kernel of their own."""
    u, sv, vt = outputs
    (ub, ku), (sb, ks), (vb, kv) = (_leading_block(s, c, ax) for c, ax in zip(cotangents, (1, 0, 0)))
    kk = max(ku, ks, kv)  # every cotangent is zero beyond index kk
    if checked and (ub is not None or vb is not None):  # S̄ alone is basis-free
        degenerate.svd_cotangents("svd", u, sv, vt, ub, vb, kk, eps_of(s, derivative_eps))
    if ub is None and vb is None:  # Ā = (U_k diag(S̄)) V_kᴴ: the values alone couple nothing
        uk, vtk = columns(s, u, kk, 1), columns(s, vt, kk, 0)
        scaled = s.mul(uk, s.broadcast_in_dim(lift_real(s, sb, u), uk.shape, [1]))
        return (s.einsum([scaled, vtk], "ai,ib->ab"),)
    blocks = [extend(s, x, kk, ax) for x, ax in ((ub, 1), (sb, 0), (vb, 0)) if x is not None]
    parts = (ub is not None, sb is not None, vb is not None)
    return (s.bind(svd_pullback_p, u, sv, vt, *blocks, eps=eps_of(s, derivative_eps), parts=parts)[0],)


svd_p = RULES.define(
    "svd",
    _svd_abstract,
    _svd_impl,
    svd_jvp,
    svd_vjp,
    cost=lambda in_avals, out_avals, params: 10.0 * math.prod(in_avals[0].shape) * out_avals[1].shape[0],
)
