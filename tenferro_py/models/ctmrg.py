"""C4v-symmetric corner transfer matrix renormalisation group (CTMRG), differentiable through its fixed point.

The environment of an infinite square lattice of one real bulk tensor ``a[u, l, d, r]``, invariant
under C4v (rotations and reflections of its four legs, bond dimension D on each), is one corner
matrix ``C[α, β]`` (χ × χ, symmetric) and one edge tensor ``T[α, i, β]`` (χ × D × χ, symmetric under
α ↔ β; ``i`` joins the bulk). One step (Nishino and Okunishi, J. Phys. Soc. Jpn. 65, 891 (1996); the
C4v form as in Liao et al., PRX 9, 031041 (2019)) grows the corner by a row and a column,
M = C·T·T·a, keeps the span of its leading eigenvectors and renormalises C and T into it.

``ctmrg_step`` fixes the gauge so that the iterates converge element by element and the step is a
smooth map, for the Ising model's exact corner multiplets and for iPEPS double layers alike:
``environment_fixed_point`` (a ``tenferro_py.fixed_point.FixedPoint``) then differentiates any
readout through the fixed point, and the networks below (``ln_z_per_site``, ``site_expectation``,
``two_site_network``, ...) are session ops of the environment and the centre tensors.
The cut (which eigenvectors of M to keep, by which eigh, and their span's derivative) is
``tenferro_py.models.corner_cut``. ``ising_thermodynamics`` is the whole method for the 2D Ising model:

    >>> from tenferro_py.models import ctmrg
    >>> r = ctmrg.ising_thermodynamics(0.6, chi=20)   # r.lnz, r.u, r.c, r.m (Onsager's to ~1e-14)
"""

from __future__ import annotations

import math
import time
from typing import Callable, NamedTuple

import numpy as np
import scipy.sparse.linalg

from ..errors import InvalidArgument, ShapeMismatch
from ..fixed_point import FixedPoint
from ..ops.structural import SliceConfig
from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import Tensor, is_real_number
from .corner_cut import EIGH_METHODS, MULTIPLET_GAP, RESOLVED, eigh_method, kept_count, kept_space
from .trg import initial

__all__ = [
    "CONVERGENCE_TOL", "EIGH_METHODS", "GAUGE_INDEX", "MULTIPLET_GAP", "RESOLVED", "SOLVE_TOL", "TIE", "BulkFn",
    "Environment", "IsingThermodynamics", "converge", "corner_network", "correlation_length", "ctmrg_step",
    "edge_network", "eigh_method", "enlarged_corner", "environment_fixed_point", "initial_environment",
    "ising_tensor", "ising_tensors", "ising_thermodynamics", "kept_count", "kept_space", "ln_z_per_site",
    "row_correlators", "site_expectation", "site_network", "transfer_matrix_eigenvalues", "two_site_network",
]

Environment = tuple[EagerTensor, EagerTensor]
"""(C, T): the corner matrix C[α, β] and the edge tensor T[α, i, β]."""

BulkFn = Callable[[EagerSession, EagerTensor], EagerTensor]
"""bulk(s, θ) -> a[u, l, d, r]: the bulk tensor as a session function of the parameters."""

GAUGE_INDEX = 0
"""The bulk index i of the edge slice T[:, i, :] whose eigenbasis is the gauge (see ``ctmrg_step``)."""
TIE = 1e-8
"""Couplings within this (relative) of the largest count as tied for it in the sign rule (``_gauge_signs``)."""
CONVERGENCE_TOL = 1e-12
"""The default largest change of C and T (relative, element by element) at which the iteration stops."""
SOLVE_TOL = 1e-10
"""The relative residual to which the derivative's linear solves go: their products carry rounding divided
by the kept-to-discarded gap of M and stall above 1e-12 where it is small (Ising at χ = 32, β = 0.44);
1e-10 changes u and c at χ = 20, β = 0.3 to 0.6 by less than 5e-14."""


def initial_environment(a: np.ndarray, chi: int, boundary: np.ndarray | None = None) -> tuple[Tensor, Tensor]:
    """A starting (C, T) of bond χ: the lattice's corner and edge closed by ``boundary`` on their outer legs.

    ``boundary`` (length D, default the first basis vector e₀) closes every outer leg:
    C₀[r, d] = Σ a[u, l, d, r] b[u] b[l] and T₀[u, r, d] = Σ a[u, l, d, r] b[l], padded with zeros (or
    cut) to χ × χ and χ × D × χ, the fixed point's shapes. For the Ising tensor (``ising_tensors``) e₀ is
    the free boundary and Q's first row a boundary of fixed + spins, which breaks the symmetry: below
    T_c the iteration then converges to the + state.
    """
    a = np.asarray(a, dtype=np.float64)
    d = a.shape[0] if a.ndim else 0
    if a.shape != (d, d, d, d):
        raise ShapeMismatch("initial_environment", "a bulk tensor of shape (D, D, D, D)", a.shape)
    b = np.eye(d)[0] if boundary is None else np.asarray(boundary, dtype=np.float64)
    if b.shape != (d,):
        raise ShapeMismatch("initial_environment", f"a boundary vector of length {d}", f"shape {b.shape}")
    corner = np.einsum("uldr,u,l->rd", a, b, b)
    edge = np.einsum("uldr,l->urd", a, b)
    n = min(d, chi)
    c0, t0 = np.zeros((chi, chi)), np.zeros((chi, d, chi))
    c0[:n, :n] = corner[:n, :n]
    t0[:n, :, :n] = edge[:n, :, :n]
    return Tensor.from_numpy(c0 / np.linalg.norm(c0)), Tensor.from_numpy(t0 / np.linalg.norm(t0))


def enlarged_corner(s: EagerSession, env: Environment, a: EagerTensor) -> EagerTensor:
    """M[(x, r), (y, d)] = Σ C[p, q] T[p, u, x] T[q, l, y] a[u, l, d, r]: the corner grown by one site.

    Rows pair the upper edge's outer χ leg x with a's right leg r, columns the left edge's y with a's
    down leg d (column-major: x and y run fastest). Symmetric by C4v (a[u,l,d,r] = a[l,u,r,d]).
    """
    c, t = env
    chi, d = t.shape[0], t.shape[1]
    corner = s.einsum([c, t, t, a], "pq,pux,qly,uldr->xryd")
    return s.reshape(corner, (chi * d, chi * d))


def _gauge_signs(corner: np.ndarray, edge: np.ndarray) -> np.ndarray:
    """Signs s (s₀ = 1) that fix the last gauge freedom of (C, T), C[k, m] → s_k s_m C[k, m], T[k, i, m]
    → s_k s_m T[k, i, m]: each state k ≥ 1 in turn makes its largest coupling to the states before it
    (among C[k, m] s_m and T[k, i, m] s_m, m < k) positive.

    "Largest" is the first within TIE of the largest magnitude: a double layer Σ_p a[p] ⊗ a[p] is
    symmetric under exchanging ket and bra, so T[k, (x, y), m] = ±T[k, (y, x), m] and the largest
    coupling comes twice, with opposite signs where k and m differ in that exchange's parity. Taking
    whichever rounds larger would flip the sign from step to step, the step would jump at its own
    fixed point, and its derivative would be that of another map (an iPEPS gradient 3.8e-3 off at
    D = 2, χ = 8, measured). The signs enter as constants (locally constant in the input).
    """
    n = corner.shape[0]
    signs = np.ones(n)
    for k in range(1, n):
        couplings = np.concatenate([corner[k, :k] * signs[:k], (edge[k, :, :k] * signs[:k]).ravel()])
        magnitudes = np.abs(couplings)
        first = np.argmax(magnitudes >= (1 - TIE) * magnitudes.max())
        signs[k] = -1.0 if couplings[first] < 0 else 1.0
    return signs


def _constant(s: EagerSession, array: np.ndarray) -> EagerTensor:
    return s.constant_from(Tensor.from_numpy(array))


def _normalised(s: EagerSession, x: EagerTensor) -> EagerTensor:
    """x / ‖x‖_F."""
    norm = s.sqrt(s.reduce_sum(s.mul(x, x)))
    return s.div(x, s.broadcast_in_dim(norm, x.shape, ()))


def _symmetrised(s: EagerSession, x: EagerTensor, perm: tuple[int, ...]) -> EagerTensor:
    """(x + x transposed by perm) / 2."""
    return s.scale_real(s.add(x, s.transpose(x, perm)), 0.5)


def ctmrg_step(
    s: EagerSession, env: Environment, a: EagerTensor, chi: int, multiplet_gap: float = MULTIPLET_GAP,
    method: str = "auto",
) -> Environment:
    """One C4v CTMRG step: (C', T') of bond χ from (C, T) and the bulk tensor a, in session ops.

    The enlarged corner M = C·T·T·a (``enlarged_corner``), symmetrised, is cut to the span of its k
    eigenvectors of largest |eigenvalue| (``kept_space``, by ``method``: see ``eigh_method``; k ≤ χ
    from ``kept_count`` with ``multiplet_gap``; C' and T' are padded with zeros to χ). The basis P of
    that span is the gauge: the eigenbasis of the new edge's slice T'[:, GAUGE_INDEX, :] (eigenvalues
    decreasing), with the signs of ``_gauge_signs``. Not M's
    eigenbasis, which M's exact multiplets (the Ising corner spectrum has them; so do iPEPS states
    near a continuous symmetry) leave arbitrary, while the slice's eigenvalues are spread. Then
    C' = PᵀMP and T'[k, i, m] = Σ P[(α, u), k] T[α, l, β] a[u, l, d, i] P[(β, d), m], each symmetrised
    and divided by its Frobenius norm. The output depends on (C, T) only through its gauge-invariant
    content, so the iterates converge element by element; the discrete choices (the cut, the signs)
    are locally constant, and the rest is differentiable to second order given distinct slice
    eigenvalues. Checked: iPEPS energy gradients at D = 2, χ = 8 agree with central differences to
    ~5e-11, and Ising u and c with Onsager's to ~1e-14.
    """
    c, t = env
    chi_in, d = t.shape[0], t.shape[1]
    if c.shape != (chi_in, chi_in) or t.shape != (chi_in, d, chi_in) or a.shape != (d, d, d, d):
        raise ShapeMismatch("ctmrg_step", "C (χ, χ), T (χ, D, χ) and a (D, D, D, D)",
                            f"{list(c.shape)}, {list(t.shape)} and {list(a.shape)}")
    if not 1 <= chi <= chi_in * d:
        raise InvalidArgument("ctmrg_step", f"chi in [1, {chi_in * d}] (the enlarged corner's size)", chi)
    if not 0 <= multiplet_gap < 1:
        raise InvalidArgument("ctmrg_step", "multiplet_gap in [0, 1)", multiplet_gap)
    eigh_method(chi_in * d, chi, method)  # a bad method is refused before any work
    corner = _symmetrised(s, enlarged_corner(s, env, a), (1, 0))
    kept = kept_space(s, corner, chi, multiplet_gap, method)
    k = kept.shape[1]
    kept = s.reshape(kept, (chi_in, d, k))
    a_slice = s.reshape(s.slice(a, SliceConfig([0, 0, 0, GAUGE_INDEX], [d, d, d, GAUGE_INDEX + 1])), (d, d, d))
    _, rotation = s.eigh(s.einsum([kept, t, a_slice, kept], "auk,alb,uld,bdm->km"))
    basis = s.einsum([kept, s.rev(rotation, (1,))], "auk,km->aum")
    c_next = _symmetrised(s, s.einsum([basis, s.reshape(corner, (chi_in, d, chi_in, d)), basis],
                                      "auk,aubd,bdm->km"), (1, 0))
    t_next = _symmetrised(s, s.einsum([basis, t, a, basis], "auk,alb,uldi,bdm->kim"), (2, 1, 0))
    signs = _gauge_signs(c_next.value().to_numpy(), t_next.value().to_numpy())
    c_next = s.mul(c_next, _constant(s, np.outer(signs, signs)))
    t_next = s.mul(t_next, _constant(s, np.einsum("k,i,m->kim", signs, np.ones(d), signs)))
    if k < chi:
        c_next = s.pad(c_next, (chi, chi), (0, 0))
        t_next = s.pad(t_next, (chi, d, chi), (0, 0, 0))
    return _normalised(s, c_next), _normalised(s, t_next)


def environment_fixed_point(
    bulk: BulkFn, chi: int, tol: float = CONVERGENCE_TOL, maxiter: int = 10_000, solver: str = "gmres",
    multiplet_gap: float = MULTIPLET_GAP, method: str = "auto",
) -> FixedPoint:
    """The CTMRG fixed point of the bulk tensor ``bulk(s, θ)`` as a ``FixedPoint`` in θ.

    ``.solve(θ, initial_environment(...))`` iterates ``ctmrg_step`` until C and T change by at most
    ``tol`` (relative) or raises FixedPointError after ``maxiter`` steps (near a critical point
    convergence slows down: Ising at β = 0.44, χ = 20 takes ~9000); the solution's ``value_and_grad``,
    ``value_and_jvp`` and ``value_grad_and_curvature`` differentiate any readout of (C, T) and θ
    through the fixed point by linear solves (``solver``, to SOLVE_TOL) of up to ``maxiter`` products.
    ``method`` is the step's eigh (``eigh_method``).
    """
    return FixedPoint(lambda s, env, theta: ctmrg_step(s, env, bulk(s, theta), chi, multiplet_gap, method), tol=tol,
                      maxiter=maxiter, solver=solver, solve_tol=SOLVE_TOL, solve_maxiter=maxiter)


def converge(
    a: Tensor | np.ndarray, chi: int, env0: tuple[Tensor, Tensor] | None = None, tol: float = CONVERGENCE_TOL,
    maxiter: int = 10_000,
) -> tuple[Tensor, Tensor]:
    """The CTMRG environment (C, T) of the fixed bulk tensor a, iterated from ``env0`` (default:
    ``initial_environment(a, chi)``) until it changes by at most ``tol``; FixedPointError if not."""
    a_tensor = a if isinstance(a, Tensor) else Tensor.from_numpy(np.asarray(a, dtype=np.float64))
    start = env0 if env0 is not None else initial_environment(a_tensor.to_numpy(), chi)
    solution = environment_fixed_point(lambda s, theta: theta, chi, tol, maxiter).solve(a_tensor, start)
    c, t = solution.x
    return c, t


# --- the networks and observables -------------------------------------------------------------


def corner_network(s: EagerSession, env: Environment) -> EagerTensor:
    """tr C⁴: the four corners alone (the 2 × 2 network without sites or edges)."""
    c, _ = env
    return s.einsum([c, c, c, c], "ab,bc,cd,da->")


def edge_network(s: EagerSession, env: Environment) -> EagerTensor:
    """The four corners and two facing edges, the edges' i legs joined: the 3 × 2 network without a site."""
    c, t = env
    return s.einsum([c, t, c, c, t, c], "ga,aib,bc,ce,eif,fg->")


def site_network(s: EagerSession, env: Environment, center: EagerTensor) -> EagerTensor:
    """The 3 × 3 network: four C, four T and ``center[u, l, d, r]`` in the middle."""
    c, t = env
    return s.einsum([c, t, c, t, c, t, c, t, center], "ha,aub,bc,crd,de,eDf,fg,glh,ulDr->")


def two_site_network(s: EagerSession, env: Environment, left: EagerTensor, right: EagerTensor) -> EagerTensor:
    """The 4 × 3 network: four C, six T and two horizontally adjacent centre tensors, ``left[u, l, d, r]``
    and ``right[u, l, d, r]`` (left's r leg joins right's l leg)."""
    c, t = env
    return s.einsum(
        [c, t, t, c, t, c, t, t, c, t, left, right],
        "ha,aub,bvc,cd,dre,ef,fDg,gEk,km,mlh,ulEx,vxDr->",
    )


def ln_z_per_site(s: EagerSession, env: Environment, a: EagerTensor) -> EagerTensor:
    """ln κ with κ = Z_site · Z_corner / Z_edge², lnZ/N of the infinite lattice of a (Baxter's formula:
    adding a site to the lattice multiplies Z by κ; the normalisations of C and T cancel)."""
    z_edge = edge_network(s, env)
    ratio = s.div(s.mul(site_network(s, env, a), corner_network(s, env)), s.mul(z_edge, z_edge))
    return s.log(ratio)


def site_expectation(s: EagerSession, env: Environment, a: EagerTensor, impurity: EagerTensor) -> EagerTensor:
    """Z_site(impurity) / Z_site(a): the expectation value that ``impurity`` at one site stands for."""
    return s.div(site_network(s, env, impurity), site_network(s, env, a))


DENSE_UP_TO = 256
"""Transfer matrices up to this size are diagonalised whole; larger ones by ARPACK with a matvec."""


def transfer_matrix_eigenvalues(env: tuple[Tensor, Tensor], a: Tensor | np.ndarray, count: int = 2) -> np.ndarray:
    """The ``count`` eigenvalues of largest magnitude (in decreasing magnitude) of the row-to-row transfer
    matrix E[(α, u, β), (α', d, β')] = Σ T[α, l, α'] a[u, l, d, r] T[β, r, β'] (one column of the
    lattice between its two edges). E is symmetric (T[α, l, α'] = T[α', l, α]; a[u, l, d, r] =
    a[d, l, u, r] by C4v), so the eigenvalues are real."""
    t = env[1].to_numpy()
    bulk = a.to_numpy() if isinstance(a, Tensor) else np.asarray(a, dtype=np.float64)
    chi, d = t.shape[0], t.shape[1]
    n = chi * d * chi
    if not 1 <= count <= n:
        raise InvalidArgument("transfer_matrix_eigenvalues", f"count in [1, {n}]", count)

    def apply(v: np.ndarray) -> np.ndarray:  # v[x, u, y] T[x, l, p] a[u, l, d, r] T[y, r, q] -> [p, d, q]
        left = np.tensordot(v.reshape(chi, d, chi), t, axes=([0], [0]))  # [u, y, l, p]
        middle = np.tensordot(left, bulk, axes=([0, 2], [0, 1]))  # [y, p, d, r]
        return np.tensordot(middle, t, axes=([0, 3], [0, 1])).reshape(-1)  # [p, d, q]

    if n <= DENSE_UP_TO or count >= n - 1:
        matrix = np.einsum("xlp,uldr,yrq->xuypdq", t, bulk, t, optimize=True).reshape(n, n)
        values = np.linalg.eigvalsh((matrix + matrix.T) / 2)
    else:
        operator = scipy.sparse.linalg.LinearOperator((n, n), matvec=apply, dtype=np.float64)
        start = np.random.default_rng(0).standard_normal(n)  # seeded: the same numbers every run
        values = scipy.sparse.linalg.eigsh(operator, k=count, which="LM", v0=start, return_eigenvectors=False)
    return values[np.argsort(-np.abs(values), kind="stable")][:count]


def correlation_length(env: tuple[Tensor, Tensor], a: Tensor | np.ndarray) -> float:
    """ξ = −1 / ln|λ₂/λ₁| from the transfer matrix's two leading eigenvalues (``transfer_matrix_eigenvalues``),
    in lattice spacings: inf where |λ₂| = |λ₁| (a degenerate leading eigenvalue), 0 where λ₂ = 0."""
    first, second = np.abs(transfer_matrix_eigenvalues(env, a, 2))
    ratio = second / first
    return math.inf if ratio >= 1 else (0.0 if ratio == 0 else -1.0 / math.log(ratio))


def row_correlators(env: tuple[Tensor, Tensor], a: Tensor | np.ndarray, left: np.ndarray, right: np.ndarray,
                    distance: int) -> np.ndarray:
    """⟨left₀ right_r⟩ for r = 1 … ``distance`` along a row: the network of ``two_site_network`` widened by
    r − 1 columns of a between the impurities ``left`` and ``right`` (double-layer tensors [u, l, d, r]),
    over the same network of a alone. Values only; each column's vectors are rescaled alike, so nothing
    overflows however long the row."""
    if not (isinstance(distance, int) and not isinstance(distance, bool) and distance >= 1):
        raise InvalidArgument("row_correlators", "distance: an int >= 1", repr(distance))
    c, t = (x.to_numpy() for x in env)
    bulk = a.to_numpy() if isinstance(a, Tensor) else np.asarray(a, dtype=np.float64)

    def column(v: np.ndarray, site: np.ndarray) -> np.ndarray:  # v[a, x, g] T[a, u, b] X[u, x, d, y] T[h, d, g]
        return np.einsum("axg,aub,uxdy,hdg->byh", v, t, site, t, optimize=True)

    boundary = np.einsum("ha,mlh,km->alk", c, t, c, optimize=True)  # C T C, the left edge's column
    closing = np.einsum("ad,dre,eg->arg", c, t, c, optimize=True)  # its mirror on the right
    plain, marked = column(boundary, bulk), column(boundary, left)
    values = np.empty(distance)
    for r in range(distance):
        num = np.einsum("axg,axg->", column(marked, right), closing)
        den = np.einsum("axg,axg->", column(plain, bulk), closing)
        values[r] = num / den
        scale = np.abs(plain).max()
        plain, marked = column(plain, bulk) / scale, column(marked, bulk) / scale
    return values


# --- the 2D Ising model -----------------------------------------------------------------------


#: The Ising model's bulk tensor (J = 1) in session ops of β, invariant under C4v: TRG's T₀,
#: a[u, l, d, r] = Σ_σ Q[σ, u] Q[σ, l] Q[σ, d] Q[σ, r], Q = [[√cosh β, √sinh β], [√cosh β, −√sinh β]].
ising_tensor = initial


def ising_tensors(beta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Q, a, b) at β as arrays: Q and a as in ``ising_tensor``, and the impurity b = Σ_σ σ Q Q Q Q (a site
    that also multiplies by its spin)."""
    q = np.array([[math.sqrt(math.cosh(beta)), math.sqrt(math.sinh(beta))],
                  [math.sqrt(math.cosh(beta)), -math.sqrt(math.sinh(beta))]])
    a = np.einsum("su,sl,sd,sr->uldr", q, q, q, q)
    b = np.einsum("s,su,sl,sd,sr->uldr", np.array([1.0, -1.0]), q, q, q, q)
    return q, a, b


class IsingThermodynamics(NamedTuple):
    """One β's results per site, and how the environment converged."""

    lnz: float  # lnZ/N
    u: float  # −d(lnZ/N)/dβ
    c: float  # β² d²(lnZ/N)/dβ²
    m: float  # ⟨σ⟩ in the + state
    kept: int  # states of the environment's χ that are not zero
    iterations: int
    seconds: float


def ising_thermodynamics(
    beta: float, chi: int = 20, maxiter: int = 10_000, method: str = "auto"
) -> IsingThermodynamics:
    """lnZ/N, u, c and m of the infinite 2D Ising model at β by CTMRG of bond dimension χ.

    The iteration starts from a boundary of fixed + spins (below T_c it ends in the + state); u and c
    differentiate the fixed point (reverse mode, and forward over reverse), m is the site network with
    the impurity over the one with a. FixedPointError if the iteration does not converge in ``maxiter``
    steps. Valid for β in [1e-14, 100] (from ~170 on a's entries, ~e^(2β), overflow the normalisation).
    ``method`` is the step's eigh (``eigh_method``).
    """
    if not (is_real_number(beta) and 0 < beta <= 100):
        raise InvalidArgument("ising_thermodynamics", "beta in (0, 100]", repr(beta))
    start = time.perf_counter()
    q, a, impurity = ising_tensors(beta)
    problem = environment_fixed_point(ising_tensor, chi, maxiter=maxiter, method=method)
    solution = problem.solve(beta, initial_environment(a, chi, boundary=q[0]))

    def ln_z(s: EagerSession, env: Environment, theta: EagerTensor) -> EagerTensor:
        return ln_z_per_site(s, env, ising_tensor(s, theta))

    lnz, grad, curvature = solution.value_grad_and_curvature(ln_z)
    m = solution.value(lambda s, env, theta: site_expectation(s, env, ising_tensor(s, theta),
                                                              _constant(s, impurity)))
    kept = int(np.count_nonzero(np.abs(solution.x[0].to_numpy()).sum(axis=0)))
    return IsingThermodynamics(lnz, -grad.item(), beta * beta * curvature.item(), m, kept, solution.iterations,
                               time.perf_counter() - start)
