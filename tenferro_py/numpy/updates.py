"""JAX's functional index updates, ``x.at[key].set(v)`` and ``.add(v)``, on a session's tensors:
a new tensor (x is unchanged), at the positions NumPy's ``x[key]`` reads, with derivatives with
respect to x and v. Each is one gather or one scatter of x's row-major flattening.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..tape import EagerTensor


def positions(shape: tuple[int, ...], key: Any) -> np.ndarray:
    """The row-major positions that ``x[key]`` reads, by NumPy's own indexing (every form)."""
    return np.arange(math.prod(shape)).reshape(shape)[key]


def _flat(s: Any, t: EagerTensor) -> EagerTensor:
    return s.reshape(t, (math.prod(t.shape),), "C")


def set_at(s: Any, x: EagerTensor, where: np.ndarray, values: EagerTensor) -> EagerTensor:
    """x with ``values`` (of ``where``'s shape) at ``where``; where a position repeats, the last
    value wins (NumPy's assignment in practice; JAX leaves it unspecified)."""
    n, targets = math.prod(x.shape), where.ravel()
    reversed_unique, first = np.unique(targets[::-1], return_index=True)
    source = np.arange(n)
    source[reversed_unique] = n + targets.size - 1 - first  # entry n + j of the joined array is values[j]
    joined = s.concatenate([_flat(s, x), _flat(s, values)], 0)
    return s.reshape(s.take(joined, source.tolist(), 0), x.shape, "C")


def add_at(s: Any, x: EagerTensor, where: np.ndarray, values: EagerTensor) -> EagerTensor:
    """x with ``values`` (of ``where``'s shape) added at ``where``; repeated positions add up."""
    n = math.prod(x.shape)
    added = s.scatter_add(_flat(s, values), where.ravel().tolist(), 0, n)
    return s.add(x, s.reshape(added, x.shape, "C"))
