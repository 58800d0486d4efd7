"""C4v-symmetric corner transfer matrix renormalisation group (CTMRG), differentiable.

The environment of an infinite square lattice of one real bulk tensor ``a[u, l, d, r]``,
invariant under C4v (rotations and reflections of its four legs, bond dimension D on each),
is one corner matrix ``C[α, β]`` (χ × χ, symmetric) and one edge tensor ``T[α, i, β]``
(χ × D × χ, symmetric under α ↔ β; ``i`` joins the bulk). In the 3 × 3 network around a
site, C sits at the four corners and T on the four edges, joined by their χ legs; the
edges' ``i`` legs join the centre tensor's four legs. By C4v one C and one T serve every
corner and edge.

One step (Nishino and Okunishi, J. Phys. Soc. Jpn. 65, 891 (1996); the C4v form as in Liao
et al., PRX 9, 031041 (2019)) enlarges the corner by a row and a column, M = C·T·T·a, a
symmetric χD × χD matrix, keeps the space of its χ eigenvectors of largest |eigenvalue|,
with P an orthonormal basis of it renormalises C' = PᵀMP and T' = Pᵀ(T·a)P, and divides both
by their Frobenius norms. For ``tenferro_py.fixed_point.FixedPoint`` (``environment_fixed_point``)
the iterates must converge element by element, so P is a gauge-fixed basis (``ctmrg_step``), the
cut avoids splitting a multiplet and unresolved eigenvalues (``kept_count``), and the derivative
of the kept space is taken without resolving the eigenvectors inside it (``kept_space``). Every
step is written in session ops, and the contractions at the end (one site, two sites, the
normalisations) give the observables as session ops of the environment and the centre tensors.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tenferro_py import EagerSession, EagerTensor, SliceConfig, Tensor
from tenferro_py.fixed_point import FixedPoint

Environment = tuple[EagerTensor, EagerTensor]
"""(C, T): the corner matrix C[α, β] and the edge tensor T[α, i, β]."""

BulkFn = Callable[[EagerSession, EagerTensor], EagerTensor]
"""bulk(s, θ) -> a[u, l, d, r]: the bulk tensor as a session function of the parameters."""


def initial_environment(a: np.ndarray, chi: int, boundary: np.ndarray | None = None) -> tuple[Tensor, Tensor]:
    """A starting (C, T) of bond χ: the lattice's corner and edge closed by ``boundary`` on their outer legs.

    ``boundary`` (length D, default the first basis vector e₀) is the vector every outer leg of
    the bulk tensor is contracted with: C₀[r, d] = Σ a[u, l, d, r] b[u] b[l] (the corner site, its
    up and left legs outside) and T₀[u, r, d] = Σ a[u, l, d, r] b[l] (the left edge site, its left
    leg outside). They are D × D and D × D × D, padded with zeros (or cut) to χ × χ and χ × D × χ,
    so that every iterate has the fixed point's shapes. For the Ising tensor of Q =
    [[√cosh β, √sinh β], [√cosh β, −√sinh β]] (rows: spin ±), e₀ is the free boundary (a
    sum over the outer spins) and Q's first row, [√cosh β, √sinh β], a boundary of fixed +
    spins, which breaks the symmetry: below T_c the iteration then converges to the + state.
    """
    a = np.asarray(a, dtype=np.float64)
    d = a.shape[0]
    if a.shape != (d, d, d, d):
        raise ValueError(f"initial_environment: expected a bulk tensor of shape (D, D, D, D), got {a.shape}")
    b = np.eye(d)[0] if boundary is None else np.asarray(boundary, dtype=np.float64)
    if b.shape != (d,):
        raise ValueError(f"initial_environment: expected a boundary vector of length {d}, got shape {b.shape}")
    corner = np.einsum("uldr,u,l->rd", a, b, b)
    edge = np.einsum("uldr,l->urd", a, b)
    n = min(d, chi)
    c0, t0 = np.zeros((chi, chi)), np.zeros((chi, d, chi))
    c0[:n, :n] = corner[:n, :n]
    t0[:n, :, :n] = edge[:n, :, :n]
    return Tensor.from_numpy(c0 / np.linalg.norm(c0)), Tensor.from_numpy(t0 / np.linalg.norm(t0))


def enlarged_corner(s: EagerSession, env: Environment, a: EagerTensor) -> EagerTensor:
    """M[(x, r), (y, d)] = Σ C[p, q] T[p, u, x] T[q, l, y] a[u, l, d, r]: the corner grown by one site.

    Rows pair the upper edge's outer χ leg x with a's right leg r, columns the left edge's y with
    a's down leg d (column-major: x and y run fastest). Symmetric by C4v (a[u,l,d,r] = a[l,u,r,d]).
    """
    c, t = env
    chi, d = t.shape[0], t.shape[1]
    corner = s.einsum([c, t, t, a], "pq,pux,qly,uldr->xryd")
    return s.reshape(corner, (chi * d, chi * d))


MULTIPLET_GAP = 0.05
"""The last kept eigenvalue of M must exceed the first discarded one by this (relative, in magnitude):
otherwise the cut moves down rather than split a (near-)degenerate multiplet. A kept eigenvector
nearly degenerate with a discarded one is fixed only to rounding / gap, and the fixed point's
derivative would divide by that gap."""
RESOLVED = 1e-5
"""Eigenvalues of M below this times the largest are not kept. The eigenvectors of M's small
eigenvalues are fixed only to ~1e-16 |w_max| / gap, and the environment keeps changing by that from
one step to the next: for Ising at χ = 20, β from 0.1 to 3, the median change per step once
converged is up to 2e-7 when states down to 1e-12 of the largest are kept, up to 3e-11 down to 1e-7,
and up to 3e-12 down to 1e-5; the derivative's linear solves stall likewise (down to 1e-6, GMRES ends
at a relative residual of 1e-9 at β = 0.55). Such states weigh nothing: the reduced density matrix of
a half-infinite cut is C⁴, so a state of C at 1e-5 has weight 1e-20 (at β = 0.6, χ = 20, the 10
states above 1e-5 give lnZ/N, u and c within 2e-14 of Onsager's)."""
GAUGE_INDEX = 0
"""The bulk index i of the edge slice T[:, i, :] whose eigenbasis is the gauge (see ``ctmrg_step``)."""
CONVERGENCE_TOL = 1e-12
"""The default largest change of C and T (relative, element by element) at which the iteration stops."""
SOLVE_TOL = 1e-10
"""The relative residual to which the derivative's linear solves go. Their products with the step's
derivative carry rounding divided by the kept-to-discarded gap of M, and stall above FixedPoint's
1e-12 where that gap is small (Ising at χ = 32, β = 0.44: GMRES at 2e-11 to 6e-11); 1e-10 changes
u and c at χ = 20, β = 0.3 to 0.6 by less than 5e-14."""


def kept_count(magnitudes: np.ndarray, chi: int) -> int:
    """How many of the eigenvalue magnitudes (in decreasing order) to keep.

    At most χ, and only those of at least RESOLVED times the first; below that top count, the cut
    moves down to the first k (down to half the top) whose k-th magnitude exceeds the (k+1)-th by
    MULTIPLET_GAP (relative), so that no multiplet is split; with no such gap, the top count.
    """
    top = min(chi, int(np.sum(magnitudes >= RESOLVED * magnitudes[0])))
    if top == len(magnitudes):
        return top
    for k in range(top, (top - 1) // 2, -1):
        if magnitudes[k] <= (1 - MULTIPLET_GAP) * magnitudes[k - 1]:
            return k
    return top


def _gauge_signs(corner: np.ndarray, edge: np.ndarray) -> np.ndarray:
    """Signs s (s₀ = 1) that fix the last gauge freedom of (C, T), C[k, m] → s_k s_m C[k, m], T[k, i, m]
    → s_k s_m T[k, i, m]: each state k ≥ 1 in turn makes its largest coupling to the states before it
    (the entry of largest magnitude among C[k, m] s_m and T[k, i, m] s_m, m < k) positive."""
    n = corner.shape[0]
    signs = np.ones(n)
    for k in range(1, n):
        couplings = np.concatenate([corner[k, :k] * signs[:k], (edge[k, :, :k] * signs[:k]).ravel()])
        signs[k] = -1.0 if couplings[np.argmax(np.abs(couplings))] < 0 else 1.0
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


def kept_space(s: EagerSession, m: EagerTensor, chi: int) -> EagerTensor:
    """An orthonormal basis (n × k) of the span of the symmetric m's k eigenvectors of largest |eigenvalue|
    (k from ``kept_count``), whose derivatives to second order are those of the span alone.

    Its value is those eigenvectors (LAPACK's, by ``numpy.linalg.eigh``). Its derivatives come from
    the invariant-subspace equation instead of an eigenvector rule: in the eigenbasis V = [V_k, V_d]
    of the current m (a constant), VᵀmV = [[A, Bᵀ], [B, D]], the kept space is the span of
    V_k + V_d X with XA − DX = B − XBᵀX. Its changes δA, δB, δD (zero at the current m) give X by
    two sweeps of X ← (δB + δD X − X δA) ⊘ G, G[d, k] = w_k − w_d (the XBᵀX term is third order),
    exact to second order, and (V_k + V_d X)(1 − XᵀX/2) is orthonormal to that order. Only kept
    against discarded eigenvalue differences enter, which ``kept_count`` keeps ≥ MULTIPLET_GAP·|w_k|.
    The near-degenerate multiplets inside the kept space do not enter at all (Ising at χ = 20: kept
    eigenvalues 5e-11, 1e-13 of the largest apart at β = 0.3, 0.6). Through ``eigh``'s own rule
    they would, with 1/(w_i − w_j) up to 1e12, and the fixed point's linear solves stall (GMRES at a
    relative residual of 9e-6 and 1e-7 at β = 0.5 and 0.6). Second order is enough for the step's
    gradient and for forward over reverse through it (``value_grad_and_curvature``).
    """
    values = m.value().to_numpy()
    w, v = np.linalg.eigh(values)
    order = np.argsort(-np.abs(w), kind="stable")
    w, v = w[order], v[:, order]
    n, k = len(w), kept_count(np.abs(w), chi)
    if k == n:  # the whole space: no direction of m moves it
        return _constant(s, v)
    blocks = s.einsum([_constant(s, v), m, _constant(s, v)], "ai,ab,bj->ij")
    change = s.sub(blocks, s.constant_from(blocks.value()))
    d_kept = s.slice(change, SliceConfig([0, 0], [k, k]))
    d_coupling = s.slice(change, SliceConfig([k, 0], [n, k]))
    d_rest = s.slice(change, SliceConfig([k, k], [n, n]))
    inverse_gaps = _constant(s, 1.0 / (w[None, :k] - w[k:, None]))
    x = s.mul(d_coupling, inverse_gaps)
    x = s.mul(s.sub(s.add(d_coupling, s.einsum([d_rest, x], "de,ek->dk")), s.einsum([x, d_kept], "dj,jk->dk")),
              inverse_gaps)
    basis = s.add(_constant(s, v[:, :k]), s.einsum([_constant(s, v[:, k:]), x], "ad,dk->ak"))
    return s.sub(basis, s.scale_real(s.einsum([basis, x, x], "aj,dj,dk->ak"), 0.5))


def ctmrg_step(s: EagerSession, env: Environment, a: EagerTensor, chi: int) -> Environment:
    """One C4v CTMRG step: (C', T') of bond χ from (C, T) and the bulk tensor a, in session ops.

    The enlarged corner M = C·T·T·a (``enlarged_corner``), symmetrised, is cut to the space of its
    k eigenvectors of largest |eigenvalue| (``kept_space``; k ≤ χ from ``kept_count``, and C' and T'
    are padded with zeros to χ). Inside that space the basis is the gauge: the eigenbasis of the new
    edge's slice T'[:, GAUGE_INDEX, :] (eigenvalues decreasing), with the signs of ``_gauge_signs``.
    Not M's eigenbasis: in M's exact multiplets (Ising's corner spectrum has them) it is arbitrary, and
    for M's small eigenvalues it is fixed only to rounding / gap, while the slice's eigenvalues are
    spread. With P that basis (χD × k), C' = PᵀMP and T'[k, i, m] = Σ P[(α, u), k] T[α, l, β]
    a[u, l, d, i] P[(β, d), m], each symmetrised and divided by its Frobenius norm. The output thus
    depends on (C, T) only through its gauge-invariant content, and the iterates converge element by
    element. The discrete choices (the cut, the signs) are locally constant; the rest is
    differentiable to second order, given distinct eigenvalues of the slice.
    """
    c, t = env
    chi_in, d = t.shape[0], t.shape[1]
    if c.shape != (chi_in, chi_in) or t.shape != (chi_in, d, chi_in) or a.shape != (d, d, d, d):
        raise ValueError(f"ctmrg_step: expected C (χ, χ), T (χ, D, χ) and a (D, D, D, D), got "
                         f"{list(c.shape)}, {list(t.shape)} and {list(a.shape)}")
    if not 1 <= chi <= chi_in * d:
        raise ValueError(f"ctmrg_step: chi must lie in [1, {chi_in * d}] (the enlarged corner's size), got {chi}")
    corner = _symmetrised(s, enlarged_corner(s, env, a), (1, 0))
    kept = kept_space(s, corner, chi)
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


def _sign_fixed(s: EagerSession, vectors: EagerTensor) -> EagerTensor:
    """The columns of ``vectors``, each times the sign that makes the first of its largest entries positive.

    "Largest" allows a relative 1e-8 for rounding, because a double layer Σ_p a[p] ⊗ a[p] has
    exact ties: it is symmetric under exchanging ket and bra, so an eigenvector of the enlarged
    corner odd under that exchange has its largest magnitude twice, with opposite signs. Taking
    whichever LAPACK rounds larger would pick the sign at random from step to step, and the
    iteration would settle, if at all, where the gauge-fixed map is not the one differentiated.
    The signs enter as constants (locally constant in the input).
    """
    values = vectors.value().to_numpy()
    magnitudes = np.abs(values)
    first = np.argmax(magnitudes >= (1 - 1e-8) * magnitudes.max(axis=0), axis=0)
    signs = np.where(values[first, np.arange(values.shape[1])] < 0, -1.0, 1.0)
    return s.mul(vectors, s.broadcast_in_dim(_constant(s, signs), vectors.shape, (1,)))


def ctmrg_step_signed(s: EagerSession, env: Environment, a: EagerTensor, chi: int) -> Environment:
    """One C4v CTMRG step in M's own eigenbasis: the plain step, for spectra without exact multiplets.

    The χ eigenvectors of largest |eigenvalue| of M = C·T·T·a, with the signs of ``_sign_fixed``,
    form P; C' is the diagonal of their eigenvalues, T' = Pᵀ(T·a)P; both normalised. The gauge
    is then M's eigenbasis, which an exact multiplet of M leaves arbitrary (the Ising model's
    corner spectrum has them: use ``ctmrg_step``), and its derivative is ``eigh``'s, exact where
    the kept eigenvalues are distinct. examples/ipeps_heisenberg.py uses it: there its energy
    gradient agrees with central differences to 6e-11 (D = 2, χ = 8, largest entry 0.18), while
    with ``ctmrg_step`` the same energy (to 3e-14) comes with a gradient 3.8e-3 off (3.7e-4 at
    χ = 16); its edge-slice gauge does not always settle on these double layers (at D = 3, χ = 32
    the element-wise change stayed of order 1 after 1000 steps while E was steady to 1e-10), so
    the map differentiated is not at its fixed point.
    """
    _, edge = env
    chi_in, d = edge.shape[0], edge.shape[1]
    w, v = s.eigh(enlarged_corner(s, env, a))
    kept = np.argsort(-np.abs(w.value().to_numpy()), kind="stable")[:chi].tolist()
    projector = s.reshape(_sign_fixed(s, s.take(v, kept, 1)), (chi_in, d, chi))
    corner = s.mul(s.broadcast_in_dim(s.take(w, kept, 0), (chi, chi), (0,)), _constant(s, np.eye(chi)))
    edge = s.einsum([projector, edge, a, projector], "auk,alb,uldi,bdm->kim")
    return _normalised(s, corner), _normalised(s, edge)


def environment_fixed_point(
    bulk: BulkFn, chi: int, tol: float = CONVERGENCE_TOL, maxiter: int = 10_000, solver: str = "gmres"
) -> FixedPoint:
    """The CTMRG fixed point of the bulk tensor ``bulk(s, θ)`` as a ``FixedPoint`` in θ.

    ``FixedPoint.solve(θ, initial_environment(...))`` iterates ``ctmrg_step`` until C and T change
    by at most ``tol`` (relative) or raises FixedPointError after ``maxiter`` steps (near a critical
    point convergence slows down: Ising at β = 0.44, χ = 20 takes ~9000); the solution's
    ``value_and_grad``, ``value_and_jvp`` and ``value_grad_and_curvature`` then differentiate any
    readout of (C, T) and θ through the fixed point, without keeping the iterations, by linear
    solves (``solver``, to SOLVE_TOL) allowed as many products with the step's derivative as the
    iteration steps.
    """
    return FixedPoint(lambda s, env, theta: ctmrg_step(s, env, bulk(s, theta), chi), tol=tol, maxiter=maxiter,
                      solver=solver, solve_tol=SOLVE_TOL, solve_maxiter=maxiter)


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


# --- the networks -----------------------------------------------------------------------------


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
