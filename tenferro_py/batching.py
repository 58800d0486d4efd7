"""Stacks: an op on single matrices (or vectors) applied to stacks of them, (..., core).

NumPy's linalg takes stacks (..., m, n). A primitive here is one matrix's, with one matrix's
rules; :func:`bind_batched` splits a stack into its matrices (one op, ``batch_unstack``), runs
the primitive on each, and stacks each output again (one op, ``batch_stack``): the batched
derivatives are the rules of one matrix, applied to each, and a wide engine runs the matrices
side by side. The two ops are linear and each other's transpose; they are core ops, so any
family's primitive can be batched.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import ShapeMismatch
from .rules import RuleSet
from .tensor import Aval

RULES = RuleSet()


def _stack_abstract(*xs: Aval) -> tuple[Aval]:
    return (Aval((len(xs),) + xs[0].shape, xs[0].dtype),)


def _unstack_abstract(x: Aval) -> tuple[Aval, ...]:
    return tuple(Aval(x.shape[1:], x.dtype) for _ in range(x.shape[0]))


def _stack(s, pieces, shape, dtype):
    """The pieces (None: zeros of ``shape`` and ``dtype``) stacked along a new first axis."""
    return s.bind(stack_p, *[p if p is not None else s.zeros(shape, dtype) for p in pieces])[0]


stack_p = RULES.define_linear(
    "batch_stack",
    _stack_abstract,
    lambda *xs: (np.stack(xs),),
    lambda s, cotangents, primals, needs: s.bind(unstack_p, cotangents[0]),
)

unstack_p = RULES.define_linear(
    "batch_unstack",
    _unstack_abstract,
    tuple,  # the matrices x[0], x[1], … (views)
    lambda s, cotangents, primals, needs: (_stack(s, cotangents, primals[0].shape[1:], primals[0].dtype),),
)


def _empty_from(s, x, shape, dtype):
    """An empty tensor of ``shape`` and ``dtype`` computed from the empty x (no work), so that it
    depends on x as a factorisation's output does: its derivatives reach x (and are empty)."""
    if x.dtype != dtype:
        x = s.real(x) if x.dtype.kind == "c" else s.complex(x, x)
    return s.reshape(x, shape) if x.dtype == dtype else s.zeros(shape, dtype)


def bind_batched(s, op: str, prim, operands, core_ranks, **params) -> tuple:
    """``prim`` (an op on single matrices or vectors) on stacks of them: operand i is
    (..., core) with ``core_ranks[i]`` core axes; the leading (batch) axes of the operands
    that have any must be equal, and an operand without them is shared by every matrix
    (as NumPy broadcasts a missing batch). Each output is stacked back to (..., core)."""
    batch: tuple[int, ...] = ()
    for x, core in zip(operands, core_ranks):
        lead = x.shape[: x.ndim - core]
        if lead and batch and lead != batch:
            raise ShapeMismatch(op, f"operands with equal leading (batch) axes ({list(batch)})", f"{list(lead)}")
        batch = batch or lead
    if not batch:
        return s.bind(prim, *operands, **params)
    cores = [x.shape[x.ndim - core:] for x, core in zip(operands, core_ranks)]
    count = math.prod(batch)
    if count == 0:  # no matrices: each output an empty reshape of the first operand, so that it stays on its trace
        avals = prim.abstract(*[Aval(c, x.dtype) for x, c in zip(operands, cores)], **params)
        return tuple(_empty_from(s, operands[0], batch + a.shape, a.dtype) for a in avals)
    columns = [[x] * count if x.ndim == len(c) else s.bind(unstack_p, s.reshape(x, (count,) + c))
               for x, c in zip(operands, cores)]
    results = [s.bind(prim, *args, **params) for args in zip(*columns)]
    return tuple(s.reshape(s.bind(stack_p, *outs)[0], batch + outs[0].shape) for outs in zip(*results))
