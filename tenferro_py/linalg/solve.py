"""solve and inv of square nonsingular matrices, by LU (LAPACK getrf), with their rules; a
singular matrix, or one whose result overflows, is a LinalgError."""

from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeMismatch, LinalgError, ShapeMismatch
from ..ops.elementwise import cj, minus
from ..tensor import Aval
from .common import RULES, check_finite, check_square


def _check_solution(op: str, x: np.ndarray) -> None:
    """A solution that overflows (finite input, nonsingular to LAPACK) is a matrix singular to
    working precision: an error, as an exactly singular one is."""
    if not np.isfinite(x).all():
        raise LinalgError(op, "a matrix nonsingular to working precision", "one whose result overflows to inf or NaN")


def _singular(op: str) -> LinalgError:
    return LinalgError(op, "a nonsingular matrix", "a singular one (LAPACK getrf met a zero pivot)")


def _solve_abstract(a: Aval, b: Aval) -> tuple[Aval]:
    n = check_square("solve", a)
    if len(b.shape) not in (1, 2) or b.shape[0] != n:
        raise ShapeMismatch("solve", f"b of shape [{n}] or [{n}, m] (a is {n} × {n})", f"shape {list(b.shape)}")
    if b.dtype != a.dtype:
        raise DTypeMismatch("solve", f"a and b of one dtype (a {a.dtype})", f"b {b.dtype}")
    return (b,)


def _solve_impl(a, b):
    """gesv through NumPy. Input with inf or NaN, a singular a, or a solution that overflows raise
    LinalgError."""
    check_finite("solve", a)
    check_finite("solve", b, "a right-hand side")
    try:
        x = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular("solve") from None
    _check_solution("solve", x)
    return (x,)


def _solve(s, a, b):
    return s.bind(solve_p, a, b)[0]


def _solve_jvp(s, tangents, primals, outputs):
    """dX = A⁻¹ (dB − dA X)."""
    (da, db), (a, _), (x,) = tangents, primals, outputs
    if da is not None:
        db = minus(s, db, s.einsum([da, x], "ij,j->i" if x.ndim == 1 else "ij,jk->ik"))
    return (_solve(s, a, db),)


def _solve_vjp(s, cotangents, primals, outputs, needs):
    """B̄ = A⁻ᴴ X̄ (a solve with Aᴴ), Ā = −B̄ Xᴴ."""
    (xb,), (a, _), (x,) = cotangents, primals, outputs
    bb = _solve(s, s.transpose(cj(s, a), (1, 0)), xb)
    if not needs[0]:
        return None, bb
    return s.neg(s.einsum([bb, cj(s, x)], "i,j->ij" if x.ndim == 1 else "ik,jk->ij")), bb


solve_p = RULES.define(
    "solve",
    _solve_abstract,
    _solve_impl,
    _solve_jvp,
    _solve_vjp,
    cost=lambda in_avals, out_avals, params: in_avals[0].shape[0] ** 2 * (
        in_avals[0].shape[0] + 2.0 * math.prod(in_avals[1].shape[1:])),
    dense_only=True,
)


def _inv_impl(a):
    """getrf and getri through NumPy; input with inf or NaN, or a singular matrix, raise LinalgError."""
    check_finite("inv", a)
    try:
        y = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular("inv") from None
    _check_solution("inv", y)
    return (y,)


def _inv_abstract(a: Aval) -> tuple[Aval]:
    check_square("inv", a)
    return (a,)


inv_p = RULES.define(
    "inv",
    _inv_abstract,
    _inv_impl,
    jvp=lambda s, tangents, primals, outputs: (s.neg(s.einsum([outputs[0], tangents[0], outputs[0]], "ij,jk,kl->il")),),
    vjp=lambda s, cotangents, primals, outputs, needs: (
        s.neg(s.einsum([cj(s, outputs[0]), cotangents[0], cj(s, outputs[0])], "ji,jk,lk->il")),),
    cost=lambda in_avals, out_avals, params: 2.0 * in_avals[0].shape[0] ** 3,
    dense_only=True,
)
