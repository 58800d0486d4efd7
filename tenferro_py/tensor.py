"""Tensor: an immutable host tensor with column-major (Fortran) semantics."""

from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence, TypeGuard

import numpy as np
import numpy.typing as npt

from .errors import DTypeMismatch, InvalidArgument, ShapeMismatch

#: dtypes every op accepts; float64 is the default.
SUPPORTED_DTYPES = tuple(np.dtype(t) for t in (np.float64, np.float32, np.complex128, np.complex64))


class Aval(NamedTuple):
    """Abstract value: what shape inference and checks see of a tensor."""

    shape: tuple[int, ...]
    dtype: np.dtype


def is_integer(x: object) -> TypeGuard["int | np.integer"]:
    """A Python or NumPy integer, not a bool."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def is_real_number(x: object) -> TypeGuard["int | float | np.integer | np.floating"]:
    """A Python or NumPy integer or float, not a bool."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def check_shape(op: str, shape: Iterable[int]) -> tuple[int, ...]:
    """A shape as a tuple of non-negative ints, or InvalidArgument naming ``op``."""
    if (type(shape) is tuple or type(shape) is list) and all([type(d) is int and d >= 0 for d in shape]):
        return tuple(shape)
    try:
        dims = tuple(shape)
    except TypeError:
        raise InvalidArgument(op, "a shape (a sequence of ints)", repr(shape)) from None
    for d in dims:
        if not is_integer(d) or d < 0:
            raise InvalidArgument(op, "a shape of non-negative ints", repr(shape))
    return tuple(int(d) for d in dims)


def as_host_array(op: str, data: object) -> np.ndarray:
    """Data as a read-only array of a supported dtype (ints and bools become float64)."""
    arr = np.asarray(data)
    if arr.dtype.kind in "biu":
        arr = arr.astype(np.float64)
    if arr.dtype not in SUPPORTED_DTYPES:
        raise DTypeMismatch(op, "float64, float32, complex128 or complex64 data", str(arr.dtype))
    return arr


def frozen(arr: np.ndarray) -> np.ndarray:
    """Mark an array read-only, so tensors can share buffers without copies."""
    arr.flags.writeable = False
    return arr


class Tensor:
    """A host tensor: a shape, a dtype and data, read and written column-major.

    Tensors are immutable values; every op makes a new one.
    """

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray):
        """Wrap an array (not copied: the caller hands it over)."""
        self._array = frozen(as_host_array("Tensor", array))

    @classmethod
    def from_vec_col_major(cls, shape: Sequence[int], data: Iterable[float]) -> "Tensor":
        """A tensor of ``shape`` whose data is read in column-major order."""
        dims = check_shape("Tensor.from_vec_col_major", shape)
        flat = as_host_array("Tensor.from_vec_col_major", data).ravel()
        expected = int(np.prod(dims, dtype=np.int64))
        if flat.size != expected:
            raise ShapeMismatch(
                "Tensor.from_vec_col_major",
                f"{expected} elements for shape {list(dims)}",
                f"{flat.size} elements",
            )
        return cls(np.array(flat.reshape(dims, order="F"), order="F"))

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> "Tensor":
        """A tensor holding a copy of a NumPy array (indexing as NumPy's)."""
        return cls(np.array(as_host_array("Tensor.from_numpy", array), order="F", copy=True))

    @classmethod
    def scalar(cls, value: float, dtype: npt.DTypeLike = np.float64) -> "Tensor":
        """A rank-0 tensor."""
        return cls(np.array(value, dtype=dtype))

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def size(self) -> int:
        return self._array.size

    def as_slice(self) -> np.ndarray:
        """The data as a flat read-only array in column-major order."""
        return frozen(self._array.ravel(order="F"))

    def to_numpy(self) -> np.ndarray:
        """A writable NumPy copy (NumPy indexing: element [i, j] is row i, column j)."""
        return np.array(self._array)

    def item(self) -> float:
        """The value of a one-element tensor as a Python number."""
        if self._array.size != 1:
            raise ShapeMismatch("Tensor.item", "a tensor of one element", f"shape {list(self.shape)}")
        return self._array.item()

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: object = None) -> np.ndarray:
        return np.array(self._array, dtype=dtype)

    def __repr__(self) -> str:
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}, data={self._array!r})"
