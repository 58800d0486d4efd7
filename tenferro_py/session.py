"""EagerSession: the library's session, the ops of one runtime on one engine.

Binding checks an op's operands (tensors of this runtime, or the structured tangents and
cotangents that derivative rules pass around, :mod:`tenferro_py.structure`) and hands the op to
its runtime (``EagerRuntime.process_primitive``), which runs, records and carries it. The op
methods themselves are :class:`~tenferro_py.opset.OpSet`'s.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .errors import SessionEnded
from .opset import OpSet
from .structure import Structured, dense
from .tape import EagerTensor
from .tensor import Aval, Tensor


class EagerSession(OpSet):
    """Runs ops on one engine, recording them in one runtime's tape."""

    __slots__ = ("runtime", "engine", "_open")

    def __init__(self, runtime: Any, engine: Any):
        self.runtime = runtime  # the EagerRuntime whose tape this session records on
        self.engine = engine  # the CpuEngine its kernels run on
        self._open = True

    def end(self) -> None:
        """End the session (its ``with_eager_session`` call returns): every op on it raises from now on."""
        self._open = False

    def _check_open(self, op: str) -> None:
        if not self._open:
            raise SessionEnded(op, "a session inside its with_eager_session call", "one whose call has returned")

    def bind(self, prim: Any, *inputs: object, **params: object) -> tuple:
        """Check one primitive's operands and hand it to the runtime, which runs and records it; its outputs."""
        if not self._open:
            self._check_open(prim.name)
        rt = self.runtime
        for x in inputs:
            if type(x) is not EagerTensor or x.runtime is not rt:
                break
        else:  # the common case: every input a tensor of this runtime
            return rt.process_primitive(self, prim, inputs, params)
        xs = tuple([self._operand(prim.name, x) for x in inputs])
        if any([type(x) is not EagerTensor for x in xs]):
            return self._bind_structured(prim, xs, params)
        return rt.process_primitive(self, prim, xs, params)

    def _operand(self, op: str, x: object) -> Any:
        """An op's input: a tensor of this runtime or a structured value as it is, else as the runtime
        takes operands."""
        if type(x) is EagerTensor and x.runtime is self.runtime:
            return x
        return x if isinstance(x, Structured) else self.runtime.operand(op, x)

    def _bind_structured(self, prim: Any, xs: tuple, params: dict) -> tuple:
        """A primitive on structured inputs: its structured form where it has one, else on the dense values."""
        prim.abstract(*[Aval(x.shape, x.dtype) for x in xs], **params)  # the op's own checks first
        if prim.structured is not None:
            out = prim.structured(self, *xs, **params)
            if out is not NotImplemented:
                return tuple(out)
        return self.bind(prim, *[dense(self, x) for x in xs], **params)

    # --- derivatives of functions of session ops, for rules -------------------------------

    def jvp_of(self, f: Callable[[list], Sequence], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple:
        """The tangents of ``f(primals)``'s outputs along ``tangents`` (None: zero), by forward mode
        through f's ops as they run here (see :meth:`EagerRuntime.jvp_of`)."""
        return self.runtime.jvp_of(self, f, primals, tangents)

    def vjp_of(self, f: Callable[[list], Sequence], primals: Sequence[Any], cotangents: Sequence[Any],
               needs: Sequence[bool]) -> tuple:
        """The cotangents of ``primals`` for ``cotangents`` of ``f(primals)``'s outputs (None: zero), by
        reverse mode through f's ops (see :meth:`EagerRuntime.vjp_of`)."""
        return self.runtime.vjp_of(self, f, primals, cotangents, needs)

    def transpose_linear(self, f: Callable[[list], Sequence], primals: Sequence[Any], cotangents: Sequence[Any],
                         needs: Sequence[bool]) -> tuple:
        """The transpose of a linear map f (tangents like ``primals`` -> tangents of some outputs) at
        ``cotangents``: the VJP of f at zero tangents."""
        return self.runtime.transpose_linear(self, f, primals, cotangents, needs)

    # --- leaves ----------------------------------------------------------------------------------

    def variable_from(self, t: "Tensor | EagerTensor") -> EagerTensor:
        """A tracked leaf (see :meth:`EagerRuntime.variable_from`)."""
        self._check_open("variable_from")
        return self.runtime.variable_from(t)

    def constant_from(self, t: "Tensor | EagerTensor") -> EagerTensor:
        """An untracked tensor."""
        self._check_open("constant_from")
        return self.runtime.constant_from(t)
