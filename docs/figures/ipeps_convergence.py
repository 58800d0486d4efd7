"""Draw an iPEPS optimisation's convergence from the output of examples/ipeps_heisenberg.py.

    python examples/ipeps_heisenberg.py > ipeps.txt
    python docs/figures/ipeps_convergence.py ipeps.txt docs/figures/ipeps_convergence.png

Plots E − E_final and |dE/dθ| against the L-BFGS iteration, on a log scale (needs matplotlib).
"""

import re
import sys

from matplotlib.figure import Figure

ITERATION = re.compile(r"^\s*(\d+) (-?\d+\.\d+) (\S+) \S+$")


def read_run(path):
    """The header line, the iterations (number, energy, |gradient|) and the final energy of one run."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    rows = [(int(m[1]), float(m[2]), float(m[3])) for m in map(ITERATION.match, lines) if m]
    final = float(next(line for line in lines if line.startswith("energy=")).split("=")[1])
    return lines[0], rows, final


def main(run_path, png_path):
    header, rows, final = read_run(run_path)
    iterations = [r[0] for r in rows]
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.subplots()
    above = [(r[0], r[1] - final) for r in rows if r[1] > final]  # printed to 10 decimals: 0 at the end
    ax.semilogy(*zip(*above), "o-", ms=3, label="E − E_final")
    ax.semilogy(iterations, [r[2] for r in rows], "s-", ms=3, label="|dE/dθ|")
    ax.set_xlabel("L-BFGS iteration")
    ax.set_title(header.split(" iPEPS ")[1].split(" parameters")[0] + f": E → {final:.10f}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


if __name__ == "__main__":
    main(*sys.argv[1:])
