"""The linear solves of fixed_point's derivatives, and norms right at every scale (NumPy and SciPy only).

The solves are of z − P(z) = b, where P is a product with a step's derivative (its vjp or
jvp): GMRES, BiCGStab or the series z ← b + P(z). The equation is linear, so it is solved for b
scaled by a power of two to a largest entry in [1/2, 1): exact, and no norm inside the solver
then overflows or underflows, whatever the scale of b. The products are counted against a limit
that the check of the result is part of; GMRES restarts are sized to end within it.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
from scipy.sparse.linalg import LinearOperator, bicgstab, gmres

SOLVERS = ("gmres", "bicgstab", "series")
#: GMRES's Krylov space between restarts (fewer where the limit on products is smaller).
GMRES_RESTART = 60

Product = Callable[[np.ndarray], np.ndarray]


def power_of_two(v: np.ndarray) -> int:
    """k with the largest |entry| of v·2^-k in [1/2, 1) (0 for v = 0): v's scale, as an exponent."""
    return math.frexp(float(np.max(np.abs(v), initial=0.0)))[1]


def times_power_of_two(v: np.ndarray, k: int) -> np.ndarray:
    """v·2^k, real or complex: exact, but for results beyond the floating-point range."""
    with np.errstate(over="ignore", under="ignore"):
        if not np.iscomplexobj(v):
            return np.ldexp(v, k)
        out = np.empty_like(v)
        out.real, out.imag = np.ldexp(v.real, k), np.ldexp(v.imag, k)
        return out


def _norm(v: np.ndarray) -> tuple[float, int]:
    """(r, k) with ‖v‖₂ = r·2^k, v brought to unit scale before it is squared."""
    k = power_of_two(v)
    return float(np.linalg.norm(times_power_of_two(v, -k))), k


def relative_change(new: np.ndarray, old: np.ndarray) -> float:
    """‖new − old‖ / ‖new‖ of finite arrays, right at every scale (0 where both are 0, inf where
    only new is: a step to 0 is no sign of convergence)."""
    k = max(power_of_two(new), power_of_two(old))
    change, k_change = _norm(times_power_of_two(new, -k) - times_power_of_two(old, -k))  # entries ≤ 2
    size, k_size = _norm(new)
    if size == 0:
        return 0.0 if change == 0 else math.inf
    return float(times_power_of_two(np.float64(change / size), k_change + k - k_size))


class ShiftedSolution(NamedTuple):
    """y·2^exponent solves z − P(z) = b; y's relative residual, checked by a product, and the
    products spent, that check included."""

    y: np.ndarray
    exponent: int
    residual: float
    products: int


def solve_shifted(product: Product, b: np.ndarray, solver: str, tol: float, max_products: int) -> ShiftedSolution:
    """z − product(z) = b for a finite b, by ``solver`` (one of SOLVERS) to a relative residual of
    ``tol``, with at most ``max_products`` products. The residual returned is y's, whether or not it
    reached ``tol``: the caller judges it."""
    k = power_of_two(b)
    b = times_power_of_two(b, -k)
    norm_b = np.linalg.norm(b)
    if norm_b == 0:
        return ShiftedSolution(np.zeros_like(b), 0, 0.0, 0)
    ops = _Products(product, b.size, b.dtype, max_products - 1)  # the last product is the check's
    latest = [b]  # the solver's latest iterate, for when the products run out

    def keep(x: np.ndarray) -> None:
        latest[0] = np.array(x, b.dtype)

    try:
        if solver == "series":
            y = b
            while True:
                change = b - ops(y)  # y's residual
                y = y + change
                keep(y)
                if np.linalg.norm(change) <= tol * norm_b:
                    break
        elif solver == "gmres":  # a start's product, then restarts of restart + 1, the last on the result
            y, restart = b, min(b.size, GMRES_RESTART, max_products - 3)
            if restart >= 1:
                y, _ = gmres(ops.operator(), b, x0=b.copy(), rtol=tol, atol=0.0, restart=restart,
                             maxiter=(max_products - 2) // (restart + 1), callback=keep, callback_type="x")
        else:
            y, _ = bicgstab(ops.operator(), b, x0=b.copy(), rtol=tol, atol=0.0, maxiter=max_products,
                            callback=keep)
    except _ProductsSpent:
        y = latest[0]
    residual = float(np.linalg.norm(ops.residual(b, y)) / norm_b)
    return ShiftedSolution(y, k, residual, ops.count)


class _ProductsSpent(Exception):
    """A solve's limit on products is reached."""


class _Products:
    """v ↦ v − product(v), the solves' operator: counted, at most ``limit`` times (then
    _ProductsSpent), its last input and output kept so that a solver's last product, on its
    result, serves as the check of the result."""

    def __init__(self, product: Product, size: int, dtype: np.dtype, limit: int):
        self.product, self.size, self.dtype, self.limit, self.count = product, size, dtype, limit, 0
        self.last: tuple[np.ndarray, np.ndarray] | None = None

    def __call__(self, v: np.ndarray) -> np.ndarray:
        if self.count >= self.limit:
            raise _ProductsSpent
        self.count += 1
        v = np.array(v, self.dtype).reshape(-1)
        out = v - self.product(v)
        self.last = (v, out.copy())  # the solvers update their vectors in place
        return out

    def operator(self) -> LinearOperator:
        return LinearOperator((self.size, self.size), matvec=self, dtype=self.dtype)

    def residual(self, b: np.ndarray, y: np.ndarray) -> np.ndarray:
        """b − (y − product(y)), by one product beyond the limit unless the last product was y's."""
        if self.last is None or not np.array_equal(self.last[0], y):
            self.limit += 1
            self(y)
        return b - self.last[1]
