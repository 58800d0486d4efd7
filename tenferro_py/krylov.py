"""Truncated SVD without the full spectrum: a block Krylov method and the discarded subspace's solve.

``truncated_svd(a, k)`` gives the k leading singular triplets of a, and with them the triplets
of the next values it converged too ("deflation triplets"), by block Golub–Kahan iteration (the
Krylov space of AᴴA, grown through Aᴴ of the new left block, so that small values keep their
digits) from a fixed start block, with full reorthogonalisation and a Rayleigh–Ritz step on A
itself (so exact multiplets up to the block size are found, and every run gives the same bits).
It stops when every kept triplet's residual ‖Aᴴ u − s v‖ is at most ``tol``·s₁ and at most
``CUT_RESOLUTION`` times the gap at the cut (A v = s u holds to rounding by construction), and
the first triplet it has not converged lies below ``DEFLATE_BELOW``·s_k; it takes the full SVD
(LAPACK gesdd) when k is not much smaller than min(m, n), the matrix is small, or the iteration
does not get there within its budget.

``complement_solve`` solves, column by column, the coupled system s_i x − A w = g_i,
s_i w − Aᴴ x = h_i on the complements of the kept singular vectors: the equation through which
the discarded subspace enters the exact derivative of a truncated SVD (Francuz, Schuch and
Vanhecke, PRR 7, 013237 (2025), there as (s_i² − AAᴴ) y = r, whose powers of A and s lose the
digits of small kept values). The deflation triplets' share is explicit, with each reciprocal
broadened as the full SVD rule broadens 1/(s_j ∓ s_i); the rest is conjugate gradients, well
conditioned because every discarded value above DEFLATE_BELOW·s_k was deflated.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import LinalgError

#: Residual tolerance of a kept triplet, relative to s₁.
TOLERANCE = 1e-13
#: Deflate every discarded value above this fraction of s_k (bounds the solve's condition number).
DEFLATE_BELOW = 0.5
#: The kept and deflated triplets' residual must also be at most this fraction of the gap at the cut,
#: s_k − s_{k+1}: a residual ρ turns the kept space by ~ρ/gap, and the derivatives by as much.
CUT_RESOLUTION = 1e-10
#: Residuals below this fraction of s₁ are out of reach of the iteration (rounding in A's products):
#: a cut that needs one is resolved by the full SVD at once.
RESIDUAL_FLOOR = 1e-15
#: The Krylov method is used for k ≤ this fraction of min(m, n), and min(m, n) ≥ KRYLOV_FROM; else the
#: full SVD is faster (bench/krylov_crossover.py, on TRG-like spectra; docs/performance.md).
KRYLOV_UP_TO = 0.1
KRYLOV_FROM = 128
#: Relative residual the discarded subspace's solve must reach, and its iteration budget.
SOLVE_TOLERANCE = 1e-13
SOLVE_STEPS = 200
#: Kept values below this fraction of s₁ are at rounding level, numerically zero for the solve (rounding
#: decides its operator there): their columns get zero, the Lorentzian's value at a repeated value.
NUMERICAL_ZERO = 1e-14

_SEED = 20240601


def orthonormal_columns(w: np.ndarray, basis: np.ndarray | None) -> np.ndarray:
    """w's columns orthonormalised against ``basis`` and each other (twice: "twice is enough")."""
    for _ in range(2):
        if basis is not None:
            w = w - basis @ (basis.conj().T @ w)
        w = np.linalg.qr(w)[0]
    return w


def block_size(k: int, n: int) -> int:
    """The Krylov block: at least 8, or half of k (the largest multiplet it resolves at once)."""
    return min(n, max(8, k // 2))


def _krylov(a: np.ndarray, k: int, tol: float) -> tuple | None:
    """(U, s, Vh) of the converged Ritz triplets and their count, or None (the full SVD decides).

    Block Golub–Kahan: right blocks V_j (Aᴴ of the newest left block), left blocks U_j (A of the
    newest right block), each orthonormalised against its whole side; B = Uᴴ A V is kept as it
    grows and its SVD gives the Ritz triplets. As Aᴴ U = V Bᴴ + V_next L Eᴴ, a triplet's residual
    ‖Aᴴ u − s v‖ is ‖L x_last‖ (x's part on the newest block): free, where it is above rounding.
    So the iteration watches these, and the true residuals are computed once, at the end.
    """
    m, n = a.shape
    b = block_size(k, n)
    budget = min(n, max(6 * k, k + 8 * b))
    start = np.random.default_rng(_SEED).standard_normal((n, b))
    if a.dtype.kind == "c":
        start = start + 1j * np.random.default_rng(_SEED + 1).standard_normal((n, b))
    right = orthonormal_columns(start.astype(a.dtype), None)
    image = a @ right
    left = orthonormal_columns(image, None)
    projected = left.conj().T @ image
    while True:
        ahead, coupling = np.linalg.qr(_outside(a.conj().T @ left[:, -b:], right))  # Aᴴ U_last = V(..) + ahead L
        x, values, yh = np.linalg.svd(projected)
        p, top = len(values), values[0]
        if p > k and top > 0:
            separation = np.abs(values - values[k])  # a triplet's distance to the other side of the cut
            separation[k:] = values[k - 1] - values[k:]
            estimate = np.linalg.norm(coupling @ x[-b:], axis=0)
            accurate = estimate <= np.minimum(tol * top, CUT_RESOLUTION * separation)
            count = int(np.argmin(accurate)) if not accurate.all() else p
            done = count >= k and (count == p or values[count] <= DEFLATE_BELOW * values[k - 1])
            if (done or np.all(estimate[: k + 1] <= tol * top)) and CUT_RESOLUTION * separation[k] < RESIDUAL_FLOOR * top:
                return None  # a cut this narrow is resolved to rounding by the full SVD only
            if done:
                u, v = left @ x[:, :count], right @ yh[:count].conj().T
                residual = np.linalg.norm(a.conj().T @ u - v * values[:count], axis=0)
                if np.all(residual <= np.minimum(tol * top, CUT_RESOLUTION * separation[:count])):
                    return u, values[:count], v.conj().T, count
                return None  # the estimates are below what rounding lets the true residuals reach
        if p + b > budget:
            return None
        block = orthonormal_columns(ahead, right)
        fresh_image = a @ block
        fresh = orthonormal_columns(fresh_image, left)
        projected = np.block([[projected, left.conj().T @ fresh_image],
                              [fresh.conj().T @ image, fresh.conj().T @ fresh_image]])
        right, left, image = np.hstack([right, block]), np.hstack([left, fresh]), np.hstack([image, fresh_image])


def _outside(w: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """w less its part in span(basis) (orthonormal columns), in two passes."""
    for _ in range(2):
        w = w - basis @ (basis.conj().T @ w)
    return w


def truncated_svd(a: np.ndarray, k: int, tol: float = TOLERANCE) -> tuple[np.ndarray, ...]:
    """(U_k, s_k, Vh_k, Z, Zh, z): the k leading triplets, and the triplets (Z, z, Zh) of the further
    values it converged (at least those above DEFLATE_BELOW·s_k). Falls back to the full SVD."""
    m, n = a.shape
    c = power_of_two_near(float(np.max(np.abs(a))) if a.size else 0.0)
    if c != 1.0:  # iterate on A/c, |entries| near 1: AᴴA neither overflows nor underflows at any scale
        u, s, vh, z, zh, z_values = truncated_svd(a * (1.0 / c), k, tol)  # (not a / c: NumPy's complex
        # division overflows by a subnormal c)
        return u, s * c, vh, z, zh, z_values * c
    found = _krylov(a, k, tol) if k <= KRYLOV_UP_TO * min(m, n) and min(m, n) >= KRYLOV_FROM else None
    if found is None:
        left, values, right_h = np.linalg.svd(a, full_matrices=False)
        below = np.nonzero(values[k:] <= DEFLATE_BELOW * values[k - 1])[0]
        count = k + (int(below[0]) if len(below) else len(values) - k)
    else:
        left, values, right_h, count = found
    return (np.ascontiguousarray(left[:, :k]), values[:k].copy(), np.ascontiguousarray(right_h[:k]),
            np.ascontiguousarray(left[:, k:count]), np.ascontiguousarray(right_h[k:count]), values[k:count].copy())


def power_of_two_near(x: float, dtype: np.dtype = np.dtype(np.float64)) -> float:
    """2^round(log₂ x) for a finite x > 0, else 1, within ``dtype``'s normal range, so that its
    reciprocal is a number too: a scale that multiplies and divides exactly (bar underflow)."""
    if not (x > 0 and math.isfinite(x)):
        return 1.0
    info = np.finfo(dtype)
    return math.ldexp(1.0, min(max(round(math.log2(x)), info.minexp), info.maxexp - 1))


def broadened_reciprocal(x: np.ndarray, width: np.ndarray) -> np.ndarray:
    """x/(x² + width²): 1/x where |x| ≫ width, finite everywhere (0 where x and width are)."""
    denominator = x * x + width * width
    return np.divide(x, denominator, out=np.zeros(np.broadcast(x, denominator).shape, x.dtype), where=denominator > 0)


def complement_solve(a: np.ndarray, u: np.ndarray, vt: np.ndarray, s: np.ndarray, gu: np.ndarray, gv: np.ndarray,
                     z: np.ndarray, zt: np.ndarray, z_values: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(X, W) with s_i x_i − A w_i = gu_i, s_i w_i − Aᴴ x_i = gv_i on the complements of the kept
    singular vectors (x_i ⊥ u's columns, w_i ⊥ v's; the right-hand sides projected there), for
    A's leading triplets (u, s, vt) and further ones (z, z_values, zt) to deflate.

    Along a triplet (u_j, σ_j, v_j) of the complement the solution is
    x_j = ½(a + b)/(s_i − σ_j) + ½(a − b)/(s_i + σ_j), w_j = ½(a + b)/(s_i − σ_j) − ½(a − b)/(s_i + σ_j)
    (a = u_jᴴ gu_i, b = v_jᴴ gv_i): for gu = dA V, gv = dAᴴ U, the discarded parts of dU and dV,
    with no power of A or s that could lose the digits of small values. Along z this is explicit,
    each reciprocal broadened as the full rule's (the Lorentzian, width ε s₁); the rest is
    conjugate gradients, all columns at once, on a system whose eigenvalues s_i ± σ
    (σ ≤ DEFLATE_BELOW s_k, deflated) make it positive definite with a condition number of at
    most 3. A kept value at rounding level (a matrix of lower rank than k) is, to rounding, equal
    to every value left: its columns get the Lorentzian's value there, zero. LinalgError if the
    iteration does not converge.
    """
    c = power_of_two_near(float(s[0]) if len(s) else 0.0)
    largest = max(float(np.max(np.abs(gu))) if gu.size else 0.0, float(np.max(np.abs(gv))) if gv.size else 0.0)
    gamma = power_of_two_near(largest)
    if c != 1.0 or gamma != 1.0:  # the system for A/c, s/c and G/γ has the solution (X, W) c/γ: solved with
        # values and right-hand sides near 1, so nothing overflows or underflows
        shrink, flatten = 1.0 / c, 1.0 / gamma
        x, w = complement_solve(a * shrink, u, vt, s * shrink, gu * flatten, gv * flatten, z, zt, z_values * shrink,
                                eps)
        return x * (gamma / c), w * (gamma / c)
    scale = float(s[0]) if len(s) and s[0] > 0 else 1.0
    shifts = np.asarray(s, dtype=np.real(gu).dtype)
    left = np.hstack([u, z])
    right = np.vstack([vt, zt]).conj().T

    def apply(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ax, aw = a @ w, a.conj().T @ x
        ax = ax - left @ (left.conj().T @ ax)
        aw = aw - right @ (right.conj().T @ aw)
        return x * shifts - ax, w * shifts - aw

    resolved = s > NUMERICAL_ZERO * scale
    gap = broadened_reciprocal(shifts[None, :] - z_values[:, None], eps * scale)
    total = broadened_reciprocal(shifts[None, :] + z_values[:, None], eps * scale)
    share_u, share_v = z.conj().T @ gu, zt @ gv
    even, odd = (share_u + share_v) * gap * resolved, (share_u - share_v) * total * resolved
    explicit_x, explicit_w = z @ ((even + odd) * 0.5), zt.conj().T @ ((even - odd) * 0.5)
    rx = (gu - left @ (left.conj().T @ gu)) * resolved
    rw = (gv - right @ (right.conj().T @ gv)) * resolved
    norms = np.sqrt(np.real(np.sum(rx.conj() * rx, axis=0) + np.sum(rw.conj() * rw, axis=0)))
    x, w = np.zeros_like(rx), np.zeros_like(rw)
    px, pw = rx.copy(), rw.copy()
    rr = norms * norms
    for _ in range(SOLVE_STEPS + 1):
        if np.all(np.sqrt(rr) <= SOLVE_TOLERANCE * norms):
            return explicit_x + x, explicit_w + w
        qx, qw = apply(px, pw)
        curvature = np.real(np.sum(px.conj() * qx, axis=0) + np.sum(pw.conj() * qw, axis=0))
        alpha = np.divide(rr, curvature, out=np.zeros_like(rr), where=curvature > 0)
        x, w = x + px * alpha, w + pw * alpha
        rx, rw = rx - qx * alpha, rw - qw * alpha
        rr_next = np.real(np.sum(rx.conj() * rx, axis=0) + np.sum(rw.conj() * rw, axis=0))
        beta = np.divide(rr_next, rr, out=np.zeros_like(rr), where=rr > 0)
        px, pw = rx + px * beta, rw + pw * beta
        rr = rr_next
    worst = float(np.max(np.sqrt(rr) / np.where(norms > 0, norms, 1.0)))
    raise LinalgError("svd", f"the discarded subspace's solve to reach a relative residual of {SOLVE_TOLERANCE:g} "
                             f"in {SOLVE_STEPS} steps", f"{worst:.1e}")
