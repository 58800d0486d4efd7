"""Elementwise ops on tensors of one shape and dtype, each with its rules.

A unary op's derivative is multiplication by f'(x), a symmetric map, so one
function ``deriv(s, t, x, y) = f'(x)·t`` serves as both its JVP and its VJP.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument, ShapeMismatch
from ..rules import RuleSet
from ..tensor import Aval

RULES = RuleSet()


def same_aval(x: Aval) -> tuple[Aval]:
    return (x,)


def matching_avals(op: str):
    """Shape rule of a binary elementwise op: equal shapes, equal dtypes."""

    def abstract(a: Aval, b: Aval) -> tuple[Aval]:
        if a.shape != b.shape:
            raise ShapeMismatch(op, f"operands of one shape (lhs {list(a.shape)})", f"rhs {list(b.shape)}")
        if a.dtype != b.dtype:
            raise DTypeMismatch(op, f"operands of one dtype (lhs {a.dtype})", f"rhs {b.dtype}")
        return (a,)

    return abstract


def unary(name: str, impl, deriv):
    """Define a unary elementwise primitive from its kernel and ``deriv``."""

    def jvp(s, tangents, primals, outputs):
        return (deriv(s, tangents[0], primals[0], outputs[0]),)

    def vjp(s, cotangents, primals, outputs, needs):
        return (deriv(s, cotangents[0], primals[0], outputs[0]),)

    return RULES.define(name, same_aval, lambda x: (impl(x),), jvp, vjp)


def plus(s, a, b):
    """a + b where None is a symbolic zero."""
    if a is None:
        return b
    if b is None:
        return a
    return s.add(a, b)


def minus(s, a, b):
    """a - b where None is a symbolic zero."""
    if b is None:
        return a
    if a is None:
        return s.neg(b)
    return s.sub(a, b)


# --- binary ---------------------------------------------------------------

add = RULES.define(
    "add",
    matching_avals("add"),
    lambda a, b: (np.add(a, b),),
    jvp=lambda s, t, p, o: (plus(s, t[0], t[1]),),
    vjp=lambda s, c, p, o, needs: (c[0], c[0]),
)

sub = RULES.define(
    "sub",
    matching_avals("sub"),
    lambda a, b: (np.subtract(a, b),),
    jvp=lambda s, t, p, o: (minus(s, t[0], t[1]),),
    vjp=lambda s, c, p, o, needs: (c[0], s.neg(c[0]) if needs[1] else None),
)


def _mul_jvp(s, tangents, primals, outputs):
    (da, db), (a, b) = tangents, primals
    return (plus(s, None if da is None else s.mul(da, b), None if db is None else s.mul(a, db)),)


def _mul_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (a, b) = cotangents, primals
    return (s.mul(ct, b) if needs[0] else None, s.mul(a, ct) if needs[1] else None)


mul = RULES.define("mul", matching_avals("mul"), lambda a, b: (np.multiply(a, b),), _mul_jvp, _mul_vjp)


def _div_jvp(s, tangents, primals, outputs):
    # d(a/b) = (da - y db) / b
    (da, db), (_, b), (y,) = tangents, primals, outputs
    return (s.div(minus(s, da, None if db is None else s.mul(y, db)), b),)


def _div_vjp(s, cotangents, primals, outputs, needs):
    (ct,), (_, b), (y,) = cotangents, primals, outputs
    ct_a = s.div(ct, b)
    return (ct_a, s.neg(s.mul(ct_a, y)) if needs[1] else None)


div = RULES.define("div", matching_avals("div"), lambda a, b: (np.divide(a, b),), _div_jvp, _div_vjp)


# --- unary ----------------------------------------------------------------

neg = unary("neg", np.negative, lambda s, t, x, y: s.neg(t))
exp = unary("exp", np.exp, lambda s, t, x, y: s.mul(t, y))
log = unary("log", np.log, lambda s, t, x, y: s.div(t, x))
sqrt = unary("sqrt", np.sqrt, lambda s, t, x, y: s.scale_real(s.div(t, y), 0.5))


def check_real_scalar(op: str, alpha: object) -> float:
    """A finite real Python number, or InvalidArgument."""
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise InvalidArgument(op, "a real number", repr(alpha))
    return float(alpha)


scale_real = RULES.define(
    "scale_real",
    lambda x, alpha: (x,),
    lambda x, alpha: (np.multiply(x, x.dtype.type(alpha)),),
    jvp=lambda s, t, p, o, alpha: (s.scale_real(t[0], alpha),),
    vjp=lambda s, c, p, o, needs, alpha: (s.scale_real(c[0], alpha),),
)
