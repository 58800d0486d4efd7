"""Triangular solves X = T⁻¹ B (LAPACK trtrs through SciPy), T the lower (or upper) triangle of
the first input, with a unit diagonal when ``unit`` (the diagonal is then not read); the other
triangle is not read either, so its derivative is zero.

dX = T⁻¹ (dB − tri(dA) X); the VJP solves with Tᴴ (the other triangle): B̄ = T⁻ᴴ X̄,
Ā = −tri(B̄ Xᴴ). Both are this op again, so every order follows. A zero on T's diagonal (not
``unit``) is a LinalgError naming ``caller``, the function that asked for the solve.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from ..errors import DTypeMismatch, LinalgError, ShapeMismatch
from ..ops.elementwise import cj, minus
from ..tensor import Aval, Tensor
from .common import RULES, check_finite, check_square


def _abstract(t: Aval, b: Aval, lower, unit, caller) -> tuple[Aval]:
    n = check_square(caller, t)
    if len(b.shape) not in (1, 2) or b.shape[0] != n:
        raise ShapeMismatch(caller, f"b of shape [{n}] or [{n}, k] (the matrix is {n} × {n})", f"shape {list(b.shape)}")
    if b.dtype != t.dtype:
        raise DTypeMismatch(caller, f"a and b of one dtype (a {t.dtype})", f"b {b.dtype}")
    return (b,)


def _impl(t, b, lower, unit, caller):
    check_finite(caller, t)
    check_finite(caller, b, "a right-hand side")
    if not unit and not np.all(np.diagonal(t)):
        raise LinalgError(caller, "a nonsingular triangular matrix", "one with a zero on its diagonal")
    if t.shape[0] == 0:
        return (np.zeros(b.shape, b.dtype),)
    x = scipy.linalg.solve_triangular(t, b, lower=lower, unit_diagonal=unit, check_finite=False)
    if not np.isfinite(x).all():
        raise LinalgError(caller, "a triangular matrix nonsingular to working precision",
                          "one whose solution overflows to inf or NaN")
    return (x.astype(b.dtype, copy=False),)


def triangle(s, x, lower, unit):
    """The part of x that a solve reads: its lower (upper) triangle, strictly when ``unit``."""
    n = x.shape[0]
    ones = np.ones((n, n), dtype=x.dtype)
    mask = np.tril(ones, -int(unit)) if lower else np.triu(ones, int(unit))
    return s.mul(x, s.constant_from(Tensor.adopt(mask)))


def solve(s, t, b, lower, unit, caller):
    """T⁻¹ b for one matrix t (its triangle) and b (n,) or (n, k)."""
    return s.bind(triangular_solve_p, t, b, lower=lower, unit=unit, caller=caller)[0]


def _jvp(s, tangents, primals, outputs, lower, unit, caller):
    """dX = T⁻¹ (dB − tri(dA) X)."""
    (da, db), (t, _), (x,) = tangents, primals, outputs
    if da is not None:
        db = minus(s, db, s.einsum([triangle(s, da, lower, unit), x], "ij,j->i" if x.ndim == 1 else "ij,jk->ik"))
    return (solve(s, t, db, lower, unit, caller),)


def _vjp(s, cotangents, primals, outputs, needs, lower, unit, caller):
    """B̄ = T⁻ᴴ X̄, Ā = −tri(B̄ Xᴴ)."""
    (xb,), (t, _), (x,) = cotangents, primals, outputs
    bb = solve(s, s.transpose(cj(s, t), (1, 0)), xb, not lower, unit, caller)
    if not needs[0]:
        return None, bb
    outer = s.einsum([bb, cj(s, x)], "i,j->ij" if x.ndim == 1 else "ik,jk->ij")
    return s.neg(triangle(s, outer, lower, unit)), bb


triangular_solve_p = RULES.define(
    "triangular_solve",
    _abstract,
    _impl,
    _jvp,
    _vjp,
    cost=lambda in_avals, out_avals, params: float(in_avals[0].shape[0] * math.prod(in_avals[1].shape)),
    dense_only=True,
)
