"""The 2D Ising model (J = 1, no field) by Levin–Nave TRG, staged, with reverse- and forward-mode AD.

The twin of tenferro-rs's eager Ising bin, line by line on tenferro_py's API (SPEC §4): each RG
step is its own small eager graph on a fresh leaf (``variable_from`` cuts the trace there), and
the reverse sweep chains the steps' pullbacks by hand, newest step first, two vjps per step.
``program`` drives the same ``initial``, ``step`` and ``log_trace`` with
:class:`tenferro_py.staged.Program`, bit for bit the same. In a few lines::

    from tenferro_py.models import trg
    r = trg.thermodynamics(0.4, trg.schedule(16, 20))   # r.lnz, r.u, r.c

c comes by forward over reverse (``value_grad_and_curvature``); ``difference_curvature`` gives c
by a central difference of the gradient instead, with a warning where truncated TRG's lnZ/N(β)
jumps inside [β − h, β + h] (a crossing of kept and discarded singular values).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple, Sequence

from .. import einsum, linalg, staged
from ..engine import CpuEngine
from ..ops.structural import SliceConfig
from ..ad_context import AdContext
from ..runtime import EagerRuntime
from ..session import EagerSession
from ..tape import EagerTensor, TangentMemo
from ..tensor import Tensor

__all__ = [
    "BETA_RANGE", "DEFAULT_BETAS", "SVD_METHODS", "Forward", "Thermo", "ad_context", "crossing_warning",
    "difference_curvature", "difference_in_range", "forward", "in_beta_range", "initial", "log_trace", "program",
    "schedule", "step", "thermodynamics", "trapezoid_tolerance", "truncation_gaps", "value_and_grad",
    "value_grad_and_curvature",
]

DEFAULT_BETAS = (0.3, 0.4, 0.44, 0.5, 0.6)
BETA_RANGE = (1e-14, 8.0)
"""The βs where lnZ/N, u and c are finite: outside, double precision no longer resolves the first
step's spectrum (how the bounds were measured: docs/sweep.md). χ = 2 over many steps is not finite
even inside, at high temperature."""
STRUCTURAL_RANKS = (2, 4, 4)  # ranks of the first three steps' matrices; beyond them s = 0 exactly
SVD_METHODS = ("full", "krylov")


def schedule(chi: int, steps: int) -> list[int]:
    """Kept bond dimension per step: k_i = min(D_i², χ, structural rank), D_{i+1} = k_i."""
    ks, d = [], 2
    for i in range(steps):
        k = min(d * d, chi)
        if i < len(STRUCTURAL_RANKS):
            k = min(k, STRUCTURAL_RANKS[i])
        ks.append(k)
        d = k
    return ks


def in_beta_range(beta: float) -> bool:
    """Whether β is in BETA_RANGE, where lnZ/N, u and c are finite."""
    return BETA_RANGE[0] <= beta <= BETA_RANGE[1]


def difference_in_range(beta: float, h: float) -> bool:
    """Whether c by central difference at β, which evaluates β − h and β + h, stays in BETA_RANGE."""
    return in_beta_range(beta - h) and in_beta_range(beta + h)


def ad_context() -> AdContext:
    """The context of the Rust bin: core rules plus linalg's and einsum's."""
    rules = linalg.semantic_ad_rules().merge(einsum.semantic_ad_rules())
    return AdContext.builder().with_semantic_extension_rules(rules).build()


def _const(s: EagerSession, rows: list[list[float]]) -> EagerTensor:
    return s.constant_from(Tensor.from_numpy(rows))


def initial(s: EagerSession, beta: EagerTensor) -> EagerTensor:
    """T₀[u,l,d,r] = Σ_σ q[σ,u] q[σ,l] q[σ,d] q[σ,r], q = [[c, s], [c, −s]], c = √cosh β, s = √sinh β."""
    e_plus, e_minus = s.exp(beta), s.exp(s.neg(beta))
    c = s.sqrt(s.scale_real(s.add(e_plus, e_minus), 0.5))
    sh = s.sqrt(s.scale_real(s.sub(e_plus, e_minus), 0.5))
    q = s.add(
        s.mul(s.broadcast_in_dim(c, (2, 2), ()), _const(s, [[1.0, 0.0], [1.0, 0.0]])),
        s.mul(s.broadcast_in_dim(sh, (2, 2), ()), _const(s, [[0.0, 1.0], [0.0, -1.0]])),
    )
    return s.einsum([q, q, q, q], "su,sl,sd,sr->uldr")


def _half(
    s: EagerSession, factors: tuple[EagerTensor, EagerTensor, EagerTensor], d: int, k: int
) -> tuple[EagerTensor, EagerTensor]:
    """An SVD (U, s, Vt) of a D² × D² matrix kept to k: (U_k √s_k, V_k √s_k), each reshaped to (D, D, k)."""
    u, sv, vt = factors
    rows = d * d
    root = s.broadcast_in_dim(s.sqrt(s.slice(sv, SliceConfig([0], [k]))), (rows, k), (1,))
    left = s.mul(s.slice(u, SliceConfig([0, 0], [rows, k])), root)
    right = s.mul(s.transpose(s.slice(vt, SliceConfig([0, 0], [k, rows])), (1, 0)), root)
    return s.reshape(left, (d, d, k)), s.reshape(right, (d, d, k))


def step(
    s: EagerSession, t: EagerTensor, k: int, spectra: list | None = None, svd: str = "full"
) -> tuple[EagerTensor, EagerTensor]:
    """One TRG step: (T', ln‖T‖) with T' of bond dimension k built from T / ‖T‖.

    ``svd``: each SVD's k leading triplets from the full SVD or the block Krylov method
    (docs/truncated.md). ``spectra``, when given, receives the singular values of both
    SVDs (all of them with "full", the k kept with "krylov", which computes only those).
    """
    d = t.shape[0]
    norm = s.sqrt(s.reduce_sum(s.mul(t, t)))
    t = s.div(t, s.broadcast_in_dim(norm, t.shape, ()))
    ma = s.reshape(s.transpose(t, (2, 1, 0, 3)), (d * d, d * d))
    mb = s.reshape(s.transpose(t, (3, 2, 1, 0)), (d * d, d * d))
    if svd == "full":
        svd_a, svd_b = s.svd(ma), s.svd(mb)  # independent: on a wide engine they run side by side
    else:
        svd_a, svd_b = s.svd(ma, k=k, method="krylov"), s.svd(mb, k=k, method="krylov")
    if spectra is not None:
        spectra.extend((svd_a[1], svd_b[1]))
    s1, s3 = _half(s, svd_a, d, k)
    s2, s4 = _half(s, svd_b, d, k)
    return s.einsum([s1, s2, s3, s4], "war,abu,bgl,gwd->ruld"), s.log(norm)


def log_trace(s: EagerSession, t: EagerTensor) -> EagerTensor:
    """ln tr T: the torus closed on the last tensor."""
    return s.log(s.einsum([t], "xyxy->"))


class Forward(NamedTuple):
    """The staged forward: T₀, per step (fresh leaf T_i, T_{i+1}, ln‖T_i‖), the last leaf and ln tr."""

    t0: EagerTensor
    stages: list[tuple[EagerTensor, EagerTensor, EagerTensor]]
    last: EagerTensor
    ln_tr: EagerTensor
    lnz: float


def forward(
    rt: EagerRuntime, eng: CpuEngine, b: EagerTensor, ks: Sequence[int], spectra: list | None = None,
    svd: str = "full",
) -> Forward:
    """T₀ from β, then each step on a fresh leaf (the trace is cut there), then ln tr; lnZ/N."""
    n = len(ks)
    t0 = rt.with_eager_session(eng, lambda s: initial(s, b))
    stages = []
    acc = 0.0
    t = t0
    for i, k in enumerate(ks):
        leaf = rt.variable_from(t)
        t_next, ln_norm = rt.with_eager_session(eng, lambda s: step(s, leaf, k, spectra, svd))
        stages.append((leaf, t_next, ln_norm))
        acc += 2.0 ** (n - i) * ln_norm.item()
        t = t_next
    last = rt.variable_from(t)
    ln_tr = rt.with_eager_session(eng, lambda s: log_trace(s, last))
    return Forward(t0, stages, last, ln_tr, (acc + ln_tr.item()) / 2.0**n)


def _setup(runtime: EagerRuntime | None, engine: CpuEngine | None) -> tuple[EagerRuntime, CpuEngine]:
    rt = runtime if runtime is not None else EagerRuntime.with_ad_context(ad_context())
    return rt, engine if engine is not None else CpuEngine.serial()


def value_and_grad(
    beta: float,
    ks: Sequence[int],
    engine: CpuEngine | None = None,
    runtime: EagerRuntime | None = None,
    spectra: list | None = None,
    svd: str = "full",
) -> tuple[float, float]:
    """(lnZ/N, d(lnZ/N)/dβ) for N = 2^n sites, n = len(ks), by the staged sweep (``svd``: "full" or
    "krylov", how each step's k leading triplets are computed)."""
    rt, eng = _setup(runtime, engine)
    n = len(ks)
    b = rt.variable_from(Tensor.scalar(beta))
    fw = forward(rt, eng, b, ks, spectra, svd)
    # Reverse: newest step first; per step one vjp through T_{i+1}, one through ln‖T_i‖.
    with rt.no_grad():
        ct = rt.vjp(eng, fw.ln_tr, fw.last, Tensor.scalar(2.0**-n))
        for i in reversed(range(n)):
            leaf, t_next, ln_norm = fw.stages[i]
            through_t = rt.vjp(eng, t_next, leaf, ct)
            through_norm = rt.vjp(eng, ln_norm, leaf, Tensor.scalar(2.0 ** (n - i) * 2.0**-n))
            ct = rt.with_eager_session(eng, lambda s: s.add(through_t, through_norm))
        grad = rt.vjp(eng, fw.t0, b, ct)
    return fw.lnz, grad.item()


def value_grad_and_curvature(
    beta: float, ks: Sequence[int], engine: CpuEngine | None = None, runtime: EagerRuntime | None = None,
    svd: str = "full",
) -> tuple[float, float, float]:
    """(lnZ/N, d/dβ, d²/dβ²) by forward-over-reverse through the staged sweep, step by step.

    A tangent of each T_i comes from the staged forward (Ṫ_{i+1} = jvp of the step along Ṫ_i,
    its tangents kept in a memo); each step's two vjps are taken with their jvp along (Ṫ_i,
    tangent of the running cotangent) in one pass (``vjp_jvp``), which gives the tangent of
    the next cotangent; then to β. No finite difference, and no graph longer than one step.
    """
    rt, eng = _setup(runtime, engine)
    n = len(ks)
    b = rt.variable_from(Tensor.scalar(beta))
    fw = forward(rt, eng, b, ks, svd=svd)
    memos = [TangentMemo() for _ in fw.stages]  # each step's tangents, lent to the jvp of its pullback
    with rt.no_grad():  # tangents of T₀ … T_n along dβ = 1
        t_dots = [rt.jvp(eng, fw.t0, b, Tensor.scalar(1.0))]
        for (leaf, t_next, _), memo in zip(fw.stages, memos):
            t_dots.append(rt.jvp(eng, t_next, leaf, t_dots[-1], memo=memo))
    with rt.no_grad():
        ct, ct_dot = rt.vjp_jvp(eng, fw.ln_tr, fw.last, Tensor.scalar(2.0**-n), t_dots[n], None)
        for i in reversed(range(n)):
            leaf, t_next, ln_norm = fw.stages[i]
            memo = memos.pop()
            through_t, through_t_dot = rt.vjp_jvp(eng, t_next, leaf, ct, t_dots[i], ct_dot, memo=memo)
            coef = Tensor.scalar(2.0 ** (n - i) * 2.0**-n)
            through_norm, through_norm_dot = rt.vjp_jvp(eng, ln_norm, leaf, coef, t_dots[i], None, memo=memo)
            ct, ct_dot = rt.with_eager_session(
                eng, lambda s: (s.add(through_t, through_norm), s.add(through_t_dot, through_norm_dot))
            )
        grad, curvature = rt.vjp_jvp(eng, fw.t0, b, ct, Tensor.scalar(1.0), ct_dot)
    return fw.lnz, grad.item(), curvature.item()


def program(ks: Sequence[int], svd: str = "full") -> staged.Program:
    """The same TRG as a :class:`tenferro_py.staged.Program`: ``initial``, one ``step`` per k, ``log_trace``.

    Its sweeps give bit for bit what ``value_and_grad`` and ``value_grad_and_curvature`` give,
    and add checkpointing (``checkpoint="stage"`` or ``"sqrt"``) and ``value_and_jvp``.
    """
    n = len(ks)
    stages = [staged.Stage(partial(step, k=k, svd=svd), 2.0**-i) for i, k in enumerate(ks)]
    return staged.Program(initial, stages, log_trace, 2.0**-n)


class Thermo(NamedTuple):
    """Per site: lnZ/N, the internal energy u = −d(lnZ/N)/dβ and the specific heat c = β² d²(lnZ/N)/dβ²."""

    lnz: float
    u: float
    c: float


def thermodynamics(beta: float, ks: Sequence[int], engine: CpuEngine | None = None, svd: str = "full") -> Thermo:
    """lnZ/N, u and c at β on a torus of N = 2^len(ks) sites, all by AD through the staged sweep."""
    lnz, grad, curvature = value_grad_and_curvature(beta, ks, engine, svd=svd)
    return Thermo(lnz, -grad, beta * beta * curvature)


def trapezoid_tolerance(h: float) -> float:
    """How far lnZ(β+h) − lnZ(β−h) may differ from h (g(β+h) + g(β−h)) where lnZ/N is smooth.

    The trapezoid rule errs by (2h)³/12 · |d³lnZ/dβ³|; allowing |d³lnZ/dβ³| up to ~10⁴ and
    rounding of order 1e-13 leaves a margin of orders of magnitude below the jumps that
    singular-value crossings cause (1e-9 at β = 0.44, χ = 16).
    """
    return 1e-13 + 1e3 * h**3


def truncation_gaps(spectra: Sequence[EagerTensor], ks: Sequence[int]) -> list[float]:
    """Per step, the smallest relative gap (s_k − s_{k+1}) / s_k at its truncation (inf: nothing cut)."""
    gaps = []
    for i, k in enumerate(ks):
        gap = math.inf
        for sv in spectra[2 * i : 2 * i + 2]:
            values = sv.value().to_numpy()
            if len(values) > k and values[k - 1] > 0:
                gap = min(gap, (values[k - 1] - values[k]) / values[k - 1])
        gaps.append(gap)
    return gaps


def crossing_warning(
    beta: float,
    h: float,
    ks: Sequence[int],
    below: tuple[float, float, list],
    above: tuple[float, float, list],
    c: float,
    c_ad: float | None,
) -> str | None:
    """A warning line when c by difference over [β − h, β + h] cannot be trusted, else None.

    ``below`` and ``above`` are (lnZ/N, gradient, spectra) at β ∓ h. lnZ/N must match the
    trapezoid of its gradients, and c must match c_ad where that is known; the step named is
    the one whose kept and discarded singular values come closest.
    """
    (lnz_m, g_m, spectra_m), (lnz_p, g_p, spectra_p) = below, above
    jump = (lnz_p - lnz_m) - h * (g_p + g_m)
    disagree = c_ad is not None and abs(c - c_ad) > 1e-6 * max(1.0, abs(c_ad))
    if abs(jump) <= trapezoid_tolerance(h) and not disagree:
        return None
    gaps = [min(a, b) for a, b in zip(truncation_gaps(spectra_m, ks), truncation_gaps(spectra_p, ks))]
    where = ""
    if any(math.isfinite(g) for g in gaps):
        i = min(range(len(gaps)), key=gaps.__getitem__)
        where = f"; kept and discarded singular values closest at step {i} (relative gap {gaps[i]:.1e})"
    trust = "trust c_ad" if c_ad is not None else "use c_ad (--c ad or both)"
    return (
        f" warning: lnZ/N is not smooth on [beta-h, beta+h]: it jumps by {jump:.1e} against the trapezoid of "
        f"its gradients (smooth: <= {trapezoid_tolerance(h):.0e}){where}; c by difference is unreliable here, {trust}"
    )


def difference_curvature(
    beta: float, h: float, ks: Sequence[int], engine: CpuEngine | None = None, svd: str = "full",
    c_ad: float | None = None,
) -> tuple[float, str | None]:
    """(c, warning): c = β² (g(β+h) − g(β−h)) / (2h), g the AD gradient, and ``crossing_warning``'s line
    (None where lnZ/N is smooth on [β − h, β + h] and c agrees with ``c_ad``, when given)."""
    spectra_m: list = []
    spectra_p: list = []
    below = (*value_and_grad(beta - h, ks, engine, spectra=spectra_m, svd=svd), spectra_m)
    above = (*value_and_grad(beta + h, ks, engine, spectra=spectra_p, svd=svd), spectra_p)
    c = beta * beta * (above[1] - below[1]) / (2 * h)
    return c, crossing_warning(beta, h, ks, below, above, c, c_ad)
