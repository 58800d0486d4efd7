"""Issue 25 item 6's figure: TRG's value_and_grad with the Krylov SVD over JAX's jit, and where its time goes.

At χ = 32, 10 steps (``--chi``, ``--steps``), per β, interleaved after one warm-up each (BLAS on
one thread): (k) ``value_and_grad(svd="krylov")``, (c) JAX ``jit(value_and_grad)`` (bench/jax_trg.py),
(b) ``value_and_grad`` with the full SVD. Then one more run of (k), instrumented, splits its time:
the Krylov forward (``krylov.truncated_svd``: calls, fallbacks to LAPACK, products with A in
columns), the discarded subspace's solves (``krylov.complement_solve``: calls, columns·steps of
CG), the pairwise einsum kernels (TRG's contraction: operands of rank 3 and 4; the rules'
matrix products: rank 2), and the rest (dispatch, elementwise, reshapes). Floors beside them,
each as a fraction of (c): the contraction's three χ⁶ products (forward and two cotangents) per
full step in plain NumPy, and LAPACK's gesdd of one D² × D² matrix. The NumPy call cost of
bench/dispatch.py (µs per np.add/np.multiply on one element) says how fast this machine's Python is.
The counts are deterministic; the times are not (see bench/README.md).

Usage: python bench/krylov_trg.py [--chi 32] [--steps 10] [--betas 0.4 0.5] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from typing import Callable

import numpy as np
import opt_einsum
from threadpoolctl import threadpool_limits

import dispatch
import trg as harness
from dispatch import seconds
from tenferro_py import contraction, krylov
from tenferro_py.models.trg import schedule, value_and_grad


class CountingMatrix(np.ndarray):
    """A view of A that counts the columns it is multiplied with (A @ X and Aᴴ @ X), products plain."""

    columns = 0

    def __matmul__(self, other):
        CountingMatrix.columns += other.shape[1] if other.ndim == 2 else 1
        return np.matmul(self.view(np.ndarray), other)


def instrumented(beta: float, ks: list[int]) -> tuple[float, dict]:
    """One krylov value_and_grad with each component timed and counted: (seconds, parts)."""
    parts: dict = defaultdict(float)
    svd, solve, pairwise = krylov.truncated_svd, krylov.complement_solve, contraction.MatrixProduct.__call__

    def timed_svd(a, k, tol=krylov.TOLERANCE):
        if isinstance(a, CountingMatrix):  # its own call on A/c
            return svd(a, k, tol)
        before, start = CountingMatrix.columns, time.perf_counter()
        fell_back = [False]
        inner = krylov._krylov

        def watch(*args):
            found = inner(*args)
            fell_back[0] = found is None
            return found

        krylov._krylov = watch
        try:
            out = svd(a.view(CountingMatrix), k, tol)
        finally:
            krylov._krylov = inner
        parts["svd s"] += time.perf_counter() - start
        parts["svd calls"] += 1
        parts["svd fallbacks"] += fell_back[0] and k <= krylov.KRYLOV_UP_TO * min(a.shape)
        parts["svd columns"] += CountingMatrix.columns - before
        return tuple(np.asarray(x).view(np.ndarray) for x in out)

    def timed_solve(a, *rest):
        if isinstance(a, CountingMatrix):  # its own call on rescaled values
            return solve(a, *rest)
        before, start = CountingMatrix.columns, time.perf_counter()
        out = solve(a.view(CountingMatrix), *rest)
        parts["solve s"] += time.perf_counter() - start
        parts["solve calls"] += 1
        parts["solve columns"] += CountingMatrix.columns - before
        return tuple(np.asarray(x).view(np.ndarray) for x in out)

    def timed_pairwise(self, x, y):
        start = time.perf_counter()
        out = pairwise(self, x, y)
        parts["contraction s" if min(x.ndim, y.ndim) >= 3 else "matrix products s"] += time.perf_counter() - start
        return out

    krylov.truncated_svd, krylov.complement_solve, contraction.MatrixProduct.__call__ = timed_svd, timed_solve, timed_pairwise
    try:
        start = time.perf_counter()
        value_and_grad(beta, ks, svd="krylov")
        total = time.perf_counter() - start
    finally:
        krylov.truncated_svd, krylov.complement_solve, contraction.MatrixProduct.__call__ = svd, solve, pairwise
    return total, parts


def contraction_floor(chi: int) -> Callable[[], None]:
    """The TRG contraction at D = k = χ in NumPy: forward and the cotangents of its two χ⁴ halves."""
    rng = np.random.default_rng(0)
    s1, s2, s3, s4 = (rng.standard_normal((chi, chi, chi)) for _ in range(4))
    upper = opt_einsum.contract("war,abu->wrbu", s1, s2)
    lower = opt_einsum.contract("bgl,gwd->bwld", s3, s4)
    cotangent = rng.standard_normal((chi,) * 4)

    def run() -> None:
        np.einsum("wrbu,bwld->ruld", upper, lower, optimize=True)
        np.einsum("ruld,bwld->wrbu", cotangent, lower, optimize=True)
        np.einsum("ruld,wrbu->bwld", cotangent, upper, optimize=True)

    return run


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/krylov_trg.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--chi", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--betas", type=float, nargs="+", default=[0.4, 0.5])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    ks = schedule(args.chi, args.steps)
    full = harness.full_steps(args.chi, args.steps)
    runners = {"k": harness.tenferro_runner(ks, 1, "krylov")}
    jax = harness.jax_runner(ks)
    if jax is None:
        print("bench/krylov_trg.py: needs jax (bench/jax_trg.py)", file=sys.stderr)
        return 1
    runners["c"] = jax[0]
    runners["b"] = harness.tenferro_runner(ks, 1, "full")
    print(harness.header(args, settings=False))
    print(f"# {jax[1]}")
    print(f"# chi={args.chi} steps={args.steps} ks={ks} ({full} steps at D = chi), width 1, medians of {args.repeats} "
          "interleaved runs after one warm-up each; k = value_and_grad(svd='krylov'), c = JAX jit(value_and_grad), "
          "b = value_and_grad (full SVD)", flush=True)
    ok, ratios = True, defaultdict(list)
    with threadpool_limits(1, "blas"):
        numpy_call_us = dispatch.numpy_call_cost(args.repeats)
        floor_contraction = seconds(contraction_floor(args.chi), args.repeats) * full
        matrix = np.random.default_rng(1).standard_normal((args.chi**2, args.chi**2))
        gesdd = seconds(lambda: np.linalg.svd(matrix, full_matrices=False), args.repeats)
    for beta in args.betas:
        results, med = harness.interleaved(runners, beta, args.repeats)
        (lnz, grad), (lnz_c, grad_c), (lnz_b, grad_b) = results["k"], results["c"], results["b"]
        good = abs(lnz - lnz_b) <= harness.LNZ_TOL and abs(grad - grad_b) <= harness.KRYLOV_GRAD_TOL * abs(grad_b)
        ok &= good
        total, parts = instrumented(beta, ks)
        c = med["c"]
        ratios["k/c"].append(med["k"] / c)
        ratios["b/c"].append(med["b"] / c)
        named = parts["svd s"] + parts["solve s"] + parts["contraction s"] + parts["matrix products s"]
        print(f"beta={beta:.4f} ms k={med['k'] * 1e3:.1f} c={c * 1e3:.1f} b={med['b'] * 1e3:.1f} | k/c={med['k'] / c:.3f} "
              f"b/c={med['b'] / c:.3f} | |k-b| lnZ/N {abs(lnz - lnz_b):.1e} grad {abs(grad - grad_b) / abs(grad_b):.1e} "
              f"(rel){'' if good else ' MISMATCH'} | |c-b| lnZ/N {abs(lnz_c - lnz_b):.1e} grad {abs(grad_c - grad_b) / abs(grad_b):.1e}")
        print(f"  k instrumented ({total * 1e3:.0f} ms), each part over c: forward {parts['svd s'] / c:.3f} "
              f"({parts['svd calls']:.0f} calls, {parts['svd fallbacks']:.0f} fallbacks to gesdd, "
              f"{parts['svd columns']:.0f} columns of A products) | solves {parts['solve s'] / c:.3f} "
              f"({parts['solve calls']:.0f} calls, {parts['solve columns']:.0f} columns of A products) | "
              f"contraction {parts['contraction s'] / c:.3f} | rules' matrix products {parts['matrix products s'] / c:.3f} "
              f"| rest {(total - named) / c:.3f}", flush=True)
        ratios["forward/c"].append(parts["svd s"] / c)
        ratios["solves/c"].append(parts["solve s"] / c)
        ratios["contraction/c"].append(parts["contraction s"] / c)
        ratios["floor contraction/c"].append(floor_contraction / c)
        ratios["floor gesdd/c"].append(gesdd / c)
    print(f"floors: contraction's three chi^6 products x {full} full steps in NumPy {floor_contraction * 1e3:.0f} ms; "
          f"gesdd of one {args.chi**2}^2 matrix {gesdd * 1e3:.1f} ms; NumPy call cost {numpy_call_us:.2f} us "
          "(bench/dispatch.py's chain)")
    print("summary (median over betas): " + " ".join(f"{k}={statistics.median(v):.3f}" for k, v in ratios.items())
          + f" | checks {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
