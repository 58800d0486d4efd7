"""Onsager's exact lnZ/N, u and c of the infinite 2D Ising model, one line per β.

    python examples/onsager.py [beta ...]      (default 0.3 0.4 0.44 0.5 0.6)
"""

import math
import sys

from tenferro_py.models import onsager
from tenferro_py.models.cli import ArgumentParser, number


def main(argv):
    parser = ArgumentParser(prog="onsager.py", description=__doc__.splitlines()[0])
    parser.add_argument("beta", nargs="*", type=number(float, "a finite number > 0", lambda b: math.isfinite(b) and b > 0),
                        help="inverse temperatures (default 0.3 0.4 0.44 0.5 0.6)")
    betas = parser.parse_args(argv).beta or [0.3, 0.4, 0.44, 0.5, 0.6]
    for b in betas:
        print(f"beta={b} lnZ/N={onsager.ln_z(b):.15f} u={onsager.energy(b):.15f} c={onsager.specific_heat(b):.12f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
