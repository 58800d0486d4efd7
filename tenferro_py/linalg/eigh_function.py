"""eigh_function(x, f, fprime, ...): V f(w) Vᴴ for eigh's (w, V) of the Hermitian part of x, for
a user's f given with its derivatives as elementwise NumPy functions of real arrays.

Its rules are Daleckii–Krein's (:mod:`.matrix_functions`), written in session ops of eigh's
(w, V) and of F, itself session ops of w and of f's derivatives (``spectral_value``, whose
own derivative is the next one given), so they differentiate again: the k-th derivative needs
f^(k). The first is exact at every spectrum; higher ones are exact where eigenvalues are
separated and along paths that keep a repeated eigenvalue repeated (eigh's limit,
docs/design.md).

F_ij is the quotient (f(w_i) − f(w_j))/(w_i − w_j) where it loses less than ε/τ to cancellation
(|w_i − w_j| max|f′| > τ (|f(w_i)| + |f(w_j)|), τ = 1e-3) or the points are far apart
(|w_i − w_j| > 1e-2 max|w|); elsewhere, the diagonal included, the 3-point
Gauss–Legendre rule for ∫₀¹ f′(w_j + t(w_i − w_j)) dt, exact there to rounding.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgument, LinalgError, Unsupported
from ..ops.complex_parts import lift_real
from ..ops.elementwise import cj, full, full_like
from .common import RULES, hermitian_part
from .eigh import eigh_p
from .matrix_functions import apply_on_spectrum, square_abstract
from .spectral import spectrum_scale


def by_row(s, x):
    """x_i as an n × n matrix (constant along j)."""
    return s.broadcast_in_dim(x, (x.shape[0], x.shape[0]), (0,))


def by_col(s, x):
    """x_j as an n × n matrix (constant along i)."""
    return s.broadcast_in_dim(x, (x.shape[0], x.shape[0]), (1,))


def _at_most(s, x, bound):
    """A constant mask, nonzero where x ≤ bound (real tensors of one shape)."""
    return s.add(s.sign(s.sub(bound, x)), full_like(s, x, 1))


# --- f and its derivatives, elementwise ---------------------------------------------------------


def _value_impl(w, functions, order):
    """functions[order](w), checked: real, finite, of w's shape; in w's dtype."""
    y = np.asarray(functions[order](w))
    what = "f" if order == 0 else f"f's derivative of order {order}"
    if y.shape != w.shape or y.dtype.kind not in "biuf":
        raise InvalidArgument("eigh_function", f"{what}: real values of the eigenvalues' shape {list(w.shape)} (an "
                                               "elementwise NumPy function)", f"{y.dtype} of shape {list(y.shape)}")
    if not np.isfinite(y).all():
        raise LinalgError("eigh_function", f"{what} finite at every eigenvalue", f"inf or NaN among {w}")
    return (y.astype(w.dtype, copy=False),)


def _value(s, x, functions, order):
    return s.bind(value_p, x, functions=functions, order=order)[0]


def _value_rule(s, t, w, functions, order):
    """t · f^(order + 1)(w); Unsupported where that derivative was not given."""
    if order + 1 >= len(functions):
        names = ["f", "fprime", "fsecond"] + [f"f{k}" for k in range(3, order + 2)]
        raise Unsupported("eigh_function", f"f's derivative of order {order + 1} to differentiate this often: pass "
                                           f"eigh_function(x, {', '.join(names[:order + 2])})",
                          f"{len(functions) - 1} derivative(s)")
    return s.mul(t, _value(s, w, functions, order + 1))


value_p = RULES.define(
    "spectral_value",
    lambda w, functions, order: (w,),
    _value_impl,
    jvp=lambda s, tangents, primals, outputs, **params: (_value_rule(s, tangents[0], primals[0], **params),),
    vjp=lambda s, cotangents, primals, outputs, needs, **params: (_value_rule(s, cotangents[0], primals[0], **params),),
    dense_only=True,
)

# --- F ----------------------------------------------------------------------------------------

_TAU = 1e-3
_GAUSS_NODE = math.sqrt(0.6)


def _differences(s, w, functions):
    """F of the module's note, symmetric in i and j."""
    f, slope = _value(s, w, functions, 0), s.abs(_value(s, w, functions, 1))
    delta = s.sub(by_row(s, w), by_col(s, w))
    size = s.add(s.abs(by_row(s, f)), s.abs(by_col(s, f)))
    steep = s.mul(s.abs(delta), s.maximum(by_row(s, slope), by_col(s, slope)))
    far = s.broadcast_in_dim(s.reshape(s.scale_real(spectrum_scale(s, w), 1e-2), ()), delta.shape, ())
    close = s.mul(_at_most(s, steep, s.scale_real(size, _TAU)), _at_most(s, s.abs(delta), far))
    middle = s.scale_real(s.add(by_row(s, w), by_col(s, w)), 0.5)
    offset = s.scale_real(delta, 0.5 * _GAUSS_NODE)
    outer = s.add(_value(s, s.sub(middle, offset), functions, 1), _value(s, s.add(middle, offset), functions, 1))
    gauss = s.add(s.scale_real(outer, 5.0 / 18.0), s.scale_real(_value(s, middle, functions, 1), 8.0 / 18.0))
    quotient = s.div(s.sub(by_row(s, f), by_col(s, f)), s.where(close, full(s, delta.shape, w.dtype, 1), delta))
    return s.where(close, gauss, quotient)


# --- the op -----------------------------------------------------------------------------------


def _daleckii_krein(s, x, e, functions):
    """herm(V (F ∘ (Vᴴ E V)) Vᴴ): the JVP along E and, F being real and symmetric, the VJP of Ȳ = E."""
    if x.shape[0] == 0:
        return s.zeros(x.shape, x.dtype)
    w, v = s.bind(eigh_p, x, derivative_eps=None)
    middle = s.mul(lift_real(s, _differences(s, w, functions), v), s.einsum([cj(s, v), e, v], "ai,ab,bj->ij"))
    return hermitian_part(s, s.einsum([v, middle, cj(s, v)], "ai,ij,bj->ab"))


def _impl(x, functions):
    return apply_on_spectrum("eigh_function", "any", x, lambda w: _value_impl(w, functions, 0)[0])


eigh_function_p = RULES.define(
    "eigh_function",
    square_abstract("eigh_function"),
    _impl,
    jvp=lambda s, tangents, primals, outputs, functions: (_daleckii_krein(s, primals[0], tangents[0], functions),),
    vjp=lambda s, cotangents, primals, outputs, needs, functions: (
        _daleckii_krein(s, primals[0], cotangents[0], functions),),
    cost=lambda in_avals, out_avals, params: 13.0 * in_avals[0].shape[0] ** 3,  # eigh and two products,
    dense_only=True,
)


def check_functions(f, derivatives: tuple) -> tuple:
    """(f, f′, ...) checked: callables, f′ given at least."""
    functions = (f,) + tuple(derivatives)
    if len(functions) < 2 or not all(callable(g) for g in functions):
        raise InvalidArgument("eigh_function", "f and fprime (and optionally fsecond, ...): callables on arrays of "
                                               "eigenvalues", repr(functions))
    return functions

