"""The matrix exponential of any square matrix (scipy.linalg.expm), with rules exact at every
order and at every spectrum, repeated or defective eigenvalues included.

Its derivative is the Fréchet derivative L(A, E) (scipy.linalg.expm_frechet, Al-Mohy & Higham's
algorithm, which scales with E), a primitive of its own: exp is entire, so no divided
difference is ever divided by zero. The VJP is L(Aᴴ, Ȳ) (the adjoint of L(A, ·) under
Re⟨·,·⟩, exp's Taylor coefficients being real). L's own derivative in A is read from the
block identity L([[A, E], [0, A]], diag(D, D)) = [[L(A, D), L²(A; E, D)], [0, L(A, D)]]: the
second Fréchet derivative is the corner of a first one, of twice the size, so every order is
again this primitive.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..errors import DTypeMismatch, ShapeMismatch
from ..ops.elementwise import cj
from ..ops.structural import SliceConfig
from ..tensor import Aval
from .common import RULES, check_finite, check_square


def _expm_abstract(a: Aval) -> tuple[Aval]:
    check_square("expm", a)
    return (a,)


def _expm_impl(a):
    """scipy.linalg.expm (Padé approximation with scaling and squaring); inf or NaN input raises
    LinalgError."""
    check_finite("expm", a)
    return (np.asarray(scipy.linalg.expm(a), dtype=a.dtype),)


def _frechet_abstract(a: Aval, e: Aval) -> tuple[Aval]:
    n = check_square("expm_frechet", a)
    if e.shape != (n, n):
        raise ShapeMismatch("expm_frechet", f"a direction of the matrix's shape [{n}, {n}]", f"{list(e.shape)}")
    if e.dtype != a.dtype:
        raise DTypeMismatch("expm_frechet", f"a direction of the matrix's dtype {a.dtype}", f"{e.dtype}")
    return (a,)


def _frechet_impl(a, e):
    check_finite("expm_frechet", a)
    check_finite("expm_frechet", e, "a direction")
    if a.shape[0] == 0:
        return (np.zeros_like(a),)
    return (np.asarray(scipy.linalg.expm_frechet(a, e, compute_expm=False, check_finite=False), dtype=a.dtype),)


def _frechet(s, a, e):
    return s.bind(expm_frechet_p, a, e)[0]


def _adjoint(s, x):
    return s.transpose(cj(s, x), (1, 0))


def _blocks(s, top_left, top_right, bottom_right):
    """[[top_left, top_right], [0, bottom_right]] of n × n blocks (None: zeros; one at least is given)."""
    n = next(b for b in (top_left, top_right, bottom_right) if b is not None).shape[0]
    out = None
    for block, at in ((top_left, (0, 0)), (top_right, (0, n)), (bottom_right, (n, n))):
        if block is not None:
            out = s.accumulate(out, s.pad(block, (2 * n, 2 * n), at))
    return out


def _block(s, x, rows, cols):
    """The n × n block of the 2n × 2n x at block row ``rows`` and column ``cols`` (0 or 1)."""
    n = x.shape[0] // 2
    return s.slice(x, SliceConfig([rows * n, cols * n], [(rows + 1) * n, (cols + 1) * n]))


def second_frechet(s, a, e, d):
    """L²(A; E, D), the derivative of L(A, E) in A along D: the corner of L([[A, E], [0, A]], diag(D, D))."""
    return _block(s, _frechet(s, _blocks(s, a, e, a), _blocks(s, d, None, d)), 0, 1)


def second_frechet_adjoint(s, a, e, g):
    """The adjoint of D ↦ L²(A; E, D) at G: the diagonal blocks of L([[A, E], [0, A]]ᴴ, [[0, G], [0, 0]]),
    summed."""
    corner = _frechet(s, _adjoint(s, _blocks(s, a, e, a)), _blocks(s, None, g, None))
    return s.add(_block(s, corner, 0, 0), _block(s, corner, 1, 1))


def _frechet_jvp(s, tangents, primals, outputs):
    """dL = L(A, dE) + L²(A; E, dA)."""
    (da, de), (a, e) = tangents, primals
    out = None if de is None else _frechet(s, a, de)
    return (out if da is None else s.accumulate(out, second_frechet(s, a, e, da)),)


def _frechet_vjp(s, cotangents, primals, outputs, needs):
    """Ē = L(Aᴴ, L̄); Ā = second_frechet_adjoint(A, E, L̄)."""
    (lb,), (a, e) = cotangents, primals
    eb = _frechet(s, _adjoint(s, a), lb) if needs[1] else None
    return (second_frechet_adjoint(s, a, e, lb) if needs[0] else None), eb


expm_frechet_p = RULES.define(
    "expm_frechet",
    _frechet_abstract,
    _frechet_impl,
    _frechet_jvp,
    _frechet_vjp,
    cost=lambda in_avals, out_avals, params: 60.0 * in_avals[0].shape[0] ** 3,
    dense_only=True,
)

expm_p = RULES.define(
    "expm",
    _expm_abstract,
    _expm_impl,
    jvp=lambda s, tangents, primals, outputs: (_frechet(s, primals[0], tangents[0]),),
    vjp=lambda s, cotangents, primals, outputs, needs: (_frechet(s, _adjoint(s, primals[0]), cotangents[0]),),
    cost=lambda in_avals, out_avals, params: 20.0 * in_avals[0].shape[0] ** 3,
    dense_only=True,
)
