"""2D Ising model (J = 1, no field) by HOTRG, staged with tenferro_py.staged.

The higher-order TRG of Xie et al. (PRB 86, 045139, 2012): each step contracts the
tensor with its upper neighbour, T[l,r,d,u] T[l',r',u,u'], which doubles the sites a
tensor stands for and squares its x-bond dimension, then truncates the pair of x-bonds
to the χ leading eigenvectors of the bond environment M Mᵀ (M the two-tensor
contraction with the x-bond pair as rows), by ``eigh``; x and y then swap, so the steps
alternate directions. Each step normalises T first and the program accumulates
2⁻ⁱ ln‖T_i‖, as TRG does: after n steps lnZ/N = Σ_i 2⁻ⁱ ln‖T_i‖ + 2⁻ⁿ ln tr T_n on a
torus of N = 2ⁿ sites. Every step is a stage of a ``tenferro_py.staged.Program``:
u = −d(lnZ/N)/dβ comes from its reverse sweep and c = β² d²(lnZ/N)/dβ² from its
second derivative (forward over reverse), with no finite difference.

Usage: python examples/hotrg_ising.py [chi=16] [steps=30] [beta ...]
(numbers in plain decimal notation; each beta in [1e-14, 150]: below ~1e-16 double precision
no longer resolves T₀'s spectrum and u and c come out NaN, from ~178 on T₀'s norm overflows.
A beta whose result is not finite all the same is named in one line, exit status 2.)
"""

from __future__ import annotations

import math
import sys
from functools import partial
from typing import NamedTuple, Sequence

from tenferro_py.models import onsager
from ising_trg import DEFAULT_BETAS, UsageError, number_argument, initial

import tenferro_py as tf
from tenferro_py import EagerSession, EagerTensor, SliceConfig, staged

BETA_RANGE = (1e-14, 150.0)
"""The βs the command line accepts. Measured finite on grids over [1e-300, 200] at χ = 16, 30 steps and
χ = 4, 6 steps (and inside at χ = 2, 10 and χ = 8, 12): u and c are NaN at and below 1e-17 (T₀'s
spectrum no longer resolved), and from β ≈ 178 on T₀'s entries, ~e^(4β), overflow and eigh refuses them."""


def schedule(chi: int, steps: int) -> list[int]:
    """Kept x-bond dimension per step, k_i = min(D_i², χ) (D_i: the x-bonds entering step i).

    The y-bonds pass through a step unchanged and become the next step's x-bonds.
    """
    ks, dx, dy = [], 2, 2
    for _ in range(steps):
        k = min(dx * dx, chi)
        ks.append(k)
        dx, dy = dy, k
    return ks


def step(s: EagerSession, t: EagerTensor, k: int) -> tuple[EagerTensor, EagerTensor]:
    """One HOTRG step: (T', ln‖T‖), T' from T / ‖T‖ and its upper neighbour, x-bonds cut to k, x and y swapped.

    T is T[l, r, d, u]. When k = D² nothing is cut and the pair of x-bonds is
    just merged (no eigh: the isometry would be a rotation of the whole space).
    """
    norm = s.sqrt(s.reduce_sum(s.mul(t, t)))
    t = s.div(t, s.broadcast_in_dim(norm, t.shape, ()))
    dx, _, dy, _ = t.shape
    if k < dx * dx:
        # M Mᵀ over the x-bond pair (l, l') of the lower and upper tensor: O(D⁶), M never formed.
        env = s.einsum([t, t, t, t], "arym,cryn,bsme,dsne->abcd")
        _, v = s.eigh(s.reshape(env, (dx * dx, dx * dx)))
        top = s.slice(v, SliceConfig([0, dx * dx - k], [dx * dx, dx * dx]))  # eigenvalues ascending
        iso = s.reshape(top, (dx, dx, k))
        coarse = s.einsum([iso, t, t, iso], "abX,arym,bsmu,rsY->XYyu")
    else:
        coarse = s.reshape(s.einsum([t, t], "arym,bsmu->abrsyu"), (dx * dx, dx * dx, dy, dy))
    return s.transpose(coarse, (2, 3, 0, 1)), s.log(norm)


def log_trace(s: EagerSession, t: EagerTensor) -> EagerTensor:
    """ln tr T: the torus closed on the last tensor (l = r, d = u)."""
    return s.log(s.einsum([t], "xxyy->"))


def program(ks: Sequence[int]) -> staged.Program:
    """lnZ/N as a staged program of β: T₀ (TRG's; it is symmetric in its four legs), the steps, ln tr."""
    n = len(ks)
    stages = [staged.Stage(partial(step, k=k), 2.0**-i) for i, k in enumerate(ks)]
    return staged.Program(initial, stages, log_trace, 2.0**-n)


class Thermo(NamedTuple):
    """Per site: lnZ/N, the internal energy u and the specific heat c."""

    lnz: float
    u: float
    c: float


def thermodynamics(beta: float, ks: Sequence[int]) -> Thermo:
    """lnZ/N, u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ², all by AD through the staged program."""
    lnz, grad, curvature = program(ks).value_grad_and_curvature(beta)
    return Thermo(lnz, -grad.item(), beta * beta * curvature.item())


def parse_args(argv: Sequence[str]) -> tuple[int, int, list[float]]:
    """chi, steps and betas from the positional arguments (UsageError when one is bad)."""
    for a in argv:
        if a.startswith("--"):
            raise UsageError(f"unknown option {a!r}; allowed: --help")
    positive_int = ("an integer >= 1", lambda v: v >= 1)
    chi = number_argument("chi", argv[0], int, *positive_int) if len(argv) > 0 else 16
    steps = number_argument("steps", argv[1], int, *positive_int) if len(argv) > 1 else 30
    allowed = f"a number in [{BETA_RANGE[0]:g}, {BETA_RANGE[1]:g}] (outside, u and c are not finite; see --help)"
    betas = [number_argument("beta", a, float, allowed, lambda v: BETA_RANGE[0] <= v <= BETA_RANGE[1])
             for a in argv[2:]]
    return chi, steps, betas or list(DEFAULT_BETAS)


def main(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    try:
        chi, steps, betas = parse_args(argv)
    except UsageError as err:
        print(f"hotrg_ising.py: {err}", file=sys.stderr)
        return 2
    ks = schedule(chi, steps)
    print(f"tenferro_py {tf.__version__} eager staged HOTRG chi={chi} steps={steps} N=2^{steps} ks={ks}")
    results = {}
    for beta in betas:
        try:
            r = thermodynamics(beta, ks)
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
