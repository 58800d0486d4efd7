"""2D Ising model (J = 1, no field) by HOTRG, staged: the command line over tenferro_py.models.hotrg.

Per β, lnZ/N, u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ² (c_ad: forward over reverse through the
staged program, no finite difference), then the errors against Onsager.

Usage: python examples/hotrg_ising.py [chi=16] [steps=30] [beta ...]
(numbers in plain decimal notation; each beta in [1e-14, 150]: below ~1e-16 double precision
no longer resolves T₀'s spectrum and u and c come out NaN, from ~178 on T₀'s norm overflows.
A beta whose result is not finite all the same is named in one line, exit status 2.)
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Sequence

import tenferro_py as tf
from tenferro_py.models import hotrg, onsager, trg
from tenferro_py.models.cli import ArgumentParser, number


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="hotrg_ising.py", description=__doc__, allow_abbrev=False,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    positive = number(int, "an integer >= 1", lambda v: v >= 1)
    low, high = hotrg.BETA_RANGE
    p.add_argument("chi", nargs="?", type=positive, default=16, help="bond dimension (default 16)")
    p.add_argument("steps", nargs="?", type=positive, default=30, help="HOTRG steps, N = 2^steps (default 30)")
    p.add_argument("beta", nargs="*", help="inverse temperatures (default 0.3 0.4 0.44 0.5 0.6)",
                   type=number(float, f"a number in [{low:g}, {high:g}] (outside, u and c are not finite; see --help)",
                               lambda v: low <= v <= high))
    return p


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    ks = hotrg.schedule(args.chi, args.steps)
    print(f"tenferro_py {tf.__version__} eager staged HOTRG chi={args.chi} steps={args.steps} N=2^{args.steps} ks={ks}")
    results = {}
    for beta in args.beta or trg.DEFAULT_BETAS:
        try:
            r = hotrg.thermodynamics(beta, ks)
        except tf.LinalgError as err:
            print(f"hotrg_ising.py: beta={beta!r}: no result ({err})", file=sys.stderr)
            return 2
        if not all(math.isfinite(v) for v in r):
            print(f"hotrg_ising.py: beta={beta!r}: the result is not finite ({r}); try another beta or chi",
                  file=sys.stderr)
            return 2
        results[beta] = r
        print(f"beta={beta:.4f} lnZ/N={r.lnz:.15f} u={r.u:.15f} c_ad={r.c:.12f}", flush=True)
    print("against Onsager (examples/onsager.py), HOTRG − exact:")
    for beta, r in results.items():
        exact = onsager.ln_z(beta)
        print(f"beta={beta:.4f} lnZ/N {r.lnz - exact:+.2e} (relative {(r.lnz - exact) / exact:+.2e}) "
              f"u {r.u - onsager.energy(beta):+.2e} c {r.c - onsager.specific_heat(beta):+.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
