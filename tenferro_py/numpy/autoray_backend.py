"""tnp as a backend of autoray, the dispatcher quimb and cotengra call every array function
through: ``autoray.do("tensordot", x, y)`` on tnp arrays runs ``tnp.tensordot``.

autoray finds a backend's functions in the module its name says: tnp arrays are registered
under ``"tenferro_py.numpy"``, so ``linalg.svd`` is ``tnp.linalg.svd``. What tnp spells
differently from what autoray's callers expect is registered here: ``linalg.svd`` is the thin
SVD (as autoray makes NumPy's); the functions whose results hold no floating-point number
(comparisons, ``count_nonzero``, ``argmax``, ``isfinite``, …) are NumPy's, run on the values,
of a tracked array too (they have no derivative); ``complex``, ``take``, ``copy`` and
``asfortranarray`` are written with tnp's functions; ``to_numpy`` is autoray's default
(``np.asarray``), which a tracked array refuses, as JAX's tracers do.

Comparisons of tnp arrays give NumPy bools (they have no derivative), so ``do("where", x > 0,
x, y)`` would go to NumPy by its first argument: ``where`` is dispatched to tnp when a tnp array is
among its three arguments, and as autoray does by default (the first) otherwise.

``tenferro_py.numpy`` calls :func:`register` when it is imported, if autoray is installed: the
registration concerns tnp's own array class only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import functions as fn
from . import joining as jn
from . import linalg, quimb_splits
from .scipy import linalg as scipy_linalg
from .array import as_array, ndarray, tracked

#: The backend's name: autoray's functions for tnp arrays are looked up in this module.
BACKEND = "tenferro_py.numpy"

#: NumPy's functions whose results hold no floating-point number: no derivative to lose, so they
#: run on the values of any tnp array (``interop.numpy_on_values``).
VALUE_FUNCTIONS = (
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "isfinite", "isnan", "isinf",
    "count_nonzero", "argmax", "argmin", "argsort", "all", "any", "allclose", "isclose", "array_equal",
    "logical_and", "logical_or", "logical_not", "nonzero", "finfo", "iinfo", "empty_like",
)


def svd(a: Any, full_matrices: bool = False, compute_uv: bool = True) -> Any:
    """The thin SVD by default, as autoray makes numpy.linalg.svd for its callers."""
    return linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def complex(real: Any, imag: Any) -> Any:  # noqa: A001 (autoray's name)
    """real + i·imag, as autoray's ``complex`` for NumPy."""
    return fn.add(real, fn.multiply(imag, 1j))


def take(a: Any, indices: Any, axis: Any = None) -> Any:
    """NumPy's take: entries at integer ``indices`` along ``axis`` (of the flattened array if None)."""
    if not tracked(a):
        return np.take(a, indices, axis)
    x = as_array("take", a)
    if axis is None:
        return jn.ravel(x)[np.asarray(indices)]
    axis = int(axis) % x.ndim
    return x[(slice(None),) * axis + (np.asarray(indices),)]


def copy(a: Any) -> Any:
    """The array itself: tnp arrays are immutable, so a copy is the same value."""
    return a if isinstance(a, ndarray) else np.copy(a)


def asfortranarray(a: Any) -> Any:
    """The array itself for a tnp array (its layout is the library's business)."""
    return a if isinstance(a, ndarray) else np.asfortranarray(a)


def where_backend(args: tuple, kwargs: dict) -> str:
    """autoray's backend for ``where(condition, x, y)``: tnp's if any of the three is a tnp array,
    else that of the condition (autoray's default, the first argument)."""
    import autoray

    if any(isinstance(a, ndarray) for a in args[:3]):
        return BACKEND
    return autoray.infer_backend(args[0])


def register() -> None:
    """Register tnp arrays with autoray (again is harmless): ``autoray.do(name, x)`` then runs
    tnp's ``name``, and quimb networks and cotengra contractions of tnp arrays run on tnp."""
    import autoray

    autoray.register_backend(ndarray, BACKEND)
    autoray.register_function(BACKEND, "linalg.svd", svd)
    autoray.register_function(BACKEND, "linalg.expm", scipy_linalg.expm)  # autoray's name for scipy's expm
    for name, f in (("complex", complex), ("take", take), ("copy", copy), ("asfortranarray", asfortranarray)):
        autoray.register_function(BACKEND, name, f)
    for name in VALUE_FUNCTIONS:
        autoray.register_function(BACKEND, name, getattr(np, name))
    from autoray.autoray import register_dispatch  # not among autoray's top-level names

    register_dispatch("where", where_backend, raw_signature=False)
    quimb_splits.register(autoray, BACKEND)
