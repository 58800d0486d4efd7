"""The ops every session has, written once over ``bind``.

:class:`OpSet` holds one method per op: each checks its arguments and binds a primitive.
Two interpreters provide ``bind``: :class:`~tenferro_py.session.EagerSession` runs the kernel on
an engine, records the op on the tape and carries forward traces (the library's sessions);
:class:`~tenferro_py.kernel_sessions.KernelSession` calls the primitive's kernel on NumPy
arrays and nothing else, to run a composite's reference as one kernel.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from . import einsum as _einsum
from .errors import InvalidArgument, NoSuchOp
from .linalg.ops import LinalgOps
from .ops import complex_parts as _cx
from .ops import elementwise as _ew
from .ops import extrema as _ex
from .ops import reductions as _red
from .ops import structural as _st
from .ops.structural import SliceConfig
from .tensor import Tensor, check_dtype, check_shape, is_integer, is_real_number

Value = Any  # an op's operand or result: an EagerTensor in an eager session, an array in a KernelSession


class OpSet(LinalgOps):
    """The op methods of a session, over the interpreter's ``bind`` (linalg's from :class:`LinalgOps`)."""

    __slots__ = ()

    def bind(self, prim: Any, *inputs: object, **params: object) -> tuple:
        """Run primitive prim on inputs (and, in an eager session, record and carry it)."""
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        """Only reached for a name that is no attribute: an op this library does not have."""
        if name.startswith("__"):
            raise AttributeError(name)
        ops = [n for n in dir(type(self)) if not n.startswith("_")]
        close = difflib.get_close_matches(name, ops, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise NoSuchOp(name, "an op of the session (README, 'Ops of a session')", f"no op {name!r}{hint}")

    def constant_from(self, t: Any) -> Any:
        """t as a constant of this session."""
        raise NotImplementedError

    def _operand(self, op: str, x: object) -> Any:
        """An op's input as this session takes it (each session says how): the op methods' one
        conversion of their arguments."""
        raise NotImplementedError

    def zeros(self, shape: Sequence[int], dtype: npt.DTypeLike = np.float64) -> Value:
        """A constant of zeros."""
        return self.constant_from(Tensor.adopt(np.zeros(check_shape("zeros", shape), dtype=dtype)))

    def accumulate(self, a: Any, b: Any) -> Any:
        """a + b for tangents or cotangents, where None is a symbolic zero."""
        if a is None:
            return b
        if b is None:
            return a
        return self.add(a, b)

    # --- elementwise ---------------------------------------------------------------

    def add(self, a: Value, b: Value) -> Value:
        """a + b, elementwise (equal shapes and dtypes)."""
        return self.bind(_ew.add, a, b)[0]

    def sub(self, a: Value, b: Value) -> Value:
        """a − b, elementwise (equal shapes and dtypes)."""
        return self.bind(_ew.sub, a, b)[0]

    def mul(self, a: Value, b: Value) -> Value:
        """a · b, elementwise (equal shapes and dtypes)."""
        return self.bind(_ew.mul, a, b)[0]

    def div(self, a: Value, b: Value) -> Value:
        """a / b, elementwise (equal shapes and dtypes)."""
        return self.bind(_ew.div, a, b)[0]

    def neg(self, x: Value) -> Value:
        """−x."""
        return self.bind(_ew.neg, x)[0]

    def exp(self, x: Value) -> Value:
        """eˣ, elementwise."""
        return self.bind(_ew.exp, x)[0]

    def log(self, x: Value) -> Value:
        """The natural logarithm, elementwise (principal branch for complex x)."""
        return self.bind(_ew.log, x)[0]

    def sqrt(self, x: Value) -> Value:
        """√x, elementwise (principal branch for complex x)."""
        return self.bind(_ew.sqrt, x)[0]

    def conj(self, x: Value) -> Value:
        """Complex conjugate (x itself for a real dtype)."""
        return self.bind(_cx.conj, x)[0]

    def real(self, x: Value) -> Value:
        """Real part, of the matching real dtype."""
        return self.bind(_cx.real, x)[0]

    def imag(self, x: Value) -> Value:
        """Imaginary part, of the matching real dtype (zeros for a real x)."""
        return self.bind(_cx.imag, x)[0]

    def complex(self, re: Value, im: Value) -> Value:
        """re + i·im from two real tensors of one shape and dtype."""
        return self.bind(_cx.complex_, re, im)[0]

    def abs(self, x: Value) -> Value:
        """|x|, real; its derivative at 0 is taken as 0 (sign(0) = 0)."""
        return self.bind(_cx.abs_, x)[0]

    def sign(self, x: Value) -> Value:
        """x/|x| (0 at 0); a constant for AD."""
        return self.bind(_cx.sign, x)[0]

    def scale_real(self, x: Value, alpha: float) -> Value:
        """alpha · x for a real number alpha."""
        return self.bind(_ew.scale_real, x, alpha=_ew.check_real_scalar("scale_real", alpha))[0]

    def square(self, x: Value) -> Value:
        """x², elementwise."""
        return self.bind(_ew.square, x)[0]

    def sin(self, x: Value) -> Value:
        """sin x, elementwise."""
        return self.bind(_ew.sin, x)[0]

    def cos(self, x: Value) -> Value:
        """cos x, elementwise."""
        return self.bind(_ew.cos, x)[0]

    def tan(self, x: Value) -> Value:
        """tan x, elementwise."""
        return self.bind(_ew.tan, x)[0]

    def sinh(self, x: Value) -> Value:
        """sinh x, elementwise."""
        return self.bind(_ew.sinh, x)[0]

    def cosh(self, x: Value) -> Value:
        """cosh x, elementwise."""
        return self.bind(_ew.cosh, x)[0]

    def tanh(self, x: Value) -> Value:
        """tanh x, elementwise."""
        return self.bind(_ew.tanh, x)[0]

    def arcsin(self, x: Value) -> Value:
        """arcsin x, elementwise (NumPy's branch)."""
        return self.bind(_ew.arcsin, x)[0]

    def arccos(self, x: Value) -> Value:
        """arccos x, elementwise (NumPy's branch)."""
        return self.bind(_ew.arccos, x)[0]

    def arctan(self, x: Value) -> Value:
        """arctan x, elementwise (NumPy's branch)."""
        return self.bind(_ew.arctan, x)[0]

    def log1p(self, x: Value) -> Value:
        """log(1 + x), accurate for small x."""
        return self.bind(_ew.log1p, x)[0]

    def expm1(self, x: Value) -> Value:
        """exp(x) − 1, accurate for small x."""
        return self.bind(_ew.expm1, x)[0]

    def arcsinh(self, x: Value) -> Value:
        """arcsinh x, elementwise (NumPy's kernel)."""
        return self.bind(_ew.arcsinh, x)[0]

    def arccosh(self, x: Value) -> Value:
        """arccosh x, elementwise (NumPy's kernel)."""
        return self.bind(_ew.arccosh, x)[0]

    def arctanh(self, x: Value) -> Value:
        """arctanh x, elementwise (NumPy's kernel)."""
        return self.bind(_ew.arctanh, x)[0]

    def exp2(self, x: Value) -> Value:
        """2**x (exact at integers, as NumPy's)."""
        return self.bind(_ew.exp2, x)[0]

    def log2(self, x: Value) -> Value:
        """log₂ x, elementwise."""
        return self.bind(_ew.log2, x)[0]

    def log10(self, x: Value) -> Value:
        """log₁₀ x, elementwise."""
        return self.bind(_ew.log10, x)[0]

    def angle(self, x: Value) -> Value:
        """The argument of x in radians, real (0 or π for a real x); its derivative at 0 is taken as 0."""
        return self.bind(_cx.angle, x)[0]

    def floor(self, x: Value) -> Value:
        """Rounded down, of a real tensor; piecewise constant, so its derivative is zero."""
        return self.bind(_ew.floor, x)[0]

    def ceil(self, x: Value) -> Value:
        """Rounded up, of a real tensor; piecewise constant, so its derivative is zero."""
        return self.bind(_ew.ceil, x)[0]

    def _real_operand(self, op: str, x: object) -> Value:
        """x, checked to be real (DTypeMismatch naming ``op`` otherwise)."""
        x = self._operand(op, x)
        _ew.real_only(op)(x)  # reads x's dtype alone
        return x

    def fabs(self, x: Value) -> Value:
        """|x| of a real tensor (NumPy's fabs; :meth:`abs` also takes complex ones)."""
        return self.abs(self._real_operand("fabs", x))

    def deg2rad(self, x: Value) -> Value:
        """Degrees to radians, of a real tensor: x times the nearest number to π/180."""
        return self.scale_real(self._real_operand("deg2rad", x), math.pi / 180.0)

    def rad2deg(self, x: Value) -> Value:
        """Radians to degrees, of a real tensor: x times the nearest number to 180/π."""
        return self.scale_real(self._real_operand("rad2deg", x), 180.0 / math.pi)

    def radians(self, x: Value) -> Value:
        """:meth:`deg2rad`."""
        return self.scale_real(self._real_operand("radians", x), math.pi / 180.0)

    def degrees(self, x: Value) -> Value:
        """:meth:`rad2deg`."""
        return self.scale_real(self._real_operand("degrees", x), 180.0 / math.pi)

    def logaddexp(self, a: Value, b: Value) -> Value:
        """log(exp(a) + exp(b)) of two real tensors, without overflow; its derivative is the softmax
        weights (½ each where a and b are one infinity)."""
        return self.bind(_ex.logaddexp, a, b)[0]

    def integer_pow(self, x: Value, n: int) -> Value:
        """x**n for an int n (any x; n < 0 as 1/x**|n|)."""
        if not is_integer(n):
            raise InvalidArgument("integer_pow", "an int exponent", repr(n))
        return self.bind(_ew.integer_pow, x, exponent=int(n))[0]

    def real_pow(self, x: Value, p: float) -> Value:
        """x**p for a real number p (NaN for negative real x and a non-integer p, as NumPy)."""
        return self.bind(_ew.real_pow, x, exponent=_ew.check_real_scalar("real_pow", p))[0]

    def pow(self, x: Value, y: Value) -> Value:
        """x**y elementwise for two tensors of one shape and dtype."""
        return self.bind(_ew.pow_, x, y)[0]

    def power(self, x: Value, y: object) -> Value:
        """x**y, as NumPy's power: y an int (:meth:`integer_pow`), a real number (:meth:`real_pow`), a
        complex number, or a tensor of x's shape and dtype (:meth:`pow`)."""
        if is_integer(y):
            return self.integer_pow(x, int(y))
        if is_real_number(y):
            return self.real_pow(x, float(y))
        if isinstance(y, (complex, np.complexfloating)):
            x = self._operand("power", x)
            return self.pow(x, self.constant_from(Tensor.adopt(np.full(x.shape, y, dtype=x.dtype))))
        return self.pow(x, y)

    def convert(self, x: Value, dtype: npt.DTypeLike) -> Value:
        """x in another supported dtype (x itself when it has it); complex to real is refused."""
        x = self._operand("convert", x)
        target = check_dtype("convert", dtype)
        return x if target == x.dtype else self.bind(_cx.convert, x, dtype=target)[0]

    def maximum(self, a: Value, b: Value) -> Value:
        """Elementwise max of two real tensors; at a tie each gets half the derivative (as JAX)."""
        return self.bind(_ex.maximum, a, b)[0]

    def minimum(self, a: Value, b: Value) -> Value:
        """Elementwise min of two real tensors; at a tie each gets half the derivative (as JAX)."""
        return self.bind(_ex.minimum, a, b)[0]

    def where(self, cond: Value, x: Value, y: Value) -> Value:
        """x where ``cond`` is nonzero, else y (cond of their shape, any dtype; a constant for AD)."""
        return self.bind(_ex.select, cond, x, y)[0]

    # --- shape ops ---------------------------------------------------------------------

    def broadcast_in_dim(self, x: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
        """StableHLO broadcast: input axis i becomes output axis dims[i] (size 1 or equal)."""
        x = self._operand("broadcast_in_dim", x)
        shape = check_shape("broadcast_in_dim", shape)
        dims = _st.check_axes("broadcast_in_dim", "dims", dims, len(shape))
        if len(dims) != x.ndim:
            raise InvalidArgument("broadcast_in_dim", f"{x.ndim} dims (one per input axis)", f"{list(dims)}")
        return self.bind(_st.broadcast_in_dim, x, shape=shape, dims=dims)[0]

    def reduce_sum(self, x: Value, axes: Sequence[int] | None = None) -> Value:
        """Sum over ``axes`` (all when None); the reduced axes are removed."""
        return self._reduce(_red.reduce_sum, "reduce_sum", x, axes)

    @staticmethod
    def _axes(op: str, x: Value, axes: Sequence[int] | None) -> tuple[int, ...]:
        """The reduced axes: all when None, else checked."""
        return tuple(range(x.ndim)) if axes is None else _st.check_axes(op, "axes", axes, x.ndim)

    def _reduce(self, prim: Any, op: str, x: Value, axes: Sequence[int] | None) -> Value:
        x = self._operand(op, x)
        return self.bind(prim, x, axes=self._axes(op, x, axes))[0]

    def reduce_max(self, x: Value, axes: Sequence[int] | None = None) -> Value:
        """Max over ``axes`` (all when None) of a real tensor; ties share the derivative equally."""
        return self._reduce(_red.reduce_max, "reduce_max", x, axes)

    def reduce_min(self, x: Value, axes: Sequence[int] | None = None) -> Value:
        """Min over ``axes`` (all when None) of a real tensor; ties share the derivative equally."""
        return self._reduce(_red.reduce_min, "reduce_min", x, axes)

    def reduce_prod(self, x: Value, axes: Sequence[int] | None = None) -> Value:
        """Product over ``axes`` (all when None); 1 over an empty axis."""
        return self._reduce(_red.reduce_prod, "reduce_prod", x, axes)

    def mean(self, x: Value, axes: Sequence[int] | None = None) -> Value:
        """Mean over ``axes`` (all when None): the sum over the number of entries summed."""
        x = self._operand("mean", x)
        axes = self._axes("mean", x, axes)
        count = math.prod(x.shape[a] for a in axes)
        if count == 0:
            raise InvalidArgument("mean", "axes of size >= 1 (an empty mean has no value)",
                                  f"axes {list(axes)} of shape {list(x.shape)}")
        return self.scale_real(self.reduce_sum(x, axes), 1.0 / count)

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        """Output axis i is input axis perm[i]."""
        x = self._operand("transpose", x)
        perm = _st.check_axes("transpose", "perm", perm, x.ndim)
        if len(perm) != x.ndim:
            raise InvalidArgument("transpose", f"a permutation of {x.ndim} axes", f"{list(perm)}")
        return self.bind(_st.transpose, x, perm=perm)[0]

    def reshape(self, x: Value, shape: Sequence[int], order: str = "F") -> Value:
        """Same elements in column-major order (tenferro's; ``order="C"``: row-major, NumPy's), new
        shape (to the same shape: x itself)."""
        x = self._operand("reshape", x)
        shape = check_shape("reshape", shape)
        if order not in ("F", "C"):
            raise InvalidArgument("reshape", "order 'F' (column-major) or 'C' (row-major)", repr(order))
        return x if shape == x.shape else self.bind(_st.reshape, x, shape=shape, order=order)[0]

    def slice(self, x: Value, config: SliceConfig) -> Value:
        """x[starts:limits:strides] per axis (limits exclusive)."""
        x = self._operand("slice", x)
        starts, limits, strides = _st.check_slice(config, x.shape)
        return self.bind(_st.slice_, x, starts=starts, limits=limits, strides=strides)[0]

    def pad(
        self, x: Value, shape: Sequence[int], starts: Sequence[int], strides: Sequence[int] | None = None
    ) -> Value:
        """Zeros of ``shape`` with x placed from ``starts`` every ``strides`` (the transpose of slice)."""
        x = self._operand("pad", x)
        shape = check_shape("pad", shape)
        starts = check_shape("pad", starts)
        strides = check_shape("pad", strides) if strides is not None else (1,) * x.ndim
        return self.bind(_st.pad, x, shape=shape, starts=starts, strides=strides)[0]

    def rev(self, x: Value, axes: Sequence[int]) -> Value:
        """x with the order of its entries along ``axes`` reversed."""
        x = self._operand("rev", x)
        axes = _st.check_axes("rev", "axes", axes, x.ndim)
        return self.bind(_st.rev, x, axes=axes)[0] if axes else x

    def take(self, x: Value, indices: Sequence[int], axis: int) -> Value:
        """The entries of x at ``indices`` (ints, negative from the end, repeats allowed) along ``axis``."""
        x = self._operand("take", x)
        (axis,) = _st.check_axes("take", "axis", (axis,), x.ndim)
        return self.bind(_st.take, x, indices=_st.check_indices("take", indices), axis=axis)[0]

    def scatter_add(self, y: Value, indices: Sequence[int], axis: int, size: int) -> Value:
        """Zeros of size ``size`` along ``axis`` with y's entries added at ``indices``: take's transpose."""
        y = self._operand("scatter_add", y)
        (axis,) = _st.check_axes("scatter_add", "axis", (axis,), y.ndim)
        (size,) = check_shape("scatter_add", (size,))
        return self.bind(_st.scatter_add, y, indices=_st.check_indices("scatter_add", indices), axis=axis,
                         size=size)[0]

    def concatenate(self, operands: Sequence[Value], axis: int) -> Value:
        """The operands joined along ``axis`` (their other axes equal)."""
        if not isinstance(operands, (list, tuple)) or not operands:
            raise InvalidArgument("concatenate", "a non-empty list of operands", repr(operands))
        xs = [self._operand("concatenate", x) for x in operands]
        (axis,) = _st.check_axes("concatenate", "axis", (axis,), xs[0].ndim)
        return xs[0] if len(xs) == 1 else self.bind(_st.concatenate, *xs, axis=axis)[0]

    # --- einsum ---------------------------------------------------------------

    def einsum(self, operands: Sequence[Value], subscripts: str, optimize: object = "auto") -> Value:
        """Einstein summation, e.g. ``einsum([a, b], "ij,jk->ik")``; ``"xyxy->"`` is a trace. ``optimize``
        (numpy.einsum's, :func:`~tenferro_py.einsum.check_optimize`): the order of pairwise contractions,
        opt_einsum's 'auto' path by default. One or two operands are one primitive; more are the
        pairwise contractions of the path, one primitive each."""
        if not isinstance(operands, (list, tuple)) or not operands:
            raise InvalidArgument("einsum", "a non-empty list of operands", repr(operands))
        xs = [self._operand("einsum", x) for x in operands]
        inputs, output = _einsum.parse(subscripts, [x.shape for x in xs])
        is_auto = isinstance(optimize, str) and optimize == "auto"
        plan_request = _einsum.AUTO if is_auto else _einsum.check_optimize(optimize, len(xs))
        if len(xs) <= 2:
            return self.bind(_einsum.einsum_p, *xs, inputs=inputs, output=output)[0]
        shapes = tuple(x.shape for x in xs)
        for positions, ins, out in _einsum.pairwise_steps(inputs, output, shapes, plan_request):
            picked = [xs.pop(p) for p in positions]
            xs.append(self.bind(_einsum.einsum_p, *picked, inputs=ins, output=out)[0])
        return xs[0]
