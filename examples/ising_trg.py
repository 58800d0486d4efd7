"""2D Ising model (J = 1, no field) by Levin–Nave TRG, staged, with reverse-mode AD: the command line.

The twin of tenferro-rs's eager Ising bin, over tenferro_py.models.trg: each RG step is its own
small eager graph, the reverse sweep chains the steps' pullbacks by hand. Prints per β lnZ/N,
u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ², by a central difference of the AD gradient (c) and by
forward over reverse (c_ad), with the f64 bits in hex so two implementations compare to the last
bit; where c by difference straddles a jump of truncated TRG's lnZ/N(β), a warning says so.

--compare then prints the errors against Onsager and SPEC's reference table; --svd=krylov takes
each step's k leading singular triplets from a block Krylov method with exact derivatives
(faster at large chi; docs/truncated.md). Numbers are plain decimals (1e-5, 0.44; not
1_000, inf or nan). Each beta, and with c by difference each beta - h and beta + h, must lie in
[1e-14, 8]: outside, double precision no longer resolves the first step's singular values and u
and c come out NaN (from beta ~ 178 on the SVD fails), and nothing is lost there: below 1e-14,
lnZ/N = ln 2 and u = -2 beta to every digit, above 8, u = -2 and c = 0.
"""

from __future__ import annotations

import argparse
import math
import struct
import sys
import time
from typing import Callable, Sequence, TypeVar

import tenferro_py as tf
from tenferro_py import CpuEngine, Pool
from tenferro_py.models import reference, trg
from tenferro_py.models.cli import ArgumentParser, number

T = TypeVar("T")
RANGE = f"[{trg.BETA_RANGE[0]:g}, {trg.BETA_RANGE[1]:g}]"


def hex_bits(x: float) -> str:
    """The 16 hex digits of a float64's bits."""
    return struct.pack(">d", x).hex()


def parser() -> ArgumentParser:
    """The Rust bin's positional arguments, and --compare, --c, --svd."""
    p = ArgumentParser(prog="ising_trg.py", description=__doc__, allow_abbrev=False,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    positive = number(int, "an integer >= 1", lambda v: v >= 1)
    p.add_argument("--compare", action="store_true", help="errors against Onsager and SPEC's table")
    p.add_argument("--c", choices=("both", "diff", "ad"), default="both",
                   help="c by central difference of the gradient, by AD, or both (default)")
    p.add_argument("--svd", choices=trg.SVD_METHODS, default="full", help="full SVD (default) or block Krylov")
    p.add_argument("chi", nargs="?", type=positive, default=16, help="bond dimension (default 16)")
    p.add_argument("steps", nargs="?", type=positive, default=20, help="TRG steps, N = 2^steps (default 20)")
    p.add_argument("width", nargs="?", type=positive, default=1, help="threads of the engine (default 1)")
    p.add_argument("h", nargs="?", default=1e-5, help="step of c's difference (default 1e-5)",
                   type=number(float, "a finite number > 0", lambda v: math.isfinite(v) and v > 0))
    p.add_argument("beta", nargs="*", help="inverse temperatures (default 0.3 0.4 0.44 0.5 0.6)",
                   type=number(float, f"a number in {RANGE} (outside, u and c are not finite; see --help)",
                               trg.in_beta_range))
    return p


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments, checked; beta - h and beta + h must stay in the range for c by difference."""
    p = parser()
    args = p.parse_args(argv)
    args.beta = args.beta or list(trg.DEFAULT_BETAS)
    if args.c != "ad":
        for beta in (min(args.beta), max(args.beta)):
            if not trg.difference_in_range(beta, args.h):
                p.error(f"argument h: must keep beta - h and beta + h in {RANGE} (c by difference evaluates "
                        f"there), got h={args.h!r} for beta={beta!r}")
    return args


def _best_of_three(f: Callable[[], T]) -> tuple[T, float]:
    """f's result and its best time (s) of 3 runs after a first one."""
    f()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - start)
    return result, min(times)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    ks = trg.schedule(args.chi, args.steps)
    engine = CpuEngine(Pool.builder().threads(args.width).build())
    h, mode, svd = args.h, args.c, args.svd
    print(f"tenferro_py {tf.__version__} eager staged chi={args.chi} steps={args.steps} "
          f"width={args.width} h={h:g} ks={ks}" + (f" svd={svd}" if svd != "full" else ""))
    results = {}
    for beta in args.beta:
        (lnz, grad), t_vg = _best_of_three(lambda: trg.value_and_grad(beta, ks, engine, svd=svd))
        values, hexes, timing = [f"lnZ/N={lnz:.15f}", f"u={-grad:.15f}"], [], f"value_and_grad {t_vg * 1e3:.1f} ms"
        c = c_ad = warning = None
        if mode != "diff":
            (_, _, curvature), t_ad = _best_of_three(lambda: trg.value_grad_and_curvature(beta, ks, engine, svd=svd))
            c_ad = beta * beta * curvature
            timing += f" c_ad {t_ad * 1e3:.1f} ms"
        if mode != "ad":
            c, warning = trg.difference_curvature(beta, h, ks, engine, svd, c_ad)
            values.append(f"c={c:.12f}")
            hexes.append(f"c={hex_bits(c)}")
        if c_ad is not None:
            values.append(f"c_ad={c_ad:.12f}")
            hexes.append(f"c_ad={hex_bits(c_ad)}")
        results[beta] = (lnz, -grad, c, c_ad)
        print(f"beta={beta:.4f} {' '.join(values)} | {timing}")
        print(f" hex lnZ/N={hex_bits(lnz)} grad={hex_bits(grad)} {' '.join(hexes)}".rstrip(), flush=True)
        if warning:
            print(warning, flush=True)
    if args.compare:
        lines, _ = reference.report("this run", results, reference.is_reference_setting(args.chi, args.steps, h))
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
