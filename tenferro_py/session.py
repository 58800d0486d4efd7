"""EagerSession: one method per op; each checks its arguments and binds a primitive.

Binding runs the kernel on the session's engine (at once, or scheduled on a wide engine),
puts a node on the tape when an input is tracked and the runtime records, and, while the
runtime has forward traces active (the jvp of a pullback being taken), pushes the op through
them. Ops also take the structured tangents and cotangents that derivative rules pass
around (:mod:`tenferro_py.structure`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from . import einsum as _einsum
from . import linalg as _linalg
from .errors import InvalidArgument
from .ops import elementwise as _ew
from .ops import structural as _st
from .ops.structural import SliceConfig
from .structure import Structured, dense
from .tape import EagerTensor, Node, reverse_sweep, tensor_key
from .tensor import Aval, Tensor, check_shape


class EagerSession:
    """Runs ops immediately on one engine, recording them in one runtime's tape."""

    __slots__ = ("_rt", "_engine")

    def __init__(self, runtime: Any, engine: Any):
        self._rt = runtime
        self._engine = engine

    @property
    def runtime(self) -> Any:
        """The :class:`~tenferro_py.EagerRuntime` whose tape this session records on."""
        return self._rt

    @property
    def engine(self) -> Any:
        """The :class:`~tenferro_py.CpuEngine` this session's kernels run on."""
        return self._engine

    def bind(self, prim: Any, *inputs: object, **params: object) -> tuple:
        """Check, run and (when tracked) record one primitive; returns its outputs."""
        rt = self._rt
        xs = tuple([x if type(x) is EagerTensor and x._rt is rt else self._operand(prim.name, x) for x in inputs])
        if any([type(x) is not EagerTensor for x in xs]):
            return self._bind_structured(prim, xs, params)
        in_avals = tuple([x._aval for x in xs])
        avals = prim.abstract(*in_avals, **params)
        values = self._engine.run(prim, [x._value for x in xs], params, in_avals, avals)
        if rt._recording and any([x._node is not None for x in xs]):
            node = Node(prim, params, xs, values, avals)
            outs = tuple([EagerTensor(rt, v, a, node, i) for i, (v, a) in enumerate(zip(values, avals))])
        else:
            outs = tuple([EagerTensor(rt, v, a) for v, a in zip(values, avals)])
        if rt._traces:
            rt._carry(self, prim, params, xs, outs)
        return outs

    def _operand(self, op: str, x: object) -> Any:
        """An op's input: a structured value as it is, else as the runtime takes operands."""
        return x if isinstance(x, Structured) else self._rt.operand(op, x)

    def _bind_structured(self, prim: Any, xs: tuple, params: dict) -> tuple:
        """A primitive on structured inputs: its structured form where it has one, else on the dense values."""
        prim.abstract(*[Aval(x.shape, x.dtype) for x in xs], **params)  # the op's own checks first
        if prim.structured is not None:
            out = prim.structured(self, *xs, **params)
            if out is not NotImplemented:
                return tuple(out)
        return self.bind(prim, *[dense(self, x) for x in xs], **params)

    def accumulate(self, a: Any, b: Any) -> Any:
        """a + b for tangents or cotangents, where None is a symbolic zero."""
        if a is None:
            return b
        if b is None:
            return a
        return self.add(a, b)

    def transpose_linear(self, f: Callable[[list], Sequence], primals: Sequence[Any], cotangents: Sequence[Any],
                         needs: Sequence[bool]) -> tuple:
        """The transpose of a linear map f (tangents like ``primals`` -> tangents of some outputs) at ``cotangents``.

        f runs on placeholder variables (recorded even under ``no_grad``), and reverse mode
        takes ȳ ↦ ∂/∂t Re⟨ȳ, f(t)⟩ through it in this session, so the result is recorded, or
        carries a tangent, as this session's ops do. Entries where not ``needs`` are None.
        """
        rt = self._rt
        with rt.enable_grad():  # the placeholders' graph is needed under no_grad too
            placeholders = [rt.variable_from(self.zeros(p.shape, p.dtype)) for p in primals]
            pairing = None
            for t, ct in zip(f(placeholders), cotangents):
                if t is not None and ct is not None:
                    term = self.reduce_sum(self.mul(self.conj(ct), t))
                    pairing = self.accumulate(pairing, self.real(term) if term.dtype.kind == "c" else term)
        wanted = [x for x, need in zip(placeholders, needs) if need]
        if pairing is None or not wanted:
            return tuple(None for _ in primals)
        one = self.constant_from(Tensor.scalar(1.0, pairing.dtype))
        cts, _ = reverse_sweep(self, rt.ad_context._rules, [(pairing, one)], wanted)
        found = iter(dense(self, cts[tensor_key(x)]) if tensor_key(x) in cts else None for x in wanted)
        return tuple(next(found) if need else None for need in needs)

    # --- leaves ----------------------------------------------------------------

    def variable_from(self, t: "Tensor | EagerTensor") -> EagerTensor:
        """A tracked leaf (see :meth:`EagerRuntime.variable_from`)."""
        return self._rt.variable_from(t)

    def constant_from(self, t: "Tensor | EagerTensor") -> EagerTensor:
        """An untracked tensor."""
        return self._rt.constant_from(t)

    def zeros(self, shape: Sequence[int], dtype: npt.DTypeLike = np.float64) -> EagerTensor:
        """A constant of zeros."""
        return self._rt.constant_from(Tensor(np.zeros(check_shape("zeros", shape), dtype=dtype)))

    # --- elementwise ---------------------------------------------------------------

    def add(self, a: EagerTensor, b: EagerTensor) -> EagerTensor:
        return self.bind(_ew.add, a, b)[0]

    def sub(self, a: EagerTensor, b: EagerTensor) -> EagerTensor:
        return self.bind(_ew.sub, a, b)[0]

    def mul(self, a: EagerTensor, b: EagerTensor) -> EagerTensor:
        return self.bind(_ew.mul, a, b)[0]

    def div(self, a: EagerTensor, b: EagerTensor) -> EagerTensor:
        return self.bind(_ew.div, a, b)[0]

    def neg(self, x: EagerTensor) -> EagerTensor:
        return self.bind(_ew.neg, x)[0]

    def exp(self, x: EagerTensor) -> EagerTensor:
        return self.bind(_ew.exp, x)[0]

    def log(self, x: EagerTensor) -> EagerTensor:
        return self.bind(_ew.log, x)[0]

    def sqrt(self, x: EagerTensor) -> EagerTensor:
        return self.bind(_ew.sqrt, x)[0]

    def conj(self, x: EagerTensor) -> EagerTensor:
        """Complex conjugate (x itself for a real dtype)."""
        return self.bind(_ew.conj, x)[0]

    def real(self, x: EagerTensor) -> EagerTensor:
        """Real part, of the matching real dtype."""
        return self.bind(_ew.real, x)[0]

    def imag(self, x: EagerTensor) -> EagerTensor:
        """Imaginary part, of the matching real dtype (zeros for a real x)."""
        return self.bind(_ew.imag, x)[0]

    def complex(self, re: EagerTensor, im: EagerTensor) -> EagerTensor:
        """re + i·im from two real tensors of one shape and dtype."""
        return self.bind(_ew.complex_, re, im)[0]

    def abs(self, x: EagerTensor) -> EagerTensor:
        """|x|, real; its derivative at 0 is taken as 0 (sign(0) = 0)."""
        return self.bind(_ew.abs_, x)[0]

    def sign(self, x: EagerTensor) -> EagerTensor:
        """x/|x| (0 at 0); a constant for AD."""
        return self.bind(_ew.sign, x)[0]

    def scale_real(self, x: EagerTensor, alpha: float) -> EagerTensor:
        """alpha · x for a real number alpha."""
        return self.bind(_ew.scale_real, x, alpha=_ew.check_real_scalar("scale_real", alpha))[0]

    # --- shape ops ---------------------------------------------------------------------

    def broadcast_in_dim(self, x: EagerTensor, shape: Sequence[int], dims: Sequence[int]) -> EagerTensor:
        """StableHLO broadcast: input axis i becomes output axis dims[i] (size 1 or equal)."""
        x = self._operand("broadcast_in_dim", x)
        shape = check_shape("broadcast_in_dim", shape)
        dims = _st.check_axes("broadcast_in_dim", "dims", dims, len(shape))
        if len(dims) != x.ndim:
            raise InvalidArgument("broadcast_in_dim", f"{x.ndim} dims (one per input axis)", f"{list(dims)}")
        return self.bind(_st.broadcast_in_dim, x, shape=shape, dims=dims)[0]

    def reduce_sum(self, x: EagerTensor, axes: Sequence[int] | None = None) -> EagerTensor:
        """Sum over ``axes`` (all when None); the reduced axes are removed."""
        x = self._operand("reduce_sum", x)
        axes = tuple(range(x.ndim)) if axes is None else _st.check_axes("reduce_sum", "axes", axes, x.ndim)
        return self.bind(_st.reduce_sum, x, axes=axes)[0]

    def transpose(self, x: EagerTensor, perm: Sequence[int]) -> EagerTensor:
        """Output axis i is input axis perm[i]."""
        x = self._operand("transpose", x)
        perm = _st.check_axes("transpose", "perm", perm, x.ndim)
        if len(perm) != x.ndim:
            raise InvalidArgument("transpose", f"a permutation of {x.ndim} axes", f"{list(perm)}")
        return self.bind(_st.transpose, x, perm=perm)[0]

    def reshape(self, x: EagerTensor, shape: Sequence[int]) -> EagerTensor:
        """Same elements in column-major order, new shape (to the same shape: x itself)."""
        x = self._operand("reshape", x)
        shape = check_shape("reshape", shape)
        return x if shape == x.shape else self.bind(_st.reshape, x, shape=shape)[0]

    def slice(self, x: EagerTensor, config: SliceConfig) -> EagerTensor:
        """x[starts:limits:strides] per axis (limits exclusive)."""
        x = self._operand("slice", x)
        starts, limits, strides = _st.check_slice(config, x.shape)
        return self.bind(_st.slice_, x, starts=starts, limits=limits, strides=strides)[0]

    def pad(
        self, x: EagerTensor, shape: Sequence[int], starts: Sequence[int], strides: Sequence[int] | None = None
    ) -> EagerTensor:
        """Zeros of ``shape`` with x placed from ``starts`` every ``strides`` (the transpose of slice)."""
        x = self._operand("pad", x)
        shape = check_shape("pad", shape)
        starts = check_shape("pad", starts)
        strides = check_shape("pad", strides) if strides is not None else (1,) * x.ndim
        return self.bind(_st.pad, x, shape=shape, starts=starts, strides=strides)[0]

    # --- einsum and linalg ---------------------------------------------------------------

    def einsum(self, operands: Sequence[EagerTensor], subscripts: str) -> EagerTensor:
        """Einstein summation, e.g. ``einsum([a, b], "ij,jk->ik")``; ``"xyxy->"`` is a trace."""
        if not isinstance(operands, (list, tuple)) or not operands:
            raise InvalidArgument("einsum", "a non-empty list of operands", repr(operands))
        xs = [self._operand("einsum", x) for x in operands]
        inputs, output = _einsum.parse(subscripts, [x.shape for x in xs])
        if len(xs) <= 2:
            return self.bind(_einsum.einsum_p, *xs, inputs=inputs, output=output)[0]
        for positions, ins, out in _einsum.pairwise_steps(inputs, output, tuple(x.shape for x in xs)):
            picked = [xs.pop(p) for p in positions]
            xs.append(self.bind(_einsum.einsum_p, *picked, inputs=ins, output=out)[0])
        return xs[0]

    def svd(
        self, x: EagerTensor, derivative_eps: float | None = None
    ) -> tuple[EagerTensor, EagerTensor, EagerTensor]:
        """Thin SVD (u, s, vt), s descending; ``derivative_eps`` overrides the context's ε."""
        if derivative_eps is not None:
            derivative_eps = _linalg.check_derivative_eps("svd", derivative_eps)
        u, s, vt = self.bind(_linalg.svd_p, x, derivative_eps=derivative_eps)
        return u, s, vt

    def eigh(self, x: EagerTensor, derivative_eps: float | None = None) -> tuple[EagerTensor, EagerTensor]:
        """Eigenvalues (ascending) and eigenvectors (w, v) of the symmetric part (x + xᵀ)/2 of a square matrix.

        Symmetrising makes the op (and its derivatives) defined for any square
        input; a symmetric x is unchanged. ``derivative_eps`` overrides the
        context's ε of the broadened rule.
        """
        if derivative_eps is not None:
            derivative_eps = _linalg.check_derivative_eps("eigh", derivative_eps)
        w, v = self.bind(_linalg.eigh_p, x, derivative_eps=derivative_eps)
        return w, v
