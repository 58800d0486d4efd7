"""The 2×2 plaquette's reduced density matrix of a C4v iPEPS in its CTMRG environment: what a
next-nearest-neighbour (diagonal) term's energy is read from, exact at the environment's χ.

The network is the four sites with their physical legs open, each in one corner of the environment:

    C T T C
    T a a T
    T a a T
    C T T C

Each quarter, C·T·T·O (O a site's open double layer), is the same tensor Q[h, v, p, p'] by the
C4v symmetry of a, C and T: h is its cut towards the horizontal neighbour (an edge's χ leg and the
site's virtual leg), v towards the vertical one. The four quarters close in a ring.
"""

from __future__ import annotations

import numpy as np

from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import Tensor
from . import ctmrg

__all__ = ["diagonal_energy", "plaquette_density", "quarter"]


def quarter(s: EagerSession, env: ctmrg.Environment, open_site: EagerTensor) -> EagerTensor:
    """Q[h, v, p, p'] of the upper-left corner: C[x, y], the top edge T[y, u, z], the left edge T[x, l, w]
    around O[p, p', u, l, d, r]; h = (z, r) towards the right, v = (w, d) downwards."""
    corner, edge = env
    q = s.einsum([corner, edge, edge, open_site], "xy,yuz,xlw,pculdr->zrwdpc")
    chi, bond = edge.shape[0], open_site.shape[2]
    return s.reshape(q, (chi * bond, chi * bond, open_site.shape[0], open_site.shape[1]), order="C")


def plaquette_density(s: EagerSession, env: ctmrg.Environment, open_site: EagerTensor) -> EagerTensor:
    """ρ[p1, p2, p3, p4, p1', p2', p3', p4'] of the plaquette, sites 1–4 clockwise from the upper left,
    normalised to trace 1."""
    q = quarter(s, env, open_site)
    rho = s.einsum([q, q, q, q], "hvae,hVbf,HVcg,Hvdk->abcdefgk")
    d = open_site.shape[0]
    trace = s.einsum([s.reshape(rho, (d ** 4, d ** 4), order="C")], "ii->")
    return s.div(rho, s.broadcast_in_dim(trace, rho.shape, ()))


def diagonal_energy(s: EagerSession, env: ctmrg.Environment, open_site: EagerTensor,
                    hamiltonian: np.ndarray) -> EagerTensor:
    """⟨h⟩ on a diagonal pair (sites 1 and 3 of the plaquette; the other diagonal is equal by C4v)."""
    rho = plaquette_density(s, env, open_site)
    pair = s.einsum([rho], "abcdebgd->aceg")  # sites 2 and 4 traced out
    return s.einsum([pair, Tensor.from_numpy(hamiltonian)], "acAC,ACac->")
