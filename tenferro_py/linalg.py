"""Linear algebra: the thin SVD and the Hermitian eigendecomposition through LAPACK, with
derivative rules broadened only where they diverge.

With A = U S Vᴴ (K = min(m, n)) and C = Uᴴ dA V, the SVD's rules couple singular values i ≠ j by
(s_j C_ij + s_i C̄_ji)/(s_j² − s_i²) = H_ij/(s_j − s_i) + A_ij/(s_j + s_i), with H and A the
Hermitian and anti-Hermitian parts of C. Only 1/(s_j − s_i) diverges at a repeated value: it
becomes the Lorentzian δ/(δ² + (ε s₁)²), δ = s_j − s_i. 1/(s_j + s_i) and 1/s take the same form,
which equals them to relative (ε s₁/σ)², i.e. to rounding wherever σ > 1e-4 s₁ (ε = 1e-12),
and stays finite where they diverge (both values near 0). Every coefficient is computed from
values divided by the spectrum's scale (s₁; for eigh max |w|), itself a constant: no squares
of singular values appear, and the rules of f(c·A) follow from those of f(A) at any scale c.
The eigendecomposition's rules need 1/(w_j − w_i) only.

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

from .errors import InvalidArgument, LinalgError, ShapeMismatch
from .ops.elementwise import cj, lift_real, real_dtype, times_i
from .ops.structural import SliceConfig
from .opset import composite
from .rules import RuleSet
from .structure import Embedded, Product, dense
from .tensor import Aval, Tensor, is_real_number

_RULES = RuleSet()

DEFAULT_DERIVATIVE_EPS = 1e-12
#: The smallest derivative_eps: its square stays a normal number in float32 (1.2e-38).
MIN_DERIVATIVE_EPS = 1e-18


def semantic_ad_rules() -> RuleSet:
    """The linalg family's AD rules, to merge into an AdContext (a new set on each call)."""
    return _RULES.copy()


def check_derivative_eps(op: str, eps: object) -> float:
    """ε relative to the spectrum's scale: a number in [1e-18, 1], or InvalidArgument."""
    if not (is_real_number(eps) and math.isfinite(eps) and MIN_DERIVATIVE_EPS <= eps <= 1.0):
        raise InvalidArgument(op, f"derivative_eps: a number in [{MIN_DERIVATIVE_EPS:g}, 1] (relative to the largest "
                                  "singular value)", repr(eps))
    return float(eps)


def _check_finite(op: str, a: np.ndarray) -> None:
    if not np.isfinite(a).all():
        raise LinalgError(op, "a matrix of finite entries", "inf or NaN entries")


def _svd_abstract(a: Aval, derivative_eps) -> tuple[Aval, Aval, Aval]:
    if len(a.shape) != 2:
        raise ShapeMismatch("svd", "a matrix (rank 2)", f"shape {list(a.shape)}")
    m, n = a.shape
    k = min(m, n)
    return Aval((m, k), a.dtype), Aval((k,), real_dtype(a.dtype)), Aval((k, n), a.dtype)


def _svd_impl(a, derivative_eps):
    """gesdd through NumPy (it releases the GIL); gesvd when gesdd does not converge. Input with
    inf or NaN raises LinalgError (LAPACK's answer to it would be undefined)."""
    _check_finite("svd", a)
    try:
        return tuple(np.linalg.svd(a, full_matrices=False))
    except np.linalg.LinAlgError:
        try:
            return tuple(scipy.linalg.svd(a, full_matrices=False, lapack_driver="gesvd", check_finite=False))
        except (np.linalg.LinAlgError, ValueError) as err:
            raise LinalgError("svd", "LAPACK gesdd or gesvd to converge", str(err)) from None


# --- helpers in session ops (so the rules stay differentiable) ---------------


def _eps(s, derivative_eps) -> float:
    return derivative_eps if derivative_eps is not None else s.runtime.ad_context.derivative_eps


def _full(s, shape, value, dtype):
    """A constant of ``shape`` filled with ``value``: one number, broadcast (no array of that size)."""
    return s.broadcast_in_dim(s.constant_from(Tensor.adopt(np.array(value, dtype=dtype))), shape, ())


def _off_diagonal(rows: int, cols: int, dtype: np.dtype) -> Tensor:
    """1 − I of rows × cols."""
    return Tensor.adopt(1.0 - np.eye(rows, cols, dtype=dtype))


def _eye(rows: int, cols: int, dtype: np.dtype) -> Tensor:
    return Tensor.adopt(np.eye(rows, cols, dtype=dtype))


def spectrum_scale(s, values):
    """The scale ε is relative to, as a constant (no derivative flows through it): the largest |v| of
    a sorted spectrum (max(|first|, |last|); s₁ for singular values), plus the dtype's smallest
    normal number, so that a zero spectrum has a scale > 0 and gives zero coefficients, not NaN."""
    n = values.shape[0]
    first, last = s.abs(_columns(s, values, 1, 0)), s.abs(s.slice(values, SliceConfig([n - 1], [n])))
    largest = s.scale_real(s.add(s.add(first, last), s.abs(s.sub(first, last))), 0.5)  # max(a, b) for a, b ≥ 0
    tiny = s.constant_from(Tensor.adopt(np.full(1, np.finfo(values.dtype).tiny, values.dtype)))
    return s.constant_from(s.add(largest, tiny))


def lorentzian(s, u, eps):
    """u/(u² + ε²) for u of order 1 or less: 1/u where |u| ≫ ε, 0 at u = 0, at most 1/(2ε) in size."""
    return s.div(u, s.add(s.mul(u, u), _full(s, u.shape, eps * eps, u.dtype)))


def gap_coefficients(s, values, eps, cols, sums=True):
    """Columns [0, cols) of the broadened 1/(v_j − v_i) and, when ``sums``, 1/(v_j + v_i) (zero on the
    diagonal), and the broadened 1/v of the first ``cols`` values, for values v of one spectrum.

    Each is the Lorentzian of the values divided by the spectrum's scale, divided by the scale: the
    differences and sums are at most 2 in size, so nothing overflows or underflows at any scale.
    """
    k = values.shape[0]
    scale = spectrum_scale(s, values)
    x = s.div(values, s.broadcast_in_dim(s.reshape(scale, ()), values.shape, ()))
    x_cols = _columns(s, x, cols, 0)
    over_scale = s.broadcast_in_dim(s.reshape(scale, ()), (k, cols), ())
    mask = s.constant_from(_off_diagonal(k, cols, values.dtype))
    xj, xi = s.broadcast_in_dim(x_cols, (k, cols), (1,)), s.broadcast_in_dim(x, (k, cols), (0,))
    minus = s.div(s.mul(lorentzian(s, s.sub(xj, xi), eps), mask), over_scale)
    plus = s.div(s.mul(lorentzian(s, s.add(xj, xi), eps), mask), over_scale) if sums else None
    inverse = s.div(lorentzian(s, x_cols, eps), s.broadcast_in_dim(s.reshape(scale, ()), (cols,), ()))
    return minus, plus, inverse


def _anti_hermitian_columns(s, x):
    """Columns [0, kk) of (X − Xᴴ)/2, where X = [x, 0] (x: K × kk): (x − [x[:kk]ᴴ; 0])/2."""
    k, kk = x.shape
    head_h = s.transpose(cj(s, _columns(s, x, kk, 0)), (1, 0))
    return s.scale_real(s.sub(x, _extend(s, head_h, k, 0)), 0.5)


def _on_diagonal(s, vec, k):
    """The kk × K matrix with ``vec`` (length kk) on its diagonal."""
    kk = vec.shape[0]
    return s.einsum([vec, s.constant_from(_eye(kk, k, vec.dtype))], "i,ij->ij")


def _phase_term(s, x_head, inverse):
    """i·Im(diag x)/s (``inverse`` the broadened 1/s): the part of dU, or of the middle of Ā, that
    keeps JAX's phase gauge for complex A (the phase sits in U); None for a real one."""
    if x_head.dtype.kind != "c":
        return None
    return times_i(s, s.mul(s.imag(s.einsum([x_head], "ii->i")), inverse))


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
    minus, plus, inverse = gap_coefficients(s, sv, eps, k)
    c = s.einsum([cj(s, u), da, cj(s, vt)], "ai,ab,jb->ij")  # Uᴴ dA V
    c_h = s.transpose(cj(s, c), (1, 0))
    hermitian = s.mul(lift(minus), s.scale_real(s.add(c, c_h), 0.5))  # H∘F⁻
    anti = s.mul(lift(plus), s.scale_real(s.sub(c, c_h), 0.5))  # A∘F⁺
    ju, jv_h = s.add(anti, hermitian), s.sub(anti, hermitian)
    phase = _phase_term(s, c, inverse)
    if phase is not None:
        ju = s.add(ju, s.transpose(_on_diagonal(s, phase, k), (1, 0)))
    if m > k:  # U J + (I − UUᴴ) dA V S⁻¹
        rest = s.sub(s.einsum([da, cj(s, vt)], "ab,jb->aj"), s.einsum([u, c], "ai,ij->aj"))
        ju = s.add(s.einsum([u, ju], "ai,ij->aj"), s.einsum([rest, lift(inverse)], "aj,j->aj"))
    ds = s.real(s.einsum([c], "ii->i"))
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
    uk, vtk = _columns(s, u, kk, 1), _columns(s, vt, kk, 0)
    lift = lambda x: lift_real(s, x, u)  # noqa: E731
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
        phase = None if p is None else _phase_term(s, _columns(s, p, kk, 0), inverse)
        if phase is not None:
            m_top = s.add(m_top, _on_diagonal(s, phase, k))
    if sb is not None:  # diag(S̄) sits in M's first kk rows
        m_top = s.accumulate(m_top, _on_diagonal(s, lift(sb), k))
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
# A = V diag(w) Vᴴ for the Hermitian part of A (w ascending, real). With P = Vᴴ herm(dA) V,
# dw = Re diag(P) and dV = V (F ∘ P), F_ij the broadened 1/(w_j − w_i) (zero on the diagonal:
# the eigenvectors' phases do not move, the gauge the SVD's V follows too).


def _eigh_abstract(a: Aval, derivative_eps) -> tuple[Aval, Aval]:
    if len(a.shape) != 2 or a.shape[0] != a.shape[1]:
        raise ShapeMismatch("eigh", "a square matrix (rank 2)", f"shape {list(a.shape)}")
    n = a.shape[0]
    return Aval((n,), real_dtype(a.dtype)), Aval((n, n), a.dtype)


def _eigh_impl(a, derivative_eps):
    """syevd/heevd through NumPy (it releases the GIL) on (A + Aᴴ)/2, which is A itself, bit for
    bit, when A is Hermitian. Input with inf or NaN raises LinalgError."""
    _check_finite("eigh", a)
    try:
        return tuple(np.linalg.eigh((a + a.conj().T) * 0.5))
    except np.linalg.LinAlgError as err:
        raise LinalgError("eigh", "LAPACK syevd/heevd to converge", str(err)) from None


def _hermitian_part(s, x):
    """(x + xᴴ)/2."""
    return s.scale_real(s.add(x, s.transpose(cj(s, x), (1, 0))), 0.5)


def _eigh_jvp(s, tangents, primals, outputs, derivative_eps):
    """dw = Re diag(P), dV = V (F ∘ P) with P = Vᴴ herm(dA) V."""
    (da,), (w, v) = tangents, outputs
    p = _hermitian_part(s, s.einsum([cj(s, v), da, v], "ai,ab,bj->ij"))
    minus, _, _ = gap_coefficients(s, w, _eps(s, derivative_eps), w.shape[0], sums=False)
    return s.real(s.einsum([p], "ii->i")), s.einsum([v, s.mul(lift_real(s, minus, v), p)], "ai,ij->aj")


def _eigh_vjp(s, cotangents, primals, outputs, needs, derivative_eps):
    """Ā = herm(V [diag(w̄) + F ∘ (Vᴴ V̄)] Vᴴ): the JVP's transpose, Hermitian as the input it reads."""
    (wb, vb), (w, v) = cotangents, outputs
    middle = None
    if vb is not None:
        minus, _, _ = gap_coefficients(s, w, _eps(s, derivative_eps), w.shape[0], sums=False)
        middle = s.mul(lift_real(s, minus, v), s.einsum([cj(s, v), vb], "ai,aj->ij"))
    if wb is not None:
        middle = s.accumulate(middle, _on_diagonal(s, lift_real(s, wb, v), w.shape[0]))
    if middle is None:
        return (None,)
    return (_hermitian_part(s, s.einsum([v, middle, cj(s, v)], "ai,ij,bj->ab")),)


eigh_p = _RULES.define(
    "eigh",
    _eigh_abstract,
    _eigh_impl,
    _eigh_jvp,
    _eigh_vjp,
    structured_rules=True,
    cost=lambda in_avals, out_avals, params: 9.0 * in_avals[0].shape[0] ** 3,  # tridiagonalisation and vectors
)
