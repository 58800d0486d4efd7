"""Reduced density matrices of an iPEPS unit cell in its CTMRG environment (``ctmrg_cell``), in session ops.

The site tensors are a[p, u, l, d, r] (physical p first, then the four bonds as in ``ipeps``). The
networks take their open double layers O[p, p', n, e, s, w] = a[p] ⊗ conj(a[p']) (bonds fused ket
fastest, clockwise as the environment's), so that ρ[p, p'] = ⟨p|ρ|p'⟩ and ⟨h⟩ = Σ ρ[p, p'] h[p', p].
Each matrix is divided by its trace. A vertical pair is a horizontal one of the frame rotated by 90°,
so one network serves both.
"""

from __future__ import annotations

import numpy as np

from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import Tensor
from .ctmrg_cell import Frame

__all__ = ["bond_expectation", "double_layer", "horizontal_density", "open_layer", "plaquette_density",
           "site_density", "trace_with", "vertical_density"]


def open_layer(s: EagerSession, site: EagerTensor) -> EagerTensor:
    """O[p, p', n, e, s, w] of a[p, u, l, d, r]: each bond's ket and bra indices fused, ket fastest."""
    bond = site.shape[1]
    pairs = s.einsum([site, s.conj(site)], "puldr,qvmes->pquvrsdelm")
    return s.reshape(pairs, (site.shape[0], site.shape[0]) + (bond * bond,) * 4)


def double_layer(s: EagerSession, site: EagerTensor) -> EagerTensor:
    """b[n, e, s, w] = Σ_p a[p] ⊗ conj(a[p]), fused as ``open_layer``'s bonds."""
    bond = site.shape[1]
    pairs = s.einsum([site, s.conj(site)], "puldr,pvmes->uvrsdelm")
    return s.reshape(pairs, (bond * bond,) * 4)


def _normalised(s: EagerSession, rho: EagerTensor, trace_subscripts: str) -> EagerTensor:
    trace = s.einsum([rho], trace_subscripts)
    return s.div(rho, s.broadcast_in_dim(trace, rho.shape, ()))


def site_density(s: EagerSession, frame: Frame, opened: dict, site: tuple[int, int]) -> EagerTensor:
    """ρ[p, p'] of one site: the site's 3 × 3 network with its physical legs open."""
    c, t = frame.corners, frame.edges
    rho = s.einsum([c[0][site], t[0][site], c[1][site], t[1][site], c[2][site], t[2][site], c[3][site],
                    t[3][site], opened[site]], "ag,gnh,hm,meq,qr,rst,tu,uwa,pPnesw->pP")
    return _normalised(s, rho, "pp->")


def horizontal_density(s: EagerSession, frame: Frame, opened: dict, site: tuple[int, int]) -> EagerTensor:
    """ρ[p1, p1', p2, p2'] of ``site`` (x, y) and its right neighbour: the 4 × 3 network, contracted as its
    left half (C0 T0 T3 C3 T2 around O₁) against its right half."""
    width, _ = frame.cell
    right = ((site[0] + 1) % width, site[1])
    c, t = frame.corners, frame.edges
    left_half = s.einsum([c[0][site], t[0][site], t[3][site], c[3][site], t[2][site], opened[site]],
                         "ag,gnh,vwa,uv,tsu,pPnjsw->hjtpP")
    right_half = s.einsum([t[0][right], c[1][right], t[1][right], c[2][right], t[2][right], opened[right]],
                          "hnk,km,meq,qr,rst,pPnesj->hjtpP")
    rho = s.einsum([left_half, right_half], "hjtaA,hjtbB->aAbB")
    return _normalised(s, rho, "aabb->")


def vertical_density(s: EagerSession, frame: Frame, opened: dict, site: tuple[int, int]) -> EagerTensor:
    """ρ[p1, p1', p2, p2'] of ``site`` (x, y) and the site below it: the horizontal pair of the frame
    rotated clockwise, where the site below is the left one."""
    rotated, turned = _rotated(s, frame, opened)
    height = frame.cell.height
    left = ((-(site[1] + 1)) % height, site[0])
    rho = horizontal_density(s, rotated, turned, left)
    return s.transpose(rho, (2, 3, 0, 1))


def _rotated(s: EagerSession, frame: Frame, opened: dict) -> tuple[Frame, dict]:
    """The frame and the open layers rotated by 90° clockwise (Frame.rotated)."""
    joint = frame._replace(bulk=opened).rotated(s)
    return joint._replace(bulk=frame.rotated(s).bulk), joint.bulk


def plaquette_density(s: EagerSession, frame: Frame, opened: dict, site: tuple[int, int]) -> EagerTensor:
    """ρ[p1, p2, p3, p4, p1', p2', p3', p4'] of the 2 × 2 plaquette with ``site`` (x, y) at its upper left,
    sites 1–4 clockwise from there: the 4 × 4 network as four quarters closed in a ring."""
    width, height = frame.cell
    x, y = site
    ur, lr, ll = ((x + 1) % width, y), ((x + 1) % width, (y + 1) % height), (x, (y + 1) % height)
    c, t = frame.corners, frame.edges
    upper_left = s.einsum([c[0][site], t[0][site], t[3][site], opened[site]], "ag,gnh,cwa,pPnesw->hecspP")
    upper_right = s.einsum([t[0][ur], c[1][ur], t[1][ur], opened[ur]], "knh,hm,meq,pPnesw->kwqspP")
    lower_right = s.einsum([t[1][lr], c[2][lr], t[2][lr], opened[lr]], "qer,rt,tsu,pPnesw->qnuwpP")
    lower_left = s.einsum([t[2][ll], c[3][ll], t[3][ll], opened[ll]], "usv,vz,zwc,pPnesw->uecnpP")
    top = s.einsum([upper_left, upper_right], "hecsaA,heqgbB->csqgbBaA")
    bottom = s.einsum([lower_right, lower_left], "qgumxX,umcsdD->qgcsxXdD")
    rho = s.einsum([top, bottom], "csqgbBaA,qgcsxXdD->abxdABXD")
    return _normalised(s, rho, "abcdabcd->")


def trace_with(s: EagerSession, rho: EagerTensor, operator: np.ndarray, subscripts: str) -> EagerTensor:
    """Σ ρ[...] operator[...] by ``subscripts`` (e.g. "aAbB,ABab->" for a pair: h's bra legs first)."""
    return s.einsum([rho, Tensor.from_numpy(np.asarray(operator))], subscripts)


def bond_expectation(s: EagerSession, rho: EagerTensor, h: np.ndarray) -> EagerTensor:
    """⟨h⟩ = Σ ρ[p1, p1', p2, p2'] h[p1', p2', p1, p2] of a pair's density matrix, real."""
    value = trace_with(s, rho, h.astype(np.result_type(h, rho.dtype)), "aAbB,ABab->")
    return s.real(value) if value.dtype.kind == "c" else value
