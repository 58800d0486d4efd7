"""2D Ising model (J = 1, no field) by C4v CTMRG, with u and c by implicit differentiation of the fixed point.

A command line over ``tenferro_py.models.ctmrg.ising_thermodynamics``: per β, lnZ/N = ln κ
(κ = Z_site Z_corner / Z_edge²), u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ² by differentiating the
CTMRG fixed point, and m = ⟨σ⟩ in the + state (the iteration starts from a boundary of fixed + spins).
"""

from __future__ import annotations

import sys
from typing import Sequence

import tenferro_py as tf
from tenferro_py.fixed_point import FixedPointError
from tenferro_py.models import ctmrg, onsager
from tenferro_py.models.cli import ArgumentParser, number

DEFAULT_BETAS = (0.3, 0.4, 0.5, 0.6)
DEFAULT_CHI = 20
BETA_RANGE = (1e-14, 100.0)
"""The βs the command line accepts; lnZ/N, u, c and m are finite there (measured from 1e-16 to 100)."""
EPILOG = """\
--compare then prints each beta's errors against Onsager's lnZ/N, u and c and Yang's m
(0 for beta <= beta_c), with the states kept, the iterations and the seconds. Fewer than chi
states are kept where the corner's spectrum falls below 1e-5 of its largest or where the cut
would split a multiplet. Close to beta_c the iteration slows down (beta = 0.44: ~9000 steps);
a beta that does not converge within 10000 is named in one line on stderr, exit status 2."""


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="ctmrg_ising.py", description=__doc__.splitlines()[0], epilog=EPILOG)
    p.add_argument("--chi", type=number(int, "an integer >= 1", lambda v: v >= 1), default=DEFAULT_CHI,
                   help=f"the environment's largest bond dimension (default {DEFAULT_CHI})")
    p.add_argument("--compare", action="store_true", help="also print the errors against the exact results")
    allowed = f"a number in [{BETA_RANGE[0]:g}, {BETA_RANGE[1]:g}]"
    p.add_argument("beta", nargs="*", type=number(float, allowed, lambda v: BETA_RANGE[0] <= v <= BETA_RANGE[1]),
                   help="inverse temperatures, plain decimals (default 0.3 0.4 0.5 0.6)")
    return p


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    chi, betas = args.chi, args.beta or list(DEFAULT_BETAS)
    print(f"tenferro_py {tf.__version__} C4v CTMRG chi={chi} tol={ctmrg.CONVERGENCE_TOL:g} boundary=+")
    results = {}
    for beta in betas:
        try:
            r = ctmrg.ising_thermodynamics(beta, chi)
        except FixedPointError as err:
            print(f"ctmrg_ising.py: beta={beta!r}: no result ({err})", file=sys.stderr)
            return 2
        results[beta] = r
        # round, then + 0.0: a magnetisation of -1e-17 above T_c prints as 0, not as -0
        print(f"beta={beta:.4f} lnZ/N={r.lnz:.15f} u={r.u:.15f} c={r.c:.12f} m={round(r.m, 12) + 0.0:.12f}",
              flush=True)
    if args.compare:
        print("against Onsager (lnZ/N, u, c; examples/onsager.py) and Yang (m), CTMRG - exact:")
        for beta, r in results.items():
            print(f"beta={beta:.4f} lnZ/N {r.lnz - onsager.ln_z(beta):+.1e} u {r.u - onsager.energy(beta):+.1e} "
                  f"c {r.c - onsager.specific_heat(beta):+.1e} m {r.m - onsager.spontaneous_magnetisation(beta):+.1e} "
                  f"| kept {r.kept} of chi={chi}, {r.iterations} iterations, {r.seconds:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
