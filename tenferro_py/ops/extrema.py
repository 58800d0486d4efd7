"""maximum, minimum, where and logaddexp as ops, with their rules: the elementwise choices between
two operands, and the share of each entry in an extremum (which reduce_max and reduce_min use too)."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeMismatch, ShapeMismatch
from ..rules import RuleSet
from ..tensor import Aval
from .elementwise import matching_avals

RULES = RuleSet()


# --- maximum, minimum, where ---------------------------------------------------


def _real_operands(op: str):
    """Shape rule of maximum and minimum: equal shapes and dtypes, real (NumPy orders complex
    numbers lexicographically, which has no derivative)."""
    matching = matching_avals(op)

    def abstract(a: Aval, b: Aval) -> tuple[Aval]:
        matching(a, b)
        if a.dtype.kind == "c":
            raise DTypeMismatch(op, "real operands (float64 or float32)", str(a.dtype))
        return (a,)

    return abstract


def _shares_abstract(*xs: Aval, axes, largest) -> tuple[Aval, ...]:
    return xs


def _shares_impl(*xs, axes, largest):
    """Each entry's share in the extremum: of one operand over ``axes``, or of several operands'
    entries at each position (the operands stacked on a leading axis)."""
    stacked, over = (xs[0], axes) if len(xs) == 1 else (np.stack(xs), (0,))
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
    jvp=lambda s, t, p, o, axes, largest: tuple(None for _ in p),
    vjp=lambda s, c, p, o, needs, axes, largest: tuple(None for _ in p),
)


def _extremum_jvp(largest):
    def jvp(s, tangents, primals, outputs):
        (da, db), (a, b) = tangents, primals
        wa, wb = s.bind(extremum_shares, a, b, axes=(), largest=largest)
        return (s.accumulate(None if da is None else s.mul(da, wa), None if db is None else s.mul(db, wb)),)

    return jvp


def _extremum_vjp(largest):
    def vjp(s, cotangents, primals, outputs, needs):
        (ct,), (a, b) = cotangents, primals
        wa, wb = s.bind(extremum_shares, a, b, axes=(), largest=largest)
        return (s.mul(ct, wa) if needs[0] else None, s.mul(ct, wb) if needs[1] else None)

    return vjp


maximum = RULES.define("maximum", _real_operands("maximum"), lambda a, b: (np.maximum(a, b),),
                       _extremum_jvp(True), _extremum_vjp(True))
minimum = RULES.define("minimum", _real_operands("minimum"), lambda a, b: (np.minimum(a, b),),
                       _extremum_jvp(False), _extremum_vjp(False))


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
    _real_operands("same_infinity"),
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


def _logaddexp_jvp(s, tangents, primals, outputs):
    (da, db), (a, b) = tangents, primals
    wa, wb = _logaddexp_weights(s, a, b)
    return (s.accumulate(None if da is None else s.mul(da, wa), None if db is None else s.mul(db, wb)),)


def _logaddexp_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (a, b) = cotangents, primals
    wa, wb = _logaddexp_weights(s, a, b)
    return (s.mul(ct, wa) if needs[0] else None, s.mul(ct, wb) if needs[1] else None)


# log(exp(a) + exp(b)) by NumPy's kernel (max + log1p(exp(−|a − b|)): no overflow, exact at infinities).
logaddexp = RULES.define("logaddexp", _real_operands("logaddexp"), lambda a, b: (np.logaddexp(a, b),),
                         _logaddexp_jvp, _logaddexp_vjp)
