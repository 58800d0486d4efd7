"""The Hermitian eigendecomposition A = V diag(w) Vᴴ of the Hermitian part of A (w ascending,
real). With P = Vᴴ herm(dA) V, dw = Re diag(P) and dV = V (F ∘ P), F_ij the broadened
1/(w_j − w_i) relative to max |w| (:mod:`.spectral`; zero on the diagonal: the eigenvectors'
phases do not move, the gauge the SVD's V follows too).
"""

from __future__ import annotations

import numpy as np

from ..errors import LinalgError
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj, real_dtype
from ..tensor import Aval
from . import degenerate
from .common import RULES, check_finite, check_square, eps_of, hermitian_part, on_diagonal
from .spectral import exact_unit, gap_coefficients, spectrum_scale, times


def _eigh_abstract(a: Aval, derivative_eps) -> tuple[Aval, Aval]:
    n = check_square("eigh", a)
    return Aval((n,), real_dtype(a.dtype)), Aval((n, n), a.dtype)


def _eigh_impl(a, derivative_eps):
    """syevd/heevd through NumPy (it releases the GIL) on (A + Aᴴ)/2, which is A itself, bit for
    bit, when A is Hermitian. Input with inf or NaN raises LinalgError."""
    check_finite("eigh", a)
    try:
        return tuple(np.linalg.eigh((a + a.conj().T) * 0.5))
    except np.linalg.LinAlgError as err:
        raise LinalgError("eigh", "LAPACK syevd/heevd to converge", str(err)) from None


def _eigh_jvp(s, tangents, primals, outputs, derivative_eps):
    """dw = Re diag(P), dV = V (F ∘ P) with P = Vᴴ herm(dA) V."""
    (da,), (w, v) = tangents, outputs
    degenerate.eigh_tangent("eigh", w, v, da, eps_of(s, derivative_eps))
    p = hermitian_part(s, s.einsum([cj(s, v), da, v], "ai,ab,bj->ij"))
    reciprocal = exact_unit(s, spectrum_scale(s, w))[1]  # dV is that of A/c along dA/c
    minus, _, _ = gap_coefficients(s, times(s, w, reciprocal), eps_of(s, derivative_eps), w.shape[0], sums=False)
    middle = s.mul(lift_real(s, minus, v), times(s, p, reciprocal))
    return s.real(s.einsum([p], "ii->i")), s.einsum([v, middle], "ai,ij->aj")


def _eigh_vjp(s, cotangents, primals, outputs, needs, derivative_eps):
    """Ā = herm(V [diag(w̄) + F ∘ (Vᴴ V̄)] Vᴴ): the JVP's transpose, Hermitian as the input it reads."""
    (wb, vb), (w, v) = cotangents, outputs
    degenerate.eigh_cotangents("eigh", w, v, vb, eps_of(s, derivative_eps))
    middle = None
    if vb is not None:  # that of A/c for V̄/c
        reciprocal = exact_unit(s, spectrum_scale(s, w))[1]
        minus, _, _ = gap_coefficients(s, times(s, w, reciprocal), eps_of(s, derivative_eps), w.shape[0], sums=False)
        middle = s.mul(lift_real(s, minus, v), times(s, s.einsum([cj(s, v), vb], "ai,aj->ij"), reciprocal))
    if wb is not None:
        middle = s.accumulate(middle, on_diagonal(s, lift_real(s, wb, v), w.shape[0]))
    if middle is None:
        return (None,)
    return (hermitian_part(s, s.einsum([v, middle, cj(s, v)], "ai,ij,bj->ab")),)


eigh_p = RULES.define(
    "eigh",
    _eigh_abstract,
    _eigh_impl,
    _eigh_jvp,
    _eigh_vjp,
    cost=lambda in_avals, out_avals, params: 9.0 * in_avals[0].shape[0] ** 3,  # tridiagonalisation and vectors
)
