"""HOTRG written the way a NumPy user writes it, run by NumPy, by JAX's jit and by tenferro_py.numpy.

One function, :func:`ln_z`, takes the array module: the environment by einsum, the isometry by
``linalg.eigh``, the update as one 4-operand einsum ``"acx,aruk,cskd,rsy->xyud"``, x and y swapped
by a transpose, lnZ/N accumulated as in SPEC §4. Per χ, timed interleaved (medians, one thread for
everyone, bench/figures.py):

- (np)   NumPy forward, einsum by opt_einsum (NumPy's own einsum would not form the 1M-element
         intermediates: its memory limit is the largest input), a floor;
- (jf)   JAX ``jit`` forward;  (jvg) JAX ``jit(value_and_grad)``, d lnZ/N / dβ, its eigh differentiated
         by our rule (broadened 1/(w_j − w_i), SPEC §3) as a ``custom_jvp``: JAX's own is NaN at χ = 24;
- (of)   ours forward, in a ``tnp.session()``;  (ovg) ours, ``tnp.value_and_grad``.

JAX's trace and compile time is reported apart. Checks: ours against JAX, value and gradient to
1e-10. Printed beside the ratios: our GEMM calls, flops and copied elements (deterministic), our
value-and-gradient's peak memory (tracemalloc) and XLA's temporaries (its memory analysis).

``--example-before COMMIT`` also times what examples/hotrg_ising.py runs per β
(``models.hotrg.thermodynamics``: value, gradient and c by forward over reverse) with the
library at COMMIT and with this tree, alternately, each round in fresh subprocesses.

Usage: python bench/hotrg_numpy.py [--chis 16 24] [--steps 20] [--beta 0.4] [--repeats 5]
                                   [--example-before COMMIT] [--no-write] [--label L]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import types

import figures  # noqa: F401  (first: one XLA thread)
import jax
import jax.numpy as jnp
import numpy as np
import opt_einsum
from threadpoolctl import threadpool_limits

import tenferro_py.numpy as tnp
from tenferro_py import contraction

jax.config.update("jax_enable_x64", True)

NUMPY = types.SimpleNamespace(**{name: getattr(np, name) for name in
                                 ("sqrt", "cosh", "sinh", "stack", "sum", "log", "transpose", "linalg")},
                              einsum=opt_einsum.contract)
"""NumPy, its einsum by opt_einsum (as a NumPy user who needs these contractions writes it)."""


def initial(xp, beta):
    """The Ising tensor T[l, r, d, u] = Σ_s q[s,l] q[s,r] q[s,d] q[s,u], q = [[c, s], [c, −s]]."""
    c, s = xp.sqrt(xp.cosh(beta)), xp.sqrt(xp.sinh(beta))
    q = xp.stack([xp.stack([c, s]), xp.stack([c, -s])])
    return xp.einsum("sl,sr,sd,su->lrdu", q, q, q, q)


def ln_z(xp, beta, chi: int, steps: int):
    """lnZ/N of the 2D Ising model by HOTRG, x-bonds cut to χ by the leading eigenvectors of M Mᵀ."""
    t = initial(xp, beta)
    total = 0.0
    for i in range(steps):
        norm = xp.sqrt(xp.sum(t * t))
        t = t / norm
        total = total + xp.log(norm) / 2**i
        d, _, e, _ = t.shape
        k = min(d * d, chi)
        if k < d * d:
            env = xp.einsum("arym,cryn,bsme,dsne->abcd", t, t, t, t).reshape(d * d, d * d)
            _, v = xp.linalg.eigh(env)
            iso = v[:, d * d - k:].reshape(d, d, k)
            t = xp.einsum("acx,aruk,cskd,rsy->xyud", iso, t, t, iso)
        else:  # nothing to cut: the pair of x-bonds merged
            t = xp.einsum("arym,bsmu->abrsyu", t, t).reshape(d * d, d * d, e, e)
        t = xp.transpose(t, (2, 3, 0, 1))
    return total + xp.log(xp.einsum("xxyy->", t)) / 2**steps


EPS = 1e-12


@jax.custom_jvp
def _eigh(a):
    return jnp.linalg.eigh(a)


@_eigh.defjvp
def _eigh_jvp(primals, tangents):
    """Ours (SPEC §3): dw = diag P, dV = V (F ∘ P), P = Vᵀ sym(dA) V, F_ij = d/(d² + (ε max|w|)²),
    d = w_j − w_i, F_ii = 0. JAX's own F = 1/d is inf where eigenvalues coincide (M Mᵀ has exact zeros
    at χ = 24), and its gradient NaN."""
    (a,), (da,) = primals, tangents
    w, v = _eigh(a)
    p = v.T @ ((da + da.T) / 2) @ v
    d = w[None, :] - w[:, None]
    width = EPS * jax.lax.stop_gradient(jnp.max(jnp.abs(w)))
    f = jnp.where(jnp.eye(w.shape[0], dtype=bool), 0.0, d / (d * d + width * width))
    return (w, v), (jnp.diagonal(p), v @ (f * p))


JAX = types.SimpleNamespace(**{name: getattr(jnp, name) for name in
                               ("sqrt", "cosh", "sinh", "stack", "sum", "log", "transpose", "einsum")},
                            linalg=types.SimpleNamespace(eigh=_eigh))
"""jax.numpy, its eigh differentiated by the rule tenferro_py uses (as bench/jax_trg.py does the SVD's)."""


def ours_forward(beta: float, chi: int, steps: int) -> float:
    with tnp.session():
        return float(ln_z(tnp, beta, chi, steps))


def compare(chi: int, steps: int, beta: float, repeats: int) -> tuple[list[str], bool]:
    """One χ: the medians, ratios, counts and checks as lines; whether the checks passed."""
    start = time.perf_counter()
    jf = jax.jit(lambda b: ln_z(JAX, b, chi, steps)).lower(beta).compile()
    t_jf = time.perf_counter() - start
    start = time.perf_counter()
    jvg = jax.jit(jax.value_and_grad(lambda b: ln_z(JAX, b, chi, steps))).lower(beta).compile()
    t_jvg = time.perf_counter() - start
    ovg = tnp.value_and_grad(lambda b: ln_z(tnp, b, chi, steps))
    value, grad = (float(v) for v in ovg(beta))
    jvalue, jgrad = (float(v) for v in jvg(beta))
    floor = float(ln_z(NUMPY, beta, chi, steps))
    runs = {
        "np": lambda: ln_z(NUMPY, beta, chi, steps),
        "jf": lambda: jf(beta).block_until_ready(),
        "of": lambda: ours_forward(beta, chi, steps),
        "jvg": lambda: jax.block_until_ready(jvg(beta)),
        "ovg": lambda: ovg(beta),
    }
    med = figures.interleaved(runs, repeats)
    with contraction.counting() as count:
        ovg(beta)
    os_ours, os_jax = figures.os_cost(lambda: ovg(beta)), figures.os_cost(lambda: jax.block_until_ready(jvg(beta)))
    tracemalloc.start()
    ovg(beta)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    errors = (abs(value - jvalue), abs(grad - jgrad), abs(floor - value))
    ok = all(e <= 1e-10 for e in errors)  # False on NaN
    return [
        f"chi={chi} steps={steps} beta={beta}: JAX trace+compile (apart) forward {t_jf:.1f} s, "
        f"value_and_grad {t_jvg:.1f} s",
        f"  ms, wall [user+sys]: {figures.milliseconds(med)}",
        "  ratios, wall [user]: " + figures.ratios(med, [("ovg", "jvg"), ("of", "jf"), ("np", "jf"), ("ovg", "of"),
                                                        ("jvg", "jf")]),
        f"  ours, value_and_grad counted: {count}; peak {peak / 2**20:.0f} MiB (tracemalloc); "
        f"XLA's temporaries {jvg.memory_analysis().temp_size_in_bytes / 2**20:.0f} MiB",
        f"  GEMM floor of our value_and_grad: {figures.gemm_floor(count, med['jvg'][0], 'jvg')}",
        f"  one value_and_grad: ours {os_ours}; JAX {os_jax}",
        f"  checks: lnZ/N {value:.15f} grad {grad:.15f}; |ours-JAX| value {errors[0]:.1e} grad {errors[1]:.1e}, "
        f"|NumPy-ours| value {errors[2]:.1e} " + ("ok" if ok else "MISMATCH"),
    ], ok


EXAMPLE = ("import sys, time; from threadpoolctl import threadpool_limits; from tenferro_py.models import hotrg; "
           "ks = hotrg.schedule({chi}, {steps}); threadpool_limits(1)\n"
           "hotrg.thermodynamics({beta}, ks); ts = []\n"
           "for _ in range(3):\n    t = time.perf_counter(); hotrg.thermodynamics({beta}, ks); "
           "ts.append(time.perf_counter() - t)\n"
           "print(min(ts))")


def example_before_after(commit: str, chi: int, steps: int, beta: float, rounds: int) -> list[str]:
    """models.hotrg.thermodynamics (examples/hotrg_ising.py's work per β) at ``commit`` and in this
    tree, alternately in fresh subprocesses; each reports the best of 3 after a warm-up."""
    times: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as before:
        archive = subprocess.run(["git", "-C", str(figures.ROOT), "archive", commit, "tenferro_py"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", before], input=archive, check=True)
        code = EXAMPLE.format(chi=chi, steps=steps, beta=beta)
        for _ in range(rounds):
            for name, tree in (("before", before), ("after", str(figures.ROOT))):
                env = dict(os.environ, PYTHONPATH=tree)
                out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
                times[name].append(float(out.stdout.split()[-1]))
    before_s, after_s = (statistics.median(times[k]) for k in ("before", "after"))
    return [f"examples/hotrg_ising.py's thermodynamics(beta={beta}, schedule({chi}, {steps})): before ({commit}) "
            f"{before_s:.2f} s, after {after_s:.2f} s, after/before {after_s / before_s:.3f} "
            f"(medians of {rounds} alternating subprocess rounds, each the best of 3)"]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/hotrg_numpy.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--chis", type=int, nargs="+", default=[16, 24], help="bond dimensions (default 16 24)")
    p.add_argument("--steps", type=int, default=20, help="HOTRG steps (default 20)")
    p.add_argument("--beta", type=float, default=0.4, help="inverse temperature (default 0.4)")
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--example-before", metavar="COMMIT", help="also time examples/hotrg_ising.py's work at COMMIT")
    p.add_argument("--no-write", action="store_true", help="print only, write nothing to bench/results/")
    p.add_argument("--label", help="a suffix for the results file (e.g. the settings measured)")
    args = p.parse_args(argv)
    out = figures.header("bench/hotrg_numpy.py")
    print("\n".join(out), flush=True)
    ok = True
    with threadpool_limits(1):
        for chi in args.chis:
            lines, passed = compare(chi, args.steps, args.beta, args.repeats)
            ok &= passed
            out += lines
            print("\n".join(lines), flush=True)
    if args.example_before:
        lines = example_before_after(args.example_before, args.chis[0], args.steps, args.beta, args.repeats)
        out += lines
        print("\n".join(lines))
    if not args.no_write:
        print(f"# written to {figures.write('hotrg_numpy', out, args.label)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
