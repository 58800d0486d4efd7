"""The sessions that run ops as plain NumPy calls on arrays: a composite's kernel.

:class:`KernelSession` calls each primitive's kernel and nothing else: no tape, no engine, no
checks of ownership. :class:`TangentKernelSession` also carries a tangent along every op (a
composite's fused JVP); :class:`RecordingKernelSession` also writes its ops down (a
shape-determined composite's replay). A composite (:mod:`tenferro_py.composite`) is defined
below the op families, which define composites, and its reference needs every op, so this
module, above them, hands it these sessions at import
(:func:`~tenferro_py.composite.use_kernel_sessions`): the one place where a lower layer is given
something by a higher one. The package imports this module, so that is done before any kernel runs.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import composite
from .opset import OpSet
from .replay import Recorder, Replay
from .structure import Structured, dense
from .tensor import Tensor


class KernelSession(OpSet):
    """Runs ops as plain NumPy calls on arrays: the interpreter of a composite's kernel."""

    __slots__ = ()

    def bind(self, prim: Any, *inputs: object, **params: object) -> tuple:
        """Run prim's kernel on plain arrays (structured ones kept where prim knows them)."""
        if any([isinstance(x, Structured) for x in inputs]):
            out = prim.structured(self, *inputs, **params) if prim.structured is not None else NotImplemented
            if out is NotImplemented:
                return prim.impl(*[dense(self, x) for x in inputs], **params)
            return tuple(out)
        return prim.impl(*inputs, **params)

    def _operand(self, op: str, x: object) -> Any:
        return x

    def constant_from(self, t: Any) -> Any:
        """t's array (a kernel session works on plain arrays)."""
        return t.array if isinstance(t, Tensor) else t


KERNEL_SESSION = KernelSession()


class RecordingKernelSession(KernelSession):
    """A KernelSession that writes down the ops it runs, for a shape-determined composite's
    :class:`~tenferro_py.replay.Replay` (a :class:`~tenferro_py.replay.Recorder` keeps the slots). An
    array that no op and no constant made leaves nothing to replay: it may have come from values."""

    __slots__ = ("_recorder",)

    def __init__(self, inputs: Sequence[Any]):
        self._recorder = Recorder(inputs, constants_allowed=False)

    def bind(self, prim: Any, *inputs: object, **params: object) -> tuple:
        """Run prim's kernel, and write it down."""
        outs = super().bind(prim, *inputs, **params)
        if any([isinstance(x, Structured) for x in (*inputs, *outs)]):
            self._recorder.taint("a structured value")
        self._recorder.step(prim.impl, params, inputs, outs)
        return outs

    def constant_from(self, t: Any) -> Any:
        """t's array, written down as a constant unless an op made it."""
        x = super().constant_from(t)
        self._recorder.constant(x)
        return x

    def replay(self, outputs: Sequence[Any]) -> Replay | None:
        """The ops written down, as a Replay giving ``outputs``; None if they cannot be replayed."""
        return self._recorder.replay(outputs)


class TangentKernelSession(KernelSession):
    """A KernelSession that also carries a tangent along every op, by the op's JVP rule run in a
    plain KernelSession: forward mode inside one kernel."""

    __slots__ = ("_rules", "_tangents")

    def __init__(self, rules: Any):
        self._rules = rules
        self._tangents: dict[int, tuple] = {}  # id(array) -> (array, tangent): the array kept alive

    def seed(self, x: Any, tangent: Any) -> None:
        """Give x the tangent tangent."""
        self._tangents[id(x)] = (x, tangent)

    def tangent(self, x: Any) -> Any:
        """x's tangent, or None."""
        found = self._tangents.get(id(x))
        return found[1] if found is not None and found[0] is x else None

    def bind(self, prim: Any, *inputs: object, **params: object) -> tuple:
        """Run prim's kernel and push the inputs' tangents through its JVP."""
        outs = super().bind(prim, *inputs, **params)
        tangents = [self.tangent(x) for x in inputs]
        if any([t is not None for t in tangents]):
            rule = self._rules.rule(prim, "jvp")
            if rule.dense_only:
                tangents = [dense(KERNEL_SESSION, t) for t in tangents]
            for o, t in zip(outs, rule.jvp(KERNEL_SESSION, tangents, inputs, outs, **params)):
                if t is not None and not any(o is x for x in inputs):
                    self.seed(o, t)
        return outs


composite.use_kernel_sessions(KERNEL_SESSION, TangentKernelSession, RecordingKernelSession)
