"""The CTMRG cut: which eigenvectors of the enlarged corner M a step keeps (``kept_count``), how it
finds them (``eigh_method``: LAPACK's full eigh or the truncated Krylov eigh), and their span as a
differentiable function of M (``kept_space``), for ``tenferro_py.models.ctmrg.ctmrg_step``."""

from __future__ import annotations

import numpy as np

from .. import krylov_eigh
from ..errors import InvalidArgument
from ..fixed_point import FixedPointError
from ..linalg import eigh_complement_solve_p
from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import Tensor

__all__ = ["EIGH_METHODS", "KRYLOV_FROM", "KRYLOV_UP_TO", "MULTIPLET_GAP", "RESOLVED", "eigh_method", "kept_count",
           "kept_space"]

MULTIPLET_GAP = 0.05
"""The default ``multiplet_gap`` of the cut: the last kept eigenvalue of M must exceed the first discarded
one by this (relative, in magnitude), otherwise the cut moves down rather than split a (near-)degenerate
multiplet, whose kept part would be fixed only to rounding / gap (the fixed point's derivative would
divide by that gap). 0 keeps the top χ whatever the gap."""
RESOLVED = 1e-5
"""Eigenvalues of M below this times the largest are not kept: their eigenvectors are fixed only to
~1e-16 |w_max| / gap, the environment keeps changing by that from step to step, and the derivative's
linear solves stall. They weigh nothing: a state of C at 1e-5 has weight 1e-20 in the reduced density
matrix C⁴ (Ising at β = 0.6, χ = 20: the 10 states above 1e-5 give lnZ/N, u and c within 2e-14 of Onsager's)."""
EIGH_METHODS = ("auto", "full", "krylov")
"""How the step finds the enlarged corner's leading eigenpairs (``eigh_method``)."""
KRYLOV_FROM = 768
KRYLOV_UP_TO = 0.065
""""auto" takes the truncated eigh for the χ + 1 leading pairs of n × n corners from n = KRYLOV_FROM on
while (χ + 1)/n ≤ KRYLOV_UP_TO. Its time over LAPACK's full eigh on iPEPS corners
(bench/ipeps.py --corners; bench/results/2026-12-01T2152-ipeps-corners.md): 0.71–0.86 at (χ + 1)/n ≈ 0.063
(D = 4, n = 1024 and 1600), 0.86 and 0.61 at 0.041 (D = 5, n = 800 and 1250), 0.54 at 0.029 (D = 6,
n = 1296), and 0.33 and 0.31 from n = 2500 on (D = 5, χ = 100; D = 6, χ = 72), spectra that fall off
slowly at the cut (|w_χ+1/w_χ| up to 0.998); 0.91 at n = 512 (D = 4, χ = 32), too close to call."""


def kept_count(magnitudes: np.ndarray, chi: int, multiplet_gap: float = MULTIPLET_GAP) -> int:
    """How many of the eigenvalue magnitudes (in decreasing order) to keep.

    At most χ, and only those of at least RESOLVED times the first; below that top count, the cut
    moves down to the first k (down to half the top) whose k-th magnitude exceeds the (k+1)-th by
    ``multiplet_gap`` (relative), so that no multiplet is split; with no such gap, the top count.
    """
    top = min(chi, int(np.sum(magnitudes >= RESOLVED * magnitudes[0])))
    if top == len(magnitudes):
        return top
    for k in range(top, (top - 1) // 2, -1):
        if magnitudes[k] <= (1 - multiplet_gap) * magnitudes[k - 1]:
            return k
    return top


def _constant(s: EagerSession, array: np.ndarray) -> EagerTensor:
    return s.constant_from(Tensor.from_numpy(array))


def eigh_method(n: int, count: int, method: str = "auto", differentiating: bool = False) -> str:
    """"full" or "krylov", the eigh that finds the ``count`` leading pairs of an n × n enlarged corner:
    ``method`` itself ("full" where count = n: nothing is truncated), or for "auto" the truncated
    (Krylov) eigh where it beats LAPACK's full one (KRYLOV_FROM, KRYLOV_UP_TO), but the full one for
    a step that is ``differentiating``: a fixed point's derivative takes many products with one
    recorded step, and with the whole eigenbasis each is explicit, where the truncated eigh's takes
    conjugate gradients (at D = 4, χ = 64: 90 ms a product against 132 ms)."""
    if method not in EIGH_METHODS:
        raise InvalidArgument("ctmrg", f"method one of {', '.join(EIGH_METHODS)}", repr(method))
    if count >= n:
        return "full"
    if method == "auto":
        wins = n >= KRYLOV_FROM and count <= KRYLOV_UP_TO * n and not differentiating
        return "krylov" if wins else "full"
    return method


def _leading_pairs(
    values: np.ndarray, chi: int, method: str, differentiating: bool
) -> tuple[np.ndarray, np.ndarray, tuple | None]:
    """(w, v, deflation): eigenpairs of the symmetric ``values`` by |w| descending, at least the χ + 1
    that ``kept_count`` reads. "full": all of them (numpy.linalg.eigh), deflation None; "krylov":
    krylov_eigh.truncated_eigh's χ + 1 and, as ``deflation`` = (their values, vectors), the further
    ones it converged (at least every |μ| above half the last |w|), or all of them (deflation None)
    where those are all."""
    n = values.shape[0]
    if eigh_method(n, chi + 1, method, differentiating) == "krylov":
        w, v, zw, z = krylov_eigh.truncated_eigh(values, chi + 1)
        if len(w) + len(zw) < n:
            return w, v, (zw, z)
        return np.concatenate([w, zw]), np.hstack([v, z]), None  # all of them: nothing left to solve for
    w, v = np.linalg.eigh(values)
    order = np.argsort(-np.abs(w), kind="stable")
    return w[order], v[:, order], None


def kept_space(
    s: EagerSession, m: EagerTensor, chi: int, multiplet_gap: float = MULTIPLET_GAP, method: str = "auto"
) -> EagerTensor:
    """An orthonormal basis (n × k) of the span of the symmetric m's k eigenvectors of largest |eigenvalue|
    (k from ``kept_count``), whose derivatives to second order are those of the span alone.

    Its value is those eigenvectors, by ``method`` (``eigh_method``: LAPACK's full eigh, or the
    truncated Krylov eigh of the χ + 1 leading pairs); where nothing differentiates (the runtime's
    ``differentiating`` false: CTMRG's own iterations) it is only that, a constant. Its derivatives
    come from the invariant-subspace equation: with the kept pairs (w, V) of the current m (constants)
    and δm = m − m (zero in value, its derivatives m's), span(V + Y), Y ⊥ V, is invariant under m + δm
    where, column by column on the complement of V, (w_j − m) y_j = [δm (V + Y) − Y Vᵀ δm (V + Y)]_j.
    Two sweeps of Y ← S[δm (V + Y) − Y Vᵀ δm V], S solving (w_j − m) y_j = g_j there, give Y to second
    order, and (V + Y)(1 − YᵀY/2) is orthonormal to that order. S is explicit with the whole eigenbasis
    (V_d ((V_dᵀ g) ⊘ G), G[d, j] = w_j − w_d: O(n²k), no n³ term), or the truncated eigh's solve
    (``eigh_complement_solve``: conjugate gradients with products by m, the further pairs it found
    deflated). Only kept-against-discarded gaps enter (``kept_count`` keeps them ≥ multiplet_gap·|w_k|;
    an exact tie is a FixedPointError), not the near-degenerate multiplets inside the kept space,
    through which ``eigh``'s own rule would divide by 1e-13 and stall the fixed point's solves. Second
    order serves the gradient and forward over reverse (``value_grad_and_curvature``).
    """
    values = m.value().to_numpy()
    w, v, deflation = _leading_pairs(values, chi, method, s.runtime.differentiating)
    n, k = values.shape[0], kept_count(np.abs(w), chi, multiplet_gap)
    if k == n:  # the whole space: no direction of m moves it
        return _constant(s, v)
    # C order, as the sum below comes out when differentiating: the contractions downstream then read
    # one layout either way, which BLAS kernels may sum in a different order (OpenBLAS's SkylakeX does)
    kept = s.constant_from(Tensor.adopt(np.array(v[:, :k], order="C")))
    if not s.runtime.differentiating:  # the terms below are zero in value: only their derivatives count
        return kept
    discarded = w[k:] if deflation is None else np.concatenate([w[k:], deflation[0]])
    if np.any(w[:k, None] == discarded[None, :]):
        raise FixedPointError("ctmrg.kept_space", "kept eigenvalues of the enlarged corner distinct from the "
                              "discarded ones (a span cut inside a multiplet has no derivative)", "an exact tie")
    if deflation is None:
        rest = _constant(s, np.ascontiguousarray(v[:, k:]))
        inverse_gaps = _constant(s, 1.0 / (w[None, :k] - w[k:, None]))

        def solve(g: EagerTensor) -> EagerTensor:
            return s.einsum([rest, s.mul(s.einsum([rest, g], "ad,ak->dk"), inverse_gaps)], "ad,dk->ak")
    else:
        operator = [_constant(s, values), kept, _constant(s, w[:k])]
        pairs = [_constant(s, np.hstack([v[:, k:], deflation[1]])), _constant(s, discarded)]

        def solve(g: EagerTensor) -> EagerTensor:
            return s.bind(eigh_complement_solve_p, *operator, g, *pairs, eps=0.0, squared=(False,) * k)[0]
    change = s.sub(m, s.constant_from(m.value()))
    first = s.einsum([change, kept], "ab,bk->ak")
    y = solve(first)
    d_kept = s.einsum([kept, first], "aj,ak->jk")
    y = solve(s.sub(s.add(first, s.einsum([change, y], "ab,bk->ak")), s.einsum([y, d_kept], "aj,jk->ak")))
    basis = s.add(kept, y)
    return s.sub(basis, s.scale_real(s.einsum([basis, y, y], "aj,bj,bk->ak"), 0.5))
