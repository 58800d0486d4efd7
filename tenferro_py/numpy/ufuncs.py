"""NumPy's ufuncs that bind one primitive each, with NumPy's broadcasting and promotion, and the
remainders behind the ``%``, ``//`` and ``divmod`` of :class:`~tenferro_py.numpy.ndarray` (set by
:mod:`.methods`). Outside a session, on NumPy data, each is NumPy's own ufunc."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ops import special
from ..rules import Primitive
from .array import lift, operands, session, tracked, wrap


def unary_ufunc(name: str, prim: Primitive, doc: str, **params: Any) -> Callable[[Any], Any]:
    """NumPy's ufunc ``name`` as the primitive ``prim`` (of one operand)."""
    numpy_fn = getattr(np, name)

    def fn(x: Any) -> Any:
        if not tracked(x):
            return numpy_fn(x)
        s = session(name)
        return wrap(s.bind(prim, lift(s, x), **params)[0])

    fn.__name__, fn.__doc__ = name, doc
    return fn


def binary_ufunc(name: str, prim: Primitive, doc: str) -> Callable[[Any, Any], Any]:
    """NumPy's ufunc ``name`` as the primitive ``prim`` of two operands, broadcast and promoted."""
    numpy_fn = getattr(np, name)

    def fn(a: Any, b: Any) -> Any:
        if not tracked(a, b):
            return numpy_fn(a, b)
        s, (x, y) = operands(name, a, b)
        return wrap(s.bind(prim, x, y)[0])

    fn.__name__, fn.__doc__ = name, doc
    return fn


remainder = mod = binary_ufunc("remainder", special.remainder,
                               "NumPy's remainder (mod, ``%``), of the sign of b; derivative 1 in a, −floor(a/b) in b.")
floor_divide = binary_ufunc("floor_divide", special.floor_divide,
                            "NumPy's floor_divide (``//``), real; piecewise constant: zero derivative.")
fmod = binary_ufunc("fmod", special.fmod, "C's fmod, of the sign of a; derivative 1 in a, −trunc(a/b) in b.")


def divmod_(a: Any, b: Any) -> tuple[Any, Any]:
    """NumPy's divmod: (floor_divide(a, b), remainder(a, b))."""
    return floor_divide(a, b), remainder(a, b)


divmod_.__name__ = "divmod"
