"""The spectral coefficients of the SVD's, eigh's and QR's rules: broadened reciprocals of
differences, sums and values of a spectrum, at any scale.

With A = U S Vᴴ and C = Uᴴ dA V, the SVD's rules couple singular values i ≠ j by
H_ij/(s_j − s_i) + A_ij/(s_j + s_i) (H, A the Hermitian and anti-Hermitian parts of C). Only
1/(s_j − s_i) diverges at a repeated value: it becomes the Lorentzian δ/(δ² + (ε s₁)²),
δ = s_j − s_i. 1/(s_j + s_i) and 1/s take the same form, which equals them to relative
(ε s₁/σ)², i.e. to rounding wherever σ > 1e-4 s₁ (ε = 1e-12), and stays finite where they
diverge (both values near 0). Every coefficient is computed from values divided by the
spectrum's scale (s₁; for eigh max |w|; for QR's pivots max |R_jj|), itself a constant, and 1
where it is 0 (:func:`scale_or_one`): no squares of values appear, and the rules of f(c·A)
follow from those of f(A) at any scale c (:func:`exact_unit` scales by an exact power of two).
"""

from __future__ import annotations

import numpy as np

from .. import krylov
from ..ops.complex_parts import lift_real, times_i
from ..ops.elementwise import full, full_like, zero_mask
from ..ops.structural import SliceConfig
from ..tensor import Tensor
from .common import RULES, columns


def _off_diagonal(rows: int, cols: int, dtype: np.dtype) -> Tensor:
    """1 − I of rows × cols."""
    return Tensor.adopt(1.0 - np.eye(rows, cols, dtype=dtype))


def scale_or_one(s, largest):
    """The scale ε is relative to, from ``largest`` (a nonnegative real tensor: a spectrum's or the
    pivots' largest |v|), as a constant (no derivative flows through it): ``largest`` itself, and 1
    where it is 0, so that a zero spectrum's coefficients are zero, not NaN, at every order (1/scale
    enters their derivatives)."""
    return s.constant_from(s.add(largest, s.bind(zero_mask, largest)[0]))


def spectrum_scale(s, values):
    """:func:`scale_or_one` of a sorted spectrum's largest |v| (max(|first|, |last|); s₁ for singular
    values), of shape (1,)."""
    n = values.shape[0]
    if n == 0:  # no values, no coefficients: any scale will do
        return full(s, (1,), values.dtype, 1)
    first, last = s.abs(columns(s, values, 1, 0)), s.abs(s.slice(values, SliceConfig([n - 1], [n])))
    largest = s.scale_real(s.add(s.add(first, last), s.abs(s.sub(first, last))), 0.5)  # max(a, b) for a, b ≥ 0
    return scale_or_one(s, largest)


def lorentzian(s, u, eps):
    """u/(u² + ε²) for u of order 1 or less: 1/u where |u| ≫ ε, 0 at u = 0, at most 1/(2ε) in size."""
    return s.div(u, s.add(s.mul(u, u), full_like(s, u, eps * eps)))


def _power_of_two_impl(x):
    """krylov.power_of_two_near elementwise (x holds a value or two)."""
    return (np.array([krylov.power_of_two_near(float(v), x.dtype) for v in x.flat], x.dtype).reshape(x.shape),)


# A constant for AD: the exact scale the spectral rules divide their values and tangents by.
power_of_two_p = RULES.define("power_of_two", lambda x: (x,), _power_of_two_impl, jvp=lambda s, t, p, o: (None,),
                               vjp=lambda s, c, p, o, needs: (None,))


def exact_unit(s, magnitude):
    """(c, 1/c): the power of two nearest ``magnitude`` (a nonnegative real tensor; 1 at 0), and its
    reciprocal, as constants of ``magnitude``'s shape. Multiplying by either is exact (bar underflow),
    so a rule that works on values and tangents times 1/c and multiplies back what carries the scale
    gives, at ordinary scales, the bits it would give unscaled, and never overflows at extreme ones."""
    unit = s.constant_from(s.bind(power_of_two_p, magnitude)[0])
    return unit, s.div(full_like(s, unit, 1), unit)


def times(s, x, factor):
    """x times ``factor`` (a real tensor of one element, e.g. from :func:`exact_unit`), any dtype of x."""
    return s.mul(x, lift_real(s, s.broadcast_in_dim(s.reshape(factor, ()), x.shape, ()), x))


def gap_coefficients(s, values, eps, cols, sums=True):
    """Columns [0, cols) of the broadened 1/(v_j − v_i) and, when ``sums``, 1/(v_j + v_i) (zero on the
    diagonal), and the broadened 1/v of the first ``cols`` values, for values v of one spectrum.

    Each is the Lorentzian of the values divided by the spectrum's scale, divided by the scale: the
    differences and sums are at most 2 in size, so nothing overflows or underflows at any scale.
    """
    k = values.shape[0]
    scale = spectrum_scale(s, values)
    x = s.div(values, s.broadcast_in_dim(s.reshape(scale, ()), values.shape, ()))
    x_cols = columns(s, x, cols, 0)
    over_scale = s.broadcast_in_dim(s.reshape(scale, ()), (k, cols), ())
    mask = s.constant_from(_off_diagonal(k, cols, values.dtype))
    xj, xi = s.broadcast_in_dim(x_cols, (k, cols), (1,)), s.broadcast_in_dim(x, (k, cols), (0,))
    minus = s.div(s.mul(lorentzian(s, s.sub(xj, xi), eps), mask), over_scale)
    plus = s.div(s.mul(lorentzian(s, s.add(xj, xi), eps), mask), over_scale) if sums else None
    inverse = s.div(lorentzian(s, x_cols, eps), s.broadcast_in_dim(s.reshape(scale, ()), (cols,), ()))
    return minus, plus, inverse


def phase_term(s, x_head, inverse):
    """i·Im(diag x)/s (``inverse`` the broadened 1/s): the part of dU, or of the middle of Ā, that
    keeps JAX's phase gauge for complex A (the phase sits in U); None for a real one."""
    if x_head.dtype.kind != "c":
        return None
    return times_i(s, s.mul(s.imag(s.einsum([x_head], "ii->i")), inverse))
