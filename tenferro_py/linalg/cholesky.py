"""cholesky: A = L Lᴴ, L lower triangular with a real positive diagonal, of the Hermitian part
(A + Aᴴ)/2 of a square matrix (as eigh reads it; a Hermitian A is itself), by LAPACK potrf. A
matrix that is not positive definite is a LinalgError: its factor does not exist.

With X = L⁻¹ herm(dA) L⁻ᴴ (Hermitian), dL = L Φ(X), where Φ keeps the strictly lower triangle
and half the diagonal; the VJP is its transpose, Ā = herm(L⁻ᴴ Φ(Lᴴ L̄) L⁻¹). The solves with L
and Lᴴ are unit-triangular solves after scaling by L's diagonal, so the rules are session ops
and every order follows.
"""

from __future__ import annotations

import numpy as np

from ..errors import LinalgError
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj
from ..tensor import Aval, Tensor
from .common import RULES, check_finite, check_square, hermitian_part
from .qr import unit_solve_p


def _cholesky_abstract(a: Aval) -> tuple[Aval]:
    check_square("cholesky", a)
    return (a,)


def _cholesky_impl(a):
    """potrf through NumPy on (A + Aᴴ)/2 (A itself, bit for bit, when A is Hermitian)."""
    check_finite("cholesky", a)
    try:
        return (np.linalg.cholesky((a + a.conj().T) * 0.5),)
    except np.linalg.LinAlgError:
        raise LinalgError("cholesky", "a Hermitian positive-definite matrix",
                          "one that is not positive definite (LAPACK potrf met a pivot <= 0)") from None


def _phi(s, x):
    """x's strictly lower triangle plus half its diagonal."""
    n = x.shape[0]
    return s.mul(x, s.constant_from(Tensor.adopt((np.tril(np.ones((n, n)), -1) + 0.5 * np.eye(n)).astype(x.dtype))))


def _lower_solve(s, l, b, adjoint: bool, right: bool):
    """X with op(L) X = B (X op(L) = B when ``right``), op(L) = L or Lᴴ (``adjoint``), for L lower
    triangular with a real positive diagonal D: L = (I + S) D and Lᴴ = D (I + Sᴴ) with S the
    strict triangle of L D⁻¹, so each is one unit-triangular solve and a scaling by D⁻¹ (of B's
    rows or columns before the solve where D stands on B's side, of X's after it otherwise)."""
    diagonal = s.einsum([l], "ii->i")
    d = lift_real(s, s.real(diagonal), l) if l.dtype.kind == "c" else diagonal
    inverse = s.div(s.constant_from(Tensor.adopt(np.ones(d.shape, d.dtype))), d)
    unit = s.einsum([l, inverse], "ij,j->ij")  # L D⁻¹
    if adjoint:
        unit = s.transpose(cj(s, unit), (1, 0))
    scale = "ij,j->ij" if right else "ij,i->ij"
    if right != adjoint:
        b = s.einsum([b, inverse], scale)
    x = s.bind(unit_solve_p, unit, b, lower=not adjoint, right=right)[0]
    return x if right != adjoint else s.einsum([x, inverse], scale)


def _cholesky_jvp(s, tangents, primals, outputs):
    """dL = L Φ(L⁻¹ herm(dA) L⁻ᴴ)."""
    (da,), (l,) = tangents, outputs
    if l.shape[0] == 0:
        return (da,)
    y = _lower_solve(s, l, hermitian_part(s, da), adjoint=False, right=False)
    x = _lower_solve(s, l, y, adjoint=True, right=True)
    return (s.einsum([l, _phi(s, x)], "ij,jk->ik"),)


def _cholesky_vjp(s, cotangents, primals, outputs, needs):
    """Ā = herm(L⁻ᴴ Φ(Lᴴ L̄) L⁻¹)."""
    (lb,), (l,) = cotangents, outputs
    if l.shape[0] == 0:
        return (lb,)
    m = _phi(s, s.einsum([cj(s, l), lb], "ji,jk->ik"))
    z = _lower_solve(s, l, m, adjoint=True, right=False)
    return (hermitian_part(s, _lower_solve(s, l, z, adjoint=False, right=True)),)


cholesky_p = RULES.define(
    "cholesky",
    _cholesky_abstract,
    _cholesky_impl,
    _cholesky_jvp,
    _cholesky_vjp,
    cost=lambda in_avals, out_avals, params: in_avals[0].shape[0] ** 3 / 3.0,
    dense_only=True,
)
