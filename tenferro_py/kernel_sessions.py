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

import weakref
from typing import Any, Sequence

import numpy as np

from . import composite
from .opset import OpSet
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
    """A KernelSession that writes down the ops it runs (which kernel, on which earlier arrays), for a
    shape-determined composite's :class:`~tenferro_py.composite.Replay`. An array's id names its slot
    while the array lives (a finalizer forgets it when it goes, so a later array with the same id is
    not taken for it); what cannot be watched so (a Python number) is kept alive."""

    __slots__ = ("_count", "_size", "_kept", "_slots", "_constants", "_steps", "_replayable")

    def __init__(self, inputs: Sequence[Any]):
        self._size = 0
        self._kept: list = []
        self._slots: dict[int, int] = {}
        for x in inputs:
            self._keep(x)
        self._count = len(inputs)
        self._constants: list[tuple[int, Any]] = []
        self._steps: list[tuple] = []
        self._replayable = True

    def _keep(self, x: Any) -> int:
        slot, self._size = self._size, self._size + 1
        self._slots[id(x)] = slot
        try:
            weakref.finalize(x, self._slots.pop, id(x), None).atexit = False
        except TypeError:  # not weakly referable
            self._kept.append(x)
        return slot

    def _slot(self, x: Any) -> int | None:
        """x's slot; a new constant for a Python number; None (and nothing to replay) for an array or
        NumPy scalar that no op and no constant made: it may have come from values."""
        found = self._slots.get(id(x))
        if found is None and not isinstance(x, (np.ndarray, np.generic, Structured)):
            found = self._keep(x)
            self._constants.append((found, x))
        return found

    def bind(self, prim: Any, *inputs: object, **params: object) -> tuple:
        """Run prim's kernel, and write it down."""
        outs = super().bind(prim, *inputs, **params)
        slots = [self._slot(x) for x in inputs]
        if None in slots or any([isinstance(o, Structured) for o in outs]):
            self._replayable = False
        if self._replayable:
            self._steps.append((prim.impl, slots, params, self._size, len(outs)))
            for o in outs:
                self._keep(o)
        return outs

    def constant_from(self, t: Any) -> Any:
        """t's array, written down as a constant unless an op made it."""
        x = super().constant_from(t)
        if id(x) not in self._slots:
            self._constants.append((self._keep(x), x))
        return x

    def replay(self, outputs: Sequence[Any]) -> composite.Replay | None:
        """The ops written down, as a Replay giving ``outputs``; None if they cannot be replayed."""
        slots = [self._slots.get(id(o)) for o in outputs]
        if not self._replayable or None in slots:
            return None
        return composite.Replay(self._count, self._size, self._constants, self._steps, slots)


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
