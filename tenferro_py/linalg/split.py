"""split: the factors l = U_k S_k^a and r = S_k^(1−a) V_kᴴ of x's rank-k truncation
P_k(x) = U_k S_k V_kᴴ (absorb "left": a = 1, "both": a = ½, "right": a = 0), for networks that
contract them back together, as quimb's ``tensor_split`` and every MPS compression do.

Such a loss sees l and r only through l·r, so it is invariant under every invertible gauge on the
bond (l → lG, r → G⁻¹r), and its derivative is that of P_k, which exists at repeated and zero
kept values where U and V have none. The rules are the SVD's, composed with the absorption, plus
a repair that restores what the SVD's broadened coefficients drop there: the part of the kept
block and of the complements that splits a repeated value or moves a zero one. The repair is put
on the bond as a gauge direction (it changes l and r, and l·r exactly as P_k does), in the
shares the SVD's own tangent gives them, so it is exact for every gauge-invariant loss and, at
repeated nonzero values, for one invariant under unitary gauges alone; it is zero along
directions that keep the spectrum's degeneracies, and the VJP stays the JVP's transpose. Where
the loss depends on the basis inside repeated values, or the cut falls inside a multiplet, or
zeros sit where no factor can carry their directions, the derivative does not exist or is not
in the cotangents: a DegenerateDerivativeWarning says so.
Derivation and tests: docs/spectral.md#degenerate.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeMismatch
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj, full, real_dtype
from ..ops.structural import SliceConfig
from ..structure import dense, embedded
from ..tensor import Aval, Tensor
from . import degenerate
from .common import RULES, columns, eps_of
from .spectral import exact_unit, gap_coefficients, spectrum_scale, times
from .svd import svd_jvp, svd_vjp

#: The power a of the singular values that the left factor takes, by quimb's names of ``absorb``.
ABSORB = {"left": 1.0, "both": 0.5, "right": 0.0}
#: Values closer than this, relative to s₁ and times ε, get the repair (the broadened coefficients
#: are exact to relative (ε s₁/σ)², so beyond it the repair would change nothing).
REPAIR_REACH = 1e6
#: Relative size of lᴴl̄ − r̄rᴴ (the cotangents' response to a gauge on the bond) below which the
#: loss counts as gauge-invariant.
GAUGE_INVARIANT = 1e-8


def _power(x, a):
    """x^a for a in {0, ½, 1} (np.sqrt for ½)."""
    return x if a == 1.0 else (np.sqrt(x) if a == 0.5 else np.ones_like(x))


def _split_abstract(x: Aval, u: Aval, sv: Aval, vt: Aval, *, k, absorb, derivative_eps) -> tuple[Aval, Aval]:
    m, n = x.shape
    if u.shape != (m, min(m, n)) or vt.shape != (min(m, n), n) or sv.shape != (min(m, n),):
        raise ShapeMismatch("split", f"x's thin SVD factors for a {m} × {n} matrix",
                            f"{list(u.shape)}, {list(sv.shape)}, {list(vt.shape)}")
    return Aval((m, k), x.dtype), Aval((k, n), x.dtype)


def zero_side(shape) -> float:
    """The power a that exact zero singular values take under absorb="both": the factor that
    carries their vectors (l for a = 0, r for a = 1) is the one whose complement the matrix has
    none of, so that no direction of P_k's tangent is lost on factors that vanish (docs/spectral.md)."""
    return 1.0 if shape[0] >= shape[1] else 0.0


def factor_powers(values, a, shape):
    """(s^a, s^(1−a)) of the kept values, with exact zeros under a = ½ given the powers of ``zero_side``
    (0⁰ = 1: one factor holds the vector, the other a zero; l·r is the same)."""
    left, right = _power(values, a), _power(values, 1.0 - a)
    if a == 0.5:
        zero, side = values == 0, zero_side(shape)
        left, right = np.where(zero, 1.0 - side, left), np.where(zero, side, right)
    return left, right


def _split_impl(x, u, sv, vt, *, k, absorb, derivative_eps):
    left, right = factor_powers(sv[:k], ABSORB[absorb], x.shape)
    return (u[:, :k] * left.astype(x.dtype), right.astype(x.dtype)[:, None] * vt[:k])


class _Spectrum:
    """What the rules need to know of the kept values, read off their data: whether the repair is
    needed, the repeated and zero values to name in a warning, and the repair's weights (exact
    powers of the values; 0 where a factor vanishes, whose directions are then lost)."""

    def __init__(self, sv, k, a, eps, shape):
        values = np.asarray(sv.value().to_numpy(), dtype=float)
        top = values[0] if values.size else 0.0
        kept = values[:k]
        gaps = np.abs(kept[:, None] - kept[None, :]) + np.eye(k) * top
        reach, tie = REPAIR_REACH * eps * top, degenerate.REPEATED * eps * top
        self.active = bool(k and (gaps.min(initial=np.inf) <= reach or kept.min() <= reach))
        self.ties = (gaps <= tie).astype(float)  # pairs i ≠ j of repeated values (zero ones too)
        self.repeated = sorted({float(v) for i, v in enumerate(kept) if (gaps[i] <= tie).any() and v > tie})
        self.zeros = bool(k) and bool(kept.min() <= tie)
        self.cut = k < values.size and k > 0 and values[k - 1] - values[k] <= tie
        self.cut_values = (float(values[k - 1]), float(values[k])) if self.cut else None
        self.positive = kept > 0
        # Repeated values made exactly equal (each run its mean, on either side of the cut): the
        # SVD's broadened 1/δ is then 0 between them instead of ~1e8/s₁ at LAPACK's ties, where it
        # would magnify rounding into the standard part.
        self.snap = np.zeros(values.size)
        for block in degenerate.repeated_blocks(values, eps):
            if block[0] >= k or block[-1] < k:
                self.snap[block] = values[block].mean() - values[block]
        powers = np.where(self.positive, a, zero_side(shape)) if a == 0.5 else np.full(k, a)  # each column's a
        self.zero_left = (~self.positive) & (powers == 0.0) if a == 0.5 else np.zeros(k, bool)  # l holds u_j
        self.zero_right = (~self.positive) & (powers == 1.0) if a == 0.5 else np.zeros(k, bool)  # r holds v_jᴴ
        right_weight, left_weight = factor_powers(kept, a, shape)[::-1]  # s^(1−a), s^a: what l̄, r̄ carry
        self.take_left = right_weight[None, :] >= left_weight[:, None] if a == 0.5 else np.full((k, k), a == 1.0)
        # The share of entry (i, j) of the kept block that goes onto l: where both values are nonzero
        # under a = ½, half, as the SVD's own tangent at split values splits it (so a loss invariant
        # under unitary gauges alone gets its derivative too); else all on the side that can carry it.
        both = self.positive[:, None] & self.positive[None, :]
        self.share_left = np.where(both, 0.5, self.take_left) if a == 0.5 else self.take_left.astype(float)
        vanishing_left = ~self.positive & (powers < 1.0)  # where s^(a−1) has no value
        vanishing_right = ~self.positive & (powers > 0.0)
        self.lost_block = bool((np.where(self.take_left, vanishing_left[None, :], vanishing_right[:, None])).any())
        self.vanishing_left, self.vanishing_right = vanishing_left.any(), vanishing_right.any()

    def lost(self, m, n, kk):
        """Whether some direction of P_k's tangent space cannot be put on factors that vanish."""
        return self.lost_block or (m > kk and self.vanishing_left) or (n > kk and self.vanishing_right)


def _warn(what: str) -> None:
    degenerate.warn("split", what)


def _cut_warning(spec: _Spectrum) -> None:
    if spec.cut:
        _warn(f"the cut at k falls inside a multiplet ({spec.cut_values[0]:.6g} kept, {spec.cut_values[1]:.6g} "
              "discarded): P_k has no derivative there; cut at a gap")


def _scaled(s, x, vec, axis):
    """x with its rows (axis 0) or columns (axis 1) multiplied by the real vector vec."""
    return s.mul(x, s.broadcast_in_dim(lift_real(s, vec, x), x.shape, [axis]))


def _constant(s, array, like):
    """A real constant of ``like``'s precision."""
    return s.constant_from(Tensor.adopt(np.asarray(array, dtype=real_dtype(like.dtype))))


class _Factors:
    """The kept triplets in session ops, and the powers of their values that l and r carry."""

    def __init__(self, s, u, sv, vt, k, a, eps, spec: "_Spectrum", like):
        self.u, self.sv, self.vt, self.k, self.a = u, sv, vt, k, a
        self.uk, self.vtk, svk = columns(s, u, k, 1), columns(s, vt, k, 0), columns(s, sv, k, 0)
        one = lambda: full(s, (k,), svk.dtype, 1)  # noqa: E731
        root = s.sqrt(svk) if a == 0.5 else None
        self.left_power = svk if a == 1.0 else (root if a == 0.5 else one())  # s^a
        self.right_power = one() if a == 1.0 else (root if a == 0.5 else svk)  # s^(1−a)
        # d(s^a)/ds and d(s^(1−a))/ds: 1/(2√s) for a = ½, as √s times the broadened 1/s where values
        # come near zero (finite at s = 0)
        half = None
        if a == 0.5:
            inverse = gap_coefficients(s, sv, eps, k, sums=False)[2] if spec.active else s.div(one(), svk)
            half = s.scale_real(s.mul(root, inverse), 0.5)
        self.left_slope = one() if a == 1.0 else half
        self.right_slope = one() if a == 0.0 else half
        if spec.zero_left.any() or spec.zero_right.any():  # exact zeros under a = ½: powers 0 or 1 there
            on_left, on_right = _constant(s, spec.zero_left, like), _constant(s, spec.zero_right, like)
            self.left_power, self.right_power = s.add(root, on_left), s.add(root, on_right)
            self.left_slope, self.right_slope = s.add(self.left_slope, on_right), s.add(self.right_slope, on_left)

    def weights(self, s, spec: "_Spectrum", like):
        """The repair's weights, in session ops of the values (so they differentiate): s^(a−1) and
        s^(−a) of the kept values (0 where s = 0, whose directions are lost), and the kept block's
        ML ∘ s_j^(a−1) and MR ∘ s_i^(−a) (ML: the pairs whose part goes on l, MR the others)."""
        k, a = self.k, self.a
        positive = _constant(s, spec.positive, like)
        values = columns(s, self.sv, k, 0)
        safe = s.add(values, _constant(s, ~spec.positive, like))  # 1 where s = 0
        over = lambda power: s.div(positive, power)  # noqa: E731
        root = over(s.sqrt(safe)) if a == 0.5 else None
        self.inverse_left = full(s, (k,), values.dtype, 1) if a == 1.0 else (root if a == 0.5 else over(safe))
        self.inverse_right = full(s, (k,), values.dtype, 1) if a == 0.0 else (root if a == 0.5 else over(safe))
        if a == 0.5:  # s^(a−1) = 1 where r holds v_jᴴ (a = 1), s^(−a) = 1 where l holds u_j (a = 0)
            self.inverse_left = s.add(self.inverse_left, _constant(s, spec.zero_right, like))
            self.inverse_right = s.add(self.inverse_right, _constant(s, spec.zero_left, like))
        share = _constant(s, spec.share_left, like)
        self.weight_left = s.mul(share, s.broadcast_in_dim(self.inverse_left, (k, k), [1]))
        self.weight_right = s.mul(s.sub(full(s, (k, k), values.dtype, 1), share),
                                  s.broadcast_in_dim(self.inverse_right, (k, k), [0]))


def _standard_jvp(s, f: _Factors, dx, x, sv, eps):
    """(dl, dr) by the SVD's JVP and the product rule: exact where the kept values are separated."""
    du, ds, dvt = svd_jvp(s, (dx,), (x,), (f.u, sv, f.vt), eps, checked=False)
    du, ds, dvt = (columns(s, dense(s, t), f.k, ax) for t, ax in ((du, 1), (ds, 0), (dvt, 0)))
    dl = _scaled(s, du, f.left_power, 1)
    if f.left_slope is not None:
        dl = s.add(dl, _scaled(s, f.uk, s.mul(f.left_slope, ds), 1))
    dr = _scaled(s, dvt, f.right_power, 0)
    if f.right_slope is not None:
        dr = s.add(dr, _scaled(s, f.vtk, s.mul(f.right_slope, ds), 0))
    return dl, dr


def _standard_vjp(s, f: _Factors, lb, rb, x, sv, eps):
    """x̄ by the product rule and the SVD's VJP: exact where the kept values are separated."""
    ub = _scaled(s, lb, f.left_power, 1)
    vb = _scaled(s, rb, f.right_power, 0)
    sb = None
    if f.left_slope is not None:
        sb = s.mul(f.left_slope, s.real(s.einsum([cj(s, f.uk), lb], "aj,aj->j")))
    if f.right_slope is not None:
        sb = s.accumulate(sb, s.mul(f.right_slope, s.real(s.einsum([cj(s, f.vtk), rb], "jb,jb->j"))))
    kk, k = f.u.shape[1], f.k
    if k == kk:
        cts = (ub, sb, vb)
    else:  # as blocks inside zeros, the form a slice's cotangent takes: the SVD's VJP then works on k columns
        (m, _), n = ub.shape, vb.shape[1]
        cts = (embedded(ub, (m, kk), ((0, m), (0, k))), None if sb is None else embedded(sb, (kk,), ((0, k),)),
               embedded(vb, (kk, n), ((0, k), (0, n))))
    return svd_vjp(s, cts, (x,), (f.u, sv, f.vt), (True,), eps, checked=False)[0]


def _outside_left(s, f: _Factors, y):
    """(I − UUᴴ) y, U all K thin left vectors."""
    return s.sub(y, s.einsum([f.u, s.einsum([cj(s, f.u), y], "ai,aj->ij")], "ai,ij->aj"))


def _outside_right(s, f: _Factors, z):
    """z (I − VVᴴ)."""
    return s.sub(z, s.einsum([s.einsum([z, cj(s, f.vt)], "ib,jb->ij"), f.vt], "ij,jb->ib"))


def _split_jvp(s, tangents, primals, outputs, *, k, absorb, derivative_eps):
    """(dl, dr): the standard JVP, plus where the kept values repeat or vanish the repair
    Lift(E(dx) − E(dl r + l dr)), E the kept block and the complements of P_k's tangent."""
    dx = tangents[0]
    x, u, sv, vt = primals
    if dx is None:
        return None, None
    a, eps = ABSORB[absorb], eps_of(s, derivative_eps)
    spec = _Spectrum(sv, k, a, eps, x.shape)
    _cut_warning(spec)
    f = _Factors(s, u, sv, vt, k, a, eps, spec, x)
    dx = dense(s, dx)
    if not spec.active:
        return _standard_jvp(s, f, dx, x, sv, eps)
    (m, n), kk = x.shape, u.shape[1]
    block = s.einsum([cj(s, f.uk), dx, cj(s, f.vtk)], "ai,ab,jb->ij")  # U_kᴴ dx V_k
    # Between repeated values the SVD's broadened 1/δ would turn this block into large rotations of the
    # factors, which cancel in l·r only to rounding: the standard part does without it, and the repair
    # puts it on the bond instead.
    ties = _constant(s, spec.ties, x)
    untied = s.sub(dx, s.einsum([f.uk, s.mul(lift_real(s, ties, block), block), f.vtk], "ai,ij,jb->ab"))
    dl, dr = _standard_jvp(s, f, untied, x, _snapped(s, sv, spec, x), eps)
    achieved = s.add(_scaled(s, s.einsum([cj(s, f.uk), dl], "ai,aj->ij"), f.right_power, 1),
                     _scaled(s, s.einsum([dr, cj(s, f.vtk)], "ib,jb->ij"), f.left_power, 0))
    defect = s.sub(block, achieved)
    f.weights(s, spec, x)
    weights = [f.weight_left, f.weight_right]
    dl = s.add(dl, s.einsum([f.uk, s.mul(lift_real(s, weights[0], defect), defect)], "ai,ij->aj"))
    dr = s.add(dr, s.einsum([s.mul(lift_real(s, weights[1], defect), defect), f.vtk], "ij,jb->ib"))
    if m > kk:
        rest = _outside_left(s, f, s.sub(s.einsum([dx, cj(s, f.vtk)], "ab,jb->aj"), _scaled(s, dl, f.right_power, 1)))
        dl = s.add(dl, _scaled(s, rest, f.inverse_left, 1))
    if n > kk:
        rest = _outside_right(s, f, s.sub(s.einsum([cj(s, f.uk), dx], "ai,ab->ib"), _scaled(s, dr, f.left_power, 0)))
        dr = s.add(dr, _scaled(s, rest, f.inverse_right, 0))
    if spec.lost(m, n, kk):
        _warn("factors that vanish at exact zero singular values were kept: the directions that move them have no "
              "tangent on l and r; drop the zeros (a cutoff above 0) or absorb them into one side")
    return dl, dr


def _gauge_response(l, r, lb, rb) -> tuple[float, float]:
    """D = lᴴl̄ − r̄rᴴ, the loss's response to a gauge on the bond (l → l(1 + X), r → (1 − X) r changes
    it by Re tr(Dᴴ X)), relative to its two terms: (‖D‖, ‖its anti-Hermitian part‖). The first is 0
    for a loss invariant under every invertible gauge, the second for one invariant under unitary ones."""
    lv, rv, lbv, rbv = (np.asarray(t.value().to_numpy()) for t in (l, r, lb, rb))
    first, second = lv.conj().T @ lbv, rbv @ rv.conj().T
    d, scale = first - second, max(np.linalg.norm(first) + np.linalg.norm(second), 1e-300)
    return float(np.linalg.norm(d) / scale), float(np.linalg.norm(d - d.conj().T) / (2 * scale))


def _split_vjp(s, cotangents, primals, outputs, needs, *, k, absorb, derivative_eps):
    """x̄: the standard VJP, plus where the kept values repeat or vanish the repair's transpose:
    x̄ = VJP_std(l̄ − G̃rᴴ, r̄ − lᴴG̃) + G̃, with G̃ the part of l·r's cotangent that the factors
    carry (exactly the loss's gradient in P_k's tangent, for a gauge-invariant loss)."""
    x, u, sv, vt = primals
    lb, rb = (None if c is None else dense(s, c) for c in cotangents)
    if lb is None and rb is None:
        return (None, None, None, None)
    a, eps = ABSORB[absorb], eps_of(s, derivative_eps)
    (m, n), kk = x.shape, u.shape[1]
    lb = s.zeros((m, k), x.dtype) if lb is None else lb
    rb = s.zeros((k, n), x.dtype) if rb is None else rb
    spec = _Spectrum(sv, k, a, eps, x.shape)
    _cut_warning(spec)
    if not spec.active:
        return (_standard_vjp(s, _Factors(s, u, sv, vt, k, a, eps, spec, x), lb, rb, x, sv, eps), None, None, None)
    u = s.bind(second_order_guard_p, u, x, sv, vt, derivative_eps=derivative_eps)[0]
    f = _Factors(s, u, sv, vt, k, a, eps, spec, x)
    response, unitary_response = _gauge_response(*outputs, lb, rb)
    invariant = response <= GAUGE_INVARIANT
    if spec.repeated and unitary_response > GAUGE_INVARIANT or spec.zeros and not invariant:
        named = ", ".join(f"{v:.6g}" for v in spec.repeated[:6]) if unitary_response > GAUGE_INVARIANT else "0"
        _warn(f"the loss is not invariant under a gauge on the bond (a unitary one, at repeated values; any, at zero "
              f"ones), and meets such singular values ({named}): it has no derivative along directions that split "
              "them, and gets the one along directions that keep them; make the loss depend on l and r only "
              "through l·r, or use svd")
    elif spec.lost(m, n, kk):
        _warn("factors that vanish at exact zero singular values were kept: the gradient's part along the directions "
              "that move them is not in the cotangents; drop the zeros (a cutoff above 0) or absorb them into one side")
    f.weights(s, spec, x)
    weights = [f.weight_left, f.weight_right]
    from_left = s.einsum([cj(s, f.uk), lb], "ai,aj->ij")
    from_right = s.einsum([rb, cj(s, f.vtk)], "ib,jb->ij")
    p = s.add(s.mul(lift_real(s, weights[0], from_left), from_left),
              s.mul(lift_real(s, weights[1], from_right), from_right))
    left_full = s.einsum([f.uk, p], "ai,ij->aj")  # U_k P + (I − UUᴴ) L
    if m > kk:
        left_full = s.add(left_full, _outside_left(s, f, _scaled(s, lb, f.inverse_left, 1)))
    right_outside = None  # R (I − VVᴴ)
    if n > kk:
        right_outside = _outside_right(s, f, _scaled(s, rb, f.inverse_right, 0))
    right_full = s.einsum([p, f.vtk], "ij,jb->ib")
    right_full = right_full if right_outside is None else s.add(right_full, right_outside)
    if invariant:  # Ā = G̃ + the couplings of kept and discarded values, from the same cotangents
        if k < kk:
            left_couple, right_couple = _discarded_coupling(s, f, sv, eps, lb, rb, spec, x)
            left_full = s.add(left_full, left_couple)
            right_outside = s.accumulate(right_outside, right_couple)
        return (_product(s, f, left_full, right_outside), None, None, None)
    left_rest = s.sub(lb, _scaled(s, left_full, f.right_power, 1))
    right_rest = s.sub(rb, _scaled(s, right_full, f.left_power, 0))
    # The rest's kept block between repeated values is undetermined (the warning above): the SVD's
    # broadened 1/δ would magnify its rounding, so it is dropped there.
    drop = _constant(s, spec.ties, x)
    in_left = s.einsum([cj(s, f.uk), left_rest], "ai,aj->ij")
    left_rest = s.sub(left_rest, s.einsum([f.uk, s.mul(lift_real(s, drop, in_left), in_left)], "ai,ij->aj"))
    in_right = s.einsum([right_rest, cj(s, f.vtk)], "ib,jb->ij")
    right_rest = s.sub(right_rest, s.einsum([s.mul(lift_real(s, drop, in_right), in_right), f.vtk], "ij,jb->ib"))
    rest = _standard_vjp(s, f, left_rest, right_rest, x, _snapped(s, sv, spec, x), eps)
    return (s.add(rest, _product(s, f, left_full, right_outside)), None, None, None)


def _snapped(s, sv, spec: _Spectrum, like):
    """The values with each run of repeated ones made exactly equal (a constant shift: the same
    derivative)."""
    return s.add(sv, _constant(s, spec.snap, like)) if spec.snap.any() else sv


def _product(s, f: _Factors, left_full, right_outside):
    """left_full V_kᴴ + U_k right_outside, as one product."""
    if right_outside is None:
        return s.einsum([left_full, f.vtk], "aj,jb->ab")
    return s.einsum([s.concatenate([left_full, f.uk], 1), s.concatenate([f.vtk, right_outside], 0)], "ai,ib->ab")


def _discarded_coupling(s, f: _Factors, sv, eps, lb, rb, spec, x):
    """(U_d M_dk, M_kd V_dᴴ): how P_k turns kept into discarded directions, for a gauge-invariant
    loss's cotangents: M_dk = (s_j² Q + s_i s_j Q̃ᴴ)/(s_j² − s_i²), M_kd likewise with Q and Q̃ swapped,
    Q = U_dᴴ G V_k and Q̃ = U_kᴴ G V_d read off l̄ and r̄ (i discarded, j kept; finite at a gap)."""
    kk, k = f.u.shape[1], f.k
    unit, reciprocal = exact_unit(s, spectrum_scale(s, sv))
    ratio = times(s, sv, reciprocal)  # s / c, c the power of two nearest s₁
    minus, plus, _ = gap_coefficients(s, ratio, eps, k)
    inverse_difference = s.slice(s.mul(minus, plus), SliceConfig([k, 0], [kk, k]))  # 1/(x_j² − x_i²): d × k
    kept, dropped = columns(s, ratio, k, 0), s.slice(ratio, SliceConfig([k], [kk]))
    outer = lambda a, b: s.mul(s.broadcast_in_dim(a, (kk - k, k), [0]), s.broadcast_in_dim(b, (kk - k, k), [1]))  # noqa: E731
    same = s.mul(outer(full(s, (kk - k,), kept.dtype, 1), s.mul(kept, kept)), inverse_difference)
    cross = s.mul(outer(dropped, kept), inverse_difference)
    ud = s.slice(f.u, SliceConfig([0, k], [f.u.shape[0], kk]))
    vtd = s.slice(f.vt, SliceConfig([k, 0], [kk, f.vt.shape[1]]))
    q = _scaled(s, s.einsum([cj(s, ud), lb], "ai,aj->ij"), f.inverse_left, 1)  # d × k
    q_t = _scaled(s, s.einsum([rb, cj(s, vtd)], "ib,jb->ij"), f.inverse_right, 0)  # k × d
    q_t_h = s.transpose(cj(s, q_t), (1, 0))
    m_dk = s.add(s.mul(lift_real(s, same, q), q), s.mul(lift_real(s, cross, q), q_t_h))
    same_t, cross_t = s.transpose(same, (1, 0)), s.transpose(cross, (1, 0))
    m_kd = s.add(s.mul(lift_real(s, same_t, q_t), q_t), s.mul(lift_real(s, cross_t, q_t), s.transpose(cj(s, q), (1, 0))))
    return s.einsum([ud, m_dk], "ai,ij->aj"), s.einsum([m_kd, vtd], "ji,ib->jb")


def _guard_jvp(s, tangents, primals, outputs, *, derivative_eps):
    """u's tangent, as it is; and a warning where x's splits repeated values: what the repair's
    derivative gets there is only the part of the direction that keeps them."""
    u, x, sv, vt = primals
    if tangents[1] is not None:
        degenerate.svd_tangent("split", u, sv, vt, dense(s, tangents[1]), eps_of(s, derivative_eps), within_split=True)
    return (tangents[0],)


# Where split's VJP repairs, its u goes through this identity, which sees x's tangent when the VJP
# itself is differentiated forward (forward over reverse), and tells whether that tangent splits
# repeated values, where the repair's own derivative (through the SVD's) is only the kept part's.
second_order_guard_p = RULES.define(
    "split_second_order_guard",
    lambda u, x, sv, vt, *, derivative_eps: (u,),
    lambda u, x, sv, vt, *, derivative_eps: (u,),
    _guard_jvp,
    lambda s, cotangents, primals, outputs, needs, *, derivative_eps: (cotangents[0], None, None, None),
)


split_p = RULES.define(
    "split",
    _split_abstract,
    _split_impl,
    _split_jvp,
    _split_vjp,
    cost=lambda in_avals, out_avals, params: float(sum(np.prod(a.shape) for a in out_avals)),
    dense_only=True,
)
