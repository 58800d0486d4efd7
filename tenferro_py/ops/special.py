"""Rounding, remainders, masks and special functions as ops, with their rules (merged into the core
rule set through :mod:`.extrema`).

Piecewise constant ops (trunc, rint, spacing, floor_divide, the masks) have zero derivative. The
remainders r = x − q·y have derivative 1 in x and −q in y, q the integer quotient of the value (as
autograd and JAX). ``nextafter`` has no AD rule, as in JAX: differentiating it is ``Unsupported``.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special

from ..errors import DTypeMismatch
from ..rules import Primitive, RuleSet
from ..tensor import Aval
from .elementwise import (
    constant_for_ad,
    full_like,
    nothing_where_nothing_flows,
    real_dtype,
    real_matching_avals,
    real_only,
    same_aval,
    unary,
)

RULES = RuleSet()

# --- masks and rounding ------------------------------------------------------------------------

_TESTS = {"signbit": np.signbit, "isnan": np.isnan, "near_zero": lambda x: np.abs(x) < SINC_SERIES_BELOW}


def _mask_abstract(x: Aval, test: str) -> tuple[Aval]:
    if test == "signbit":
        real_only("signbit")(x)
    return (Aval(x.shape, real_dtype(x.dtype)),)


# 1 where ``test`` holds (signbit, isnan, near_zero: below SINC_SERIES_BELOW in magnitude), else 0,
# of x's real dtype: a constant for AD.
mask = RULES.define("mask", _mask_abstract, lambda x, test: (_TESTS[test](x).astype(real_dtype(x.dtype)),),
                    jvp=lambda s, t, p, o, test: (None,), vjp=lambda s, c, p, o, needs, test: (None,))

trunc = constant_for_ad("trunc", np.trunc, RULES)
rint = constant_for_ad("rint", np.rint, RULES, abstract=same_aval)  # NumPy rounds complex parts too
spacing = constant_for_ad("spacing", np.spacing, RULES)
floor_divide = constant_for_ad("floor_divide", np.floor_divide, RULES, abstract=real_matching_avals("floor_divide"))

# nextafter: a primitive without rules (JAX has none): its value, and Unsupported for a derivative.
nextafter = Primitive("nextafter", real_matching_avals("nextafter"), lambda a, b: (np.nextafter(a, b),))


# --- remainders ---------------------------------------------------------------------------------


def _remainder_rules(quotient):
    """The JVP and VJP of r = x − q·y, with q = ``quotient(s, x, y, r)`` (a constant for AD)."""

    def jvp(s, tangents, primals, outputs):
        (dx, dy), (x, y), (r,) = tangents, primals, outputs
        return (s.accumulate(dx, None if dy is None else s.neg(s.mul(dy, quotient(s, x, y, r)))),)

    def vjp(s, cotangents, primals, outputs, needs):
        (ct,), (x, y), (r,) = cotangents, primals, outputs
        return (ct if needs[0] else None, s.neg(s.mul(ct, quotient(s, x, y, r))) if needs[1] else None)

    return jvp, vjp


# remainder (NumPy's mod, the sign of y): q = floor_divide(x, y), as NumPy's divmod pairs them.
remainder = RULES.define("remainder", real_matching_avals("remainder"), lambda a, b: (np.remainder(a, b),),
                         *_remainder_rules(lambda s, x, y, r: s.bind(floor_divide, x, y)[0]))
# fmod (C's, the sign of x): q = (x − r)/y rounded, the integer fmod's exact value was divided by.
fmod = RULES.define("fmod", real_matching_avals("fmod"), lambda a, b: (np.fmod(a, b),),
                    *_remainder_rules(lambda s, x, y, r: s.bind(rint, s.div(s.sub(x, r), y))[0]))

# modf's fractional part x − trunc(x) (±0 at infinities, as NumPy): derivative 1.
modf_fraction = unary("modf_fraction", lambda x: np.modf(x)[0], lambda s, t, x, y: t, rules=RULES,
                      abstract=real_only("modf"))


def _ldexp_abstract(x: Aval, n: Aval) -> tuple[Aval]:
    return real_matching_avals("ldexp")(x, n)


# ldexp(x, n) = x·2**n for integers n (held in x's dtype, a constant): linear in x, exact at any n.
ldexp = RULES.define(
    "ldexp", _ldexp_abstract, lambda x, n: (np.ldexp(x, n.astype(np.int64)),),
    jvp=lambda s, t, p, o: (None if t[0] is None else s.bind(ldexp, t[0], p[1])[0],),
    vjp=lambda s, c, p, o, needs: (s.bind(ldexp, c[0], p[1])[0], None),
)


# --- powers and special functions ---------------------------------------------------------------

cbrt = unary("cbrt", np.cbrt, lambda s, t, x, y: nothing_where_nothing_flows(
    s, t, y, lambda: s.div(t, s.scale_real(s.square(y), 3.0))), rules=RULES, abstract=real_only("cbrt"))


SINC_SERIES_BELOW = 0.25  # |u| below which sin(u)/u and its derivatives are taken from the series


def _sinc_series(u, k):
    """The k-th derivative of sin(u)/u = Σ (−u²)ⁿ/(2n+1)! by its series, to rounding for |u| < 1/4."""
    out = np.zeros_like(u)
    for n in range((k + 1) // 2, 12):
        out = out + (-1.0) ** n / math.factorial(2 * n + 1) * math.perm(2 * n, k) * u ** (2 * n - k)
    return out


# sinc_series(u, k): the k-th derivative of sin(u)/u by its series, the (k+1)-th its derivative: the
# branch sinc takes near 0, so that every order there is accurate (the quotient's cancel).
sinc_series = unary("sinc_series", _sinc_series,
                    lambda s, t, x, y, k: s.mul(t, s.bind(sinc_series, x, k=k + 1)[0]), rules=RULES)


def sinc(s, x):
    """sin(πx)/(πx), 1 at 0, in session ops; accurate near 0 at every order."""
    u = s.scale_real(x, math.pi)
    near = s.bind(mask, u, test="near_zero")[0]
    safe = s.where(near, full_like(s, u, 1), u)
    return s.where(near, s.bind(sinc_series, u, k=0)[0], s.div(s.sin(safe), safe))


def _bessel_i(x, order):
    return np.i0(x) if order == 0 else scipy.special.iv(order, x).astype(x.dtype)


def _bessel_i_deriv(s, t, x, y, order):
    """I_n' = (I_{n−1} + I_{n+1})/2, with I_{−1} = I_1."""
    below = s.bind(bessel_i, x, order=abs(order - 1))[0]
    return s.mul(t, s.scale_real(s.add(below, s.bind(bessel_i, x, order=order + 1)[0]), 0.5))


def _bessel_abstract(x: Aval, order: int) -> tuple[Aval]:
    if x.dtype.kind == "c":
        raise DTypeMismatch("i0", "a real tensor (NumPy's i0 has no complex values)", str(x.dtype))
    return (x,)


# bessel_i(x, order=n): the modified Bessel function I_n (n = 0: NumPy's i0).
bessel_i = unary("bessel_i", _bessel_i, _bessel_i_deriv, rules=RULES, abstract=_bessel_abstract)


def _unwrap_correction(p, axis, discont, period):
    """What unwrap adds to p: the running sum of the multiples of ``period`` that bring each step
    along ``axis`` within period/2 (steps below ``discont`` kept), 0 at the first entry."""
    steps = np.diff(p, axis=axis)
    half = period / 2
    folded = np.mod(steps + half, period) - half
    folded = np.where((folded == -half) & (steps > 0), half, folded)
    fix = np.where(np.abs(steps) < max(discont, half), 0.0, folded - steps)
    out = np.zeros_like(p)
    inner = [slice(None)] * p.ndim
    inner[axis] = slice(1, None)
    out[tuple(inner)] = np.cumsum(fix, axis=axis)
    return out


# The correction np.unwrap adds (piecewise constant in p): a constant for AD.
unwrap_correction = RULES.define(
    "unwrap_correction", lambda p, **params: real_only("unwrap")(p),
    lambda p, axis, discont, period: (_unwrap_correction(p, axis, discont, period),),
    jvp=lambda s, t, p, o, **params: (None,), vjp=lambda s, c, p, o, needs, **params: (None,),
)
