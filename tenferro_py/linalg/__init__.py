"""Linear algebra through LAPACK: the thin SVD, the Hermitian eigendecomposition, the thin QR,
solve, inv and norms, each with JVP and VJP rules written in session ops (so they
differentiate again); stacks of matrices (..., m, n) go through the same rules one matrix at
a time.

With A = U S Vᴴ (K = min(m, n)) and C = Uᴴ dA V, the SVD's rules couple singular values i ≠ j by
(s_j C_ij + s_i C̄_ji)/(s_j² − s_i²) = H_ij/(s_j − s_i) + A_ij/(s_j + s_i), with H and A the
Hermitian and anti-Hermitian parts of C. Only 1/(s_j − s_i) diverges at a repeated value: it
becomes the Lorentzian δ/(δ² + (ε s₁)²), δ = s_j − s_i. 1/(s_j + s_i) and 1/s take the same form,
which equals them to relative (ε s₁/σ)², i.e. to rounding wherever σ > 1e-4 s₁ (ε = 1e-12),
and stays finite where they diverge (both values near 0). Every coefficient is computed from
values divided by the spectrum's scale (s₁; for eigh max |w|), itself a constant: no squares
of singular values appear, and the rules of f(c·A) follow from those of f(A) at any scale c.
The eigendecomposition's rules need 1/(w_j − w_i) only; the QR's, 1/R_jj (R's pivots), which
is broadened the same way relative to max |R_jj|.

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

from .. import krylov
from ..errors import DTypeMismatch, InvalidArgument, LinalgError, ShapeMismatch
from ..ops.elementwise import cj, lift_real, minus, real_dtype, times_i, zero_mask
from ..ops.structural import SliceConfig
from ..opset import composite
from ..rules import RuleSet, vjp_from_linear_jvp
from ..structure import Embedded, Product, dense
from ..tensor import Aval, Tensor, is_real_number

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


def _check_finite(op: str, a: np.ndarray, what: str = "a matrix") -> None:
    if not np.isfinite(a).all():
        raise LinalgError(op, f"{what} of finite entries", "inf or NaN entries")


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
    a sorted spectrum (max(|first|, |last|); s₁ for singular values), and 1 for a zero spectrum, whose
    coefficients are then zero, not NaN, at every order (1/scale enters their derivatives)."""
    n = values.shape[0]
    first, last = s.abs(_columns(s, values, 1, 0)), s.abs(s.slice(values, SliceConfig([n - 1], [n])))
    largest = s.scale_real(s.add(s.add(first, last), s.abs(s.sub(first, last))), 0.5)  # max(a, b) for a, b ≥ 0
    return s.constant_from(s.add(largest, s.bind(zero_mask, largest)[0]))


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


def _pair_tangent(s, u, sv, vt, da, eps):
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
    phase = _phase_term(s, c, inverse)
    if phase is not None:
        ju = s.add(ju, s.transpose(_on_diagonal(s, phase, k), (1, 0)))
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
    c, ju, jv_h, inverse = _pair_tangent(s, u, sv, vt, da, eps)
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


# --- truncated SVD by a Krylov method ---------------------------------------------------
#
# svd_krylov gives the k leading triplets (krylov.truncated_svd), and deflation triplets: those
# of the next values it converged (zeros pad them to a fixed width; they only speed up the
# solve below, whose solution does not depend on them, and carry no derivative). Its JVP is exact: with
# C = Uᴴ dA V, the kept pairs couple as in the full rule, and the discarded subspace enters
# through X = complement_solve(A, U, s, dA V S + A dAᴴ U), the solution of (s_i² − AAᴴ) x_i = r_i
# on the complement of U: dU = U J + X, dV = V(−J'ᴴ) + (dAᴴ U − V Cᴴ + Aᴴ X) S⁻¹. Everything is
# written in session ops, complement_solve's own rules included, so the VJP is the JVP's
# transpose and every order follows.


def deflation_width(m: int, n: int, k: int) -> int:
    """How many deflation vectors svd_krylov returns (padded with zero columns)."""
    return max(0, min(min(m, n) - k, k + 8))


def _complement_solve_abstract(
    a: Aval, u: Aval, sv: Aval, g: Aval, vt: Aval, z: Aval, zt: Aval, zv: Aval, eps
) -> tuple[Aval]:
    return (g,)


def _complement_solve_impl(a, u, sv, g, vt, z, zt, zv, eps):
    return (krylov.complement_solve(a, u, vt, sv, g, z, zt, zv, eps),)


def _complement_solve_cost(in_avals, out_avals, params) -> float:
    """A dozen steps of conjugate gradients, two products with A each."""
    (m, n), k = in_avals[0].shape, in_avals[3].shape[1]
    return 48.0 * m * n * k


def _complement_solve(s, a, u, sv, g, rest, eps):
    """complement_solve of g; ``rest`` = (Vᴴ, deflation triplets Z, Zᴴ-side, values): constants."""
    return s.bind(complement_solve_p, a, u, sv, g, *rest, eps=eps)[0]


def _column_scaled(s, x, vec):
    """x times vec[j] in column j."""
    return s.einsum([x, lift_real(s, vec, x)], "ai,i->ai")


def _complement_solve_residual(s, a, u, sv, g, y):
    """R = Y S² − AAᴴY − G, which lies in span(U) for the solution Y."""
    squares = s.mul(sv, sv)
    return s.sub(s.sub(_column_scaled(s, y, squares), s.einsum([a, cj(s, a), y], "ab,cb,ci->ai")), g)


def _complement_solve_jvp(s, tangents, primals, outputs, eps):
    """dY = solve(dG + d(AAᴴ) Y − 2 Y diag(s ds) + AAᴴ U C + dU Uᴴ R) + U C, with C = −dUᴴ Y and R
    the residual: the equation P (S² − AAᴴ) Y = P G differentiated, and Uᴴ Y = 0 kept."""
    (da, du, dsv, dg), (a, u, sv, g), rest, (y,) = tangents[:4], primals[:4], primals[4:], outputs
    terms = [dg]
    if da is not None:
        terms += [s.einsum([da, cj(s, a), y], "ab,cb,ci->ai"), s.einsum([a, cj(s, da), y], "ab,cb,ci->ai")]
    if dsv is not None:
        terms.append(_column_scaled(s, y, s.scale_real(s.mul(sv, dsv), -2.0)))
    back = None
    if du is not None:
        back = s.neg(s.einsum([u, cj(s, du), y], "ai,bi,bj->aj"))  # U C, C = −dUᴴ Y
        terms.append(s.einsum([a, cj(s, a), back], "ab,cb,ci->ai"))
        terms.append(s.einsum([du, cj(s, u), _complement_solve_residual(s, a, u, sv, g, y)], "ai,bi,bj->aj"))
    rhs = None
    for t in terms:
        rhs = s.accumulate(rhs, t)
    if rhs is None:
        return (back,)
    return (s.accumulate(_complement_solve(s, a, u, sv, rhs, rest, eps), back),)


def _complement_solve_vjp(s, cotangents, primals, outputs, needs, eps):
    """Λ = solve(Ȳ) (the operator is self-adjoint on the complement): Ḡ = Λ, Ā = Λ YᴴA + Y ΛᴴA,
    s̄ = −2 s Re diag(ΛᴴY), Ū = Λ RᴴU − Y ΛᴴAAᴴU − Y ȲᴴU."""
    (yb,), (a, u, sv, g), rest, (y,) = cotangents, primals[:4], primals[4:], outputs
    lam = _complement_solve(s, a, u, sv, yb, rest, eps)
    a_bar = sv_bar = u_bar = None
    if needs[0]:
        a_bar = s.add(s.einsum([lam, cj(s, y), a], "ai,bi,bc->ac"), s.einsum([y, cj(s, lam), a], "ai,bi,bc->ac"))
    if needs[2]:
        sv_bar = s.mul(s.scale_real(sv, -2.0), s.real(s.einsum([cj(s, lam), y], "ai,ai->i")))
    if needs[1]:
        residual = _complement_solve_residual(s, a, u, sv, g, y)
        u_bar = s.sub(s.sub(s.einsum([lam, cj(s, residual), u], "ai,bi,bj->aj"),
                            s.einsum([y, cj(s, lam), a, cj(s, a), u], "ai,bi,bc,dc,dj->aj")),
                      s.einsum([y, cj(s, yb), u], "ai,bi,bj->aj"))
    return (a_bar, u_bar, sv_bar, lam if needs[3] else None, None, None, None, None)


complement_solve_p = _RULES.define(
    "complement_solve",
    _complement_solve_abstract,
    _complement_solve_impl,
    _complement_solve_jvp,
    _complement_solve_vjp,
    cost=_complement_solve_cost,
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
    _check_finite("svd", a)
    u, sv, vt, z, zt, zv = krylov.truncated_svd(a, k)
    p = deflation_width(a.shape[0], a.shape[1], k)
    used = min(p, len(zv))
    z_padded, zt_padded, zv_padded = np.zeros((a.shape[0], p), a.dtype), np.zeros((p, a.shape[1]), a.dtype), \
        np.zeros(p, sv.dtype)
    z_padded[:, :used], zt_padded[:used], zv_padded[:used] = z[:, :used], zt[:used], zv[:used]
    return u, sv, vt, z_padded, zt_padded, zv_padded


def _krylov_jvp(s, tangents, primals, outputs, k, derivative_eps):
    (da,), (a,), (u, sv, vt, z, zt, zv) = tangents, primals, outputs
    eps = _eps(s, derivative_eps)
    c, ju, jv_h, inverse = _pair_tangent(s, u, sv, vt, da, eps)
    c_h = s.transpose(cj(s, c), (1, 0))
    da_h_u = s.einsum([cj(s, da), u], "ba,bi->ai")  # dAᴴ U
    rhs = s.add(_column_scaled(s, s.einsum([da, cj(s, vt)], "ab,ib->ai"), sv), s.einsum([a, da_h_u], "ab,bi->ai"))
    x = _complement_solve(s, a, u, sv, rhs, (vt, z, zt, zv), eps)
    du = s.add(s.einsum([u, ju], "ai,ij->aj"), x)
    ds = s.real(s.einsum([c], "ii->i"))
    dv_rest = s.add(s.sub(da_h_u, s.einsum([cj(s, vt), c_h], "ib,ij->bj")), s.einsum([cj(s, a), x], "ab,ai->bi"))
    dvt = s.add(s.einsum([jv_h, vt], "ji,ib->jb"),
                s.transpose(cj(s, _column_scaled(s, dv_rest, inverse)), (1, 0)))
    return du, ds, dvt, None, None, None


svd_krylov_p = _RULES.define(
    "svd_krylov",
    _krylov_abstract,
    _krylov_impl,
    _krylov_jvp,
    vjp_from_linear_jvp(_krylov_jvp),
    cost=lambda in_avals, out_avals, params: 40.0 * math.prod(in_avals[0].shape) * out_avals[1].shape[0],
)


# --- eigh ------------------------------------------------------------------------
#
# A = V diag(w) Vᴴ for the Hermitian part of A (w ascending, real). With P = Vᴴ herm(dA) V,
# dw = Re diag(P) and dV = V (F ∘ P), F_ij the broadened 1/(w_j − w_i) (zero on the diagonal:
# the eigenvectors' phases do not move, the gauge the SVD's V follows too).


def _square_abstract(op: str, a: Aval) -> int:
    """n for an n × n matrix; else ShapeMismatch naming ``op``."""
    if len(a.shape) != 2 or a.shape[0] != a.shape[1]:
        raise ShapeMismatch(op, "a square matrix (rank 2)", f"shape {list(a.shape)}")
    return a.shape[0]


def _eigh_abstract(a: Aval, derivative_eps) -> tuple[Aval, Aval]:
    n = _square_abstract("eigh", a)
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


# --- stacks of matrices ------------------------------------------------------------------
#
# NumPy's linalg takes stacks (..., m, n). Here each primitive is one matrix's, with one
# matrix's rules; a stack is split into its matrices (one op), each goes through the
# primitive, and each output is stacked again (one op): the batched derivatives are the
# rules of one matrix, applied to each, and a wide engine runs the matrices side by side.


def _stack_abstract(*xs: Aval) -> tuple[Aval]:
    return (Aval((len(xs),) + xs[0].shape, xs[0].dtype),)


def _unstack_abstract(x: Aval) -> tuple[Aval, ...]:
    return tuple(Aval(x.shape[1:], x.dtype) for _ in range(x.shape[0]))


def _stack(s, pieces, like):
    """The pieces (None: zeros of ``like``'s shape and dtype) stacked along a new first axis."""
    return s.bind(stack_p, *[p if p is not None else s.zeros(like.shape, like.dtype) for p in pieces])[0]


def _unstack(s, x) -> tuple:
    return s.bind(unstack_p, x)


stack_p = _RULES.define(
    "batch_stack",
    _stack_abstract,
    lambda *xs: (np.stack(xs),),
    jvp=lambda s, tangents, primals, outputs: (_stack(s, tangents, primals[0]),),
    vjp=lambda s, cotangents, primals, outputs, needs: _unstack(s, cotangents[0]),
)

unstack_p = _RULES.define(
    "batch_unstack",
    _unstack_abstract,
    tuple,  # the matrices x[0], x[1], … (views)
    jvp=lambda s, tangents, primals, outputs: _unstack(s, tangents[0]),
    vjp=lambda s, cotangents, primals, outputs, needs: (_stack(s, cotangents, outputs[0]),),
)


def bind_batched(s, op: str, prim, operands, core_ranks, **params) -> tuple:
    """``prim`` (an op on single matrices or vectors) on stacks of them: operand i is
    (..., core) with ``core_ranks[i]`` core axes; the leading (batch) axes of the operands
    that have any must be equal, and an operand without them is shared by every matrix
    (as NumPy broadcasts a missing batch). Each output is stacked back to (..., core)."""
    batch: tuple[int, ...] = ()
    for x, core in zip(operands, core_ranks):
        lead = x.shape[: x.ndim - core]
        if lead and batch and lead != batch:
            raise ShapeMismatch(op, f"operands with equal leading (batch) axes ({list(batch)})", f"{list(lead)}")
        batch = batch or lead
    if not batch:
        return s.bind(prim, *operands, **params)
    cores = [x.shape[x.ndim - core:] for x, core in zip(operands, core_ranks)]
    count = math.prod(batch)
    if count == 0:
        avals = prim.abstract(*[Aval(c, x.dtype) for x, c in zip(operands, cores)], **params)
        return tuple(s.zeros(batch + a.shape, a.dtype) for a in avals)
    columns = [[x] * count if x.ndim == len(c) else s.bind(unstack_p, s.reshape(x, (count,) + c))
               for x, c in zip(operands, cores)]
    results = [s.bind(prim, *args, **params) for args in zip(*columns)]
    return tuple(s.reshape(s.bind(stack_p, *outs)[0], batch + outs[0].shape) for outs in zip(*results))


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


unit_solve_p = _RULES.define(
    "unit_triangular_solve",
    _unit_solve_abstract,
    _unit_solve_impl,
    _unit_solve_jvp,
    _unit_solve_vjp,
    cost=lambda in_avals, out_avals, params: float(in_avals[0].shape[0] * math.prod(in_avals[1].shape)),
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
    _check_finite("qr", a)
    q, r = np.linalg.qr(a, mode="reduced")
    d = np.diagonal(r)
    size = np.abs(d)
    phase = np.ones_like(d)
    np.divide(d, size, out=phase, where=size > 0)
    return q * phase, np.conj(phase)[:, None] * r


def _pivot_reciprocals(s, r1, eps):
    """The broadened 1/R_jj of R₁'s (real) diagonal, as :func:`gap_coefficients`' 1/s: the Lorentzian
    of R_jj / c over c, for c = max |R_jj| (a constant): 0 at a zero pivot, never inf. Where every
    pivot is zero (A = 0) c is 1, so that the derivatives of the coefficients stay finite too."""
    d = s.real(s.einsum([r1], "ii->i"))
    largest = s.reduce_max(s.abs(d))
    scale = s.constant_from(s.add(largest, s.sub(_full(s, (), 1, d.dtype), s.sign(largest))))  # c, or 1 at c = 0
    scale = s.broadcast_in_dim(scale, d.shape, ())
    return s.div(lorentzian(s, s.div(d, scale), eps), scale)


def _right_solve_r(s, w, r1, eps, adjoint):
    """W R₁⁻¹ (W R₁⁻ᴴ when ``adjoint``) by back substitution with the broadened pivot reciprocals
    P = diag(ρ): W P (I + N P)⁻¹ with N the strict triangle of R₁ (of R₁ᴴ), one unit-diagonal
    LAPACK solve. The adjoint is exactly the transpose of the other (P (I + NᴴP)⁻¹ =
    (I + P Nᴴ)⁻¹ P)."""
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
    return _on_diagonal(s, times_i(s, s.imag(s.einsum([x], "ii->i"))), x.shape[0])


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
    k = r.shape[0]
    y = _right_solve_r(s, _columns(s, da, k, 1), _columns(s, r, k, 1), _eps(s, derivative_eps), adjoint=False)
    x = s.einsum([cj(s, q), y], "ai,aj->ij")
    omega = _rotation(s, x)
    dq = s.sub(y, s.einsum([q, s.sub(x, omega)], "ai,ij->aj"))
    dr = s.sub(s.einsum([cj(s, q), da], "ai,ab->ib"), s.einsum([omega, r], "ij,jb->ib"))
    return dq, dr


def _qr_vjp(s, cotangents, primals, outputs, needs, derivative_eps):
    """The JVP's transpose: with M = QᴴQ̄ − R̄Rᴴ (Ω's cotangent), Ȳ = Q̄ − Q QᴴQ̄ + Q Ω*(M) for Ω*
    the adjoint of X ↦ Ω, and Ā = Q R̄ + [Ȳ R₁⁻ᴴ, 0]."""
    (qb, rb), (q, r) = cotangents, outputs
    k, n = r.shape
    p = None if qb is None else s.einsum([cj(s, q), qb], "ai,aj->ij")
    m = minus(s, p, None if rb is None else s.einsum([rb, cj(s, r)], "ib,jb->ij"))
    yb = s.einsum([q, _rotation_transpose(s, m)], "ai,ij->aj")
    if qb is not None:
        yb = s.add(yb, s.sub(qb, s.einsum([q, p], "ai,ij->aj")))
    ab = _extend(s, _right_solve_r(s, yb, _columns(s, r, k, 1), _eps(s, derivative_eps), adjoint=True), n, 1)
    if rb is not None:
        ab = s.add(ab, s.einsum([q, rb], "ai,ib->ab"))
    return (ab,)


qr_p = _RULES.define(
    "qr",
    _qr_abstract,
    _qr_impl,
    _qr_jvp,
    _qr_vjp,
    cost=lambda in_avals, out_avals, params: 4.0 * math.prod(in_avals[0].shape) * out_avals[1].shape[0],
)


# --- solve, inv ------------------------------------------------------------------------------


def _check_solution(op: str, x: np.ndarray) -> None:
    """A solution that overflows (finite input, nonsingular to LAPACK) is a matrix singular to
    working precision: an error, as an exactly singular one is."""
    if not np.isfinite(x).all():
        raise LinalgError(op, "a matrix nonsingular to working precision", "one whose result overflows to inf or NaN")


def _singular(op: str) -> LinalgError:
    return LinalgError(op, "a nonsingular matrix", "a singular one (LAPACK getrf met a zero pivot)")


def _solve_abstract(a: Aval, b: Aval) -> tuple[Aval]:
    n = _square_abstract("solve", a)
    if len(b.shape) not in (1, 2) or b.shape[0] != n:
        raise ShapeMismatch("solve", f"b of shape [{n}] or [{n}, m] (a is {n} × {n})", f"shape {list(b.shape)}")
    if b.dtype != a.dtype:
        raise DTypeMismatch("solve", f"a and b of one dtype (a {a.dtype})", f"b {b.dtype}")
    return (b,)


def _solve_impl(a, b):
    """gesv through NumPy. Input with inf or NaN, a singular a, or a solution that overflows raise
    LinalgError."""
    _check_finite("solve", a)
    _check_finite("solve", b, "a right-hand side")
    try:
        x = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular("solve") from None
    _check_solution("solve", x)
    return (x,)


def _solve(s, a, b):
    return s.bind(solve_p, a, b)[0]


def _solve_jvp(s, tangents, primals, outputs):
    """dX = A⁻¹ (dB − dA X)."""
    (da, db), (a, _), (x,) = tangents, primals, outputs
    if da is not None:
        db = minus(s, db, s.einsum([da, x], "ij,j->i" if x.ndim == 1 else "ij,jk->ik"))
    return (_solve(s, a, db),)


def _solve_vjp(s, cotangents, primals, outputs, needs):
    """B̄ = A⁻ᴴ X̄ (a solve with Aᴴ), Ā = −B̄ Xᴴ."""
    (xb,), (a, _), (x,) = cotangents, primals, outputs
    bb = _solve(s, s.transpose(cj(s, a), (1, 0)), xb)
    if not needs[0]:
        return None, bb
    return s.neg(s.einsum([bb, cj(s, x)], "i,j->ij" if x.ndim == 1 else "ik,jk->ij")), bb


solve_p = _RULES.define(
    "solve",
    _solve_abstract,
    _solve_impl,
    _solve_jvp,
    _solve_vjp,
    cost=lambda in_avals, out_avals, params: in_avals[0].shape[0] ** 2 * (
        in_avals[0].shape[0] + 2.0 * math.prod(in_avals[1].shape[1:])),
)


def _inv_impl(a):
    """getrf and getri through NumPy; input with inf or NaN, or a singular matrix, raise LinalgError."""
    _check_finite("inv", a)
    try:
        y = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular("inv") from None
    _check_solution("inv", y)
    return (y,)


def _inv_abstract(a: Aval) -> tuple[Aval]:
    _square_abstract("inv", a)
    return (a,)


inv_p = _RULES.define(
    "inv",
    _inv_abstract,
    _inv_impl,
    jvp=lambda s, tangents, primals, outputs: (s.neg(s.einsum([outputs[0], tangents[0], outputs[0]], "ij,jk,kl->il")),),
    vjp=lambda s, cotangents, primals, outputs, needs: (
        s.neg(s.einsum([cj(s, outputs[0]), cotangents[0], cj(s, outputs[0])], "ji,jk,lk->il")),),
    cost=lambda in_avals, out_avals, params: 2.0 * in_avals[0].shape[0] ** 3,
)


# --- norms -----------------------------------------------------------------------------------


def _reciprocal_or_zero_impl(x):
    out = np.zeros_like(x)
    return (np.divide(1, x, out=out, where=x != 0),)


# 1/x where x ≠ 0, and 0 at 0 (real x): its derivative −t/x² (0 at 0) is written with the op
# itself, so every order is finite.
reciprocal_or_zero_p = _RULES.define(
    "reciprocal_or_zero",
    lambda x: (x,),
    _reciprocal_or_zero_impl,
    jvp=lambda s, tangents, primals, outputs: (s.neg(s.mul(tangents[0], s.mul(outputs[0], outputs[0]))),),
    vjp=lambda s, cotangents, primals, outputs, needs: (s.neg(s.mul(cotangents[0], s.mul(outputs[0], outputs[0]))),),
)


def _frobenius_impl(x):
    """BLAS nrm2 over all entries: scaled, so it neither overflows nor underflows where ‖x‖ does not."""
    flat = np.ravel(x, order="K")
    nrm2 = scipy.linalg.get_blas_funcs("nrm2", (flat,))
    return (np.array(nrm2(flat) if flat.size else 0, dtype=real_dtype(x.dtype)),)


def _direction(s, x, n):
    """x/‖x‖, and 0 at x = 0 (n = ‖x‖): the derivative of ‖x‖, dn = Re⟨x/‖x‖, dx⟩, x̄ = n̄ x/‖x‖."""
    inverse = s.bind(reciprocal_or_zero_p, n)[0]
    return s.mul(x, lift_real(s, s.broadcast_in_dim(inverse, x.shape, ()), x))


def _frobenius_jvp(s, tangents, primals, outputs):
    (dx,), (x,), (n,) = tangents, primals, outputs
    change = s.reduce_sum(s.mul(cj(s, _direction(s, x, n)), dx))
    return (s.real(change) if change.dtype.kind == "c" else change,)


def _frobenius_vjp(s, cotangents, primals, outputs, needs):
    (nb,), (x,), (n,) = cotangents, primals, outputs
    return (s.mul(_direction(s, x, n), lift_real(s, s.broadcast_in_dim(nb, x.shape, ()), x)),)


frobenius_p = _RULES.define(
    "frobenius_norm",
    lambda x: (Aval((), real_dtype(x.dtype)),),
    _frobenius_impl,
    _frobenius_jvp,
    _frobenius_vjp,
)

VECTOR_ORDS = (None, 2, 1, math.inf, -math.inf)
MATRIX_ORDS = (None, "fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)


def norm(s, x, ord):
    """numpy.linalg.norm(x, ord) of a vector or a matrix, as a real scalar (the orders of
    VECTOR_ORDS and MATRIX_ORDS). Frobenius by BLAS nrm2 (its derivative 0 at x = 0); 'nuc', 2
    and −2 through the SVD (Σ s, s₁, s_K); 1, ∞ (and −1, −∞) as the max (min) over column (row)
    sums of |x|, ties sharing the derivative."""
    if x.ndim not in (1, 2):
        raise ShapeMismatch("norm", "a vector or a matrix (rank 1 or 2)", f"shape {list(x.shape)}")
    ords = VECTOR_ORDS if x.ndim == 1 else MATRIX_ORDS
    if not (ord is None or isinstance(ord, str) or is_real_number(ord)) or ord not in ords:
        what = "vector" if x.ndim == 1 else "matrix"
        raise InvalidArgument("norm", f"a {what} order among {', '.join(map(repr, ords))}", repr(ord))
    if ord is None or ord == "fro" or (x.ndim == 1 and ord == 2):
        return s.bind(frobenius_p, x)[0]
    if ord == "nuc" or ord in (2, -2):
        sv = s.bind(svd_p, x, derivative_eps=None)[1]
        if ord == "nuc":
            return s.reduce_sum(sv)
        k = sv.shape[0]
        return s.reshape(s.slice(sv, SliceConfig([0], [1]) if ord == 2 else SliceConfig([k - 1], [k])), ())
    extremum = s.reduce_max if ord > 0 else s.reduce_min
    if x.ndim == 1:
        return s.reduce_sum(s.abs(x)) if ord == 1 else extremum(s.abs(x))
    return extremum(s.reduce_sum(s.abs(x), axes=(0,) if abs(ord) == 1 else (1,)))  # columns for ±1, rows for ±∞


# --- ops in modules of their own (imported last: they register into _RULES) -----------------

from .eig import eig_p, eigvals_p  # noqa: E402,F401
from .expm import expm_frechet_p, expm_p  # noqa: E402,F401
from .eigh_function import check_functions, eigh_function_p  # noqa: E402,F401
from .matrix_functions import inv_sqrtm_p, logm_p, sqrtm_p  # noqa: E402,F401
from .pinv import pinv_p, pinv_rtol  # noqa: E402,F401
from . import complement  # noqa: E402,F401
from .cholesky import cholesky_p  # noqa: E402,F401
from .determinants import det_p, slogdet_p  # noqa: E402,F401
from .least_squares import lstsq  # noqa: E402,F401
from .eigh_krylov import eigh_complement_solve_p, eigh_krylov_p, truncated_eigh  # noqa: E402,F401
