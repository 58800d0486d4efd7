"""The orthogonal complement of orthonormal columns: what NumPy's full SVD (``full_matrices=True``)
adds to the thin factors of a rectangular matrix.

Any orthonormal basis of the complement is as good as another (the full SVD's extra columns are
that arbitrary), so the op has no derivative: its rules refuse, saying why, rather than
differentiate one choice of basis.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeMismatch, Unsupported
from ..tensor import Aval
from .common import RULES


def _abstract(q: Aval, op) -> tuple[Aval]:
    if len(q.shape) < 2 or q.shape[-1] > q.shape[-2]:
        raise ShapeMismatch("orthogonal_complement", "columns (..., m, k), k <= m", f"shape {list(q.shape)}")
    m, k = q.shape[-2:]
    return (Aval(q.shape[:-2] + (m, m - k), q.dtype),)


def _impl(q: np.ndarray, op) -> tuple[np.ndarray]:
    """The last m − k columns of the complete QR of q (Householder: orthogonal to q to rounding)."""
    return (np.ascontiguousarray(np.linalg.qr(q, mode="complete")[0][..., q.shape[-1]:]),)


_REFUSALS = {
    "svd": ("full_matrices=False to differentiate the SVD of a rectangular matrix (the full factors' extra columns "
            "are an arbitrary basis of the complement: they have no derivative)", "full_matrices=True"),
    "qr": ("mode='reduced' to differentiate the QR of a tall matrix (the complete Q's extra columns are an "
           "arbitrary basis of the complement: they have no derivative)", "mode='complete'"),
}


def _refuse(*args: object, op: str, **params: object) -> tuple:
    raise Unsupported(op, *_REFUSALS[op])


orthogonal_complement_p = RULES.define("orthogonal_complement", _abstract, _impl, jvp=_refuse, vjp=_refuse,
                                        dense_only=True)


def orthogonal_complement(s: object, q: object, op: str = "svd") -> object:
    """An orthonormal basis (..., m, m − k) of the complement of q's orthonormal columns (..., m, k),
    with no derivative (its rules raise Unsupported naming ``op``, svd's or qr's completion)."""
    return s.bind(orthogonal_complement_p, q, op=op)[0]  # type: ignore[attr-defined]
