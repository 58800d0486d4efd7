"""Structured values: tangents and cotangents kept in a cheaper form than the tensor they stand for.

Derivative sweeps meet values with known structure, and the cost of a sweep depends on
keeping it:

* :class:`Embedded`, a block inside zeros: the cotangent a slice's VJP gives. Truncating
  an SVD's factors to k columns makes their cotangents zero beyond column k, and the SVD's
  VJP then costs O(m n k) instead of O(m n K).
* :class:`Product`, a matrix kept as two factors: the SVD's JVP gives dU = U·J so, and a
  pullback that contracts U with thin matrices then never forms the K × K × K product.

The protocol is small. A structured value has a ``shape``, a ``dtype`` and ``dense(s)``,
the tensor it stands for, built with session ``s``'s ops. Session ops accept structured
inputs: a primitive that knows how to act on them (its ``structured`` form, beside its
rules) keeps the structure (a transpose of a block is a block, a product's slice is a
product of slices), and any other primitive gets them made dense. Rules written in session
ops therefore pass structure on without knowing of it; a rule that exploits it (the SVD's)
looks at the kind it was given. Outside derivative sweeps no structured value is seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Structured:
    """A tangent or cotangent in a structured form; ``dense(s)`` is the tensor it stands for."""

    __slots__ = ()

    shape: tuple[int, ...]

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the value it stands for."""
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.shape)

    def dense(self, s: Any) -> Any:
        """The value as a plain tensor, made by ops of session s."""
        raise NotImplementedError


class Embedded(Structured):
    """Zero except for ``block``, whose element i sits at ``starts + i·strides`` in a tensor of ``shape``."""

    __slots__ = ("block", "shape", "starts", "strides")

    def __init__(self, block: Any, shape: tuple[int, ...], starts: tuple[int, ...], strides: tuple[int, ...] | None = None):
        self.block = block
        self.shape = tuple(shape)
        self.starts = tuple(starts)
        self.strides = tuple(strides) if strides is not None else (1,) * len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        """The block's dtype."""
        return self.block.dtype

    @property
    def contiguous(self) -> bool:
        """True when the block is one box (unit strides)."""
        return all(sd == 1 for sd in self.strides)

    def box(self) -> tuple[tuple[int, int], ...]:
        """Per axis, the range [start, stop) the block covers (contiguous blocks)."""
        return tuple((st, st + n) for st, n in zip(self.starts, self.block.shape))

    def dense(self, s: Any) -> Any:
        """The block padded with zeros to the full shape."""
        return s.pad(self.block, self.shape, self.starts, self.strides)

    def __repr__(self) -> str:
        return f"Embedded(block shape {list(self.block.shape)} at {list(self.starts)} in {list(self.shape)})"


def embedded(block: Any, shape: tuple[int, ...], box: tuple[tuple[int, int], ...]) -> Any:
    """``block`` placed at ``box`` in zeros of ``shape``: the block itself where the box is all of it."""
    if all(lo == 0 and hi == n for (lo, hi), n in zip(box, shape)):
        return block
    return Embedded(block, shape, tuple(lo for lo, _ in box))


class Product(Structured):
    """The matrix ``left @ right``, not multiplied out."""

    __slots__ = ("left", "right")

    def __init__(self, left: Any, right: Any):
        self.left = left
        self.right = right

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        """(rows of left, columns of right)."""
        return (self.left.shape[0], self.right.shape[1])

    @property
    def dtype(self) -> np.dtype:
        """The factors' dtype."""
        return self.left.dtype

    def dense(self, s: Any) -> Any:
        """The product left · right."""
        return s.einsum([self.left, self.right], "ij,jk->ik")

    def __repr__(self) -> str:
        return f"Product({list(self.left.shape)} @ {list(self.right.shape)})"


def dense(s: Any, x: Any) -> Any:
    """x as a plain tensor: a structured value made dense, anything else as it is."""
    return x.dense(s) if isinstance(x, Structured) else x


def intersect(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The box common to boxes a and b (empty ranges where they do not meet)."""
    return tuple((max(lo, lo2), max(max(lo, lo2), min(hi, hi2))) for (lo, hi), (lo2, hi2) in zip(a, b))


def hull(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The smallest box holding boxes a and b."""
    return tuple((min(lo, lo2), max(hi, hi2)) for (lo, hi), (lo2, hi2) in zip(a, b))


def flatten(values: Any) -> tuple[list, tuple]:
    """Values that may be None, plain or structured as (their plain leaves, a spec to rebuild them)."""
    leaves: list = []
    spec: list[tuple] = []
    for v in values:
        if v is None:
            spec.append(("none",))
        elif type(v) is Product:
            spec.append(("product", len(leaves)))
            leaves += [v.left, v.right]
        elif type(v) is Embedded:
            spec.append(("embedded", len(leaves), v.shape, v.starts, v.strides))
            leaves.append(v.block)
        else:
            spec.append(("plain", len(leaves)))
            leaves.append(v)
    return leaves, tuple(spec)


def unflatten(spec: tuple, leaves: Any) -> list:
    """The values :func:`flatten` took apart, from its spec and (other) leaves."""
    out: list = []
    for kind, *rest in spec:
        if kind == "none":
            out.append(None)
        elif kind == "product":
            out.append(Product(leaves[rest[0]], leaves[rest[0] + 1]))
        elif kind == "embedded":
            i, shape, starts, strides = rest
            out.append(Embedded(leaves[i], shape, starts, strides))
        else:
            out.append(leaves[rest[0]])
    return out
