"""How a pairwise contraction runs: one matrix product (batched over the indices both operands and
the result keep), handed to BLAS without copying wherever the operands' strides allow.

A step ``x[sub_a] · y[sub_b] → out`` splits the indices into batch (in a, b and out), inner
(in a and b only: summed), free of x and free of y. It reads each operand as a stack of matrices
(batch…, free, inner): a transposed view with one unit stride, which ``numpy.matmul`` hands to GEMM
with a transpose flag, when each group of axes merges into one stride; else reshape copies it. Among
the group orders that the operands' memory and the output suggest, it takes the layout that copies
the fewest elements (operands and result together), once per pair of strides.

The reverse of a step reads the output's cotangent in place too, after at most one reordering
that serves both operands (:func:`cotangent_order`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from typing import Iterator

import numpy as np


class Count:
    """What the pairwise kernels did while :func:`counting`: GEMM calls, their flops, and the elements
    copied (operands read as matrices, results put in the output's order)."""

    __slots__ = ("gemms", "flops", "copied", "_lock")

    def __init__(self):
        self.gemms, self.flops, self.copied = 0, 0, 0
        self._lock = threading.Lock()

    def add(self, gemms: int, flops: int, copied: int) -> None:
        """Count one kernel's GEMM calls, flops and copied elements."""
        with self._lock:
            self.gemms += gemms
            self.flops += flops
            self.copied += copied

    def __repr__(self) -> str:
        return f"{self.gemms} GEMM calls, {self.flops:.3e} flops, {self.copied} elements copied"


_count: Count | None = None


@contextlib.contextmanager
def counting() -> Iterator[Count]:
    """Count the pairwise kernels' GEMM calls, flops and copied elements inside the block (any thread)."""
    global _count
    outer, _count = _count, Count()
    try:
        yield _count
    finally:
        _count = outer


def kind(inputs: tuple[str, ...], output: str):
    """The kernel class of a one- or two-operand einsum step, built as ``kind(inputs, output, shapes)``:
    :class:`MatrixProduct` when two operands sum over a shared index, :class:`BroadcastProduct` when
    they sum nothing, :class:`Permutation` when one operand's axes are only reordered; None for
    anything else, numpy.einsum's business: an index repeated inside an operand or summed inside one
    alone, and batches of products where an operand has no free index (batched dot or
    matrix-vector products: numpy.einsum's loops, no BLAS call per batch)."""
    if any(len(set(sub)) != len(sub) for sub in inputs) or len(inputs) > 2:
        return None
    if len(inputs) == 1:
        return Permutation if sorted(inputs[0]) == sorted(output) else None
    a, b = inputs
    if not all(c in output or c in b for c in a) or not all(c in output or c in a for c in b):
        return None
    if not any(c in b and c not in output for c in a):
        return BroadcastProduct
    if any(c in b for c in output if c in a) and not (set(a) - set(b) and set(b) - set(a)):
        return None
    return MatrixProduct


class Permutation:
    """One operand's axes reordered, as a C-ordered copy (numpy.einsum would return a view): what
    follows reads it in place, as :func:`cotangent_order` intends."""

    __slots__ = ("perm",)

    def __init__(self, inputs: tuple[str, ...], output: str, shapes: tuple = ()):
        self.perm = [inputs[0].index(c) for c in output]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        r = x.transpose(self.perm)
        if r.flags.c_contiguous:
            return r
        if _count is not None:
            _count.add(0, 0, r.size)
        return r.copy()


class BroadcastProduct:
    """A pairwise einsum that sums over nothing (an outer or elementwise product): one broadcast multiply."""

    __slots__ = ("index_a", "index_b", "perm_a", "perm_b")

    def __init__(self, inputs: tuple[str, ...], output: str, shapes: tuple = ()):
        a, b = inputs
        self.perm_a = sorted(range(len(a)), key=lambda i: output.index(a[i]))
        self.perm_b = sorted(range(len(b)), key=lambda i: output.index(b[i]))
        self.index_a = tuple(slice(None) if c in a else None for c in output)
        self.index_b = tuple(slice(None) if c in b else None for c in output)

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.multiply(x.transpose(self.perm_a)[self.index_a], y.transpose(self.perm_b)[self.index_b])


def _copied(sub: str, shape, strides, rows: str, cols: str, size: dict, unit: int) -> int:
    """Elements copied to read an operand as matrices (rows | cols): none when each group's axes merge
    into one stride and one group has unit stride with the other at least its extent (BLAS's
    leading dimension), else all."""
    merged = []
    for group in (rows, cols):
        axes = [sub.index(c) for c in group if shape[sub.index(c)] != 1]
        if any(strides[i] != strides[j] * shape[j] for i, j in zip(axes, axes[1:])):
            return math.prod(shape)
        merged.append(strides[axes[-1]] if axes else unit)
    r, c = merged
    if (c == unit and r >= math.prod(size[i] for i in cols) * unit) or \
            (r == unit and c >= math.prod(size[i] for i in rows) * unit):
        return 0
    return math.prod(shape)


class MatrixProduct:
    """A pairwise contraction as one (batched) matrix product, laid out to copy as little as possible.

    The result, C-ordered, is (batch, free of x, free of y) from X·Yᵀ or (batch, free of y, free of x)
    from Y·Xᵀ, put in the output's order by a copy only when it is not already; the batch indices
    stay separate axes, over which ``numpy.matmul`` loops GEMM.
    """

    __slots__ = ("a", "b", "output", "shapes", "_layouts")

    def __init__(self, inputs: tuple[str, ...], output: str, shapes: tuple[tuple[int, ...], ...]):
        (self.a, self.b), self.output, self.shapes = inputs, output, shapes
        self._layouts: dict = {}

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        key = (x.strides, y.strides)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = self.layout(x.strides, y.strides, x.itemsize)
        perm_x, matrix_x, perm_y, matrix_y, y_first, result_shape, out_perm, tally = layout
        xm = x.transpose(perm_x).reshape(matrix_x)
        ym = y.transpose(perm_y).reshape(matrix_y)
        p, q = (ym, xm) if y_first else (xm, ym)
        r = np.matmul(p, q.swapaxes(-1, -2), order="C")
        if _count is not None:
            _count.add(*tally)
        r = r.reshape(result_shape)
        return r if out_perm is None else np.ascontiguousarray(r.transpose(out_perm))

    def layout(self, strides_x, strides_y, itemsize: int) -> tuple:
        """(axes and matrix shape of x, the same of y, whether Y·Xᵀ, the result's shape, the permutation
        to the output or None, (GEMM calls, flops, elements copied)) for operands of these strides."""
        a, b, out = self.a, self.b, self.output
        size = dict(zip(a + b, self.shapes[0] + self.shapes[1]))
        cost, order_x, order_y, inner, y_first = _cheapest(a, b, out, size, strides_x, strides_y, itemsize)
        batch = "".join(c for c in out if c in a and c in b)
        result = batch + (order_y + order_x if y_first else order_x + order_y)
        n = math.prod
        batches = n(size[c] for c in batch)
        flops = 2 * batches * n(size[c] for c in order_x + order_y + inner)
        return (
            [a.index(c) for c in batch + order_x + inner],
            tuple(size[c] for c in batch) + (n(size[c] for c in order_x), n(size[c] for c in inner)),
            [b.index(c) for c in batch + order_y + inner],
            tuple(size[c] for c in batch) + (n(size[c] for c in order_y), n(size[c] for c in inner)),
            y_first, tuple(size[c] for c in result),
            None if result == out else [result.index(c) for c in out],
            (batches, flops, cost),
        )


def _cheapest(a: str, b: str, out: str, size: dict, strides_x, strides_y, unit: int) -> tuple:
    """(elements copied, free order of x, free order of y, inner order, whether Y·Xᵀ): the layout of
    ``a,b->out`` that copies least (operands and result; the first on ties) among those worth
    pricing, each group of indices in the output's order or as its operand lies in memory."""
    free_a = "".join(c for c in out if c in a and c not in b)
    free_b = "".join(c for c in out if c in b and c not in a)
    batch = "".join(c for c in out if c in a and c in b)
    # each operand's letters from the largest stride to the smallest (C order without strides)
    memory_a = a if strides_x is None else sorted(a, key=lambda c: -abs(strides_x[a.index(c)]))
    memory_b = b if strides_y is None else sorted(b, key=lambda c: -abs(strides_y[b.index(c)]))
    inners = dict.fromkeys(("".join(c for c in memory_a if c in b and c not in out),
                            "".join(c for c in memory_b if c in a and c not in out)))
    shape_x, shape_y = tuple(size[c] for c in a), tuple(size[c] for c in b)
    out_size = math.prod(size[c] for c in out)
    best = None
    for order_x in dict.fromkeys((free_a, "".join(c for c in memory_a if c in free_a))):
        for order_y in dict.fromkeys((free_b, "".join(c for c in memory_b if c in free_b))):
            for inner in inners:
                for y_first in (False, True):
                    result = batch + (order_y + order_x if y_first else order_x + order_y)
                    cost = (_copied(a, shape_x, strides_x, order_x, inner, size, unit)
                            + _copied(b, shape_y, strides_y, order_y, inner, size, unit)
                            + (0 if result == out else out_size))
                    if best is None or cost < best[0]:
                        best = (cost, order_x, order_y, inner, y_first)
    return best


@functools.lru_cache(maxsize=1024)
def cotangent_order(inputs: tuple[str, ...], output: str, shapes: tuple[tuple[int, ...], ...]) -> str | None:
    """For the reverse of a two-operand step whose operands both need a cotangent: the order to copy the
    output's cotangent into once, (batch, free of a, free of b) as the operands lie, so that both
    contractions with it read it in place; None when that copies no less than reading it as it is.
    Operands and cotangent are taken as C-ordered in their subscripts."""
    if kind(inputs, output) is not MatrixProduct:
        return None
    a, b = inputs
    order = "".join(c for c in output if c in a and c in b) + "".join(c for c in a + b if c in output and
                                                                       not (c in a and c in b))
    if order == output:
        return None
    size = dict(zip(a + b, shapes[0] + shapes[1]))

    def copies(ct: str) -> int:
        ct_strides = strides_in(tuple(size[c] for c in ct))
        return sum(_cheapest(other, ct, sub, size, strides_in(tuple(size[c] for c in other)), ct_strides, 1)[0]
                   for sub, other in ((a, b), (b, a)))

    return order if math.prod(size[c] for c in output) + copies(order) < copies(output) else None


def strides_in(shape: tuple[int, ...], order: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """The strides, in elements, of a dense array of ``shape`` whose axes lie in memory in ``order``
    (outermost first; C order when None)."""
    strides, step = [0] * len(shape), 1
    for axis in reversed(order or range(len(shape))):
        strides[axis], step = step, step * shape[axis]
    return tuple(strides)
