"""The methods of :class:`~tenferro_py.numpy.array.ndarray` that the modules above it write: the
transpose ``x.T``, ``@``, ``%``, ``//``, ``divmod``, reshape and its kin, the reductions, indexing and ``x.at``, and NumPy's
protocols ``__array_ufunc__`` and ``__array_function__``. They are written as the body of
:class:`ArrayMethods` and set on ndarray when the package is imported, as JAX sets its array's
methods: array.py stays below shaping.py and contractions.py, which build on it."""

from __future__ import annotations

from types import FunctionType
from typing import Any, Callable

import numpy as np

from . import interop
from .array import binary, is_tracked_array, ndarray, power, refuse_options, value_of
from .contractions import dot, matmul, reduce
from .shaping import IndexUpdates, getitem, reshape, squeeze, transpose
from .ufuncs import divmod_, floor_divide, remainder

#: NumPy's functions that NumPy runs as the array's own method (``np.sum(x)`` is ``x.sum()``).
METHOD_FUNCTIONS = {"sum": "sum", "mean": "mean", "prod": "prod", "max": "max", "amax": "max", "min": "min",
                    "amin": "min", "reshape": "reshape", "transpose": "transpose", "squeeze": "squeeze"}

#: The ufuncs of Python's operators: ``np_array + x`` reaches x as ``np.add(np_array, x)``.
OPERATORS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: binary("add", a, b), "subtract": lambda a, b: binary("sub", a, b),
    "multiply": lambda a, b: binary("mul", a, b), "divide": lambda a, b: binary("div", a, b),
    "power": power, "matmul": matmul, "remainder": remainder, "floor_divide": floor_divide, "divmod": divmod_,
}


class ArrayMethods:
    """ndarray's methods defined here (their bodies call this module's functions of the same names)."""

    @property
    def T(self) -> ndarray:  # noqa: N802
        """The transpose (axes reversed), as NumPy's ``.T``."""
        return transpose(self)

    @property
    def at(self) -> IndexUpdates:
        """JAX's functional updates: ``x.at[key].set(v)``, ``.add(v)``, ``.get()``, each a new array."""
        return IndexUpdates(self)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __mod__(self, other):
        return remainder(self, other)

    def __rmod__(self, other):
        return remainder(other, self)

    def __floordiv__(self, other):
        return floor_divide(self, other)

    def __rfloordiv__(self, other):
        return floor_divide(other, self)

    def __divmod__(self, other):
        return divmod_(self, other)

    def __rdivmod__(self, other):
        return divmod_(other, self)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """An operator with a NumPy operand on the left (``np_array + x``) is ours; any other ufunc
        runs on the values (see :func:`interop.numpy_on_values`), naming tnp's for a tracked array."""
        operator = OPERATORS.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if operator is not None:
            return operator(*inputs)
        op = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        return interop.numpy_on_values(op, getattr(ufunc, method), inputs, kwargs, value_of, is_tracked_array,
                                       interop.tnp_name(ufunc.__name__, "numpy") if method == "__call__" else None)

    def __array_function__(self, func: Callable[..., Any], types: Any, args: tuple, kwargs: dict) -> Any:
        """NumPy's functions that call the array's own method (np.sum(x) is x.sum()) do so, as NumPy
        does for any array-like; others run on the values, naming tnp's for a tracked array."""
        method = METHOD_FUNCTIONS.get(func.__name__)
        if method is not None and args and isinstance(args[0], ndarray):
            return getattr(args[0], method)(*args[1:], **kwargs)
        module = getattr(func, "__module__", None) or "numpy"
        name = f"{'np' + module[len('numpy'):] if module.startswith('numpy') else module}.{func.__name__}"
        return interop.numpy_on_values(name, func, args, kwargs, value_of, is_tracked_array,
                                       interop.tnp_name(func.__name__, module))

    def reshape(self, *shape, order: str = "C") -> ndarray:
        """NumPy's reshape, row-major by default (``order='F'``: column-major)."""
        return reshape(self, shape[0] if len(shape) == 1 else shape, order=order)

    def ravel(self, order: str = "C") -> ndarray:
        """The array flattened, row-major by default."""
        return reshape(self, (-1,), order=order)

    def flatten(self, order: str = "C") -> ndarray:
        """The array flattened, row-major by default (no copy is needed: arrays are immutable)."""
        return reshape(self, (-1,), order=order)

    def transpose(self, *axes) -> ndarray:
        """NumPy's transpose: axes reversed, or permuted as given."""
        return transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    def squeeze(self, axis=None) -> ndarray:
        """NumPy's squeeze: axes of length 1 removed."""
        return squeeze(self, axis)

    def dot(self, other) -> ndarray:
        """NumPy's dot with other."""
        return dot(self, other)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **unsupported) -> ndarray:
        """NumPy's sum over axis (None: all); ``initial=`` and ``where=`` are refused."""
        refuse_options("sum", unsupported)
        return reduce("sum", self, axis, keepdims, dtype, out)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **unsupported) -> ndarray:
        """NumPy's mean over axis (None: all); ``where=`` is refused."""
        refuse_options("mean", unsupported)
        return reduce("mean", self, axis, keepdims, dtype, out)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **unsupported) -> ndarray:
        """NumPy's prod over axis (None: all), exact at zeros; ``initial=`` and ``where=`` are refused."""
        refuse_options("prod", unsupported)
        return reduce("prod", self, axis, keepdims, dtype, out)

    def max(self, axis=None, out=None, keepdims=False, **unsupported) -> ndarray:
        """NumPy's max over axis; a maximum attained more than once shares the derivative."""
        refuse_options("max", unsupported)
        return reduce("max", self, axis, keepdims, None, out)

    def min(self, axis=None, out=None, keepdims=False, **unsupported) -> ndarray:
        """NumPy's min over axis; a minimum attained more than once shares the derivative."""
        refuse_options("min", unsupported)
        return reduce("min", self, axis, keepdims, None, out)

    def swapaxes(self, axis1: int, axis2: int) -> ndarray:
        """NumPy's swapaxes."""
        perm = list(range(self.ndim))
        perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
        return transpose(self, perm)

    def __getitem__(self, key) -> ndarray:
        return getitem(self, key)


for _name, _member in vars(ArrayMethods).items():
    if isinstance(_member, (property, FunctionType)):
        setattr(ndarray, _name, _member)
