"""Tensor: an immutable host tensor with column-major (Fortran) semantics."""

from __future__ import annotations

import math
from typing import Iterable, Literal, NamedTuple, Sequence, TypeGuard

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


def check_dtype(op: str, dtype: object) -> np.dtype:
    """A supported dtype (float64, float32, complex128, complex64), or DTypeMismatch naming ``op``."""
    try:
        target = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise DTypeMismatch(op, "a dtype", repr(dtype)) from None
    if target not in SUPPORTED_DTYPES:
        raise DTypeMismatch(op, "float64, float32, complex128 or complex64", str(target))
    return target


def host_copy(op: str, data: object, order: Literal["K", "F"] = "K") -> np.ndarray:
    """A new array holding ``data`` (an array, nested sequences or a number) in a supported dtype:
    ints and bools become float64; anything else, or ragged data, is an error naming ``op``."""
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as err:  # ragged nesting, objects NumPy cannot hold as numbers
        raise InvalidArgument(op, "rectangular numeric data", f"{type(data).__name__} ({err})") from None
    if arr.dtype.kind in "biu":
        return arr.astype(np.float64, order=order)
    if arr.dtype not in SUPPORTED_DTYPES:
        raise DTypeMismatch(op, "float64, float32, complex128 or complex64 data", str(arr.dtype))
    return np.array(arr, order=order, copy=True)


def frozen(arr: np.ndarray) -> np.ndarray:
    """Mark an array read-only, so tensors can share buffers without copies."""
    arr.flags.writeable = False
    return arr


class Tensor:
    """A host tensor: a shape, a dtype and data, read and written column-major.

    Tensors are immutable values; every op makes a new one. A tensor made from a caller's
    array holds a copy, so neither changes the other.
    """

    __slots__ = ("array",)  # the data: a read-only NumPy array, shared, never written

    def __init__(self, array: object):
        """A tensor holding a copy of ``array`` (a NumPy array, nested sequences or a number;
        NumPy indexing: element [i, j] is row i, column j)."""
        self.array = frozen(host_copy("Tensor", array))

    @classmethod
    def adopt(cls, array: np.ndarray) -> "Tensor":
        """A tensor on ``array`` itself, not copied: for arrays nothing else holds (the library's
        kernel outputs and fresh constants). The array is made read-only."""
        t = cls.__new__(cls)
        t.array = frozen(array)
        return t

    @classmethod
    def from_vec_col_major(cls, shape: Sequence[int], data: Iterable[float]) -> "Tensor":
        """A tensor of ``shape`` whose data is read in column-major order."""
        op = "Tensor.from_vec_col_major"
        dims = check_shape(op, shape)
        flat = host_copy(op, data).ravel()
        expected = math.prod(dims)  # a Python int: no overflow, however large the shape
        if flat.size != expected:
            raise ShapeMismatch(op, f"{expected} elements for shape {list(dims)}", f"{flat.size} elements")
        return cls.adopt(flat.reshape(dims, order="F"))  # a view of our own copy, column-major

    @classmethod
    def from_numpy(cls, array: object) -> "Tensor":
        """A tensor holding a copy of a NumPy array, laid out column-major (indexing as NumPy's)."""
        return cls.adopt(host_copy("Tensor.from_numpy", array, order="F"))

    @classmethod
    def scalar(cls, value: complex, dtype: npt.DTypeLike | None = None) -> "Tensor":
        """A rank-0 tensor: float64 for a real number, complex128 for a complex one, unless ``dtype``
        says otherwise (a complex value needs a complex dtype)."""
        op = "Tensor.scalar"
        if not (is_real_number(value) or isinstance(value, (complex, np.complexfloating))):
            raise InvalidArgument(op, "a real or complex number", repr(value))
        if dtype is None:
            dtype = np.complex128 if isinstance(value, (complex, np.complexfloating)) else np.float64
        target = check_dtype(op, dtype)
        if target.kind != "c" and isinstance(value, (complex, np.complexfloating)):
            raise DTypeMismatch(op, f"a real number for dtype {target}", repr(value))
        return cls.adopt(np.array(value, dtype=target))

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, a tuple of ints (``()`` for a scalar)."""
        return self.array.shape

    @property
    def dtype(self) -> np.dtype:
        """The dtype: float64, float32, complex128 or complex64."""
        return self.array.dtype

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return self.array.ndim

    @property
    def size(self) -> int:
        """The number of elements."""
        return self.array.size

    def as_slice(self) -> np.ndarray:
        """The data as a flat read-only array in column-major order."""
        return frozen(self.array.ravel(order="F"))

    def to_numpy(self) -> np.ndarray:
        """A writable NumPy copy (NumPy indexing: element [i, j] is row i, column j)."""
        return np.array(self.array)

    def item(self) -> float:
        """The value of a one-element tensor as a Python number."""
        if self.array.size != 1:
            raise ShapeMismatch("Tensor.item", "a tensor of one element", f"shape {list(self.shape)}")
        return self.array.item()

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        """NumPy's array protocol: the tensor's own buffer, read-only, where no copy is needed (a
        matching dtype) nor asked for (``copy=True``); else a writable copy."""
        target = self.dtype if dtype is None else np.dtype(dtype)  # type: ignore[call-overload]
        if copy is not True and target == self.dtype:
            return self.array
        if copy is False:
            raise ValueError(f"Tensor.__array__: a {self.dtype} tensor as {target} needs a copy")
        return np.array(self.array, dtype=target)

    def __dlpack__(self, *, stream: object = None, max_version: tuple[int, int] | None = None,
                   dl_device: object = None, copy: bool | None = None) -> object:
        """DLPack (``torch.from_dlpack(t)``, ``jax.numpy.from_dlpack(t)``), by NumPy's export: the
        buffer itself, flagged read-only, for a consumer of DLPack 1.0 (one that ignores the flag must
        not write into it, as with JAX's arrays); a copy for an older one, unless ``copy=False``."""
        given = dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        options = {k: v for k, v in given.items() if v is not None}  # NumPy 1's takes stream alone
        try:
            return self.array.__dlpack__(**options)
        except BufferError:
            if copy is False:
                raise
            return np.array(self.array).__dlpack__(**options)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.array.__dlpack_device__()

    @classmethod
    def from_dlpack(cls, x: object) -> "Tensor":
        """A tensor holding a copy of the data of any DLPack producer (a PyTorch or JAX array): the
        producer may write to its buffer, and a tensor's data never changes."""
        return cls.from_numpy(np.from_dlpack(x))  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}, data={self.array!r})"
