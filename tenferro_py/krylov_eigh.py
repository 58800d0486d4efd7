"""Truncated eigh without the full spectrum: a block Krylov method and the discarded subspace's solve.

``truncated_eigh(h, k)`` gives the k eigenpairs of largest |λ| of a Hermitian h (ordered by |λ|
descending, the positive one first at a tie), and with them the pairs of the next eigenvalues it
converged ("deflation pairs"), by block Krylov iteration on h itself from a fixed start block,
twice reorthogonalised, and a Rayleigh–Ritz step (so exact multiplets up to the block size are
found, and every run gives the same bits). It stops when every kept pair's residual
‖h v − λ v‖ is at most ``TOLERANCE``·|λ₁| and the first Ritz value it has not converged has
|λ| ≤ ``DEFLATE_BELOW``·|λ_k|; where |λ_k| is below REFINE_BELOW·|λ₁|, the kept pairs then take
a Newton step. It takes the full eigh (LAPACK syevd/heevd) when k is not much smaller than n, n
is small, or the iteration does not converge within its budget.

``complement_solve`` solves, column by column, (λ_j − h) y_j = g_j on the complement of the kept
eigenvectors: the equation through which the discarded subspace enters the exact derivative of a
truncated eigh. Its reciprocals are broadened as the full eigh's rule broadens 1/(w_j − w_i):
y_j = r(λ_j − h) g_j with r(δ) = δ/(δ² + η²), η = ε·|λ₁| (docs/design.md, "Truncated eigh").
"""

from __future__ import annotations

import math

import numpy as np

from .errors import LinalgError
from .krylov import block_size, broadened_reciprocal, orthonormal_columns, power_of_two_near

#: Residual tolerance of a kept pair, relative to |λ₁|: a few units of rounding, so that the kept
#: vectors of small |λ| are as accurate as LAPACK's (a vector's error is its residual over its gap).
TOLERANCE = 3e-15
#: Deflate every discarded eigenvalue with |μ| above this fraction of |λ_k|: every λ_j − μ left to
#: the iterative solve then has the sign of λ_j and lies in [|λ_j|/2, 3|λ_j|/2] in size.
DEFLATE_BELOW = 0.5
#: The Krylov method is used for k ≤ this fraction of n, and n ≥ KRYLOV_FROM; else the full eigh is
#: faster (bench/eigh_krylov_crossover.py; docs/performance.md).
KRYLOV_UP_TO = 0.08
KRYLOV_FROM = 512
#: Below this |λ_k|/|λ₁| the kept pairs take a Newton step, its solve to this relative residual.
REFINE_BELOW = 1e-4
REFINE_TOLERANCE = 1e-4
#: Residual the discarded subspace's solve must reach, relative to its right-hand side, and its
#: iteration budget.
SOLVE_TOLERANCE = 1e-13
SOLVE_STEPS = 200

#: A Krylov block whose part outside the basis is below this fraction of it: the basis is invariant.
INVARIANT = 1e-10
#: |w| equal to within this fraction of max|w| are a tie for the order (a few units of rounding).
TIE = 1e-13

_SEED = 20240607


def rounding(dtype: np.dtype) -> float:
    """The dtype's unit of rounding over float64's: the tolerances here, set for float64, scale with it."""
    return float(np.finfo(dtype).eps / np.finfo(np.float64).eps)


def largest_magnitude_order(w: np.ndarray) -> np.ndarray:
    """The indices of w by |w| descending; where |w| are equal to within TIE·max|w| (λ and −λ,
    as rounding leaves them), the larger w first, so that every method keeps the same one."""
    order = np.lexsort((-w, -np.abs(w)))
    if len(w) < 2:
        return order
    size = np.abs(w[order])
    group = np.concatenate([[0], np.cumsum(size[:-1] - size[1:] > TIE * rounding(w.dtype) * size[0])])
    return order[np.lexsort((-w[order], group))]


def _krylov(h: np.ndarray, k: int, tol: float) -> tuple | None:
    """(w, V) of the Ritz pairs by |w| descending and how many leading ones converged, or None.

    The basis Q grows by blocks, each h times the newest one orthonormalised against all before it,
    so h Q = Q G + F with F nonzero only in the newest block's columns (F = its part outside Q).
    A Ritz pair (θ, Q y) of G then has the residual F y: ‖F_new y_new‖, from the newest rows of y
    alone. The iteration watches these and computes the true residuals ‖h v − θ v‖ once they pass,
    where rounding in h's products, which the estimate does not see, decides."""
    n = h.shape[0]
    b = block_size(k, n)
    budget = min(n, max(10 * k, k + 12 * b))  # more than the SVD's: it iterates on h, not on h²
    start = np.random.default_rng(_SEED).standard_normal((n, b))
    if h.dtype.kind == "c":
        start = start + 1j * np.random.default_rng(_SEED + 1).standard_normal((n, b))
    room = budget + b
    basis, image = np.empty((n, room), h.dtype), np.empty((n, room), h.dtype)
    gram = np.empty((room, room), h.dtype)
    block, m = orthonormal_columns(start.astype(h.dtype), None), 0
    limit = tol * rounding(h.dtype)
    check_at, last_check = k + 1, None
    while True:
        basis[:, m:m + b], image[:, m:m + b] = block, h @ block
        gram[:m, m:m + b] = basis[:, :m].conj().T @ image[:, m:m + b]
        gram[m:m + b, :m] = gram[:m, m:m + b].conj().T
        gram[m:m + b, m:m + b] = block.conj().T @ image[:, m:m + b]
        m += b
        q, newest = basis[:, :m], image[:, m - b:m]
        fresh = newest - q @ (q.conj().T @ newest)
        last = m + b > budget or np.linalg.norm(fresh) <= INVARIANT * rounding(h.dtype) * np.linalg.norm(newest)
        if m >= check_at or (m > k and last):
            found, excess = _ritz_pairs(q, image[:, :m], gram[:m, :m], fresh, k, b, limit)
            if found is not None:
                return found
            check_at = m + _columns_to_next_check(last_check, (m, excess), b)
            last_check = (m, excess)
        if last:  # the budget spent, or a numerically invariant subspace without the pairs wanted (h of
            return None  # rank below k)
        block = orthonormal_columns(fresh, q)


def _ritz_pairs(q: np.ndarray, image: np.ndarray, gram: np.ndarray, fresh: np.ndarray, k: int, b: int,
                limit: float) -> tuple[tuple | None, float]:
    """(found, excess): found, the Ritz pairs of span(q) by |w| descending (the kept and the next
    ones deflation may take) and how many leading ones converged, if k of them did and the first
    one that did not lies below DEFLATE_BELOW·|w_k|, else None; judged on the estimated residuals
    first, then on the true ones. excess: the largest estimated residual among the pairs that must
    converge (|w| ≥ DEFLATE_BELOW·|w_k|), over the tolerance."""
    ritz, coefficients = np.linalg.eigh((gram + gram.conj().T) * 0.5)
    order = largest_magnitude_order(ritz)
    watched = order[: k + 2 * b]
    values, coefficients = ritz[watched], coefficients[:, watched]
    top = abs(values[0])

    def enough(residual: np.ndarray) -> int | None:
        converged = residual <= limit * top if top > 0 else np.ones(len(residual), bool)
        count = int(np.argmin(converged)) if not converged.all() else len(residual)
        following = abs(ritz[order[count]]) if count < len(order) else 0.0  # the first Ritz value not counted
        return count if count >= k and following <= DEFLATE_BELOW * abs(values[k - 1]) else None

    estimate = np.linalg.norm(fresh @ coefficients[-b:], axis=0)
    needed = np.abs(values) >= DEFLATE_BELOW * abs(values[k - 1])
    excess = float(np.max(estimate[needed])) / (limit * top) if top > 0 else 0.0
    if enough(estimate) is None:
        return None, excess
    vectors = q @ coefficients
    count = enough(np.linalg.norm(image @ coefficients - vectors * values, axis=0))
    return (None if count is None else (values, vectors, count)), excess


def _columns_to_next_check(last: tuple[int, float] | None, now: tuple[int, float], b: int) -> int:
    """How many columns the basis of m grows before the next Rayleigh–Ritz step: a multiple of b, at
    least b, at most m/2, and at most half of those that the residuals' geometric decay since the
    last check says are still needed. The Rayleigh–Ritz step (an eigh of the m × m projection) costs
    more than a block's products once m is a few times k, so on slowly falling spectra checking
    every block would dominate; the decay seen early is faster than later's, hence the halves."""
    if last is None or not 0 < now[1] < last[1] or now[1] <= 1:
        return b
    per_column = math.log(last[1] / now[1]) / (now[0] - last[0])
    return b * max(1, min(int(0.5 * math.log(now[1]) / per_column / b), now[0] // (2 * b)))


def _refined(h: np.ndarray, k: int, values: np.ndarray, vectors: np.ndarray, count: int) -> tuple | None:
    """The converged pairs after one Newton step on the kept ones, or None where its solve fails.

    A kept vector's error toward an eigenvector of μ is about its residual over |λ_j − μ|: for
    small |λ_j| that is TOLERANCE·|λ₁|/|λ_j|, far above LAPACK's. The step solves (λ_j − h) t_j = r_j,
    r_j = h v_j − λ_j v_j, on the complement of the converged vectors (well conditioned there, by
    deflation), and a Rayleigh–Ritz step on span(v + t, the rest) mixes the converged ones again."""
    kept, rest = vectors[:, :k], vectors[:, k:count]
    residual = h @ kept - kept * values[:k]
    try:
        correction = complement_solve(h, vectors[:, :count], values[:k], residual, rest[:, :0], values[:0], 0.0,
                                      (False,) * k, REFINE_TOLERANCE)
    except LinalgError:
        return None
    basis = orthonormal_columns(np.hstack([kept + correction, rest]), None)
    image = h @ basis
    gram = basis.conj().T @ image
    values, coefficients = np.linalg.eigh((gram + gram.conj().T) * 0.5)
    order = largest_magnitude_order(values)
    values, coefficients = values[order], coefficients[:, order]
    vectors = basis @ coefficients
    residual = np.linalg.norm(image @ coefficients[:, :k] - vectors[:, :k] * values[:k], axis=0)
    if np.any(residual > TOLERANCE * rounding(h.dtype) * abs(values[0])):
        return None  # the step did not keep the pairs converged (an eigenvalue near λ_j left undeflated)
    return values, vectors, count


def truncated_eigh(h: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """(w_k, V_k, z, Z): the k eigenpairs of largest |λ| of the Hermitian h, and the pairs (z, Z)
    of the further eigenvalues it converged (at least those with |μ| > DEFLATE_BELOW·|λ_k|), each
    by |λ| descending. Where |λ_k| < REFINE_BELOW·|λ₁| the kept pairs take a Newton step
    (:func:`_refined`). Falls back to the full eigh, whose pairs it then returns as they are."""
    n = h.shape[0]
    largest = float(np.max(np.abs(h))) if h.size else 0.0
    found = None
    if k <= KRYLOV_UP_TO * n and n >= KRYLOV_FROM and largest > 0:
        c = power_of_two_near(largest)  # iterate on h/c, |entries| near 1: no underflow at any scale
        scaled = h / c if c != 1.0 else h
        found = _krylov(scaled, k, TOLERANCE)
        if found is not None and abs(found[0][k - 1]) < REFINE_BELOW * abs(found[0][0]):
            found = _refined(scaled, k, *found)
        if found is not None:
            found = (found[0] * c,) + found[1:]
    if found is None:
        values, vectors = np.linalg.eigh(h)
        order = largest_magnitude_order(values)
        values, vectors = values[order], vectors[:, order]
        below = np.nonzero(np.abs(values[k:]) <= DEFLATE_BELOW * abs(values[k - 1]))[0]
        count = k + (int(below[0]) if len(below) else n - k)
    else:
        values, vectors, count = found
    return (values[:k].copy(), np.ascontiguousarray(vectors[:, :k]), values[k:count].copy(),
            np.ascontiguousarray(vectors[:, k:count]))


def squared_columns(w: np.ndarray, eps: float) -> tuple[bool, ...]:
    """Which kept eigenvalues need the broadened solve: those where r(δ) = δ/(δ² + η²) differs from
    1/δ (δ ≥ |λ_j|/2 on the solve's space, η = ε|λ₁|) by more than the solve's own rounding,
    u·|λ₁|/|λ_j| relative: |λ_j| < 4ε²|λ₁|/u (1.8e-8·|λ₁| at ε = 1e-12)."""
    scale = float(np.max(np.abs(w))) if w.size else 0.0
    scale = scale if scale > 0 else 1.0
    u = float(np.finfo(w.dtype).eps)
    return tuple(bool(abs(x) < 4.0 * eps * eps * scale / u) for x in w)


def complement_solve(h: np.ndarray, v: np.ndarray, w: np.ndarray, g: np.ndarray, z: np.ndarray, zw: np.ndarray,
                     eps: float, squared: tuple[bool, ...], tolerance: float = SOLVE_TOLERANCE) -> np.ndarray:
    """Y, in the complement of v's columns, with column j the solution there of

        (w_j − h) y_j = g_j                      where not squared[j], and
        ((w_j − h)² + η²) y_j = g_j              where squared[j] (η = ε·max|w|),

    for the kept pairs (w, v) of h and further pairs (zw, z) for deflation (zero columns pad them).
    r(λ_j − h) g_j (the broadened reciprocal) is the first where it equals it to rounding
    (:func:`squared_columns`), and the second applied to (w_j − h) g_j elsewhere.

    Along z the solution is explicit, (z_mᴴ g_j) times r(w_j − zw_m) or 1/((w_j − zw_m)² + η²); the
    rest is conjugate gradients on the complement of (v, z), all columns at once, on
    sign(w_j)(w_j − h) (its eigenvalues lie in [|w_j|/2, 3|w_j|/2], as every μ with
    |μ| > DEFLATE_BELOW·|w_k| was deflated) or on (w_j − h)² + η². LinalgError if it does not converge.
    """
    c = power_of_two_near(float(np.max(np.abs(w))) if w.size else 0.0)
    gamma = power_of_two_near(float(np.max(np.abs(g))) if g.size else 0.0)
    if c != 1.0 or gamma != 1.0:  # solved with values and right-hand side near 1: y scales as γ/c (γ/c²)
        inner = complement_solve(h / c, v, w / c, g / gamma, z, zw / c, eps, squared, tolerance)
        twice = np.array(squared, dtype=bool)
        return np.where(twice, inner * (gamma / c) / c, inner * (gamma / c))
    scale = float(np.max(np.abs(w))) if w.size else 0.0
    eta = eps * (scale if scale > 0 else 1.0)
    twice = np.array(squared, dtype=bool)
    shifts = np.asarray(w, dtype=np.real(g).dtype)
    sign = np.where(twice | (shifts >= 0), 1.0, -1.0).astype(shifts.dtype)
    limit = tolerance * rounding(g.dtype)
    left = np.hstack([v, z])

    def project(x: np.ndarray) -> np.ndarray:
        return x - left @ (left.conj().T @ x)

    def shifted(x: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """(w_j − h) x_j for the j in ``columns``, projected on the complement."""
        return project(x * shifts[columns] - h @ x)

    def apply(x: np.ndarray, columns: np.ndarray) -> np.ndarray:
        once = shifted(x, columns)
        again = twice[columns]
        if again.any():
            once[:, again] = shifted(once[:, again], columns[again]) + eta * eta * x[:, again]
        return once * sign[columns]

    gap = shifts[None, :] - zw[:, None]
    coefficient = np.where(twice[None, :], 1.0 / (gap * gap + eta * eta), broadened_reciprocal(gap, eta))
    explicit = z @ ((z.conj().T @ g) * coefficient)
    r = project(project(g)) * sign  # twice: a g in span(v, z) leaves rounding with no part there
    norms = np.linalg.norm(g, axis=0)  # relative to g: an r at g's rounding is solved (no CG can lower it)
    x, p = np.zeros_like(r), r.copy()
    rr = np.real(np.sum(r.conj() * r, axis=0))
    for _ in range(SOLVE_STEPS + 1):
        active = np.nonzero(np.sqrt(rr) > limit * norms)[0]  # a converged column stays as it is
        if not len(active):
            return explicit + x
        q = apply(p[:, active], active)
        curvature = np.real(np.sum(p[:, active].conj() * q, axis=0))
        alpha = np.divide(rr[active], curvature, out=np.zeros_like(curvature), where=curvature > 0)
        x[:, active] += p[:, active] * alpha
        r[:, active] -= q * alpha
        rr_next = np.real(np.sum(r[:, active].conj() * r[:, active], axis=0))
        beta = np.divide(rr_next, rr[active], out=np.zeros_like(rr_next), where=rr[active] > 0)
        p[:, active] = r[:, active] + p[:, active] * beta
        rr[active] = rr_next
    worst = float(np.max(np.sqrt(rr) / np.where(norms > 0, norms, 1.0)))
    raise LinalgError("eigh", f"the discarded subspace's solve to reach a relative residual of {limit:g} "
                              f"in {SOLVE_STEPS} steps", f"{worst:.1e}")
