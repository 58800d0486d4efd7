"""norm: numpy.linalg.norm's vector and matrix norms, with the Frobenius norm (BLAS nrm2) and the
reciprocal-or-zero its derivative needs as primitives."""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from ..errors import InvalidArgument, ShapeMismatch
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj, real_dtype
from ..ops.structural import SliceConfig
from ..tensor import Aval, is_real_number
from .common import RULES
from .svd import svd_p


def _reciprocal_or_zero_impl(x):
    out = np.zeros_like(x)
    return (np.divide(1, x, out=out, where=x != 0),)


# 1/x where x ≠ 0, and 0 at 0 (real x): its derivative −t/x² (0 at 0) is written with the op
# itself, so every order is finite.
reciprocal_or_zero_p = RULES.define(
    "reciprocal_or_zero",
    lambda x: (x,),
    _reciprocal_or_zero_impl,
    jvp=lambda s, tangents, primals, outputs: (s.neg(s.mul(tangents[0], s.mul(outputs[0], outputs[0]))),),
    vjp=lambda s, cotangents, primals, outputs, needs: (s.neg(s.mul(cotangents[0], s.mul(outputs[0], outputs[0]))),),
    dense_only=True,
)


def _frobenius_impl(x):
    """BLAS nrm2 over all entries: scaled, so it neither overflows nor underflows where ‖x‖ does not."""
    flat = np.ravel(x, order="K")
    nrm2 = scipy.linalg.get_blas_funcs("nrm2", (flat,))
    return (np.array(nrm2(flat) if flat.size else 0, dtype=real_dtype(x.dtype)),)


def _unit_direction(s, x, n):
    """x/‖x‖, and 0 at x = 0 (n = ‖x‖): the derivative of ‖x‖, dn = Re⟨x/‖x‖, dx⟩, x̄ = n̄ x/‖x‖."""
    inverse = s.bind(reciprocal_or_zero_p, n)[0]
    return s.mul(x, lift_real(s, s.broadcast_in_dim(inverse, x.shape, ()), x))


def _frobenius_jvp(s, tangents, primals, outputs):
    (dx,), (x,), (n,) = tangents, primals, outputs
    change = s.reduce_sum(s.mul(cj(s, _unit_direction(s, x, n)), dx))
    return (s.real(change) if change.dtype.kind == "c" else change,)


def _frobenius_vjp(s, cotangents, primals, outputs, needs):
    (nb,), (x,), (n,) = cotangents, primals, outputs
    return (s.mul(_unit_direction(s, x, n), lift_real(s, s.broadcast_in_dim(nb, x.shape, ()), x)),)


frobenius_p = RULES.define(
    "frobenius_norm",
    lambda x: (Aval((), real_dtype(x.dtype)),),
    _frobenius_impl,
    _frobenius_jvp,
    _frobenius_vjp,
    dense_only=True,
)

VECTOR_ORDS = (None, 2, 1, math.inf, -math.inf)
MATRIX_ORDS = (None, "fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)


def norm(s, x, ord):
    """numpy.linalg.norm(x, ord) of a vector or a matrix, as a real scalar (the orders of
    VECTOR_ORDS and MATRIX_ORDS). Frobenius by BLAS nrm2 (its derivative 0 at x = 0); 'nuc', 2
    and −2 through the SVD (Σ s, s₁, s_K); 1, ∞ (and −1, −∞) as the max (min) over column (row)
    sums of |x|, ties sharing the derivative."""
    if x.ndim not in (1, 2):
        raise ShapeMismatch("norm", "a vector or a matrix (rank 1 or 2)", f"shape {list(x.shape)}")
    ords = VECTOR_ORDS if x.ndim == 1 else MATRIX_ORDS
    if not (ord is None or isinstance(ord, str) or is_real_number(ord)) or ord not in ords:
        what = "vector" if x.ndim == 1 else "matrix"
        raise InvalidArgument("norm", f"a {what} order among {', '.join(map(repr, ords))}", repr(ord))
    if ord is None or ord == "fro" or (x.ndim == 1 and ord == 2):
        return s.bind(frobenius_p, x)[0]
    if ord in (2, -2) and min(x.shape) == 0:  # as NumPy: an empty spectrum has no extreme value
        raise ShapeMismatch("norm", f"a matrix with at least one row and column for ord {ord} (an extreme "
                                    "singular value)", f"shape {list(x.shape)}")
    if ord == "nuc" or ord in (2, -2):
        sv = s.bind(svd_p, x, derivative_eps=None)[1]
        if ord == "nuc":
            return s.reduce_sum(sv)
        k = sv.shape[0]
        return s.reshape(s.slice(sv, SliceConfig([0], [1]) if ord == 2 else SliceConfig([k - 1], [k])), ())
    if x.ndim == 1 and ord == 1:
        return s.reduce_sum(s.abs(x))
    # |x| for a vector; for a matrix, its column sums (±1) or row sums (±∞)
    sums = s.abs(x) if x.ndim == 1 else s.reduce_sum(s.abs(x), axes=(0,) if abs(ord) == 1 else (1,))
    if sums.shape[0] == 0:  # as NumPy: the largest of none is 0, the least has no value
        if ord < 0:
            raise ShapeMismatch("norm", f"at least one {'entry' if x.ndim == 1 else 'row and column'} for ord "
                                        f"{ord} (the least of none has no value)", f"shape {list(x.shape)}")
        return s.reduce_sum(sums)
    return (s.reduce_max if ord > 0 else s.reduce_min)(sums)
