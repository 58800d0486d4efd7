"""NumPy's protocols on tnp arrays: plain NumPy for an untracked array, a clear refusal for a
tracked one (an array a derivative is being taken through), whose derivative NumPy would drop
without a word (``float(x) * x`` would differentiate as a constant times x: 2 at x = 2, not 4).

A tracked array is read only on purpose: ``tnp.stop_gradient(x)`` is its value as a constant,
which ``float``, ``np.asarray`` and NumPy's functions then take. What has no derivative reads
values as they are: comparisons, truth values, ``int()`` and integer casts, printing, and a NumPy
function whose result holds no floating-point number (``np.isfinite``, ``np.argmax``,
``np.shape``). Python's operators with a NumPy operand on the left, and the NumPy functions
that NumPy runs as the array's own method (``np.sum(x)`` is ``x.sum()``), are tnp's (array.py).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from ..errors import TrackedConversion

_STOP_GRADIENT = "tnp.stop_gradient(x) reads the value as a constant, without its derivative"

#: NumPy functions that read only the shape and dtype of their first argument.
_PROTOTYPE_ONLY = frozenset({"zeros_like", "ones_like", "empty_like", "full_like"})


def conversion_refused(op: str) -> TrackedConversion:
    """The error of ``float(x)``, ``np.asarray(x)``, ``x.item()``… on a tracked array."""
    return TrackedConversion(op, f"an array no derivative is taken through ({_STOP_GRADIENT})",
                             "a tracked array (its derivative would be dropped)")


def function_refused(op: str, replacement: str | None) -> TrackedConversion:
    """The error of a NumPy function given a tracked array: it names tnp's function of that name."""
    use = replacement if replacement is not None else f"tnp's functions (tnp has no {op.rsplit('.', 1)[-1]})"
    because = f"NumPy's {op} would drop its derivative; {_STOP_GRADIENT}"
    return TrackedConversion(op, f"{use} for a tracked array ({because})", "a tracked array")


#: tnp's public names, by namespace ("numpy", "numpy.linalg"): given by the package as it is
#: imported (``offer_names``), so that a refusal names tnp's function without this module
#: importing the package above it.
_OFFERED: dict[str, frozenset[str]] = {}


def offer_names(namespace: str, names: Iterable[str]) -> None:
    """Record the names tnp offers for NumPy's namespace (used to name tnp's function in a refusal)."""
    _OFFERED[namespace] = frozenset(names)


def tnp_name(name: str, module: str) -> str | None:
    """``tnp.name`` (``tnp.linalg.name`` for numpy.linalg's) where tnp has that function, else None."""
    namespace = "numpy.linalg" if module.endswith("linalg") else "numpy"
    prefix = "tnp.linalg." if namespace == "numpy.linalg" else "tnp."
    return prefix + name if name in _OFFERED.get(namespace, ()) else None


def holds_no_float(result: Any) -> bool:
    """Whether a result holds no floating-point or complex number, so has no derivative to lose."""
    if isinstance(result, (tuple, list)):
        return all(holds_no_float(r) for r in result)
    if isinstance(result, (np.ndarray, np.generic)):
        return result.dtype.kind in "biu"
    return result is None or isinstance(result, (int, str, np.dtype))


def numpy_on_values(op: str, fn: Callable[..., Any], args: tuple, kwargs: dict, value: Callable[[Any], Any],
                    is_tracked: Callable[[Any], bool], replacement: str | None) -> Any:
    """``fn(*args, **kwargs)`` with every tnp array replaced by its value (``value``), for an
    untracked one, or wherever the result holds no floating-point number; else the refusal
    naming ``replacement``."""
    name = op.rsplit(".", 1)[-1]
    skip = args[:1] if name in _PROTOTYPE_ONLY else ()
    tracked = [False]

    def read(x: Any) -> Any:
        if type(x) in (tuple, list):
            return type(x)(read(v) for v in x)
        if is_tracked(x) and not any(x is p for p in skip):
            tracked[0] = True
        return value(x)

    try:
        result = fn(*read(args), **{k: read(v) for k, v in kwargs.items()})
    except Exception:
        if tracked[0]:  # NumPy's own complaint matters less than that its function is the wrong one
            raise function_refused(op, replacement) from None
        raise
    if tracked[0] and not holds_no_float(result):
        raise function_refused(op, replacement)
    return result
