"""Linear algebra: the thin SVD and the symmetric eigendecomposition through LAPACK,
with the broadened derivative rules.

With A = U S Vᵀ (K = min(m, n)) the rules need 1/(s_j² − s_i²), infinite at
repeated singular values. The broadened rule (tenferro's default) uses
F_ij = d/(d² + ε²), d = s_j² − s_i², and 1/s becomes s/(s² + ε²): both stay
finite at repeated or zero singular values and equal the exact ones to
relative ε²/d² elsewhere.

The VJP exploits cotangents that are zero beyond column k (what slicing the
factors to k leaves): the work is then O(m n k), not O(m n K).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from .errors import DTypeMismatch, InvalidArgument, LinalgError, ShapeMismatch
from .ops.elementwise import cj, lift_real, real_dtype, times_i
from .ops.structural import SliceConfig
from .opset import composite
from .rules import RuleSet
from .structure import Embedded, Product, dense
from .tensor import Aval, Tensor, is_real_number

_RULES = RuleSet()

DEFAULT_DERIVATIVE_EPS = 1e-12


def semantic_ad_rules() -> RuleSet:
    """The linalg family's AD rules, to merge into an AdContext (a new set on each call)."""
    return _RULES.copy()


def check_derivative_eps(op: str, eps: object) -> float:
    """A finite float > 0, or InvalidArgument."""
    if not (is_real_number(eps) and math.isfinite(eps) and eps > 0):
        raise InvalidArgument(op, "derivative_eps: a finite number > 0", repr(eps))
    return float(eps)


def _svd_abstract(a: Aval, derivative_eps) -> tuple[Aval, Aval, Aval]:
    if len(a.shape) != 2:
        raise ShapeMismatch("svd", "a matrix (rank 2)", f"shape {list(a.shape)}")
    m, n = a.shape
    k = min(m, n)
    return Aval((m, k), a.dtype), Aval((k,), real_dtype(a.dtype)), Aval((k, n), a.dtype)


def _svd_impl(a, derivative_eps):
    """gesdd through NumPy (it releases the GIL); gesvd when gesdd does not converge."""
    try:
        return tuple(np.linalg.svd(a, full_matrices=False))
    except np.linalg.LinAlgError:
        try:
            return tuple(scipy.linalg.svd(a, full_matrices=False, lapack_driver="gesvd"))
        except (np.linalg.LinAlgError, ValueError) as err:
            raise LinalgError("svd", "LAPACK gesdd or gesvd to converge", str(err)) from None


# --- helpers in session ops (so the rules stay differentiable) ---------------


def _eps(s, derivative_eps) -> float:
    return derivative_eps if derivative_eps is not None else s.runtime.ad_context.derivative_eps


def _full(s, shape, value, dtype):
    """A constant of ``shape`` filled with ``value``: one number, broadcast (no array of that size)."""
    return s.broadcast_in_dim(s.constant_from(Tensor(np.array(value, dtype=dtype))), shape, ())


def _off_diagonal(rows: int, cols: int, dtype: np.dtype) -> Tensor:
    """1 − I of rows × cols."""
    return Tensor(1.0 - np.eye(rows, cols, dtype=dtype))


def _eye(rows: int, cols: int, dtype: np.dtype) -> Tensor:
    return Tensor(np.eye(rows, cols, dtype=dtype))


def broadened_f(s, sv, eps, cols=None):
    """Columns [0, cols) of the SVD's F: :func:`broadened_gap_inverse` of w = s²."""
    return broadened_gap_inverse(s, s.mul(sv, sv), eps, cols)


def broadened_gap_inverse(s, w, eps, cols=None):
    """Columns [0, cols) of F: F_ij = d/(d² + ε²) with d = w_j − w_i, and F_ii = 0.

    1/(w_j − w_i) where the w are separated, finite where they repeat. The diagonal
    is masked to a constant zero: as d/(d² + ε²) its derivative would be 1/ε², which
    cancels only in exact arithmetic.
    """
    k = w.shape[0]
    cols = k if cols is None else cols
    d = s.sub(s.broadcast_in_dim(_columns(s, w, cols, 0), (k, cols), (1,)), s.broadcast_in_dim(w, (k, cols), (0,)))
    f = s.div(d, s.add(s.mul(d, d), _full(s, (k, cols), eps * eps, w.dtype)))
    return s.mul(f, s.constant_from(_off_diagonal(k, cols, w.dtype)))


def broadened_inverse(s, sv, eps):
    """s/(s² + ε²): 1/s where s ≫ ε, finite at s = 0."""
    return s.div(sv, s.add(s.mul(sv, sv), _full(s, sv.shape, eps * eps, sv.dtype)))


def _antisym_columns(s, f_cols, p):
    """Columns [0, kk) of F ∘ (X − Xᴴ), where X = [p, 0] (p: K × kk): F's columns times p − [p[:kk]ᴴ; 0]."""
    k, kk = p.shape
    head_h = s.transpose(cj(s, _columns(s, p, kk, 0)), (1, 0))
    return s.mul(lift_real(s, f_cols, p), s.sub(p, _extend(s, head_h, k, 0)))


def _on_diagonal(s, vec, k):
    """The kk × K matrix with ``vec`` (length kk) on its diagonal."""
    kk = vec.shape[0]
    return s.einsum([vec, s.constant_from(_eye(kk, k, vec.dtype))], "i,ij->ij")


def _phase_term(s, dp_head, sk, eps):
    """i·Im(diag dP)/s: the part of dU (or Ū's dual) that keeps the complex phase gauge; None if real."""
    if dp_head.dtype.kind != "c":
        return None
    return times_i(s, s.mul(s.imag(s.einsum([dp_head], "ii->i")), broadened_inverse(s, sk, eps)))


def _columns(s, x, stop, axis):
    """The first ``stop`` entries of x along ``axis``."""
    limits = list(x.shape)
    limits[axis] = stop
    return x if stop == x.shape[axis] else s.slice(x, SliceConfig([0] * x.ndim, limits))


def _extend(s, x, stop, axis):
    """x padded with zeros along ``axis`` to length ``stop``."""
    if x.shape[axis] == stop:
        return x
    shape = list(x.shape)
    shape[axis] = stop
    return s.pad(x, shape, (0,) * x.ndim, (1,) * x.ndim)


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


def _svd_tangent(s, u, sv, vt, da, *, eps):
    """The SVD's JVP of SPEC §3 from dP = Uᴴ dA V: (dU, dS, dVᴴ), except that where U (or Vᴴ) is
    square it gives J with dU = U·J (J' with dVᴴ = J'·Vᴴ).

    J = F∘(dP S + S dPᴴ), J' = (F∘(S dP + dPᴴ S))ᴴ, dS = Re diag dP; for complex A, J also gets
    diag(i Im(dP_ii)/s_i) (JAX's gauge); a tall A adds (I − UUᴴ) dA V S⁻¹ to dU, a wide one
    S⁻¹ Uᴴ dA (I − VVᴴ) to dVᴴ.
    """
    m, k = u.shape
    n = vt.shape[1]
    lift = lambda x: lift_real(s, x, u)  # noqa: E731
    dp = s.einsum([cj(s, u), da, cj(s, vt)], "ai,ab,jb->ij")  # Uᴴ dA V
    f = lift(broadened_f(s, sv, eps))
    s_rows = lift(s.broadcast_in_dim(sv, (k, k), (0,)))  # s_i
    s_cols = lift(s.broadcast_in_dim(sv, (k, k), (1,)))  # s_j

    def hermitian_part(x):
        return s.add(x, s.transpose(cj(s, x), (1, 0)))

    ju = s.mul(f, hermitian_part(s.mul(dp, s_cols)))  # F∘(dP S + S dPᴴ)
    phase = _phase_term(s, dp, sv, eps)
    if phase is not None:
        ju = s.add(ju, s.transpose(_on_diagonal(s, phase, k), (1, 0)))
    if m > k:  # U J + (I − UUᴴ) dA V S⁻¹
        inverse = lift(broadened_inverse(s, sv, eps))
        rest = s.sub(s.einsum([da, cj(s, vt)], "ab,jb->aj"), s.einsum([u, dp], "ai,ij->aj"))
        ju = s.add(s.einsum([u, ju], "ai,ij->aj"), s.einsum([rest, inverse], "aj,j->aj"))
    ds = s.real(s.einsum([dp], "ii->i"))
    jv_h = s.transpose(cj(s, s.mul(f, hermitian_part(s.mul(s_rows, dp)))), (1, 0))  # (F∘(S dP + dPᴴ S))ᴴ
    if n > k:  # J' Vᴴ + S⁻¹ Uᴴ dA (I − VVᴴ)
        inverse = lift(broadened_inverse(s, sv, eps))
        rest = s.sub(s.einsum([cj(s, u), da], "ai,ab->ib"), s.einsum([dp, vt], "ij,jb->ib"))
        jv_h = s.add(s.einsum([jv_h, vt], "ji,ib->jb"), s.einsum([inverse, rest], "i,ib->ib"))
    return ju, ds, jv_h


def _tangent_abstract(u: Aval, sv: Aval, vt: Aval, da: Aval, *, eps) -> tuple[Aval, Aval, Aval]:
    (m, k), n = u.shape, vt.shape[1]
    return Aval((m, k), u.dtype), sv, Aval((k, n), u.dtype)


def _tangent_cost(in_avals, out_avals, params) -> float:
    """Its products: dP = Uᴴ dA V, and the rectangular terms."""
    (m, k), n = in_avals[0].shape, in_avals[2].shape[1]
    return 2.0 * m * n * k + 4.0 * k * k * k


svd_tangent_p = _RULES.define("svd_tangent", _tangent_abstract, **composite(_svd_tangent, _tangent_cost),
                              structured_rules=True)


def _svd_jvp(s, tangents, primals, outputs, derivative_eps):
    """dU, dS, dVᴴ by :func:`_svd_tangent`, one kernel. Where U (or Vᴴ) is square, dU = U·J
    (dVᴴ = J'·Vᴴ) is returned as a :class:`Product`, so that thin products with it never form
    the K × K product."""
    (da,), (a,), (u, sv, vt) = tangents, primals, outputs
    m, n = a.shape
    k = sv.shape[0]
    du, ds, dvt = s.bind(svd_tangent_p, u, sv, vt, da, eps=_eps(s, derivative_eps))
    return (du if m > k else Product(u, du)), ds, (dvt if n > k else Product(dvt, vt))


def _svd_pullback(s, u, sv, vt, *blocks, eps, parts):
    """Ā for the SVD's cotangents, given as their blocks before index kk (zero beyond):
    Ū[:, :kk], S̄[:kk] and V̄ᴴ[:kk, :], those of ``parts`` = (has Ū, has S̄, has V̄ᴴ) present.

    Ā = U M Vᴴ (+ rectangular terms), the transpose of the JVP under Re⟨·,·⟩, with
    M = diag(S̄) + J S + S L (+ i Im(diag UᴴŪ)/s for complex A), J = F∘(UᴴŪ − ŪᴴU) and
    L = F∘(VᴴV̄ − V̄ᴴV). J and L are Hermitian and zero outside their first kk rows and
    columns, so only M[:, :kk] and M[:kk, :] are formed, and
    Ā = U_k (M[:kk, :] Vᴴ + S_k⁻¹ (V̄ᴴ − V̄ᴴ V Vᴴ)) + (U_rest M[kk:, :kk] + (Ū − U UᴴŪ) S_k⁻¹) V_kᴴ,
    the last sum one product of [U_k, ·] (m × 2kk) and [·; V_kᴴ] (2kk × n): O(m n kk) in all.
    """
    found = iter(blocks)
    ub, sb, vb = (next(found) if present else None for present in parts)
    m, k = u.shape
    n = vt.shape[1]
    kk = blocks[0].shape[1] if parts[0] else blocks[0].shape[0]
    uk, sk, vtk = _columns(s, u, kk, 1), _columns(s, sv, kk, 0), _columns(s, vt, kk, 0)
    lift = lambda x: lift_real(s, x, u)  # noqa: E731
    f_cols = broadened_f(s, sv, eps, kk)  # K × kk
    s_rows = lift(s.broadcast_in_dim(sv, (k, kk), (0,)))  # s_i
    s_cols = lift(s.broadcast_in_dim(sk, (k, kk), (1,)))  # s_j, j < kk
    inverse = lift(broadened_inverse(s, sk, eps))
    # M[:, :kk] directly, and M[:kk, :] as the conjugate transpose of its Hermitian mirror.
    m_left = top_mirror = p = q = phase = None
    if ub is not None:
        p = s.einsum([cj(s, u), ub], "ai,aj->ij")  # UᴴŪ: K × kk
        j_cols = _antisym_columns(s, f_cols, p)
        m_left = s.mul(j_cols, s_cols)
        top_mirror = s.mul(j_cols, s_rows)
        phase = _phase_term(s, _columns(s, p, kk, 0), sk, eps)
    if vb is not None:
        q = s.einsum([vt, cj(s, vb)], "ib,jb->ij")  # VᴴV̄: K × kk
        l_cols = _antisym_columns(s, f_cols, q)
        m_left = s.accumulate(m_left, s.mul(s_rows, l_cols))
        top_mirror = s.accumulate(top_mirror, s.mul(l_cols, s_cols))
    m_top = None if top_mirror is None else s.transpose(cj(s, top_mirror), (1, 0))
    if phase is not None:
        m_top = s.add(m_top, _on_diagonal(s, phase, k))
    if sb is not None:  # diag(S̄) sits in M's first kk rows
        m_top = s.accumulate(m_top, _on_diagonal(s, lift(sb), k))
    right = None if m_top is None else s.einsum([m_top, vt], "ij,jb->ib")  # M[:kk, :] Vᴴ
    if n > k and vb is not None:  # + S⁻¹ V̄ᴴ (I − VVᴴ)
        rest = s.sub(vb, s.einsum([cj(s, q), vt], "ij,ib->jb"))
        right = s.accumulate(right, s.einsum([inverse, rest], "j,jb->jb"))
    left = None
    if m_left is not None and kk < k:  # U_rest M[kk:, :kk]
        left = s.einsum([s.slice(u, SliceConfig([0, kk], [m, k])), s.slice(m_left, SliceConfig([kk, 0], [k, kk]))],
                        "ai,ij->aj")
    if m > k and ub is not None:  # + (I − UUᴴ) Ū S⁻¹
        rest = s.sub(ub, s.einsum([u, p], "ai,ij->aj"))
        left = s.accumulate(left, s.einsum([rest, inverse], "aj,j->aj"))
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


svd_pullback_p = _RULES.define("svd_pullback", _pullback_abstract, **composite(_svd_pullback, _pullback_cost),
                               structured_rules=True)


def _svd_vjp(s, cotangents, primals, outputs, needs, derivative_eps):
    """Ā by :func:`_svd_pullback`, one kernel, on the leading blocks of the cotangents: those a slice
    leaves zero beyond index k are cut to k, so the work is O(m n k), not O(m n K)."""
    u, sv, vt = outputs
    (ub, ku), (sb, ks), (vb, kv) = (_leading_block(s, c, ax) for c, ax in zip(cotangents, (1, 0, 0)))
    kk = max(ku, ks, kv)  # every cotangent is zero beyond index kk
    blocks = [_extend(s, x, kk, ax) for x, ax in ((ub, 1), (sb, 0), (vb, 0)) if x is not None]
    parts = (ub is not None, sb is not None, vb is not None)
    return (s.bind(svd_pullback_p, u, sv, vt, *blocks, eps=_eps(s, derivative_eps), parts=parts)[0],)


svd_p = _RULES.define(
    "svd",
    _svd_abstract,
    _svd_impl,
    _svd_jvp,
    _svd_vjp,
    structured_rules=True,
    cost=lambda in_avals, out_avals, params: 10.0 * math.prod(in_avals[0].shape) * out_avals[1].shape[0],
)


# --- eigh ------------------------------------------------------------------------
#
# A = V diag(w) Vᵀ for the symmetric part of A (w ascending). With P = Vᵀ dA V,
# dw = diag(P) and dV = V (F ∘ P), F_ij = 1/(w_j − w_i): the SVD's F with
# d = w_j − w_i in place of s_j² − s_i², broadened the same way.


def _eigh_abstract(a: Aval, derivative_eps) -> tuple[Aval, Aval]:
    if len(a.shape) != 2 or a.shape[0] != a.shape[1]:
        raise ShapeMismatch("eigh", "a square matrix (rank 2)", f"shape {list(a.shape)}")
    if a.dtype.kind != "f":
        raise DTypeMismatch("eigh", "a real matrix (float64 or float32)", str(a.dtype))
    n = a.shape[0]
    return Aval((n,), a.dtype), Aval((n, n), a.dtype)


def _eigh_impl(a, derivative_eps):
    """syevd through NumPy (it releases the GIL) on (A + Aᵀ)/2, which is A itself, bit for bit, when A is symmetric."""
    try:
        return tuple(np.linalg.eigh((a + a.T) * 0.5))
    except np.linalg.LinAlgError as err:
        raise LinalgError("eigh", "LAPACK syevd to converge", str(err)) from None


def _symmetric_part(s, x):
    """(x + xᵀ)/2."""
    return s.scale_real(s.add(x, s.transpose(x, (1, 0))), 0.5)


def _eigh_jvp(s, tangents, primals, outputs, derivative_eps):
    """dw = diag(P), dV = V (F ∘ P) with P = Vᵀ sym(dA) V."""
    (da,), (w, v) = tangents, outputs
    p = _symmetric_part(s, s.einsum([v, da, v], "ai,ab,bj->ij"))
    f = broadened_gap_inverse(s, w, _eps(s, derivative_eps))
    return s.einsum([p], "ii->i"), s.einsum([v, s.mul(f, p)], "ai,ij->aj")


def _eigh_vjp(s, cotangents, primals, outputs, needs, derivative_eps):
    """Ā = V [diag(w̄) + sym(F ∘ (Vᵀ V̄))] Vᵀ: the JVP's transpose, symmetric as the input it reads."""
    (wb, vb), (w, v) = cotangents, outputs
    abar = None
    if vb is not None:
        f = broadened_gap_inverse(s, w, _eps(s, derivative_eps))
        inner = _symmetric_part(s, s.mul(f, s.einsum([v, vb], "ai,aj->ij")))
        abar = s.einsum([v, inner, v], "ai,ij,bj->ab")
    if wb is not None:
        abar = s.accumulate(abar, s.einsum([v, wb, v], "ai,i,bi->ab"))
    return (abar,)


eigh_p = _RULES.define(
    "eigh",
    _eigh_abstract,
    _eigh_impl,
    _eigh_jvp,
    _eigh_vjp,
    structured_rules=True,
    cost=lambda in_avals, out_avals, params: 9.0 * in_avals[0].shape[0] ** 3,  # tridiagonalisation and vectors
)
