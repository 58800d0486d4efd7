"""What the linalg family's modules share: its rule set; ε of the broadened spectral rules and
its check; the checks of a kernel's input; small helpers in session ops that several rules use
(the leading entries along an axis, zero padding, a vector on a diagonal, the Hermitian part)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgument, LinalgError, ShapeMismatch
from ..ops.elementwise import cj
from ..ops.structural import SliceConfig
from ..rules import RuleSet
from ..tensor import Aval, Tensor, is_real_number

#: The family's rules: each linalg module registers its primitives here.
RULES = RuleSet()

#: ε of the broadened spectral rules, relative to the spectrum's scale (an AdContext's default).
DEFAULT_DERIVATIVE_EPS = 1e-12
#: The smallest derivative_eps: its square stays a normal number in float32 (1.2e-38).
MIN_DERIVATIVE_EPS = 1e-18


def check_derivative_eps(op: str, eps: object) -> float:
    """ε relative to the spectrum's scale: a number in [1e-18, 1], or InvalidArgument."""
    if not (is_real_number(eps) and math.isfinite(eps) and MIN_DERIVATIVE_EPS <= eps <= 1.0):
        raise InvalidArgument(op, f"derivative_eps: a number in [{MIN_DERIVATIVE_EPS:g}, 1] (relative to the largest "
                                  "singular value)", repr(eps))
    return float(eps)


def eps_of(s, derivative_eps) -> float:
    """ε of a rule: the op's own ``derivative_eps``, or (None) the runtime's context's."""
    return derivative_eps if derivative_eps is not None else s.runtime.ad_context.derivative_eps


def check_finite(op: str, a: np.ndarray, what: str = "a matrix") -> None:
    """LinalgError naming ``op`` where a kernel's input has inf or NaN (LAPACK's answer would be undefined)."""
    if not np.isfinite(a).all():
        raise LinalgError(op, f"{what} of finite entries", "inf or NaN entries")


def check_square(op: str, a: Aval) -> int:
    """n for an n × n matrix; else ShapeMismatch naming ``op``."""
    if len(a.shape) != 2 or a.shape[0] != a.shape[1]:
        raise ShapeMismatch(op, "a square matrix (rank 2)", f"shape {list(a.shape)}")
    return a.shape[0]


def columns(s, x, stop, axis):
    """The first ``stop`` entries of x along ``axis``."""
    limits = list(x.shape)
    limits[axis] = stop
    return x if stop == x.shape[axis] else s.slice(x, SliceConfig([0] * x.ndim, limits))


def extend(s, x, stop, axis):
    """x padded with zeros along ``axis`` to length ``stop``."""
    if x.shape[axis] == stop:
        return x
    shape = list(x.shape)
    shape[axis] = stop
    return s.pad(x, shape, (0,) * x.ndim, (1,) * x.ndim)


def on_diagonal(s, vec, k):
    """The kk × K matrix with ``vec`` (length kk) on its diagonal."""
    kk = vec.shape[0]
    return s.einsum([vec, s.constant_from(Tensor.adopt(np.eye(kk, k, dtype=vec.dtype)))], "i,ij->ij")


def hermitian_part(s, x):
    """(x + xᴴ)/2."""
    return s.scale_real(s.add(x, s.transpose(cj(s, x), (1, 0))), 0.5)
