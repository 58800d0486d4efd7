"""NumPy's reductions (sum, mean, prod, max, min) and products (matmul, einsum, tensordot, dot) on
tnp arrays: the functions that sum over axes, each one op of the session (einsum's path included)."""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from ..einsum import numpy_path
from ..kernel_sessions import KERNEL_SESSION
from ..tensor import SUPPORTED_DTYPES, Tensor
from ..errors import DTypeMismatch, InvalidArgument
from .array import (
    as_array,
    binary,
    broadcast_shapes,
    broadcast_to_shape,
    lift,
    ndarray,
    result_dtype,
    session,
    stack_nested,
    tracked,
    value_of,
    wrap,
)
from .shaping import normalize_axes, normalize_axis, rearranged

# --- reductions ---------------------------------------------------------------------------------

_REDUCERS = {"sum": "reduce_sum", "mean": "mean", "prod": "reduce_prod", "max": "reduce_max", "min": "reduce_min"}


def reduce(op: str, x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None, out: Any = None) -> Any:
    """sum, mean, prod, max or min over ``axis`` (None: all; an int or a tuple), NumPy's keepdims.
    ``dtype`` and ``out`` are NumPy's (which passes them to an array's method); ``out`` must be None."""
    x = stack_nested(x)
    if not tracked(x):
        return getattr(np, op)(x, axis=axis, keepdims=keepdims, dtype=dtype, out=out)
    if out is not None:
        raise InvalidArgument(op, "out=None (arrays are immutable)", type(out).__name__)
    s = session(op)
    t = lift(s, x, None if dtype is None else np.dtype(dtype))
    axes = normalize_axes(op, axis, t.ndim)
    if op in ("max", "min") and t.dtype.kind == "c":
        return _complex_extremum(op, wrap(t), axes, keepdims)
    out = getattr(s, _REDUCERS[op])(t, axes)
    if keepdims:
        kept = tuple(1 if a in axes else n for a, n in enumerate(t.shape))
        out = s.reshape(out, kept)  # only size-1 axes are added: the order of elements is unchanged
    return wrap(out)


def _complex_extremum(op: str, x: ndarray, axes: tuple[int, ...], keepdims: bool) -> ndarray:
    """NumPy's max or min of complex numbers, in its lexicographic order (real part, then imaginary):
    the entry attained, gathered, so the derivative goes to it (to the first, where it is tied)."""
    if any(x.shape[a] == 0 for a in axes):
        raise InvalidArgument(op, "axes of size >= 1 (an empty reduction has no value)",
                              f"axes {list(axes)} of shape {list(x.shape)}")
    values = value_of(x)
    kept = [a for a in range(x.ndim) if a not in axes]
    out_shape = tuple(1 if a in axes else n for a, n in enumerate(x.shape)) if keepdims else \
        tuple(x.shape[a] for a in kept)

    def attained(positions: np.ndarray) -> np.ndarray:
        def flat(a: np.ndarray) -> np.ndarray:
            return np.transpose(a, kept + list(axes)).reshape(tuple(x.shape[k] for k in kept) + (-1,))
        index = (np.argmax if op == "max" else np.argmin)(flat(values), axis=-1)
        return np.take_along_axis(flat(positions), index[..., None], -1).reshape(out_shape)

    return rearranged(op, x, attained)


# --- products ---------------------------------------------------------------------------------------


def matmul(a: Any, b: Any) -> Any:
    """NumPy's matmul: vectors promoted and demoted, leading axes broadcast."""
    if not tracked(a, b):
        return np.matmul(a, b)
    s = session("matmul")
    dtype = result_dtype(a, b)
    x, y = lift(s, a, dtype), lift(s, b, dtype)
    if x.ndim == 0 or y.ndim == 0:
        raise InvalidArgument("matmul", "operands of rank >= 1 (use * for scalars)", f"ranks {x.ndim} and {y.ndim}")
    if x.ndim == 1 and y.ndim == 1:
        return wrap(s.einsum([x, y], "i,i->"))
    if x.ndim == 1:
        return wrap(s.einsum([x, y], "...j,...jk->...k"))
    if y.ndim == 1:
        return wrap(s.einsum([x, y], "...ij,j->...i"))
    batch = broadcast_shapes("matmul", x.shape[:-2], y.shape[:-2])
    x = broadcast_to_shape(s, x, batch + x.shape[-2:])
    y = broadcast_to_shape(s, y, batch + y.shape[-2:])
    return wrap(s.einsum([x, y], "...ij,...jk->...ik"))


def einsum(*operands: Any, optimize: Any = None) -> Any:
    """NumPy's einsum (the operands promoted to one dtype): ``einsum(subscripts, *operands)`` or NumPy's
    interleaved form ``einsum(x, labels, y, labels, ..., [output])`` (labels: ints and Ellipsis).
    ``optimize`` as NumPy's (False, True, 'greedy', 'optimal', (strategy, memory limit), or a path
    from einsum_path; also opt_einsum's other strategies, and path optimisers: opt_einsum's,
    cotengra's HyperOptimizer and ReusableHyperOptimizer); None: opt_einsum's 'auto' path."""
    if operands and not isinstance(operands[0], str):
        subscripts, operands = _interleaved_subscripts(operands)
    else:
        subscripts, operands = (operands[0], operands[1:]) if operands else (None, ())
    if not isinstance(subscripts, str):
        raise InvalidArgument("einsum", "subscripts as a str such as 'ij,jk->ik', or NumPy's interleaved "
                                        "operands and labels", repr(subscripts))
    optimize = "auto" if optimize is None else optimize
    if not tracked(*operands):
        return _planned_numpy_einsum(subscripts, operands, optimize)
    s = session("einsum")
    dtype = result_dtype(*operands)
    return wrap(s.einsum([lift(s, stack_nested(x), dtype) for x in operands], subscripts, optimize))


def _planned_numpy_einsum(subscripts: str, operands: tuple, optimize: Any) -> np.ndarray:
    """einsum of NumPy data, outside a session: the kernels a session's einsum runs (planned by the
    same path, each operand taken as a session takes it), run on the arrays with no tape, so the bits
    are a session's wherever BLAS runs one thread as there; data of other dtypes (integers) by NumPy's
    einsum along the same path."""
    arrays = [np.asarray(x) for x in operands]
    strange = next((a.dtype for a in arrays if a.dtype.kind not in "biufc"), None)
    if strange is not None:
        raise DTypeMismatch("einsum", "numeric data (booleans, integers, floats or complex numbers)", str(strange))
    if not all(a.dtype.kind in "fc" and a.dtype in SUPPORTED_DTYPES for a in arrays):
        path = False if optimize is False else numpy_path(subscripts, [a.shape for a in arrays], optimize)
        return np.einsum(subscripts, *arrays, optimize=path)
    dtype = result_dtype(*operands)
    out = KERNEL_SESSION.einsum([Tensor(np.asarray(a, dtype=dtype)).array for a in arrays], subscripts, optimize)
    return out if out.flags.writeable else out.copy()


def _interleaved_subscripts(args: tuple) -> tuple[str, tuple]:
    """(subscripts, operands) of NumPy's interleaved einsum(x, [0, 1], y, [1, 2], [0, 2]): each label a
    letter (in the labels' order), Ellipsis '...'; without the output list, NumPy's implicit output
    (the labels that appear once, in increasing order, after the broadcast axes)."""
    pairs, output = list(zip(args[0::2], args[1::2])), (args[-1] if len(args) % 2 else None)
    for labels in [labels for _, labels in pairs] + ([] if output is None else [output]):
        if not isinstance(labels, (list, tuple, np.ndarray)) or not all(
                label is Ellipsis or (isinstance(label, (int, np.integer)) and not isinstance(label, bool))
                for label in labels):
            raise InvalidArgument("einsum", "subscripts as a str such as 'ij,jk->ik', or NumPy's interleaved "
                                            "operands and labels (lists of ints and Ellipsis)", repr(labels))
    names = sorted({label for _, labels in pairs for label in labels if label is not Ellipsis})
    letters = [c for c in map(chr, range(65, 0x2FF)) if c.isalpha()]
    if len(names) > len(letters):
        raise InvalidArgument("einsum", f"at most {len(letters)} distinct labels", f"{len(names)}")
    letter = dict(zip(names, letters))

    def term(labels: Any) -> str:
        return "".join("..." if label is Ellipsis else letter[label] for label in labels)

    if output is None:
        counts = [label for _, labels in pairs for label in labels if label is not Ellipsis]
        ellipsis = any(label is Ellipsis for _, labels in pairs for label in labels)
        output = [Ellipsis] * ellipsis + [label for label in names if counts.count(label) == 1]
    return ",".join(term(labels) for _, labels in pairs) + "->" + term(output), tuple(x for x, _ in pairs)


def tensordot(a: Any, b: Any, axes: Any = 2) -> Any:
    """NumPy's tensordot: the last ``axes`` of a against the first of b, or the listed pairs."""
    if not tracked(a, b):
        return np.tensordot(a, b, axes)
    x, y = as_array("tensordot", a), as_array("tensordot", b)
    if isinstance(axes, (int, np.integer)):
        left, right = list(range(x.ndim - int(axes), x.ndim)), list(range(int(axes)))
    else:
        left, right = ([int(axes[0])] if isinstance(axes[0], (int, np.integer)) else list(axes[0]),
                       [int(axes[1])] if isinstance(axes[1], (int, np.integer)) else list(axes[1]))
    left = [normalize_axis("tensordot", i, x.ndim) for i in left]
    right = [normalize_axis("tensordot", i, y.ndim) for i in right]
    if len(left) != len(right):
        raise InvalidArgument("tensordot", "as many axes of a as of b", f"{len(left)} and {len(right)}")
    letters = string.ascii_letters[: x.ndim + y.ndim]
    sub_x, sub_y = list(letters[: x.ndim]), list(letters[x.ndim:])
    for i, j in zip(left, right):
        sub_y[j] = sub_x[i]
    out = [c for k, c in enumerate(sub_x) if k not in left] + [c for k, c in enumerate(sub_y) if k not in right]
    return einsum(f"{''.join(sub_x)},{''.join(sub_y)}->{''.join(out)}", x, y)


def dot(a: Any, b: Any) -> Any:
    """NumPy's dot: a product with a scalar; else the last axis of a against the second-to-last
    of b (the only one of a vector)."""
    if not tracked(a, b):
        return np.dot(a, b)
    x, y = as_array("dot", a), as_array("dot", b)
    if x.ndim == 0 or y.ndim == 0:
        return binary("mul", x, y)
    return tensordot(x, y, ([x.ndim - 1], [0 if y.ndim == 1 else y.ndim - 2]))
