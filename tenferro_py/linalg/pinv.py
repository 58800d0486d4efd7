"""The Moore–Penrose pseudo-inverse as a primitive with its own rules.

A⁺ by the SVD, singular values ≤ rtol·s₁ counted as zero (NumPy's cutoff). Its derivative
for a constant rank (Golub & Pereyra, SIAM J. Numer. Anal. 10, 413 (1973)) reads A and A⁺
alone, so it is exact where singular values repeat (at A = I, say), where a rule through the
SVD's factors cannot be:

    dA⁺ = −A⁺ dA A⁺ + A⁺A⁺ᴴ dAᴴ (I − AA⁺) + (I − A⁺A) dAᴴ A⁺ᴴA⁺,

and the VJP is its transpose. Both are session ops of A and A⁺ (A⁺ an output of this op), so
they differentiate again. Where the rank changes A⁺ jumps: the rules give the derivative
along the directions that keep the rank (the values the cutoff drops stay dropped). The rules
work at unit scale (A divided by a power of two near max |A|), so that they hold at any scale.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgument, ShapeMismatch
from ..ops.elementwise import cj, full_like, real_dtype
from ..tensor import Aval, is_real_number
from .common import RULES, check_finite
from .spectral import times
from .svd import svd_p


def pinv_rtol(x, rtol: object) -> float:
    """The cutoff relative to s₁: ``rtol`` checked, or, for None, max(m, n)·ε of x's dtype (NumPy's
    ``rtol=None``)."""
    if rtol is None:
        return max(x.shape[-2:]) * float(np.finfo(real_dtype(x.dtype)).eps)
    if not (is_real_number(rtol) and math.isfinite(rtol) and rtol >= 0):
        raise InvalidArgument("pinv", "rtol: a finite number >= 0 (the cutoff relative to the largest singular "
                                      "value)", repr(rtol))
    return float(rtol)


def _pinv_abstract(a: Aval, rtol) -> tuple[Aval]:
    if len(a.shape) != 2:
        raise ShapeMismatch("pinv", "a matrix (rank 2)", f"shape {list(a.shape)}")
    m, n = a.shape
    return (Aval((n, m), a.dtype),)


def _pinv_impl(a, rtol):
    """V diag(1/s) Uᴴ over the singular values s > rtol·s₁ (NumPy's pinv). Input with inf or NaN
    raises LinalgError."""
    check_finite("pinv", a)
    m, n = a.shape
    if m == 0 or n == 0:
        return (np.zeros((n, m), a.dtype),)
    u, sv, vt = svd_p.impl(a, None)
    kept = sv > rtol * sv[0]
    inverse = np.zeros_like(sv)
    inverse[kept] = 1 / sv[kept]
    return ((vt.conj().T * inverse) @ u.conj().T,)


def _adjoint(s, x):
    """xᴴ."""
    return s.transpose(cj(s, x), (1, 0))


def product(s, *matrices):
    """The matrix product of ``matrices``, left to right, as one einsum (its planner picks the order)."""
    letters = "abcdefgh"[: len(matrices) + 1]
    pairs = ",".join(letters[i: i + 2] for i in range(len(matrices)))
    return s.einsum(list(matrices), f"{pairs}->{letters[0]}{letters[-1]}")


def _binary_scale_impl(a):
    """2^e ≥ max |a| > 2^(e−1) (1 for a zero or empty a): a scale to divide by exactly."""
    size = float(np.abs(a).max(initial=0))
    return (np.array(np.ldexp(1.0, int(np.frexp(size)[1])) if size > 0 else 1.0, dtype=real_dtype(a.dtype)),)


# The power of two nearest above max |a|, a constant for AD: the rules' A and A⁺ are taken at
# that scale, so their products neither overflow nor underflow where the result does not.
binary_scale_p = RULES.define(
    "binary_scale",
    lambda a: (Aval((), real_dtype(a.dtype)),),
    _binary_scale_impl,
    jvp=lambda s, tangents, primals, outputs: (None,),
    vjp=lambda s, cotangents, primals, outputs, needs: (None,),
    dense_only=True,
)


def _at_unit_scale(s, a, p):
    """(A/c, c A⁺, 1/c) for c = binary_scale(A): every term of the rules is of degree −2 in the scale."""
    c = s.bind(binary_scale_p, a)[0]
    inverse = s.div(full_like(s, c, 1), c)
    return times(s, a, inverse), times(s, p, c), inverse


def _pinv_jvp(s, tangents, primals, outputs, rtol):
    """dP = −P dA P + PPᴴ dAᴴ − PPᴴ dAᴴ A P + dAᴴ PᴴP − P A dAᴴ PᴴP (P = A⁺), at unit scale."""
    (da,), (a,), (p,) = tangents, primals, outputs
    a, p, inverse = _at_unit_scale(s, a, p)
    da_h, p_h = _adjoint(s, da), _adjoint(s, p)
    left = product(s, p, p_h, da_h)  # P Pᴴ dAᴴ
    right = product(s, da_h, p_h, p)  # dAᴴ Pᴴ P
    out = s.sub(s.add(left, right), product(s, p, da, p))
    out = s.sub(out, s.add(product(s, left, a, p), product(s, p, a, right)))
    return (times(s, times(s, out, inverse), inverse),)


def _pinv_vjp(s, cotangents, primals, outputs, needs, rtol):
    """Ā = −Pᴴ P̄ Pᴴ + P̄ᴴ PPᴴ − A P P̄ᴴ PPᴴ + PᴴP P̄ᴴ − PᴴP P̄ᴴ P A: the JVP's transpose, at unit scale."""
    (pb,), (a,), (p,) = cotangents, primals, outputs
    a, p, inverse = _at_unit_scale(s, a, p)
    pb_h, p_h = _adjoint(s, pb), _adjoint(s, p)
    left = product(s, pb_h, p, p_h)  # P̄ᴴ P Pᴴ
    right = product(s, p_h, p, pb_h)  # Pᴴ P P̄ᴴ
    out = s.sub(s.add(left, right), product(s, p_h, pb, p_h))
    out = s.sub(out, s.add(product(s, a, p, left), product(s, right, p, a)))
    return (times(s, times(s, out, inverse), inverse),)


pinv_p = RULES.define(
    "pinv",
    _pinv_abstract,
    _pinv_impl,
    _pinv_jvp,
    _pinv_vjp,
    cost=lambda in_avals, out_avals, params: 12.0 * math.prod(in_avals[0].shape) * min(in_avals[0].shape),
    dense_only=True,
)
