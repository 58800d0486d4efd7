"""2D Ising model (J = 1, no field) by Levin–Nave TRG, staged, with reverse-mode AD.

The twin of tenferro-rs's eager Ising bin, line by line on tenferro_py's API:
each RG step is its own small eager graph on a fresh leaf (``variable_from``
cuts the trace), and the reverse sweep chains the steps' pullbacks by hand,
newest step first. Prints lnZ/N, u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ²
(a central difference of the AD gradient), with the f64 bits in hex so two
implementations compare to the last bit.

Usage: python examples/ising_trg.py [--compare] [chi=16] [steps=20] [width=1] [h=1e-5] [beta ...]
(--compare: then print the errors against Onsager and SPEC's reference table)
"""

from __future__ import annotations

import math
import struct
import sys
import time
from typing import Sequence

import tenferro_py as tf
from tenferro_py import AdContext, CpuEngine, EagerRuntime, EagerSession, EagerTensor, Pool, SliceConfig, Tensor

DEFAULT_BETAS = (0.3, 0.4, 0.44, 0.5, 0.6)
STRUCTURAL_RANKS = (2, 4, 4)  # ranks of the first three steps' matrices; beyond them s = 0 exactly
USAGE = "usage: python examples/ising_trg.py [--compare] [chi=16] [steps=20] [width=1] [h=1e-5] [beta ...]"


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


def ad_context() -> AdContext:
    """The context of the Rust bin: core rules plus linalg's and einsum's."""
    rules = tf.linalg.semantic_ad_rules().merge(tf.einsum.semantic_ad_rules())
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


def _half(s: EagerSession, m: EagerTensor, d: int, k: int) -> tuple[EagerTensor, EagerTensor]:
    """SVD of m (D² × D²) kept to k: (U_k √s_k, V_k √s_k), each reshaped to (D, D, k)."""
    u, sv, vt = s.svd(m)
    rows = d * d
    root = s.broadcast_in_dim(s.sqrt(s.slice(sv, SliceConfig([0], [k]))), (rows, k), (1,))
    left = s.mul(s.slice(u, SliceConfig([0, 0], [rows, k])), root)
    right = s.mul(s.transpose(s.slice(vt, SliceConfig([0, 0], [k, rows])), (1, 0)), root)
    return s.reshape(left, (d, d, k)), s.reshape(right, (d, d, k))


def step(s: EagerSession, t: EagerTensor, k: int) -> tuple[EagerTensor, EagerTensor]:
    """One TRG step: (T', ln‖T‖) with T' of bond dimension k built from T / ‖T‖."""
    d = t.shape[0]
    norm = s.sqrt(s.reduce_sum(s.mul(t, t)))
    t = s.div(t, s.broadcast_in_dim(norm, t.shape, ()))
    ma = s.reshape(s.transpose(t, (2, 1, 0, 3)), (d * d, d * d))
    mb = s.reshape(s.transpose(t, (3, 2, 1, 0)), (d * d, d * d))
    s1, s3 = _half(s, ma, d, k)
    s2, s4 = _half(s, mb, d, k)
    return s.einsum([s1, s2, s3, s4], "war,abu,bgl,gwd->ruld"), s.log(norm)


def log_trace(s: EagerSession, t: EagerTensor) -> EagerTensor:
    """ln tr T: the torus closed on the last tensor."""
    return s.log(s.einsum([t], "xyxy->"))


def value_and_grad(
    beta: float, ks: Sequence[int], engine: CpuEngine | None = None, runtime: EagerRuntime | None = None
) -> tuple[float, float]:
    """(lnZ/N, d(lnZ/N)/dβ) for N = 2^n sites, n = len(ks), by the staged sweep."""
    rt = runtime if runtime is not None else EagerRuntime.with_ad_context(ad_context())
    eng = engine if engine is not None else CpuEngine.serial()
    n = len(ks)
    b = rt.variable_from(Tensor.scalar(beta))
    t0 = rt.with_eager_session(eng, lambda s: initial(s, b))

    # Forward: each step on a fresh leaf; keep (leaf, T_{i+1}, ln‖T_i‖).
    stages = []
    acc = 0.0
    t = t0
    for i, k in enumerate(ks):
        leaf = rt.variable_from(t)
        t_next, ln_norm = rt.with_eager_session(eng, lambda s: step(s, leaf, k))
        stages.append((leaf, t_next, ln_norm))
        acc += 2.0 ** (n - i) * ln_norm.item()
        t = t_next
    last = rt.variable_from(t)
    ln_tr = rt.with_eager_session(eng, lambda s: log_trace(s, last))
    lnz = (acc + ln_tr.item()) / 2.0**n

    # Reverse: newest step first; per step one vjp through T_{i+1}, one through ln‖T_i‖.
    with rt.no_grad():
        ct = rt.vjp(eng, ln_tr, last, Tensor.scalar(2.0**-n))
        for i in reversed(range(n)):
            leaf, t_next, ln_norm = stages[i]
            through_t = rt.vjp(eng, t_next, leaf, ct)
            through_norm = rt.vjp(eng, ln_norm, leaf, Tensor.scalar(2.0 ** (n - i) * 2.0**-n))
            ct = rt.with_eager_session(eng, lambda s: s.add(through_t, through_norm))
        grad = rt.vjp(eng, t0, b, ct)
    return lnz, grad.item()


def hex_bits(x: float) -> str:
    """The 16 hex digits of a float64's bits."""
    return struct.pack(">d", x).hex()


class UsageError(Exception):
    """A bad command-line argument; its message names the argument and what is allowed."""


def _number(name: str, text: str, kind: type, allowed: str, ok) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise UsageError(f"{name} must be {allowed}, got {text!r}") from None
    if not ok(value):
        raise UsageError(f"{name} must be {allowed}, got {text!r}")
    return value


def parse_args(argv: Sequence[str]) -> dict:
    """chi, steps, width, h, betas and compare from the Rust bin's positional arguments."""
    args = list(argv)
    compare = "--compare" in args
    args = [a for a in args if a != "--compare"]
    for a in args:
        if a.startswith("--"):
            raise UsageError(f"unknown option {a!r}; allowed: --help, --compare")
    positive_int = ("an integer >= 1", lambda v: v >= 1)
    positive_float = ("a finite number > 0", lambda v: math.isfinite(v) and v > 0)
    names = [("chi", 16, int, *positive_int), ("steps", 20, int, *positive_int), ("width", 1, int, *positive_int),
             ("h", 1e-5, float, *positive_float)]
    out: dict = {"compare": compare}
    for (name, default, kind, allowed, ok), text in zip(names, args + [None] * len(names)):
        out[name] = default if text is None else _number(name, text, kind, allowed, ok)
    out["betas"] = [_number("beta", a, float, *positive_float) for a in args[len(names):]] or list(DEFAULT_BETAS)
    return out


def main(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        print(USAGE)
        return 0
    try:
        cfg = parse_args(argv)
    except UsageError as err:
        print(f"ising_trg.py: {err}", file=sys.stderr)
        return 2
    ks = schedule(cfg["chi"], cfg["steps"])
    engine = CpuEngine(Pool.builder().threads(cfg["width"]).build())
    h = cfg["h"]
    print(f"tenferro_py {tf.__version__} eager staged chi={cfg['chi']} steps={cfg['steps']} "
          f"width={cfg['width']} h={h:g} ks={ks}")
    results = {}
    for beta in cfg["betas"]:
        lnz, grad = value_and_grad(beta, ks, engine)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            lnz, grad = value_and_grad(beta, ks, engine)
            times.append(time.perf_counter() - start)
        g_plus = value_and_grad(beta + h, ks, engine)[1]
        g_minus = value_and_grad(beta - h, ks, engine)[1]
        c = beta * beta * (g_plus - g_minus) / (2 * h)
        results[beta] = (lnz, -grad, c)
        print(f"beta={beta:.4f} lnZ/N={lnz:.15f} u={-grad:.15f} c={c:.12f} | value_and_grad {min(times) * 1e3:.1f} ms")
        print(f" hex lnZ/N={hex_bits(lnz)} grad={hex_bits(grad)} c={hex_bits(c)}", flush=True)
    if cfg["compare"]:
        from compare import is_reference_setting, report

        report("this run", results, is_reference_setting(cfg["chi"], cfg["steps"], h))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
