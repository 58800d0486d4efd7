"""Reductions over axes, each with its rules: the sum (linear: broadcast_in_dim is its transpose, and
a block inside zeros sums to a block), max, min and prod.

max and min follow JAX's convention where the extremum is attained more than once: the
derivative is shared equally among the tied entries (a constant share, as sign is). prod's
derivative is written as the product of all other entries, built from exclusive prefix and
suffix products (log-depth scans of elementwise products), so it is exact where entries are
zero and differentiates again to any order.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeMismatch, InvalidArgument
from ..rules import RuleSet
from ..structure import Embedded, embedded
from ..tensor import Aval
from .elementwise import cj, full, full_like
from .extrema import extremum_shares
from .structural import SliceConfig

RULES = RuleSet()


def _reduced_aval(op: str, real_only: bool):
    """Shape rule of a reduction; max and min (``real_only``) have no value over an empty axis."""

    def abstract(x: Aval, axes) -> tuple[Aval]:
        if real_only and x.dtype.kind == "c":
            raise DTypeMismatch(op, "a real tensor (float64 or float32)", str(x.dtype))
        if real_only and any(x.shape[a] == 0 for a in axes):
            raise InvalidArgument(op, "axes of size >= 1 (an empty reduction has no value)",
                                  f"axes {list(axes)} of shape {list(x.shape)}")
        return (Aval(tuple(n for a, n in enumerate(x.shape) if a not in axes), x.dtype),)

    return abstract


def _kept_axes(x, axes):
    return [a for a in range(x.ndim) if a not in axes]


# --- sum: linear, broadcast_in_dim its transpose --------------------------------------


def _reduce_abstract(x: Aval, axes) -> tuple[Aval]:
    return (Aval(tuple(n for a, n in enumerate(x.shape) if a not in axes), x.dtype),)


def _reduce_transpose(s, cotangents, primals, needs, axes):
    (ct,), (x,) = cotangents, primals
    kept = [a for a in range(x.ndim) if a not in axes]
    return (s.broadcast_in_dim(ct, x.shape, kept),)


def _reduce_structured(s, x, axes):
    """A block's sum is the block summed, placed on the kept axes."""
    if type(x) is not Embedded or not x.contiguous:
        return NotImplemented
    kept = [a for a in range(x.ndim) if a not in axes]
    box = x.box()
    return (embedded(s.reduce_sum(x.block, axes), tuple(x.shape[a] for a in kept), tuple(box[a] for a in kept)),)


reduce_sum = RULES.define_linear(
    "reduce_sum",
    _reduce_abstract,
    lambda x, axes: (np.asarray(np.sum(x, axis=axes)),),
    transpose=_reduce_transpose,
    structured=_reduce_structured,
)


# --- max, min ---------------------------------------------------------------------------


def _extremum(name: str, largest: bool):
    chooser = np.max if largest else np.min

    def jvp(s, tangents, primals, outputs, axes):
        (t,), (x,) = tangents, primals
        return (s.reduce_sum(s.mul(t, s.bind(extremum_shares, x, axes=axes, largest=largest)[0]), axes),)

    def vjp(s, cotangents, primals, outputs, needs, axes):
        (ct,), (x,) = cotangents, primals
        spread = s.broadcast_in_dim(ct, x.shape, _kept_axes(x, axes))
        return (s.mul(spread, s.bind(extremum_shares, x, axes=axes, largest=largest)[0]),)

    return RULES.define(name, _reduced_aval(name, real_only=True),
                        lambda x, axes: (np.asarray(chooser(x, axis=axes)),), jvp, vjp)


reduce_max = _extremum("reduce_max", largest=True)
reduce_min = _extremum("reduce_min", largest=False)


# --- prod -------------------------------------------------------------------------------


def _shifted(s, x, shift, forward):
    """x moved by ``shift`` along its last axis (towards higher indices when ``forward``), ones
    shifted in."""
    n = x.shape[-1]
    lead, rest = [0] * (x.ndim - 1), list(x.shape[:-1])
    ones = full(s, rest + [shift], x.dtype, 1)
    if forward:  # entry i is x_{i−shift}
        return s.concatenate([ones, s.slice(x, SliceConfig(lead + [0], rest + [n - shift]))], x.ndim - 1)
    return s.concatenate([s.slice(x, SliceConfig(lead + [shift], rest + [n])), ones], x.ndim - 1)  # x_{i+shift}


def _exclusive_scan(s, x, forward):
    """Π_{j<i} x_j (``forward``) or Π_{j>i} x_j along the last axis: x shifted by one, then
    ⌈log₂ n⌉ products with itself shifted by 1, 2, 4, … (a log-depth scan)."""
    n = x.shape[-1]
    y = _shifted(s, x, 1, forward)
    shift = 1
    while shift < n:
        y = s.mul(y, _shifted(s, y, shift, forward))
        shift *= 2
    return y


def others_product(s, x, axes):
    """For each entry of x, the product of the other entries over ``axes``: exact with zeros."""
    kept = _kept_axes(x, axes)
    perm = kept + list(axes)
    moved = s.transpose(x, perm)
    rows = [x.shape[a] for a in kept]
    n = math.prod(x.shape[a] for a in axes)
    if n == 0:
        return s.zeros(x.shape, x.dtype)
    flat = s.reshape(moved, rows + [n])
    if n == 1:
        others = full_like(s, flat, 1)
    else:
        others = s.mul(_exclusive_scan(s, flat, True), _exclusive_scan(s, flat, False))
    back = s.reshape(others, [moved.shape[i] for i in range(x.ndim)])
    return s.transpose(back, list(np.argsort(perm)))


def _prod_jvp(s, tangents, primals, outputs, axes):
    (t,), (x,) = tangents, primals
    return (s.reduce_sum(s.mul(t, others_product(s, x, axes)), axes),)


def _prod_vjp(s, cotangents, primals, outputs, needs, axes):
    (ct,), (x,) = cotangents, primals
    spread = s.broadcast_in_dim(ct, x.shape, _kept_axes(x, axes))
    return (s.mul(spread, cj(s, others_product(s, x, axes))),)


reduce_prod = RULES.define(
    "reduce_prod",
    _reduced_aval("reduce_prod", real_only=False),
    lambda x, axes: (np.asarray(np.prod(x, axis=axes)),),
    _prod_jvp,
    _prod_vjp,
)
