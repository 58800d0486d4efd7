"""2D Ising model (J = 1, no field) by C4v CTMRG, with u and c by implicit differentiation of the fixed point.

The bulk tensor is TRG's (examples/ising_trg.py): a[u, l, d, r] = Σ_σ Q[σ, u] Q[σ, l] Q[σ, d]
Q[σ, r] with Q = [[√cosh β, √sinh β], [√cosh β, −√sinh β]] (rows: spin σ = ±1), invariant under
C4v. The environment (C, T) of the infinite lattice is iterated to its fixed point by
examples/ctmrg_c4v.py, starting from a boundary of fixed + spins (each outer leg closed with
Q[+, :]), which breaks the up-down symmetry: below T_c (β > β_c = ln(1 + √2)/2) the iteration ends
in the + state, above it in the symmetric one. Per β it prints:

- lnZ/N = ln κ, κ = Z_site Z_corner / Z_edge² (ctmrg_c4v.ln_z_per_site);
- u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ², by tenferro_py.fixed_point: one CTMRG step recorded
  at the fixed point, linear solves with its pullback (u, reverse mode) and its jvp (c, forward over
  reverse), no difference and no graph of the iterations;
- m = ⟨σ⟩, the site network with the impurity Σ_σ σ Q Q Q Q over the one with a.

Usage: python examples/ctmrg_ising.py [--chi 20] [--compare] [beta ...]
(--chi: the environment's largest bond dimension (fewer states are kept where the corner's
 spectrum has fallen below 1e-5 of its largest, or where the cut would split a multiplet);
 --compare: then print each beta's errors against Onsager's lnZ/N, u and c (examples/onsager.py)
 and Yang's m = (1 - sinh(2 beta)^-4)^(1/8) (0 for beta <= beta_c), with the states kept, the
 iterations and the seconds; numbers in plain decimal notation (20, 0.44; not 1_000, inf or nan);
 each beta in [1e-14, 100] (measured finite from 1e-16 to 100; from ~170 on the entries of a,
 ~e^(2 beta), overflow the environment's normalisation). Close to beta_c the iteration slows down
 (beta = 0.44: ~9000 steps); a beta that does not converge within 10000 is named in one line on
 stderr, exit status 2.)
"""

from __future__ import annotations

import math
import sys
import time
from typing import NamedTuple, Sequence

import numpy as np

import ctmrg_c4v
from tenferro_py.models import onsager
from tenferro_py.models.trg import initial
from tenferro_py.models.cli import plain_number


class UsageError(Exception):
    """A bad command-line argument (until this example moves onto models.cli's parser)."""


def number_argument(name, text, kind, allowed, ok):
    try:
        value = plain_number(text, kind)
    except ValueError:
        raise UsageError(f"{name} must be {allowed}, got {text!r}") from None
    if not ok(value):
        raise UsageError(f"{name} must be {allowed}, got {text!r}")
    return value

import tenferro_py as tf
from tenferro_py import EagerSession, EagerTensor, Tensor
from tenferro_py.fixed_point import FixedPointError

DEFAULT_BETAS = (0.3, 0.4, 0.5, 0.6)
DEFAULT_CHI = 20
BETA_RANGE = (1e-14, 100.0)
"""The βs the command line accepts; lnZ/N, u, c and m are finite there (measured from 1e-16 to 100)."""
USAGE = "usage: python examples/ctmrg_ising.py [--chi 20] [--compare] [beta ...]"


def spin_tensors(beta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Q, a, b): Q[σ, i] = [[√cosh β, √sinh β], [√cosh β, −√sinh β]], the bulk tensor a = Σ_σ Q Q Q Q
    and the impurity b = Σ_σ σ Q Q Q Q (a site that also multiplies by its spin)."""
    q = np.array([[math.sqrt(math.cosh(beta)), math.sqrt(math.sinh(beta))],
                  [math.sqrt(math.cosh(beta)), -math.sqrt(math.sinh(beta))]])
    a = np.einsum("su,sl,sd,sr->uldr", q, q, q, q)
    b = np.einsum("s,su,sl,sd,sr->uldr", np.array([1.0, -1.0]), q, q, q, q)
    return q, a, b


def spontaneous_magnetisation(beta: float) -> float:
    """Yang's m = (1 − sinh(2β)⁻⁴)^(1/8) below T_c, 0 above (C. N. Yang, Phys. Rev. 85, 808 (1952))."""
    return (1 - math.sinh(2 * beta) ** -4) ** 0.125 if beta > onsager.BETA_C else 0.0


def ln_z(s: EagerSession, env: ctmrg_c4v.Environment, beta: EagerTensor) -> EagerTensor:
    """The readout lnZ/N of the environment at β (a from β, so that its derivative counts too)."""
    return ctmrg_c4v.ln_z_per_site(s, env, initial(s, beta))


class Thermo(NamedTuple):
    """One β's results, with how the environment converged and how long the β took."""

    lnz: float
    u: float
    c: float
    m: float
    kept: int  # states of the environment's χ that are not zero
    iterations: int
    seconds: float


def thermodynamics(beta: float, chi: int) -> Thermo:
    """lnZ/N, u, c and m at β from the CTMRG fixed point of bond dimension χ (FixedPointError if it
    does not converge)."""
    start = time.perf_counter()
    q, a, impurity = spin_tensors(beta)
    problem = ctmrg_c4v.environment_fixed_point(initial, chi)
    solution = problem.solve(beta, ctmrg_c4v.initial_environment(a, chi, boundary=q[0]))
    lnz, grad, curvature = solution.value_grad_and_curvature(ln_z)
    m = solution.value(lambda s, env, theta: ctmrg_c4v.site_expectation(s, env, initial(s, theta),
                                                                        s.constant_from(Tensor.from_numpy(impurity))))
    kept = int(np.count_nonzero(np.abs(solution.x[0].to_numpy()).sum(axis=0)))
    return Thermo(lnz, -grad.item(), beta * beta * curvature.item(), m, kept, solution.iterations,
                  time.perf_counter() - start)


def parse_args(argv: Sequence[str]) -> tuple[int, bool, list[float]]:
    """χ, whether to compare, and the βs (UsageError when an argument is bad)."""
    chi, compare, betas = DEFAULT_CHI, False, []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--compare":
            compare = True
        elif arg == "--chi" or arg.startswith("--chi="):
            if arg == "--chi" and not args:
                raise UsageError("--chi needs a value, e.g. --chi 20")
            text = args.pop(0) if arg == "--chi" else arg[len("--chi="):]
            chi = number_argument("chi", text, int, "an integer >= 1", lambda v: v >= 1)
        elif arg.startswith("-") and not arg[1:2].isdigit() and not arg[1:2] == ".":
            raise UsageError(f"unknown option {arg!r}; allowed: --chi N, --compare, --help")
        else:
            allowed = f"a number in [{BETA_RANGE[0]:g}, {BETA_RANGE[1]:g}]"
            betas.append(number_argument("beta", arg, float, allowed,
                                         lambda v: BETA_RANGE[0] <= v <= BETA_RANGE[1]))
    return chi, compare, betas or list(DEFAULT_BETAS)


def main(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    try:
        chi, compare, betas = parse_args(argv)
    except UsageError as err:
        print(f"ctmrg_ising.py: {err}", file=sys.stderr)
        return 2
    print(f"tenferro_py {tf.__version__} C4v CTMRG chi={chi} tol={ctmrg_c4v.CONVERGENCE_TOL:g} boundary=+")
    results = {}
    for beta in betas:
        try:
            r = thermodynamics(beta, chi)
        except FixedPointError as err:
            print(f"ctmrg_ising.py: beta={beta!r}: no result ({err})", file=sys.stderr)
            return 2
        results[beta] = r
        # round, then + 0.0: a magnetisation of -1e-17 above T_c prints as 0, not as -0
        print(f"beta={beta:.4f} lnZ/N={r.lnz:.15f} u={r.u:.15f} c={r.c:.12f} m={round(r.m, 12) + 0.0:.12f}",
              flush=True)
    if compare:
        print("against Onsager (lnZ/N, u, c; examples/onsager.py) and Yang (m), CTMRG - exact:")
        for beta, r in results.items():
            print(f"beta={beta:.4f} lnZ/N {r.lnz - onsager.ln_z(beta):+.1e} u {r.u - onsager.energy(beta):+.1e} "
                  f"c {r.c - onsager.specific_heat(beta):+.1e} m {r.m - spontaneous_magnetisation(beta):+.1e} | "
                  f"kept {r.kept} of chi={chi}, {r.iterations} iterations, {r.seconds:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
