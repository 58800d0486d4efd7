"""The transforms of a runtime: vjp, grad, jvp, vjp_jvp and the stateful backward.

:class:`Transforms` is EagerRuntime's base class, written on the runtime's public methods
(``check_owned``, ``operand``, ``session``, ``tracing``, ``no_grad``, ``ad_context``). The
functional transforms return ordinary tensors, touch no grad slot, and differentiate again
(their sweeps run in a session of the runtime, recorded when it records); the stateful one
accumulates into the grad slots of the variables it reaches.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .engine import CpuEngine
from .errors import DTypeMismatch, InvalidArgument, NonScalarGrad, NotReachable, ShapeMismatch
from .structure import dense
from .tape import EagerTensor, ForwardTrace, TangentMemo, ancestors, reaching, reverse_sweep, tensor_key
from .tensor import Tensor


class Transforms:
    """vjp, grad, jvp and vjp_jvp (with their ``_optional`` forms), and ``accumulate_grads``."""

    __slots__ = ()

    # --- reverse mode -------------------------------------------------------------

    def vjp(self, engine: CpuEngine, out: EagerTensor, wrt: Any, cot: "Tensor | EagerTensor") -> Any:
        """Cotangent of ``wrt`` (a tensor or a sequence of them) for ``cot`` on ``out``."""
        return self._reverse("vjp", engine, out, wrt, cot, optional=False)

    def vjp_optional(self, engine: CpuEngine, out: EagerTensor, wrt: Any, cot: "Tensor | EagerTensor") -> Any:
        """As :meth:`vjp`, with None where ``wrt`` does not reach ``out``."""
        return self._reverse("vjp_optional", engine, out, wrt, cot, optional=True)

    def grad(self, engine: CpuEngine, out: EagerTensor, wrt: Any) -> Any:
        """d(out)/d(wrt) for a scalar ``out``."""
        return self._reverse("grad", engine, out, wrt, None, optional=False)

    def grad_optional(self, engine: CpuEngine, out: EagerTensor, wrt: Any) -> Any:
        """As :meth:`grad`, with None where ``wrt`` does not reach ``out``."""
        return self._reverse("grad_optional", engine, out, wrt, None, optional=True)

    def _reverse(self, op: str, engine: CpuEngine, out: Any, wrt: Any, cot: Any, optional: bool) -> Any:
        """The reverse sweep from ``out`` with cotangent ``cot`` (None: 1 for a scalar) to ``wrt``."""
        out = self.check_owned(op, out)
        targets, many = self._wrt_list(op, wrt)
        cot = self._like(op, "a cotangent", cot, out)
        with self.session(engine) as s:
            cts, met = reverse_sweep(s, self.ad_context, [(out, cot)], targets)
            results = self._swept(s, op, targets, cts, met, optional)
        return results if many else results[0]

    def accumulate_grads(self, out: EagerTensor, seed: Any, engine: CpuEngine | None) -> None:
        """The stateful reverse sweep of ``out.backward()`` (seed None) and ``out.backward_with(seed)``:
        slot = existing + incoming for every reachable variable."""
        op = "backward" if seed is None else "backward_with"
        out = self.check_owned(op, out)
        seed = self._like(op, "a seed", seed, out)
        if not out.is_tracked:
            raise NotReachable(op, "a tracked output (one that depends on a variable)", "a constant")
        with self.no_grad(), self.session(engine or CpuEngine.serial()) as s:
            cts, met = reverse_sweep(s, self.ad_context, [(out, seed)], None)
            for leaf, _ in met:
                ct = cts.get((leaf, 0))
                incoming = dense(s, ct).value().array if ct is not None else np.zeros(leaf.shape, leaf.dtype)
                leaf.grad = incoming if leaf.grad is None else leaf.grad + incoming

    # --- forward mode -------------------------------------------------------------

    def jvp(self, engine: CpuEngine, out: EagerTensor, wrt: Any, tan: Any, memo: TangentMemo | None = None
            ) -> EagerTensor:
        """Tangent of ``out`` for tangent ``tan`` of ``wrt`` (tensors and tangents may be sequences).

        ``memo``: an empty :class:`TangentMemo` keeps the tangents of every tensor on the way; a
        filled one lends them to this jvp (forward over reverse: the jvp of a step's pullback
        reuses the tangents of the step's own jvp).
        """
        return self._forward("jvp", engine, out, wrt, tan, False, memo)

    def jvp_optional(self, engine: CpuEngine, out: EagerTensor, wrt: Any, tan: Any, memo: TangentMemo | None = None
                     ) -> EagerTensor | None:
        """As :meth:`jvp`, with None where no ``wrt`` reaches ``out``."""
        return self._forward("jvp_optional", engine, out, wrt, tan, True, memo)

    def _forward(self, op: str, engine: CpuEngine, out: Any, wrt: Any, tan: Any, optional: bool, memo: Any) -> Any:
        out = self.check_owned(op, out)
        sources, many = self._wrt_list(op, wrt)
        tans = self._tangents_for(op, sources, many, tan)
        for w in sources:
            if not w.is_tracked:
                self._unreached(op, w, optional)
        seeds = [(w, t) for w, t in zip(sources, tans) if w.is_tracked]
        _check_memo(op, memo, seeds)
        with self.session(engine) as s:
            trace, reached = self._replayed(s, out, seeds, memo)
            if not reached:
                self._unreached(op, seeds[0][0] if seeds else sources[0], optional)
                return None
            result = trace.tangent(out)
            return dense(s, result) if result is not None else s.zeros(out.shape, out.dtype)

    def vjp_jvp(self, engine: CpuEngine, out: EagerTensor, wrt: Any, cot: "Tensor | EagerTensor", wrt_tangent: Any,
                cot_tangent: "Tensor | EagerTensor | None", memo: TangentMemo | None = None) -> tuple[Any, Any]:
        """(the vjp of ``cot`` through ``out`` to ``wrt``, its jvp) in one pass that records nothing.

        The jvp is along ``wrt_tangent`` (one per wrt) and ``cot_tangent`` (None: zero): the
        numbers of ``jvp`` of a recorded ``vjp``, without the recording and the second sweep.
        The tangents of the tensors between wrt and out are replayed first, or lent by
        ``memo`` (see :meth:`jvp`); then the pullback runs with the trace active, so that
        every op it runs, in any session, carries its tangent.
        """
        op = "vjp_jvp"
        out = self.check_owned(op, out)
        targets, many = self._wrt_list(op, wrt)
        cot = self._like(op, "a cotangent", cot, out)
        tans = self._tangents_for(op, targets, many, wrt_tangent)
        seeds = [(w, t) for w, t in zip(targets, tans) if w.is_tracked]
        cot_dot = None if cot_tangent is None else self._like(op, "a cotangent's tangent", cot_tangent, out)
        _check_memo(op, memo, seeds)
        with self.session(engine) as s:
            trace, _ = self._replayed(s, out, seeds, memo)
            if cot_dot is not None:
                trace.seed(s, cot, cot_dot)
            with self.tracing(trace):
                cts, met = reverse_sweep(s, self.ad_context, [(out, cot)], targets)
                results = self._swept(s, op, targets, cts, met, False)
            results_dot = []
            for r in results:
                t = trace.tangent(r)
                results_dot.append(dense(s, t) if t is not None else s.zeros(r.shape, r.dtype))
        return (results, results_dot) if many else (results[0], results_dot[0])

    def _replayed(self, s: Any, out: EagerTensor, seeds: list, memo: TangentMemo | None) -> tuple[ForwardTrace, set]:
        """The trace of the tangents between ``seeds`` and ``out`` (replayed, or lent by ``memo``), and
        the seeded tensors that reach ``out``. An empty memo is filled."""
        trace = ForwardTrace(self.ad_context, memo, [w for w, _ in seeds])
        for w, t in seeds:
            trace.seed(s, w, t)
        nodes = ancestors([out])
        trace.replay(s, nodes)
        if memo is not None and not memo.filled:
            memo.fill(seeds, trace, nodes)
        return trace, reaching([tensor_key(w) for w, _ in seeds], nodes, [out])

    # --- arguments --------------------------------------------------------------------

    def _like(self, op: str, what: str, t: object, like: EagerTensor) -> EagerTensor:
        """A seed, cotangent or tangent: a Tensor or EagerTensor of ``like``'s shape and dtype; None for
        a seed or cotangent means 1, for a scalar ``like`` only."""
        if t is None:
            if math.prod(like.shape) != 1:
                raise NonScalarGrad(op, "a scalar output (one element)", f"shape {list(like.shape)}")
            one = np.ones(like.shape, dtype=like.dtype)
            one.setflags(write=False)  # as every kernel's output
            return EagerTensor(self, one, like.aval)
        x = self.operand(op, t)
        if x.shape != like.shape:
            raise ShapeMismatch(op, f"{what} of shape {list(like.shape)}", f"shape {list(x.shape)}")
        if x.dtype != like.dtype:
            raise DTypeMismatch(op, f"{what} of dtype {like.dtype}", str(x.dtype))
        return x

    def _wrt_list(self, op: str, wrt: Any) -> tuple[list[EagerTensor], bool]:
        many = isinstance(wrt, (list, tuple))
        items = list(wrt) if many else [wrt]
        if many and not items:
            raise InvalidArgument(op, "at least one tensor in wrt", "an empty sequence")
        return [self.check_owned(op, w) for w in items], many

    def _tangents_for(self, op: str, sources: list[EagerTensor], many: bool, tan: Any) -> list[EagerTensor]:
        """The tangents given for ``sources`` (a sequence when ``many``), one each, checked."""
        tans = list(tan) if many else [tan]
        if len(tans) != len(sources):
            raise InvalidArgument(op, f"{len(sources)} tangents (one per wrt)", f"{len(tans)}")
        if any(t is None for t in tans):
            raise InvalidArgument(op, "a tangent per wrt (a Tensor or an EagerTensor)", "None")
        return [self._like(op, "a tangent", t, w) for t, w in zip(tans, sources)]

    @staticmethod
    def _unreached(op: str, w: EagerTensor, optional: bool) -> None:
        if not optional:
            got = "a constant (it has no slot)" if not w.is_tracked else "a tensor the output does not depend on"
            raise NotReachable(op, "wrt that reaches the output", got)

    def _swept(self, s: Any, op: str, targets: list, cts: dict, met: set, optional: bool) -> list:
        """Each target's cotangent from a reverse sweep: dense, zeros where none flowed, None if unreached."""
        results: list[EagerTensor | None] = []
        for w in targets:
            key = tensor_key(w)
            if key not in met:  # an untracked target's key is never met
                self._unreached(op, w, optional)
                results.append(None)
            elif key in cts:
                results.append(dense(s, cts[key]))
            else:
                results.append(s.zeros(w.shape, w.dtype))
        return results


def _check_memo(op: str, memo: Any, seeds: list) -> None:
    """None, or a TangentMemo that holds for ``seeds``; else InvalidArgument."""
    if memo is not None:
        if not isinstance(memo, TangentMemo):
            raise InvalidArgument(op, "memo: a TangentMemo", type(memo).__name__)
        memo.check(op, seeds)
