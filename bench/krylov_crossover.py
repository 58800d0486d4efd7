"""Where the Krylov truncated SVD stops paying: its time over LAPACK gesdd's, by size and k/n.

For n × n matrices with a TRG-like decaying spectrum s_i = exp(−i^0.6) (random singular
vectors, seed 0), BLAS pinned to one thread, prints per n the full SVD's time and, per kept
fraction k/n, the ratio (block Krylov forward, without its fallback) / (full SVD), each the
median of ``--repeats`` interleaved runs. "nc" marks a budget the iteration did not converge in.
The fallback thresholds ``krylov.KRYLOV_UP_TO`` and ``krylov.KRYLOV_FROM`` come from this table.

Usage: python bench/krylov_crossover.py [--sizes 64 256 576 1024 2304] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from dispatch import seconds  # bench/dispatch.py, beside this file
from threadpoolctl import threadpool_limits

from tenferro_py import krylov

FRACTIONS = (0.03, 0.06, 0.1, 0.125, 0.25, 0.4)


def trg_like(n: int, rng: np.random.Generator) -> np.ndarray:
    """An n × n matrix with singular values exp(−i^0.6), decaying as TRG's do, and random vectors."""
    q1 = np.linalg.qr(rng.standard_normal((n, n)))[0]
    q2 = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return (q1 * np.exp(-np.arange(n) ** 0.6)) @ q2.T


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/krylov_crossover.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 576, 1024, 2304])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"# krylov/full time ratio, 1 BLAS thread, medians of {args.repeats}; columns: k/n")
    print(f"{'n':>5} {'full ms':>9} " + " ".join(f"{f:>7}" for f in FRACTIONS), flush=True)
    with threadpool_limits(1, "blas"):
        for n in args.sizes:
            a = trg_like(n, rng)
            full = seconds(lambda: np.linalg.svd(a, full_matrices=False), args.repeats)
            cells = []
            for fraction in FRACTIONS:
                k = max(1, int(fraction * n))
                converged = krylov._krylov(a, k, krylov.TOLERANCE) is not None
                ratio = seconds(lambda: krylov._krylov(a, k, krylov.TOLERANCE), args.repeats) / full
                cells.append(f"{ratio:>7.2f}" if converged else f"{'nc':>7}")
            print(f"{n:>5} {full * 1e3:>9.1f} " + " ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
