"""Where the Krylov truncated eigh stops paying: its time over LAPACK syevd's, by size and k/n.

For n × n symmetric matrices with an indefinite, CTMRG-like decaying spectrum λ_i = ±exp(−i^0.6)
(random signs and eigenvectors, seed 0), BLAS pinned to one thread, prints per n the full eigh's
time and, per kept fraction k/n, the ratio (the Krylov forward, its Newton step where
|λ_k| < REFINE_BELOW·|λ₁| included, its fallback thresholds lifted) / (full eigh), each the median
of ``--repeats`` runs. "nc" marks a budget the iteration did not converge in (where the forward
falls back to the full eigh). The fallback thresholds ``krylov_eigh.KRYLOV_UP_TO`` and
``krylov_eigh.KRYLOV_FROM`` come from this table. Last, at CTMRG's D = 4, χ = 64 size (n = 1024,
k = 64), the time of a value ⟨W, V diag(w) Vᴴ⟩ with its gradient by s.eigh(x, k=64, method=...),
full and krylov (the best of ``--repeats``).

Usage: python bench/eigh_krylov_crossover.py [--sizes 256 512 768 1024 2048] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from dispatch import seconds
from threadpoolctl import threadpool_limits

import tenferro_py as tf
from tenferro_py import krylov_eigh

FRACTIONS = (0.03, 0.06, 0.08, 0.1, 0.125, 0.25)


def corner_like(n: int, rng: np.random.Generator) -> np.ndarray:
    """An n × n symmetric matrix with eigenvalues ±exp(−i^0.6) (random signs) and random vectors."""
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    values = np.where(rng.random(n) < 0.5, -1.0, 1.0) * np.exp(-np.arange(n) ** 0.6)
    h = (q * values) @ q.T
    return (h + h.T) * 0.5


def value_and_gradient(h: np.ndarray, weight: np.ndarray, k: int, method: str) -> None:
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(h))

    def loss(s):
        w, v = s.eigh(x, k=k, method=method)
        return s.einsum([tf.Tensor(weight), v, w, v], "ab,ai,i,bi->")

    rt.grad(eng, rt.with_eager_session(eng, loss), x)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/eigh_krylov_crossover.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 768, 1024, 2048])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"# krylov/full time ratio, 1 BLAS thread, medians of {args.repeats}; columns: k/n")
    print(f"{'n':>5} {'full ms':>9} " + " ".join(f"{f:>7}" for f in FRACTIONS), flush=True)
    krylov_eigh.KRYLOV_FROM, krylov_eigh.KRYLOV_UP_TO = 1, 1.0  # the Krylov path at every size
    with threadpool_limits(1, "blas"):
        for n in args.sizes:
            h = corner_like(n, rng)
            full = seconds(lambda: np.linalg.eigh(h), args.repeats)
            cells = []
            for fraction in FRACTIONS:
                k = max(1, int(fraction * n))
                converged = krylov_eigh._krylov(h, k, krylov_eigh.TOLERANCE) is not None
                ratio = seconds(lambda: krylov_eigh.truncated_eigh(h, k), args.repeats) / full
                cells.append(f"{ratio:>7.2f}" if converged else f"{'nc':>7}")
            print(f"{n:>5} {full * 1e3:>9.1f} " + " ".join(cells), flush=True)
        h, weight = corner_like(1024, rng), rng.standard_normal((1024, 1024))
        times = {m: min(seconds(lambda: value_and_gradient(h, weight, 64, m), 1) for _ in range(args.repeats))
                 for m in ("full", "krylov")}
    print(f"# n = 1024, k = 64, value and gradient: full {times['full']:.3f} s, krylov {times['krylov']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
