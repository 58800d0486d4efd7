"""CTMRG of an Lx × Ly unit cell without lattice symmetry, differentiable through its fixed point.

Every site (x, y) of the cell (x to the right, y down, both periodic) has an environment of its
own, the 3 × 3 network around it (the layout of PEPSKit and of Corboz et al., PRB 89, 035133 (2014)):

    C0 T0 C1
    T3 b  T1
    C3 T2 C2

Directions run clockwise from up: 0 up, 1 right, 2 down, 3 left. Corner k lies between edges k − 1
and k, C_k[α, β] with α towards edge k − 1 and β towards edge k; edge k is T_k[α, i, β], α towards
corner k, i into the site, β towards corner k + 1. The bulk (double-layer) tensors are held with
their legs in the same order, b[n, e, s, w]. Rotating the lattice by 90° maps these conventions
onto themselves, so one directional move, the left move, serves all four: a :class:`Frame` is the
cell seen after some rotations, and rotating is relabelling. A step (:func:`ctmrg_step`) is a left,
a down, a right and an up move, each from the environment the one before left.

A move cuts each bond of the new boundary with projectors from the two enlarged corners beside the
cut (the half-infinite construction), truncated by an SVD to χ. Each new state's phase (its sign,
for real tensors) is then matched to the tensors it replaces, so the iterates converge element by
element and the step is a smooth map at its fixed point: :func:`environment_fixed_point` (a
``tenferro_py.fixed_point.FixedPoint``) differentiates any readout through it. Why these choices,
and what they cost, is in docs/unit-cell.md.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..errors import InvalidArgument, ShapeMismatch
from ..fixed_point import FixedPoint
from ..ops.structural import SliceConfig
from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import Tensor

__all__ = ["ALIGNED", "ALIGNED_BLOCK", "CLUSTER_GAP", "CONVERGENCE_TOL", "KEPT", "SOLVE_TOL", "Cell", "clusters", "CellBulkFn", "Frame", "converge", "ctmrg_step",
           "environment_fixed_point", "initial_environment", "left_move", "pack", "unpack"]

KEPT = 1e-9
"""Singular values of a cut below this times the largest are not kept: they are ~λ² of the enlarged
corners' λ, their states weigh ~1e-9 in the density matrices, and their vectors are fixed only to
rounding / gap, which keeps the iterates moving (measured in docs/unit-cell.md)."""
CONVERGENCE_TOL = 1e-10
"""The default largest change of a corner or edge (relative, in Frobenius norm) at which iteration stops."""
SOLVE_TOL = 1e-10
"""The relative residual of the derivative's linear solves (as ctmrg.SOLVE_TOL)."""
ALIGNED = 1e-12
"""New states whose overlaps with the ones they replace are below this (relative) keep the SVD's basis:
there is nothing to align them to (an environment still growing from its start)."""
ALIGNED_BLOCK = 1e-3
"""A cluster's cosines are usable for its alignment while their smallest singular value is above this."""
CLUSTER_GAP = 1e-3
"""Kept singular values closer than this (relative) form a cluster, whose states are aligned to the old
ones as a block (by a unitary), not one by one (by a phase): inside a near-multiplet the SVD's basis is
fixed only weakly, and the iterates would keep turning in it (measured: a C4v Heisenberg state on a
2 × 2 cell, pairs 5e-6 apart, stalled at a change of 2e-6)."""

Site = tuple[int, int]


class Cell(NamedTuple):
    """The unit cell's width Lx (columns x) and height Ly (rows y)."""

    width: int
    height: int

    def sites(self) -> list[Site]:
        """(x, y) of every site, row by row."""
        return [(x, y) for y in range(self.height) for x in range(self.width)]


CellBulkFn = Callable[[EagerSession, EagerTensor], dict]
"""bulk(s, θ) -> {(x, y): b[n, e, s, w]}: the cell's double layers as session functions of the parameters."""


class Frame(NamedTuple):
    """The cell's environment and bulk tensors seen after some 90° rotations: ``corners[k]`` and ``edges[k]``
    map each site to C_k and T_k, ``bulk`` to b[n, e, s, w], in this frame's directions."""

    cell: Cell
    corners: tuple[dict, dict, dict, dict]
    edges: tuple[dict, dict, dict, dict]
    bulk: dict

    def rotated(self, s: EagerSession) -> "Frame":
        """The frame rotated by 90° clockwise: (x, y) ↦ (−y mod Ly, x), direction k ↦ k + 1, the old west
        leg of each bulk tensor its new north leg (legs before its last four, physical ones, stay)."""
        width, height = self.cell

        def moved(tensors: dict) -> dict:
            return {((-y) % height, x): t for (x, y), t in tensors.items()}

        corners = tuple(moved(self.corners[(k - 1) % 4]) for k in range(4))
        edges = tuple(moved(self.edges[(k - 1) % 4]) for k in range(4))
        bulk = {site: s.transpose(b, _turned_legs(b.ndim)) for site, b in moved(self.bulk).items()}
        return Frame(Cell(height, width), corners, edges, bulk)


def _turned_legs(ndim: int) -> tuple[int, ...]:
    """The axes of a tensor [..., n, e, s, w] (its last four legs the bonds) after a clockwise turn."""
    lead = tuple(range(ndim - 4))
    return lead + (ndim - 1, ndim - 4, ndim - 3, ndim - 2)


def pack(frame: Frame) -> tuple[EagerTensor, ...]:
    """The environment as one tuple (FixedPoint's state): C0 … C3, then T0 … T3, each over the sites row by row."""
    sites = frame.cell.sites()
    return tuple(group[k][site] for group in (frame.corners, frame.edges) for k in range(4) for site in sites)


def unpack(cell: Cell, state: tuple, bulk: dict) -> Frame:
    """The inverse of :func:`pack`, with the bulk tensors that go with it."""
    sites = cell.sites()
    n = len(sites)
    if len(state) != 8 * n:
        raise ShapeMismatch("ctmrg_cell", f"8 × {n} environment tensors for a {cell.width} × {cell.height} cell",
                            f"{len(state)}")
    groups = [{site: state[k * n + i] for i, site in enumerate(sites)} for k in range(8)]
    return Frame(cell, tuple(groups[:4]), tuple(groups[4:]), bulk)


def clusters(values: np.ndarray) -> np.ndarray:
    """Which kept singular values (decreasing) share a cluster, as labels: a new cluster wherever the next
    value lies more than CLUSTER_GAP (relative) below the one before."""
    gaps = (values[:-1] - values[1:]) > CLUSTER_GAP * values[:-1]
    return np.concatenate([[0], np.cumsum(gaps)])


def _alignment(s: EagerSession, overlap: EagerTensor, new_norms: EagerTensor, old_norms: EagerTensor,
               labels: np.ndarray) -> EagerTensor:
    """The block-diagonal unitary X (one block per cluster) that makes the new states j follow the old
    ones j': the polar factor B (BᴴB)^(−1/2) of each block B of the cosines Z[j, j'] / (|new_j| |old_j'|),
    for a single state its phase z/|z|. A block that is not usable (a state whose norm is below ALIGNED
    of the largest, or cosines whose smallest singular value is below ALIGNED_BLOCK: nothing yet to align
    to) keeps the SVD's basis."""
    z = overlap.value().to_numpy()
    sizes = np.outer(new_norms.value().to_numpy(), old_norms.value().to_numpy())
    present = sizes > ALIGNED * max(sizes.max(), np.finfo(np.float64).tiny)
    cosines = np.where(present, z / np.where(present, sizes, 1.0), 0.0)
    keep = np.zeros(z.shape, dtype=bool)
    for label in np.unique(labels):
        members = labels == label
        block = np.ix_(members, members)
        if present[block].all() and np.linalg.svd(cosines[block], compute_uv=False)[-1] > ALIGNED_BLOCK:
            keep[block] = True
    norms = s.einsum([new_norms, old_norms], "j,k->jk")
    if z.dtype.kind == "c":
        norms = s.complex(norms, s.constant_from(Tensor.from_numpy(np.zeros(z.shape))))
    safe = s.where(s.constant_from(Tensor.from_numpy(present)), norms,
                   s.constant_from(Tensor.from_numpy(np.ones(z.shape, z.dtype))))
    masked = s.where(s.constant_from(Tensor.from_numpy(keep)), s.div(overlap, safe),
                     s.constant_from(Tensor.from_numpy(np.eye(len(labels), dtype=z.dtype))))
    gram = s.einsum([s.conj(masked), masked], "ji,jk->ik")
    return s.einsum([masked, s.inv_sqrtm(gram)], "ji,ik->jk")


def _row_norms(s: EagerSession, corner0: EagerTensor, corner3: EagerTensor) -> EagerTensor:
    """√(Σ_b |C0[j, b]|² + Σ_a |C3[a, j]|²) per state j."""
    squares = s.add(s.einsum([s.conj(corner0), corner0], "jb,jb->j"), s.einsum([s.conj(corner3), corner3], "aj,aj->j"))
    return s.sqrt(s.real(squares) if squares.dtype.kind == "c" else squares)


def _normalised(s: EagerSession, x: EagerTensor) -> EagerTensor:
    """x / ‖x‖_F (complex x too)."""
    if x.dtype.kind != "c":
        norm = s.sqrt(s.reduce_sum(s.mul(x, x)))
    else:
        norm = s.sqrt(s.reduce_sum(s.real(s.mul(x, s.conj(x)))))
        norm = s.complex(norm, s.constant_from(Tensor.from_numpy(np.zeros(()))))
    return s.div(x, s.broadcast_in_dim(norm, x.shape, ()))


def _scaled(s: EagerSession, x: EagerTensor, factors: EagerTensor, axis: int) -> EagerTensor:
    """x with its index ``axis`` multiplied by ``factors``."""
    return s.mul(x, s.broadcast_in_dim(factors, x.shape, (axis,)))


def _projectors(s: EagerSession, upper: EagerTensor, lower: EagerTensor, chi: int, op: str
                ) -> tuple[EagerTensor, EagerTensor, np.ndarray]:
    """(P_a, P_b) of one cut, each [c, j] with c the cut's (χ, D) pair: P_a joins the side above, P_b the
    side below, P_a P_bᵀ the identity on the kept span; and the kept values' ``clusters``. ``upper`` is the
    enlarged corner above the cut as [cut, right], ``lower`` the one below as [right, cut]; with the
    half-infinite environment M = upperᵀ lowerᵀ = U S Vᴴ truncated to k ≤ χ, P_a = lowerᵀ V S^(−1/2) and
    P_b = upper conj(U) S^(−1/2)."""
    # M = A B with A = upperᵀ = Ua Sa Vaᴴ: the SVD of the row-graded K = Sa Vaᴴ B = Uk S Vkᴴ gives M's small
    # singular triplets to the accuracy of the factors, where forming M would square their condition
    ua, sa, vha = s.svd(s.transpose(upper, (1, 0)))
    n = ua.shape[0]
    graded = s.einsum([s.mul(s.broadcast_in_dim(sa, vha.shape, (0,)), vha) if sa.dtype == vha.dtype else
                       s.mul(s.broadcast_in_dim(s.complex(sa, s.constant_from(Tensor.from_numpy(np.zeros(n)))),
                                                vha.shape, (0,)), vha), s.transpose(lower, (1, 0))],
                      "ic,cm->im")
    uk, values, vhk = s.svd(graded)
    found = values.value().to_numpy()
    if not np.all(np.isfinite(found)) or found[0] == 0:
        raise InvalidArgument(op, "a cut whose half-infinite environment is finite and not zero",
                              "one with a largest singular value of " + repr(float(found[0])))
    k = int(min(chi, np.count_nonzero(found >= KEPT * found[0])))
    uk_k = s.slice(uk, SliceConfig([0, 0], [n, k]))
    vh_k = s.slice(vhk, SliceConfig([0, 0], [k, n]))
    scale = s.div(s.constant_from(Tensor.from_numpy(np.ones(k))), s.sqrt(s.slice(values, SliceConfig([0], [k]))))
    if upper.dtype.kind == "c":
        scale = s.complex(scale, s.constant_from(Tensor.from_numpy(np.zeros(k))))
    p_a = _scaled(s, s.einsum([lower, s.conj(vh_k)], "nc,jn->cj"), scale, 1)
    left = s.einsum([vha, s.conj(uk_k)], "ic,ij->icj")
    weights = sa if upper.dtype.kind != "c" else s.complex(sa, s.constant_from(Tensor.from_numpy(np.zeros(n))))
    p_b = _scaled(s, s.einsum([left, weights], "icj,i->cj"), scale, 1)
    return p_a, p_b, clusters(found[:k])


def _padded(s: EagerSession, x: EagerTensor, shape: tuple[int, ...]) -> EagerTensor:
    return x if tuple(x.shape) == shape else s.pad(x, shape, (0,) * len(shape))


def left_move(s: EagerSession, frame: Frame, chi: int) -> Frame:
    """The frame with each column's left boundary (C0, T3, C3) renewed from the column to its left.

    For the cut between rows y − 1 and y of column x, the enlarged corners Q0 of (x, y − 1) and Q3 of
    (x, y) give the projectors (``_projectors``); column x + 1's C0 = C0 T0 P_a, T3 = P_a T3 b P_b and
    C3 = T2 C3 P_b are then built from column x's tensors, each new state's phase matched to the
    corners it replaces, and each tensor divided by its norm."""
    width, height = frame.cell
    c, t, b = frame.corners, frame.edges, frame.bulk
    chi_in, bond = t[0][(0, 0)].shape[0], t[0][(0, 0)].shape[1]
    n = chi_in * bond
    upper, lower = {}, {}
    for site in frame.cell.sites():
        q0 = s.einsum([c[0][site], t[0][site], t[3][site], b[site]], "ag,gnb,cwa,nesw->csbe")
        q3 = s.einsum([c[3][site], t[2][site], t[3][site], b[site]], "gb,asg,bwc,nesw->aecn")
        upper[site], lower[site] = s.reshape(q0, (n, n)), s.reshape(q3, (n, n))
    cuts, labels = {}, {}  # (x, y): the projectors of the cut above row y in column x, each [χ, D, k]
    for x, y in frame.cell.sites():
        p_a, p_b, labels[(x, y)] = _projectors(s, upper[(x, (y - 1) % height)], lower[(x, y)], chi,
                                               "ctmrg_cell.left_move")
        k = p_a.shape[1]
        cuts[(x, y)] = s.reshape(p_a, (chi_in, bond, k)), s.reshape(p_b, (chi_in, bond, k))
    corners0, corners3, edges3 = dict(c[0]), dict(c[3]), dict(t[3])
    raw0, raw3 = {}, {}
    for x, y in frame.cell.sites():
        below = (x, (y + 1) % height)
        raw0[(x, y)] = s.einsum([c[0][(x, y)], t[0][(x, y)], cuts[(x, y)][0]], "ag,gnb,anj->jb")
        raw3[(x, y)] = s.einsum([t[2][(x, y)], c[3][(x, y)], cuts[below][1]], "asg,gb,bsj->aj")
    turns = {}  # (x, y): the cut's alignment X, new states j to aligned states j'
    for x, y in frame.cell.sites():
        new, above = ((x + 1) % width, y), ((x + 1) % width, (y - 1) % height)
        k = raw0[(x, y)].shape[0]
        old0 = s.slice(c[0][new], SliceConfig([0, 0], [k, chi_in]))
        old3 = s.slice(c[3][above], SliceConfig([0, 0], [chi_in, k]))
        overlap = s.add(s.einsum([s.conj(raw0[(x, y)]), old0], "jb,kb->jk"),
                        s.einsum([raw3[(x, (y - 1) % height)], s.conj(old3)], "aj,ak->jk"))
        new_norms = _row_norms(s, raw0[(x, y)], raw3[(x, (y - 1) % height)])
        turns[(x, y)] = _alignment(s, overlap, new_norms, _row_norms(s, old0, old3), labels[(x, y)])
    for x, y in frame.cell.sites():
        below, new = (x, (y + 1) % height), ((x + 1) % width, y)
        up, down = turns[(x, y)], turns[below]
        corner0 = s.einsum([up, raw0[(x, y)]], "jJ,jb->Jb")
        corner3 = s.einsum([raw3[(x, y)], s.conj(down)], "aj,jJ->aJ")
        edge = s.einsum([cuts[below][0], t[3][(x, y)], b[(x, y)], cuts[(x, y)][1]], "asK,awb,nesw,bnk->Kek")
        edge = s.einsum([down, edge, s.conj(up)], "KL,Kek,kl->Lel")
        corners0[new] = _normalised(s, _padded(s, corner0, (chi, chi_in)))
        corners3[new] = _normalised(s, _padded(s, corner3, (chi_in, chi)))
        edges3[new] = _normalised(s, _padded(s, edge, (chi, bond, chi)))
    corners = (corners0, c[1], c[2], corners3)
    return Frame(frame.cell, corners, (t[0], t[1], t[2], edges3), b)


def ctmrg_step(s: EagerSession, frame: Frame, chi: int) -> Frame:
    """One CTMRG step of the whole cell: a left move, then (rotating the lattice clockwise between moves)
    a down, a right and an up move. The environment's χ must already be ``chi`` (see initial_environment)."""
    if not (isinstance(chi, int) and not isinstance(chi, bool) and chi >= 1):
        raise InvalidArgument("ctmrg_cell.ctmrg_step", "chi: an int >= 1", repr(chi))
    for _ in range(4):
        frame = left_move(s, frame, chi).rotated(s)
    return frame


def initial_environment(cell: Cell, bulk: dict, chi: int) -> tuple[Tensor, ...]:
    """A starting environment of bond χ (packed): each boundary tensor is the bulk tensor at its place
    closed by the first basis vector e₀ on its outer legs, padded with zeros (or cut) to χ."""
    width, height = cell
    arrays = {site: np.asarray(b) for site, b in bulk.items()}
    bond = arrays[(0, 0)].shape[0]
    e0 = np.eye(bond)[0]
    n = min(bond, chi)

    def at(x: int, y: int) -> np.ndarray:
        return arrays[(x % width, y % height)]

    def fit(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """a padded with zeros (or cut) to ``shape`` on its χ legs, divided by its norm."""
        out = np.zeros(shape, a.dtype)
        if a.ndim == 2:
            out[:n, :n] = a[:n, :n]
        else:
            out[:n, :, :n] = a[:n, :, :n]
        return out / np.linalg.norm(out)

    corners, edges = [{}, {}, {}, {}], [{}, {}, {}, {}]
    for x, y in cell.sites():
        # corner k: the site diagonally beyond it, closed on the two legs that point away from (x, y)
        corners[0][(x, y)] = fit(np.einsum("nesw,n,w->se", at(x - 1, y - 1), e0, e0), (chi, chi))
        corners[1][(x, y)] = fit(np.einsum("nesw,n,e->ws", at(x + 1, y - 1), e0, e0), (chi, chi))
        corners[2][(x, y)] = fit(np.einsum("nesw,e,s->nw", at(x + 1, y + 1), e0, e0), (chi, chi))
        corners[3][(x, y)] = fit(np.einsum("nesw,s,w->en", at(x - 1, y + 1), e0, e0), (chi, chi))
        edges[0][(x, y)] = fit(np.einsum("nesw,n->wse", at(x, y - 1), e0), (chi, bond, chi))
        edges[1][(x, y)] = fit(np.einsum("nesw,e->nws", at(x + 1, y), e0), (chi, bond, chi))
        edges[2][(x, y)] = fit(np.einsum("nesw,s->enw", at(x, y + 1), e0), (chi, bond, chi))
        edges[3][(x, y)] = fit(np.einsum("nesw,w->sen", at(x - 1, y), e0), (chi, bond, chi))
    sites = cell.sites()
    return tuple(Tensor.from_numpy(group[k][site]) for group in (corners, edges) for k in range(4) for site in sites)


def _checked_bulk(cell: Cell, bulk: dict, op: str) -> None:
    if not isinstance(bulk, dict) or set(bulk) != set(cell.sites()):
        raise InvalidArgument(op, f"bulk: a dict of the {cell.width} × {cell.height} cell's sites (x, y)",
                              repr(sorted(bulk)) if isinstance(bulk, dict) else type(bulk).__name__)
    shapes = {tuple(b.shape) for b in bulk.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 4 or len(set(next(iter(shapes)))) != 1:
        raise ShapeMismatch(op, "bulk tensors b[n, e, s, w] of one shape (D, D, D, D)", sorted(shapes))


def environment_fixed_point(cell: Cell, bulk: CellBulkFn, chi: int, tol: float = CONVERGENCE_TOL,
                            maxiter: int = 1000) -> FixedPoint:
    """The CTMRG fixed point of the cell's bulk tensors ``bulk(s, θ)`` as a ``FixedPoint`` in θ, its state
    the packed environment (``pack``; start from ``initial_environment``)."""
    if not (isinstance(cell, Cell) and all(isinstance(v, int) and v >= 1 for v in cell)):
        raise InvalidArgument("ctmrg_cell.environment_fixed_point", "cell: a Cell(width, height) of ints >= 1",
                              repr(cell))

    def step(s: EagerSession, state: tuple, theta: EagerTensor) -> tuple:
        tensors = bulk(s, theta)
        _checked_bulk(cell, tensors, "ctmrg_cell.ctmrg_step")
        return pack(ctmrg_step(s, unpack(cell, state, tensors), chi))

    return FixedPoint(step, tol=tol, maxiter=maxiter, solve_tol=SOLVE_TOL, solve_maxiter=maxiter)


def converge(cell: Cell, bulk: dict, chi: int, tol: float = CONVERGENCE_TOL, maxiter: int = 1000
             ) -> tuple[Tensor, ...]:
    """The packed environment of fixed bulk tensors {(x, y): b[n, e, s, w]} (arrays), from
    ``initial_environment``; FixedPointError if it does not converge."""
    arrays = {site: np.asarray(b) for site, b in bulk.items()} if isinstance(bulk, dict) else bulk
    _checked_bulk(cell, arrays, "ctmrg_cell.converge")
    sites = cell.sites()
    dtype = np.result_type(*arrays.values())
    stacked = Tensor.from_numpy(np.stack([arrays[site].astype(dtype) for site in sites]))

    def tensors(s: EagerSession, theta: EagerTensor) -> dict:
        d = theta.shape[1]
        return {site: s.reshape(s.slice(theta, SliceConfig([i, 0, 0, 0, 0], [i + 1, d, d, d, d])), (d,) * 4)
                for i, site in enumerate(sites)}

    problem = environment_fixed_point(cell, tensors, chi, tol, maxiter)
    return problem.solve(stacked, initial_environment(cell, arrays, chi)).x
