"""numpy.linalg's norms on tnp arrays: norm, vector_norm, matrix_norm and cond, composed of tnp's
functions and the session's norm and SVD (their rules: docs/linalg.md, norm)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import InvalidArgument, ShapeMismatch
from ..linalg.least_squares import refused_derivative_p
from . import functions as fn
from . import joining as jn
from .array import lift, session, tracked, value_of, wrap
from .shaping import normalize_axes

__all__ = ["cond", "matrix_norm", "norm", "vector_norm"]


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    """numpy.linalg.norm: of a vector or a matrix (axis None), vector norms along one axis, and matrix
    norms over a pair of axes (NumPy's orders for each, with ``keepdims``)."""
    if not tracked(x):
        return np.linalg.norm(x, ord, axis, keepdims)
    a = fn.asarray(x)
    if axis is None and a.ndim > 2 and ord is not None:
        raise InvalidArgument("norm", "ord None for an array of rank > 2 without axis", repr(ord))
    axes = normalize_axes("norm", axis, a.ndim)
    if len(axes) == 1:
        out = _vector_norm(a, ord, axes[0])
    elif len(axes) == 2 and not (axis is None and ord is None):
        out = _matrix_norm(a, ord, axes)
    elif ord is None:  # the Frobenius norm over every axis
        out = _vector_norm(jn.ravel(a), None, 0)
    else:
        raise InvalidArgument("norm", "one or two axes (a vector or a matrix norm)", repr(axis))
    if keepdims:
        out = fn.reshape(out, tuple(1 if i in axes else n for i, n in enumerate(a.shape)))
    return out


def _euclidean(magnitude: Any, axes: Any) -> Any:
    """sqrt(Σ |x|²) along axes; at a zero vector the derivative is 0 (as the matrix norm's), not 0/0."""
    squares = fn.sum(magnitude * magnitude, axes)
    zero = squares == 0  # a guard, as every comparison of arrays
    return fn.where(zero, 0.0, fn.sqrt(fn.where(zero, 1.0, squares)))


def _vector_norm(a: Any, ord: Any, axis: int) -> Any:
    """NumPy's vector norm of order ``ord`` along ``axis``: None or 2, ±1, ±inf, 0 (the count of
    nonzero entries) or any other real p, (Σ |x|ᵖ)^(1/p)."""
    if a.ndim == 1 and (ord is None or ord in (2, 1, np.inf, -np.inf)) and not isinstance(ord, str):
        s = session("norm")
        return wrap(s.norm(a.tensor, ord))
    if isinstance(ord, str) or not isinstance(ord, (int, float, np.integer, np.floating, type(None))):
        raise InvalidArgument("norm", "a vector order: None or a real number", repr(ord))
    magnitude = fn.abs(a)
    if ord is None or ord == 2:
        return _euclidean(magnitude, axis)
    if ord == np.inf:
        return fn.max(magnitude, axis)
    if ord == -np.inf:
        return fn.min(magnitude, axis)
    if ord == 0:  # a count, which has no derivative
        return fn.sum(fn.where(magnitude != 0, fn.ones_like(magnitude), fn.zeros_like(magnitude)), axis)
    if ord == 1:
        return fn.sum(magnitude, axis)
    return _p_norm(magnitude, float(ord), axis)


def _p_norm(magnitude: Any, p: float, axis: int) -> Any:
    """(Σ |x|ᵖ)^(1/p) with the smallest subgradient, 0, where it has no derivative (at a zero vector,
    at zero entries for p < 1), never 0/0: zero entries add nothing (p > 0) or make the norm 0 (p < 0,
    NumPy's value) and move nothing."""
    nonzero = magnitude != 0
    safe = fn.where(nonzero, magnitude, 1.0)
    if p > 0:
        total = fn.sum(fn.where(nonzero, safe ** p, 0.0), axis)
        zero = total == 0
    else:
        total = fn.sum(safe ** p, axis)
        zero = np.any(~nonzero, axis=axis)
    return fn.where(zero, 0.0, fn.where(zero, 1.0, total) ** (1.0 / p))


def _matrix_norm(a: Any, ord: Any, axes: tuple[int, int]) -> Any:
    """NumPy's matrix norm of order ``ord`` of each matrix (rows along axes[0], columns along axes[1])."""
    y = jn.moveaxis(a, axes, (-2, -1))
    if y.ndim == 2:
        s = session("norm")
        return wrap(s.norm(y.tensor, ord))
    if ord in (None, "fro"):
        return _euclidean(fn.abs(y), (-2, -1))
    if ord in ("nuc", 2, -2):
        values = _svdvals(y)
        if ord == "nuc":
            return fn.sum(values, -1)
        if values.shape[-1] == 0:
            raise ShapeMismatch("norm", f"matrices with at least one row and column for ord {ord} (an extreme "
                                        "singular value)", f"shape {list(y.shape)}")
        return values[..., 0] if ord == 2 else values[..., -1]
    if ord in (1, -1, np.inf, -np.inf) and not isinstance(ord, bool):
        sums = fn.sum(fn.abs(y), -2 if ord in (1, -1) else -1)  # column sums for ±1, row sums for ±inf
        return fn.max(sums, -1) if ord > 0 else fn.min(sums, -1)
    raise InvalidArgument("norm", "a matrix order among None, 'fro', 'nuc', 2, -2, 1, -1, inf, -inf", repr(ord))


def _svdvals(x: Any) -> Any:
    s = session("norm")
    return wrap(s.svdvals(lift(s, x)))


def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:  # noqa: A002
    """numpy.linalg.vector_norm: over every axis (None), one, or several (as one flattened vector)."""
    if not tracked(x):
        return np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    a = fn.asarray(x)
    axes = tuple(range(a.ndim)) if axis is None else normalize_axes("vector_norm", axis, a.ndim)
    rest = [n for i, n in enumerate(a.shape) if i not in axes]
    flat = fn.reshape(jn.moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim))),
                      tuple(rest) + (math.prod(a.shape[i] for i in axes),))
    out = _vector_norm(flat, ord, flat.ndim - 1)
    if keepdims:
        out = fn.reshape(out, tuple(1 if i in axes else n for i, n in enumerate(a.shape)))
    return out


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:  # noqa: A002
    """numpy.linalg.matrix_norm: the norm of each matrix over the last two axes."""
    if not tracked(x):
        return np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return norm(x, ord, (-2, -1), keepdims)


def cond(x: Any, p: Any = None) -> Any:
    """numpy.linalg.cond: s₁/s_K (p None or 2), s_K/s₁ (−2), else ‖x‖_p ‖x⁻¹‖_p (a singular x is then
    inv's LinalgError). Where s_K = 0 the value is inf, and its derivative is refused (LinalgError)."""
    if not tracked(x):
        return np.linalg.cond(x, p)
    a = fn.asarray(x)
    if p not in (None, 2, -2):
        s = session("cond")
        return norm(a, p, (-2, -1)) * norm(wrap(s.inv(a.tensor)), p, (-2, -1))
    values = _svdvals(a)
    first, last = values[..., 0], values[..., -1]
    smallest, largest = value_of(last), value_of(first)
    if p == -2:  # 0/0 of a zero matrix is inf, as NumPy's
        out = fn.where(largest == 0, np.inf, last / fn.where(largest == 0, 1.0, first))
    else:
        out = fn.where(smallest == 0, np.inf, first / fn.where(smallest == 0, 1.0, last))
    if np.any(smallest == 0):
        s = session("cond")
        out = out + wrap(s.bind(refused_derivative_p, a.tensor, shape=out.shape, dtype=out.dtype, op="cond",
                                expected="a nonsingular matrix for the derivative (cond is inf)",
                                got="a singular one (its smallest singular value is 0)")[0])
    return out
