"""EagerRuntime: variables, sessions, modes, and the one hook through which sessions hand it their
ops (its transforms are :class:`~tenferro_py.transforms.Transforms`; its rules an
:class:`~tenferro_py.ad_context.AdContext`)."""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

from .ad_context import AdContext
from .engine import CpuEngine, resolve
from .errors import InvalidArgument, RuntimeMismatch
from .replay import Recorder
from .session import EagerSession
from .transforms import Transforms
from .structure import dense
from .tape import EagerTensor, ForwardTrace, Leaf, op_outputs, reverse_sweep, tensor_key
from .tensor import Aval, Tensor

R = TypeVar("R")

#: The innermost session running in this thread (or context), for code that does not pass one
#: along: the NumPy-style front end, tenferro_py.numpy.
_CURRENT_SESSION: contextvars.ContextVar[EagerSession | None] = contextvars.ContextVar("tenferro_session",
                                                                                       default=None)


def current_session() -> EagerSession | None:
    """The innermost session of ``with_eager_session`` (or of a transform) now running here, or None."""
    return _CURRENT_SESSION.get()


class GradMode:
    """A guard that sets whether a runtime records, from when it is made until it is closed.

    ``with rt.no_grad():`` closes it at the end of the block. As with tenferro's guards,
    ``guard = rt.no_grad()`` holds until the guard is dropped (or ``guard.close()``).
    Guards may close in any order: the newest open one decides.
    """

    __slots__ = ("_rt", "_token", "__weakref__")

    def __init__(self, rt: "EagerRuntime", recording: bool):
        self._rt = rt
        self._token: tuple | None = (object(), recording)
        rt._modes.append(self._token)
        rt._recording = recording

    def close(self) -> None:
        """End this guard (once; later calls do nothing)."""
        token = self._token
        if token is not None:
            self._token = None
            rt = self._rt
            rt._modes.remove(token)
            rt._recording = rt._modes[-1][1] if rt._modes else True

    def __enter__(self) -> "GradMode":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class EagerRuntime(Transforms):
    """Owns variables, their grad slots and the tape; runs sessions and transforms.

    A runtime is used from one thread at a time.
    """

    __slots__ = ("_ad", "_leaves", "_modes", "_recording", "_traces", "_recorder", "_placeholders", "__weakref__")

    def __init__(self, ad_context: AdContext | None = None):
        if ad_context is not None and not isinstance(ad_context, AdContext):
            raise InvalidArgument("EagerRuntime", "an AdContext", type(ad_context).__name__)
        self._ad = ad_context if ad_context is not None else AdContext()
        self._leaves: "weakref.WeakSet[Leaf]" = weakref.WeakSet()
        self._modes: list[tuple] = []  # the open grad-mode guards' tokens, oldest first
        self._recording = True
        self._traces: list[ForwardTrace] = []  # forward traces that every op is pushed through
        self._recorder: Recorder | None = None  # writes down every kernel run, while a program is recorded
        self._placeholders: dict[int, Any] | None = None  # id -> array: the zero values of a transpose_linear

    @classmethod
    def with_ad_context(cls, ad: AdContext) -> "EagerRuntime":
        """A runtime with the rules and ε of ad, as Rust's ``EagerRuntime::with_ad_context``."""
        return cls(ad)

    @property
    def ad_context(self) -> AdContext:
        """The runtime's AD context."""
        return self._ad

    @property
    def recording(self) -> bool:
        """False inside ``no_grad()``: op results are then constants."""
        return self._recording

    @property
    def differentiating(self) -> bool:
        """Whether something will differentiate the ops run now: the tape records them, or a forward
        trace carries their tangents (a rule may then take a route that does not differentiate again)."""
        return self._recording or bool(self._traces)

    # --- the one hook between sessions and the tape ---------------------------------------

    def process_primitive(self, s: EagerSession, prim: Any, inputs: tuple, params: dict) -> tuple:
        """Run one primitive for session ``s`` (its inputs this runtime's tensors): its kernel on s's
        engine, a node on the tape when an input is tracked and the runtime records, and its
        tangents through the active forward traces, newest first."""
        in_avals = tuple([x.aval for x in inputs])
        avals = prim.abstract(*in_avals, **params)
        if self._placeholders is not None and any([id(x.payload) in self._placeholders for x in inputs]):
            return self._placeholder_outputs(s, prim, params, inputs, avals)
        if self._traces:
            joint = self._values_with_tangents(s, prim, params, inputs, avals)
            if joint is not None:
                return joint
        args = [x.payload for x in inputs]
        try:
            values = s.engine.run(prim, args, params, in_avals, avals)
        except BaseException:  # caught, it may steer the program: the values decided what ran
            if self._recorder is not None:
                self._recorder.taint(f"a kernel that raised ({prim.name})")
            raise
        if self._recorder is not None:
            self._recorder.step(prim.impl, params, args, values)
        outs = op_outputs(self, prim, params, inputs, values, avals, self._recording)
        if self._traces:
            self._carry(s, prim, params, inputs, outs)
        return outs

    # --- recording a program, and reading values into Python ------------------------

    @property
    def recorder(self) -> Recorder | None:
        """The recorder writing down this runtime's kernels (:meth:`record`), or None."""
        return self._recorder

    @contextlib.contextmanager
    def record(self, recorder: Recorder | None) -> Iterator[Recorder | None]:
        """``with rt.record(Recorder()):`` writes down every kernel run meanwhile (at width 1: a wider
        engine's kernels run in an order of their own, and a forward trace's joint rules take another
        route, so both leave nothing to replay); ``rt.record(None)`` records nothing."""
        if recorder is None:
            yield None
            return
        if self._recorder is not None:
            raise InvalidArgument("record", "one recorder at a time", "a second one")
        self._recorder = recorder
        try:
            yield recorder
        finally:
            self._recorder = None

    def observe(self, fn: Callable[..., R], *tensors: EagerTensor) -> R:
        """``fn`` of the tensors' values: a read into Python whose result steers what runs next (an
        argmax, a comparison, a branch's condition). A recording replays it as a guard, which stops
        the replay where the result differs; ``fn`` must be a function of the arrays alone."""
        arrays = [resolve(t.payload) for t in tensors]
        result = fn(*arrays)
        if self._recorder is not None:
            self._recorder.guard(fn, arrays, result)
        return result

    # --- values -------------------------------------------------------------

    def _host_value(self, op: str, t: object) -> tuple[Any, Aval]:
        """(value, aval) of a Tensor or of an EagerTensor of this runtime (its value may be pending)."""
        if isinstance(t, Tensor):
            return t.array, Aval(t.array.shape, t.array.dtype)
        if isinstance(t, EagerTensor):
            self.check_owned(op, t)
            return t.payload, t.aval
        raise InvalidArgument(op, "a Tensor or an EagerTensor", type(t).__name__)

    def variable_from(self, t: "Tensor | EagerTensor") -> EagerTensor:
        """A tracked leaf with a grad slot; from an EagerTensor, a fresh leaf (the tape is cut there).

        While a forward trace is active (inside ``vjp_jvp``) the leaf keeps the tangent of the
        tensor it was made from: it holds the same value.
        """
        value, aval = self._host_value("variable_from", t)
        leaf = Leaf(aval.shape, aval.dtype)
        self._leaves.add(leaf)
        x = EagerTensor(self, value, aval, leaf)
        if self._traces and isinstance(t, EagerTensor):
            for trace in self._traces:
                trace.alias(x, t)
        return x

    def constant_from(self, t: "Tensor | EagerTensor") -> EagerTensor:
        """An untracked tensor."""
        return EagerTensor(self, *self._host_value("constant_from", t))

    def operand(self, op: str, x: object) -> EagerTensor:
        """x as an EagerTensor of this runtime: a Tensor becomes a constant; else a clear error."""
        return self.constant_from(x) if isinstance(x, Tensor) else self.check_owned(op, x)

    def check_owned(self, op: str, x: object) -> EagerTensor:
        """x as an EagerTensor of this runtime, or a clear error."""
        if not isinstance(x, EagerTensor):
            raise InvalidArgument(op, "an EagerTensor", type(x).__name__)
        if x.runtime is not self:
            raise RuntimeMismatch(op, "tensors of this runtime", "a tensor of another EagerRuntime")
        return x

    # --- sessions and modes -------------------------------------------------------

    def with_eager_session(self, engine: CpuEngine, f: Callable[[EagerSession], R]) -> R:
        """Run ``f(session)``: its ops run on ``engine`` and are recorded; all of its kernels are done when it returns."""
        with self.session(engine) as s:
            return f(s)

    @contextlib.contextmanager
    def session(self, engine: CpuEngine) -> Iterator[EagerSession]:
        """``with rt.session(engine) as s:``, the block form of :meth:`with_eager_session`."""
        if not isinstance(engine, CpuEngine):
            raise InvalidArgument("EagerRuntime", "a CpuEngine", type(engine).__name__)
        with engine.active():
            session = EagerSession(self, engine)
            token = _CURRENT_SESSION.set(session)
            try:
                yield session
            finally:
                _CURRENT_SESSION.reset(token)
                session.end()

    def no_grad(self) -> GradMode:
        """A guard within which op results are constants (nothing is recorded)."""
        return GradMode(self, recording=False)

    def enable_grad(self) -> GradMode:
        """A guard within which ops are recorded even inside ``no_grad()``: for rules that build a graph of their own."""
        return GradMode(self, recording=True)

    def clear_grads(self) -> None:
        """Empty the grad slot of every variable of this runtime."""
        for leaf in list(self._leaves):
            leaf.grad = None

    @contextlib.contextmanager
    def tracing(self, trace: ForwardTrace) -> Iterator[None]:
        """Push every op of every session through ``trace`` meanwhile (the newest trace first)."""
        self._traces.append(trace)
        try:
            yield
        finally:
            self._traces.remove(trace)

    def _carry(self, s: EagerSession, prim: Any, params: dict, inputs: tuple, outputs: tuple) -> None:
        """Push one op through the active traces, newest first; each runs its rule with only older traces active.

        So an older trace also differentiates a newer one's tangent ops (forward over forward),
        and no trace sees its own rule's ops.
        """
        traces = self._traces
        try:
            for k in reversed(range(len(traces))):
                self._traces = traces[:k]
                traces[k].push(s, prim, params, inputs, outputs)
        finally:
            self._traces = traces

    def _values_with_tangents(self, s: EagerSession, prim: Any, params: dict, inputs: tuple, avals: tuple
                              ) -> tuple | None:
        """The op's outputs with their tangents from its rule's ``values_and_jvp``, where the newest
        trace carries a tangent of an input and the rule takes it (it declines where anything
        else differentiates the op: the tape, an older trace); else None."""
        rule = self._ad.get(prim.name)
        if rule is None or rule.values_and_jvp is None:
            return None
        traces = self._traces
        tangents = [traces[-1].tangent(x) for x in inputs]
        if all(t is None for t in tangents):
            return None
        if rule.dense_only:
            tangents = [dense(s, t) for t in tangents]
        self._traces = traces[:-1]
        try:
            joint = rule.values_and_jvp(s, tangents, inputs, avals, **params)
        finally:
            self._traces = traces
        if joint is None:
            return None
        values, dots = joint
        outs = op_outputs(self, prim, params, inputs, tuple(v.payload for v in values), avals, self._recording)
        for o, t in zip(outs, dots):
            traces[-1].seed(s, o, t)
        return outs

    def transpose_linear(self, s: EagerSession, f: Callable[[list], Sequence], primals: Sequence[Any],
                         cotangents: Sequence[Any], needs: Sequence[bool]) -> tuple:
        """The transpose of a linear map f (tangents like ``primals`` -> tangents of some outputs) at
        ``cotangents``: the VJP of f at zero tangents. While f runs, every value that depends on those
        zeros is zero (f is linear), so such an op is recorded on a zero placeholder without running
        its kernel: only the transposes compute."""
        zeros = [self.constant_from(Tensor.adopt(_zeros(p.aval))) for p in primals]
        return self.vjp_of(s, f, zeros, cotangents, needs, placeholders=True)

    def _placeholder_outputs(self, s: EagerSession, prim: Any, params: dict, inputs: tuple, avals: tuple) -> tuple:
        """An op of a transposed linear map on a placeholder: zeros, recorded (and carried) as if run."""
        values = tuple([_zeros(a) for a in avals])
        self._placeholders.update({id(v): v for v in values})
        outs = op_outputs(self, prim, params, inputs, values, avals, self._recording)
        if self._traces:
            self._carry(s, prim, params, inputs, outs)
        return outs

    def jvp_of(self, s: EagerSession, f: Callable[[list], Sequence], primals: Sequence[Any],
               tangents: Sequence[Any]) -> tuple:
        """The tangents of ``f(primals)``'s outputs along ``tangents`` (None: zero): forward mode through
        f's ops as they run in session ``s`` (a trace of its own, the newest)."""
        trace = ForwardTrace(self._ad)
        seeded: set = set()
        for p, t in zip(primals, tangents):
            if t is not None and tensor_key(p) not in seeded:  # one tensor in two slots has one tangent
                seeded.add(tensor_key(p))
                trace.seed(s, p, t)
        with self.tracing(trace):
            outs = f(list(primals))
        return tuple(trace.tangent(o) for o in outs)

    def vjp_of(self, s: EagerSession, f: Callable[[list], Sequence], primals: Sequence[Any],
               cotangents: Sequence[Any], needs: Sequence[bool], placeholders: bool = False) -> tuple:
        """The cotangents of ``primals`` for ``cotangents`` of ``f(primals)``'s outputs (None: zero), by
        reverse mode through f's ops run in session ``s``, recorded even under ``no_grad``; None
        where not ``needs``.

        Each primal enters f as a tensor of its own, so that each gets the partial derivative
        even where one primal depends on another: a tracked one as a recorded copy (the result
        stays differentiable with respect to what it came from), an untracked one as a fresh leaf.
        """
        with self.enable_grad():
            xs = [self.variable_from(p) if not p.is_tracked else s.scale_real(p, 1.0) for p in primals]
            outer = self._placeholders
            if placeholders:  # (transpose_linear) the primals are zeros that f maps linearly
                self._placeholders = {**(outer or {}), **{id(x.payload): x.payload for x in xs}}
            try:
                outs = f(xs)
            finally:
                self._placeholders = outer
        roots = [(o, ct) for o, ct in zip(outs, cotangents) if ct is not None]
        wanted = [x for x, need in zip(xs, needs) if need]
        if not roots or not wanted:
            return tuple(None for _ in primals)
        cts, _ = reverse_sweep(s, self._ad, roots, wanted)
        return tuple(dense(s, cts[tensor_key(x)]) if need and tensor_key(x) in cts else None
                     for x, need in zip(xs, needs))


def _zeros(aval: Aval) -> np.ndarray:
    """A read-only array of zeros of aval's shape and dtype that holds one element: a placeholder."""
    return np.broadcast_to(np.zeros((), aval.dtype), aval.shape)
