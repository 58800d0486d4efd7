"""The 4-operand einsum of HOTRG's update, alone: ours against JAX jit, forward and value-and-gradient.

``"acx,aruk,cskd,rsy->xyud"`` at χ = D = n (16 by default: 6.0e8 flops forward), random float64
operands, one thread for everyone (bench/figures.py). Timed interleaved, medians:

- (np)    opt_einsum + NumPy forward, the expression built once (no path search timed): a floor;
- (jf)    JAX ``jit(einsum)``;
- (of)    ours: ``tnp.einsum`` in a ``tnp.session()``;
- (jvg)   JAX ``jit(value_and_grad(L, argnums=(0, 1, 2, 3)))``, L = ⟨einsum(…), W⟩ with W a random
          tensor passed as an argument (so XLA cannot fold it);
- (ovg)   ours: ``tnp.value_and_grad`` of the same L.

JAX's compile time is reported apart. Times are wall, user and system CPU (bench/figures.py). Checks: ours against JAX, value and every gradient to 1e-12
relative. Also printed, deterministic whatever the load: our GEMM calls and the elements our
pairwise steps copy (operands read as matrices and results put in order), forward and
value-and-gradient, the peak memory of our value-and-gradient (tracemalloc) and XLA's temporary
buffers (its memory analysis).

Usage: python bench/einsum4.py [--n 16] [--repeats 15] [--no-write] [--label L]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc

import figures  # noqa: F401  (first: one XLA thread)
import jax
import jax.numpy as jnp
import numpy as np
import opt_einsum
from threadpoolctl import threadpool_limits

import tenferro_py.numpy as tnp
from tenferro_py import contraction

jax.config.update("jax_enable_x64", True)

SPEC = "acx,aruk,cskd,rsy->xyud"


def operands(n: int) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(0)
    shapes = [(n, n, n), (n, n, n, n), (n, n, n, n), (n, n, n)]
    return [rng.standard_normal(s) for s in shapes], rng.standard_normal((n, n, n, n))


def ours_forward(xs: list[np.ndarray]) -> np.ndarray:
    with tnp.session():
        return np.asarray(tnp.einsum(SPEC, *xs).tensor.value().to_numpy())


def ours_value_and_grad(w: np.ndarray):
    return tnp.value_and_grad(lambda *xs: tnp.sum(tnp.einsum(SPEC, *xs) * w), argnums=(0, 1, 2, 3))


def jax_programs(xs: list[np.ndarray], w: np.ndarray):
    """(forward, value_and_grad) compiled, and the seconds each took to trace and compile."""
    js, jw = [jnp.asarray(x) for x in xs], jnp.asarray(w)
    start = time.perf_counter()
    fwd = jax.jit(lambda *ys: jnp.einsum(SPEC, *ys)).lower(*js).compile()
    t_fwd = time.perf_counter() - start
    start = time.perf_counter()
    vg = jax.jit(jax.value_and_grad(lambda ys, v: jnp.sum(jnp.einsum(SPEC, *ys) * v))).lower(js, jw).compile()
    t_vg = time.perf_counter() - start
    return js, jw, fwd, vg, t_fwd, t_vg


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/einsum4.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=16, help="every index's size (default 16)")
    p.add_argument("--repeats", type=int, default=15, help="interleaved rounds (default 15)")
    p.add_argument("--no-write", action="store_true", help="print only, write nothing to bench/results/")
    p.add_argument("--label", help="a suffix for the results file (e.g. the settings measured)")
    args = p.parse_args(argv)
    xs, w = operands(args.n)
    out = figures.header("bench/einsum4.py")
    with threadpool_limits(1):
        js, jw, jfwd, jvg, t_fwd, t_vg = jax_programs(xs, w)
        expression = opt_einsum.contract_expression(SPEC, *(x.shape for x in xs))
        ovg = ours_value_and_grad(w)
        value, grads = ovg(*xs)
        jvalue, jgrads = jvg(js, jw)
        errors = [abs(float(jvalue) - float(value)) / abs(float(jvalue))]
        errors += [float(np.max(np.abs(np.asarray(g) - h)) / np.max(np.abs(g))) for g, h in zip(jgrads, grads)]
        forward_error = float(np.max(np.abs(np.asarray(jfwd(*js)) - ours_forward(xs))))
        runs = {
            "np": lambda: expression(*xs),
            "jf": lambda: jfwd(*js).block_until_ready(),
            "of": lambda: ours_forward(xs),
            "jvg": lambda: jax.block_until_ready(jvg(js, jw)),
            "ovg": lambda: ovg(*xs),
        }
        med = figures.interleaved(runs, args.repeats)
        with contraction.counting() as fwd_count:
            ours_forward(xs)
        with contraction.counting() as vg_count:
            ovg(*xs)
        os_ours, os_jax = figures.os_cost(lambda: ovg(*xs)), figures.os_cost(lambda: jax.block_until_ready(jvg(js, jw)))
        tracemalloc.start()
        ovg(*xs)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    flops = 2 * args.n**7 + 4 * args.n**6
    xla_temp = jvg.memory_analysis().temp_size_in_bytes
    ok = max(errors) <= 1e-12 and forward_error <= 1e-10 * np.max(np.abs(ours_forward(xs)))
    out += [
        f"# {SPEC} at n = {args.n} ({flops:.2e} flops forward); medians of {args.repeats} interleaved rounds, ms",
        f"# JAX trace+compile (apart): forward {t_fwd * 1e3:.0f} ms, value_and_grad {t_vg * 1e3:.0f} ms",
        f"ms, wall [user+sys]: {figures.milliseconds(med)}",
        "ratios, wall [user]: " + figures.ratios(med, [("of", "jf"), ("np", "jf"), ("ovg", "jvg"), ("ovg", "of"),
                                                      ("jvg", "jf")]),
        f"ours, counted: forward {fwd_count}; value_and_grad {vg_count}",
        f"GEMM floor: forward {figures.gemm_floor(fwd_count, med['jf'][0], 'jf')}; "
        f"value_and_grad {figures.gemm_floor(vg_count, med['jvg'][0], 'jvg')}",
        f"memory: our value_and_grad's peak {peak / 2**20:.1f} MiB (tracemalloc, inputs excluded); "
        f"XLA's temporaries {xla_temp / 2**20:.1f} MiB",
        f"one value_and_grad: ours {os_ours}; JAX {os_jax}",
        f"checks: value and gradients against JAX, max relative {max(errors):.1e}; forward {forward_error:.1e} "
        + ("ok" if ok else "MISMATCH"),
    ]
    print("\n".join(out))
    if not args.no_write:
        print(f"# written to {figures.write('einsum4', out, args.label)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
