"""maximum, minimum, fmax, fmin, where, logaddexp, logaddexp2, hypot and arctan2 as ops, with their
rules: the elementwise choices between two operands, the share of each entry in an extremum (which
reduce_max and reduce_min use too), and the functions of two reals whose derivatives are weights."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeMismatch
from ..rules import RuleSet
from ..tensor import Aval
from . import special
from .elementwise import full_like, matching_avals, real_matching_avals, zero_mask

RULES = RuleSet().merge(special.RULES)  # the core rule set takes special's through this one


# --- maximum, minimum, where ---------------------------------------------------


def _shares_abstract(*xs: Aval, axes, largest, nans_ignored=False) -> tuple[Aval, ...]:
    return xs


def _shares_impl(*xs, axes, largest, nans_ignored=False):
    """Each entry's share in the extremum: of one operand over ``axes``, or of several operands'
    entries at each position (the operands stacked on a leading axis); ``nans_ignored``: of the
    extremum fmax and fmin take (NaN only where all are NaN)."""
    stacked, over = (xs[0], axes) if len(xs) == 1 else (np.stack(xs), (0,))
    if nans_ignored:
        best = (np.fmax if largest else np.fmin).reduce(stacked, axis=over, keepdims=True)
    else:
        best = (np.max if largest else np.min)(stacked, axis=over, keepdims=True)
    hits = np.equal(stacked, best)
    shares = (hits / np.sum(hits, axis=over, keepdims=True)).astype(stacked.dtype)
    return (shares,) if len(xs) == 1 else tuple(shares)


# The shares of entries in an extremum (max or min, ``largest``), the one tie-splitting op of
# maximum, minimum, reduce_max and reduce_min: 1 where an entry alone attains it, 1/t where t
# entries tie (JAX's convention: a tie splits the derivative), 0 elsewhere. A constant for AD.
extremum_shares = RULES.define(
    "extremum_shares",
    _shares_abstract,
    _shares_impl,
    jvp=lambda s, t, p, o, **params: tuple(None for _ in p),
    vjp=lambda s, c, p, o, needs, **params: tuple(None for _ in p),
)


def _extremum_jvp(largest, nans_ignored=False):
    def jvp(s, tangents, primals, outputs):
        (da, db), (a, b) = tangents, primals
        wa, wb = s.bind(extremum_shares, a, b, axes=(), largest=largest, nans_ignored=nans_ignored)
        return (s.accumulate(None if da is None else s.mul(da, wa), None if db is None else s.mul(db, wb)),)

    return jvp


def _extremum_vjp(largest, nans_ignored=False):
    def vjp(s, cotangents, primals, outputs, needs):
        (ct,), (a, b) = cotangents, primals
        wa, wb = s.bind(extremum_shares, a, b, axes=(), largest=largest, nans_ignored=nans_ignored)
        return (s.mul(ct, wa) if needs[0] else None, s.mul(ct, wb) if needs[1] else None)

    return vjp


maximum = RULES.define("maximum", real_matching_avals("maximum"), lambda a, b: (np.maximum(a, b),),
                       _extremum_jvp(True), _extremum_vjp(True))
minimum = RULES.define("minimum", real_matching_avals("minimum"), lambda a, b: (np.minimum(a, b),),
                       _extremum_jvp(False), _extremum_vjp(False))
# fmax and fmin: a NaN operand loses to a number, which takes the whole derivative.
fmax = RULES.define("fmax", real_matching_avals("fmax"), lambda a, b: (np.fmax(a, b),),
                    _extremum_jvp(True, True), _extremum_vjp(True, True))
fmin = RULES.define("fmin", real_matching_avals("fmin"), lambda a, b: (np.fmin(a, b),),
                    _extremum_jvp(False, True), _extremum_vjp(False, True))


def _select_abstract(cond: Aval, x: Aval, y: Aval) -> tuple[Aval]:
    matching_avals("where")(x, y)
    if cond.shape != x.shape:
        raise ShapeMismatch("where", f"a condition of the operands' shape {list(x.shape)}", f"{list(cond.shape)}")
    return (x,)


def _select_jvp(s, tangents, primals, outputs):
    (_, dx, dy), (cond, x, y) = tangents, primals
    if dx is None and dy is None:
        return (None,)
    return (s.where(cond, dx if dx is not None else s.zeros(x.shape, x.dtype),
                    dy if dy is not None else s.zeros(y.shape, y.dtype)),)


def _select_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (cond, x, _) = cotangents, primals
    zero = s.zeros(x.shape, x.dtype)
    return (None, s.where(cond, ct, zero) if needs[1] else None, s.where(cond, zero, ct) if needs[2] else None)


# where(cond, x, y): x where cond is nonzero, else y. The condition is a constant for AD.
select = RULES.define("where", _select_abstract, lambda c, x, y: (np.where(c != 0, x, y),), _select_jvp, _select_vjp)


# 1 where a and b are infinities of one sign (their difference is NaN), else 0: a constant for AD.
same_infinity = RULES.define(
    "same_infinity",
    real_matching_avals("same_infinity"),
    lambda a, b: ((np.isinf(a) & (a == b)).astype(a.dtype),),
    jvp=lambda s, t, p, o: (None,),
    vjp=lambda s, c, p, o, needs: (None, None),
)


def _logaddexp_weights(s, a, b):
    """(σ(a − b), σ(b − a)), the softmax weights of a and b, each as exp(−logaddexp(0, other − own)):
    finite at every pair, ½ each where a and b are one infinity."""
    tie = s.bind(same_infinity, a, b)[0]
    zero = s.zeros(a.shape, a.dtype)
    a, b = s.where(tie, zero, a), s.where(tie, zero, b)
    return (s.exp(s.neg(s.logaddexp(zero, s.sub(b, a)))), s.exp(s.neg(s.logaddexp(zero, s.sub(a, b)))))


def _weighted_rules(weights):
    """(jvp, vjp) of a real function f(a, b) whose partial derivatives are ``weights(s, a, b)``:
    df = w_a da + w_b db, and (ā, b̄) = (w_a c̄, w_b c̄)."""

    def jvp(s, tangents, primals, outputs):
        (da, db), (wa, wb) = tangents, weights(s, *primals)
        return (s.accumulate(None if da is None else s.mul(da, wa), None if db is None else s.mul(db, wb)),)

    def vjp(s, cotangents, primals, outputs, needs):
        (ct,), (wa, wb) = cotangents, weights(s, *primals)
        return (s.mul(ct, wa) if needs[0] else None, s.mul(ct, wb) if needs[1] else None)

    return jvp, vjp


# log(exp(a) + exp(b)) by NumPy's kernel (max + log1p(exp(−|a − b|)): no overflow, exact at infinities).
logaddexp = RULES.define("logaddexp", real_matching_avals("logaddexp"), lambda a, b: (np.logaddexp(a, b),),
                         *_weighted_rules(_logaddexp_weights))


def _logaddexp2_weights(s, a, b):
    """logaddexp's weights of a·ln 2 and b·ln 2."""
    return _logaddexp_weights(s, s.scale_real(a, math.log(2.0)), s.scale_real(b, math.log(2.0)))


logaddexp2 = RULES.define("logaddexp2", real_matching_avals("logaddexp2"), lambda a, b: (np.logaddexp2(a, b),),
                          *_weighted_rules(_logaddexp2_weights))


# --- hypot and arctan2: derivatives by the unit vector (x, y)/hypot(x, y) ---------------------------


def _unit(s, x, y):
    """(x/h, y/h), h = hypot(x, y), each 0 at the origin (where h's derivative is taken as 0, as |x|'s)."""
    h = s.bind(hypot, x, y)[0]
    safe = s.where(s.bind(zero_mask, h)[0], full_like(s, h, 1), h)
    return s.div(x, safe), s.div(y, safe), h


hypot = RULES.define("hypot", real_matching_avals("hypot"), lambda a, b: (np.hypot(a, b),),
                     *_weighted_rules(lambda s, x, y: _unit(s, x, y)[:2]))


def _arctan2_factors(s, y, x):
    """(∂/∂y, ∂/∂x) of arctan2(y, x): (x/h, −y/h)/h, no square formed (NaN at the origin, as JAX)."""
    ux, uy, h = _unit(s, x, y)
    return s.div(ux, h), s.neg(s.div(uy, h))


arctan2 = RULES.define("arctan2", real_matching_avals("arctan2"), lambda y, x: (np.arctan2(y, x),),
                       *_weighted_rules(_arctan2_factors))
