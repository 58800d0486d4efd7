"""The 2D Ising model (J = 1, no field) by HOTRG, staged with :mod:`tenferro_py.staged`.

The higher-order TRG of Xie et al. (PRB 86, 045139, 2012): each step contracts the tensor with
its upper neighbour, T[l,r,d,u] T[l',r',u,u'], which doubles the sites a tensor stands for and
squares its x-bond dimension, then truncates the pair of x-bonds to the χ leading eigenvectors
of the bond environment M Mᵀ (M the two-tensor contraction with the x-bond pair as rows), by
``eigh``; x and y then swap, so the steps alternate directions. Each step normalises T first and
the program accumulates 2⁻ⁱ ln‖T_i‖, as TRG does: after n steps lnZ/N = Σ_i 2⁻ⁱ ln‖T_i‖ +
2⁻ⁿ ln tr T_n on a torus of N = 2ⁿ sites. u comes from the program's reverse sweep and c from
its second derivative (forward over reverse), with no finite difference::

    from tenferro_py.models import hotrg
    r = hotrg.thermodynamics(0.4, hotrg.schedule(16, 30))   # r.lnz, r.u, r.c
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

from .. import staged
from ..ops.structural import SliceConfig
from ..session import EagerSession
from ..tape import EagerTensor
from .trg import Thermo, initial

__all__ = ["BETA_RANGE", "Thermo", "initial", "log_trace", "program", "schedule", "step", "thermodynamics"]

BETA_RANGE = (1e-14, 150.0)
"""The βs where u and c are finite: below, T₀'s spectrum is no longer resolved; above, its entries
overflow (how the bounds were measured: docs/models.md, HOTRG)."""


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

    T is T[l, r, d, u] (TRG's T₀ serves: it is symmetric in its four legs). When k = D² nothing
    is cut and the pair of x-bonds is just merged (no eigh: the isometry would be a rotation of
    the whole space).
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
    """lnZ/N as a staged program of β: T₀ (TRG's), the steps, ln tr."""
    n = len(ks)
    stages = [staged.Stage(partial(step, k=k), 2.0**-i) for i, k in enumerate(ks)]
    return staged.Program(initial, stages, log_trace, 2.0**-n)


def thermodynamics(beta: float, ks: Sequence[int]) -> Thermo:
    """lnZ/N, u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ², all by AD through the staged program."""
    lnz, grad, curvature = program(ks).value_grad_and_curvature(beta)
    return Thermo(lnz, -grad.item(), beta * beta * curvature.item())
