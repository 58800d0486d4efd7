"""Functions of Hermitian matrices: sqrtm, inv_sqrtm, logm (and eigh_function, :mod:`.eigh_function`).
Each is Y = V f(w) Vᴴ for eigh's (w, V) of the Hermitian part of X (a Hermitian
X is read as it is), one primitive whose rules are Daleckii–Krein's:

    dY = V (F ∘ (Vᴴ dX V)) Vᴴ,   F_ij = (f(w_i) − f(w_j))/(w_i − w_j),   F_ii = f′(w_i),

exact where eigenvalues repeat, as F is f′ there, not a ratio of differences. F is real and
symmetric, so the map is self-adjoint: the VJP is the same formula on Ȳ.

sqrtm, inv_sqrtm and logm are exact at every order and every spectrum: Y = f(X) solves g(Y) = X
for g = square (sqrtm) or exp (logm), so dY solves L_g(Y, dY) = dX, L_g the Fréchet derivative
of g; that solve (``inverse_frechet``) is Daleckii–Krein's formula for g at Y, and its own
derivative needs only L_g's derivative in Y, which has no divided difference at all
(dY Z + Z dY for square; a Fréchet derivative of expm, :mod:`.expm`, for exp). inv_sqrtm is
the inverse of sqrtm: dZ = −Z L Z with Z L + L Z = Z dX Z.

Domains: sqrtm takes a positive semidefinite matrix (eigenvalues down to −10 n ε max|w|,
rounding, count as 0; at zero eigenvalues the 1/(√w_i + √w_j) of its derivative is broadened
as the SVD's 1/s, so it stays finite); inv_sqrtm and logm a positive definite one (smallest
eigenvalue above 10 n ε max|w|). Outside them a LinalgError: never a complex or NaN result.
"""

from __future__ import annotations

import numpy as np

from ..errors import LinalgError, ShapeMismatch
from ..ops.elementwise import cj, minus
from ..tensor import Aval
from .common import RULES, check_finite, check_square, eps_of, hermitian_part
from .eigh import eigh_p
from .expm import second_frechet, second_frechet_adjoint

# --- the forward: f on eigh's spectrum ------------------------------------------------------


def _admit(op: str, domain: str, w: np.ndarray) -> None:
    """LinalgError where an eigenvalue lies outside the domain (up to rounding, 10 n ε max|w|)."""
    if domain == "any" or w.size == 0:
        return
    scale = max(abs(w[0]), abs(w[-1]))
    floor = 10 * w.size * np.finfo(w.dtype).eps * scale
    if domain == "semidefinite" and w[0] < -floor:
        raise LinalgError(op, "a positive semidefinite matrix (Hermitian part)",
                          f"an eigenvalue {w[0]:.6g} (largest |eigenvalue| {scale:.6g})")
    if domain == "definite" and w[0] <= floor:
        raise LinalgError(op, "a positive definite matrix (Hermitian part; every eigenvalue above 10 n ε times the "
                              "largest)", f"smallest eigenvalue {w[0]:.6g}, largest {scale:.6g}")


def apply_on_spectrum(op: str, domain: str, x: np.ndarray, f) -> tuple[np.ndarray]:
    """V f(w) Vᴴ from eigh of the Hermitian part (eigh's own kernel, so that the rules' eigh is
    bitwise this one), made Hermitian to the last bit."""
    check_finite(op, x)
    if x.shape[0] == 0:
        return (x.copy(),)
    w, v = eigh_p.impl(x, None)
    _admit(op, domain, w)
    y = (v * np.asarray(f(w), dtype=w.dtype)) @ v.conj().T
    return ((y + y.conj().T) * 0.5,)


def square_abstract(op: str):
    """The abstract rule of a function of square matrices named ``op``."""

    def abstract(x: Aval, **params) -> tuple[Aval]:
        check_square(op, x)
        return (x,)

    return abstract


# --- Z with L_g(Y, Z) = C, for Hermitian Y ----------------------------------------------------


def _reciprocal_differences(g: str, y: np.ndarray, eps: float) -> np.ndarray:
    """1/G, G_ij = (g(y_i) − g(y_j))/(y_i − y_j): for square 1/(y_i + y_j), broadened as the SVD's
    1/s relative to 2 max|y| (0 where both are 0); for exp 1/(e^m (1 − e^−δ)/δ), m = max, δ = |y_i − y_j|
    (e^m at δ = 0), never 0 nor overflowing."""
    yi, yj = y[:, None], y[None, :]
    if g == "square":
        scale = max(2 * np.abs(y).max(initial=0), np.finfo(y.dtype).tiny)
        total = (yi + yj) / scale
        return total / (total * total + eps * eps) / scale
    gap = np.abs(yi - yj)
    ratio = np.ones_like(gap)
    np.divide(-np.expm1(-gap), gap, out=ratio, where=gap > 0)
    return np.exp(-np.maximum(yi, yj)) / ratio


def _inverse_frechet_impl(y, c, g, eps):
    if y.shape[0] == 0:
        return (c.copy(),)
    w, v = eigh_p.impl(y, None)
    middle = (v.conj().T @ c @ v) * _reciprocal_differences(g, w, eps)
    return ((v @ middle @ v.conj().T).astype(c.dtype, copy=False),)


def _inverse_frechet_abstract(y: Aval, c: Aval, g, eps) -> tuple[Aval]:
    n = check_square("inverse_frechet", y)
    if c.shape != (n, n) or c.dtype != y.dtype:
        raise ShapeMismatch("inverse_frechet", f"a right-hand side of shape [{n}, {n}] and dtype {y.dtype}",
                            f"{list(c.shape)} of {c.dtype}")
    return (c,)


def solve_frechet(s, y, c, g):
    """Z with L_g(Y, Z) = C (Y's Hermitian part is read; g "square" or "exp")."""
    return s.bind(inverse_frechet_p, y, c, g=g, eps=eps_of(s, None))[0]


def _second(s, y, z, d, g):
    """L²_g(Y; Z, D), the derivative of L_g(Y, Z) in Y along D."""
    if g == "square":
        return s.add(s.einsum([d, z], "ab,bc->ac"), s.einsum([z, d], "ab,bc->ac"))
    return second_frechet(s, hermitian_part(s, y), z, d)


def _second_adjoint(s, y, z, lam, g):
    """The adjoint of D ↦ L²_g(Y; Z, D) at Λ."""
    if g == "square":
        return s.add(s.einsum([lam, cj(s, z)], "ab,cb->ac"), s.einsum([cj(s, z), lam], "ba,bc->ac"))
    return second_frechet_adjoint(s, hermitian_part(s, y), z, lam)


def _inverse_frechet_jvp(s, tangents, primals, outputs, g, eps):
    """dZ = solve(dC − L²_g(Y; Z, herm dY)), from L_g(Y, Z) = C."""
    (dy, dc), (y, _), (z,) = tangents, primals, outputs
    if dy is not None:
        dc = minus(s, dc, _second(s, y, z, hermitian_part(s, dy), g))
    return (s.bind(inverse_frechet_p, y, dc, g=g, eps=eps)[0],)


def _inverse_frechet_vjp(s, cotangents, primals, outputs, needs, g, eps):
    """Λ = solve(Z̄) (the solve is self-adjoint): C̄ = Λ, Ȳ = −herm(L²_g(Y; Z, ·)*(Λ))."""
    (zb,), (y, _), (z,) = cotangents, primals, outputs
    lam = s.bind(inverse_frechet_p, y, zb, g=g, eps=eps)[0]
    yb = s.neg(hermitian_part(s, _second_adjoint(s, y, z, lam, g))) if needs[0] else None
    return yb, lam


inverse_frechet_p = RULES.define(
    "inverse_frechet",
    _inverse_frechet_abstract,
    _inverse_frechet_impl,
    _inverse_frechet_jvp,
    _inverse_frechet_vjp,
    cost=lambda in_avals, out_avals, params: 13.0 * in_avals[0].shape[0] ** 3,  # eigh and four products,
    dense_only=True,
)


# --- sqrtm, inv_sqrtm, logm: rules read the output Y -------------------------------------------


def _self_adjoint(rule):
    """The JVP and the VJP of a function of Hermitian matrices whose derivative E ↦ rule(s, Y, herm E)
    is self-adjoint: both are that map."""
    return dict(jvp=lambda s, tangents, primals, outputs: (rule(s, outputs[0], hermitian_part(s, tangents[0])),),
                vjp=lambda s, cotangents, primals, outputs, needs: (
                    rule(s, outputs[0], hermitian_part(s, cotangents[0])),))


def _inv_sqrt_rule(s, z, e):
    """−Z L Z with Z L + L Z = Z E Z."""
    lyapunov = solve_frechet(s, z, s.einsum([z, e, z], "ab,bc,cd->ad"), "square")
    return s.neg(s.einsum([z, lyapunov, z], "ab,bc,cd->ad"))


def _cost(in_avals, out_avals, params) -> float:
    return 11.0 * in_avals[0].shape[0] ** 3  # eigh and a product


sqrtm_p = RULES.define(
    "sqrtm", square_abstract("sqrtm"),
    lambda x: apply_on_spectrum("sqrtm", "semidefinite", x, lambda w: np.sqrt(np.maximum(w, 0))),
    **_self_adjoint(lambda s, y, e: solve_frechet(s, y, e, "square")), cost=_cost, dense_only=True)

inv_sqrtm_p = RULES.define(
    "inv_sqrtm", square_abstract("inv_sqrtm"),
    lambda x: apply_on_spectrum("inv_sqrtm", "definite", x, lambda w: 1 / np.sqrt(w)),
    **_self_adjoint(_inv_sqrt_rule), cost=_cost, dense_only=True)

logm_p = RULES.define(
    "logm", square_abstract("logm"),
    lambda x: apply_on_spectrum("logm", "definite", x, np.log),
    **_self_adjoint(lambda s, y, e: solve_frechet(s, y, e, "exp")), cost=_cost, dense_only=True)
