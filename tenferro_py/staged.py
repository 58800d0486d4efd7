"""Staged programs: a chain of stages, each differentiated alone, their pullbacks chained.

Tensor-network codes (TRG, HOTRG, CTMRG) compute a scalar objective

    x₀ = source(θ),   (x_{i+1}, side_i) = stage_i(x_i),   L(θ) = Σ_i c_i side_i + c_out readout(x_n)

where side_i is, say, ln‖x_i‖ and c_i the fraction of sites it stands for.
:class:`Program` runs each stage on a fresh leaf made from x_i (``variable_from``
cuts the trace there), so no graph is longer than one stage, and chains the
stages by hand:

* ``value``: L alone, nothing recorded.
* ``value_and_grad``, reverse: x̄_n = c_out ∂readout/∂x_n; per stage, newest first,
  x̄_i = vjp(x_{i+1}; x̄_{i+1}) + vjp(side_i; c_i); then θ̄ = vjp(x₀; x̄₀).
* ``value_and_jvp``, forward: ẋ_{i+1} = jvp(x_{i+1}; ẋ_i), and L̇ sums the sides'
  tangents with their coefficients. It keeps no stage behind it, so its memory does
  not grow with the chain.
* ``value_grad_and_curvature``, forward over reverse: the reverse sweep with, per
  stage, the jvp of its pullbacks along (ẋ_i, tangent of the running cotangent),
  taken in the same pass (``vjp_jvp``, the stage's forward tangents lent by its
  ``TangentMemo``), which gives the tangent of the next cotangent; its end is H·θ̇
  (d²L/dθ² for a scalar θ and θ̇ = 1).

The reverse sweeps keep every stage's graph (its residuals, the SVDs say) from
the forward, unless ``checkpoint`` says otherwise: ``"stage"`` keeps only each
stage's input and re-runs the stage just before its pullback; ``"sqrt"`` keeps
the input of every ⌈√L⌉-th stage and re-runs one segment of stages at a time.
Stages are deterministic, so every mode gives the same bits.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, NamedTuple, Sequence, TypeVar

import numpy as np

from .engine import CpuEngine
from .errors import InvalidArgument
from .replay import Recorder
from .runtime import EagerRuntime
from .session import EagerSession
from .tape import EagerTensor, TangentMemo
from .tensor import Tensor, is_real_number
from .traced import Traced

SourceFn = Callable[[EagerSession, EagerTensor], EagerTensor]
StageFn = Callable[[EagerSession, EagerTensor], "tuple[EagerTensor, EagerTensor | None]"]
ReadoutFn = Callable[[EagerSession, EagerTensor], EagerTensor]

CHECKPOINTS = (None, "stage", "sqrt")
State = TypeVar("State")


class Stage(NamedTuple):
    """``fn(s, x) -> (x_next, side)`` and ``coef``, the weight of the scalar ``side`` in L.

    ``side`` may be None (the stage adds nothing to L; ``coef`` is then unused).
    """

    fn: StageFn
    coef: float = 0.0


class ValueAndGrad(NamedTuple):
    value: float
    grad: Tensor


class ValueAndJvp(NamedTuple):
    value: float
    jvp: float


class ValueGradAndCurvature(NamedTuple):
    value: float
    grad: Tensor
    curvature: Tensor


class _StageRun(NamedTuple):
    """One stage as run: x_i as a fresh leaf, its outputs, the tangents ẋ_i, ẋ_{i+1} (or None),
    and the tangents of the stage's tensors, which the jvp of its pullback reuses."""

    leaf: EagerTensor
    out: EagerTensor
    side: EagerTensor | None
    tangent: EagerTensor | None
    out_tangent: EagerTensor | None
    memo: TangentMemo | None


class _Segment(NamedTuple):
    """Consecutive stages: their input (and its tangent), and their runs when kept."""

    stages: range
    x: EagerTensor
    tangent: EagerTensor | None
    runs: list[_StageRun] | None


class _Forward(NamedTuple):
    sides: list[tuple[float, EagerTensor]]  # (coef, side_i) of the stages with a side, in order
    x0: EagerTensor
    segments: list[_Segment]
    last: EagerTensor
    readout: EagerTensor
    last_tangent: EagerTensor | None


def _setup(runtime: EagerRuntime | None, engine: CpuEngine | None) -> tuple[EagerRuntime, CpuEngine]:
    return runtime if runtime is not None else EagerRuntime(), engine if engine is not None else CpuEngine.serial()


def _as_tensor(op: str, what: str, x: object) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if is_real_number(x):
        return Tensor.scalar(float(x))
    raise InvalidArgument(op, f"{what}: a Tensor or a real number", type(x).__name__)


def _coef(op: str, what: str, c: object) -> float:
    if not (is_real_number(c) and math.isfinite(c)):
        raise InvalidArgument(op, f"{what}: a finite real number", repr(c))
    return float(c)


def _name(fn: object) -> str:
    return getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", None) or repr(fn)


def _checked_tensor(what: str, fn: object, out: object, scalar: bool = False) -> EagerTensor:
    """The source's x₀ or the readout's value: an EagerTensor (of one element for the readout)."""
    if not isinstance(out, EagerTensor) or (scalar and math.prod(out.shape) != 1):
        got = f"shape {list(out.shape)}" if isinstance(out, EagerTensor) else type(out).__name__
        expected = "a scalar EagerTensor" if scalar else "an EagerTensor"
        raise InvalidArgument(f"staged.Program {what} ({_name(fn)})", expected, got)
    return out


def _checked_stage_output(i: int, fn: object, out: object) -> tuple[EagerTensor, EagerTensor | None]:
    """A stage's (x_next, side): a tensor, and a one-element tensor or None."""
    what = f"staged.Program stage {i} ({_name(fn)})"
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        got = f"one {type(out).__name__}" if not isinstance(out, (tuple, list)) else f"{len(out)} values"
        raise InvalidArgument(what, "fn(s, x) to return (x_next, side), side a scalar tensor or None", got)
    x_next, side = out
    if not isinstance(x_next, EagerTensor):
        raise InvalidArgument(what, "x_next an EagerTensor", type(x_next).__name__)
    if side is not None and not (isinstance(side, EagerTensor) and math.prod(side.shape) == 1):
        got = f"shape {list(side.shape)}" if isinstance(side, EagerTensor) else type(side).__name__
        raise InvalidArgument(what, "side a scalar EagerTensor or None", got)
    return x_next, side


def _scalar_like(c: float, x: EagerTensor) -> Tensor:
    return Tensor.adopt(np.array(c, dtype=x.dtype))


class Program:
    """A staged program: ``source(s, θ) -> x₀``, ``stages``, ``readout(s, x_n) -> scalar``.

    L(θ) = Σ_i stages[i].coef · side_i + readout_coef · readout(x_n). Stage
    functions must be deterministic (checkpointing re-runs them). Methods take
    θ as a Tensor or a number, and ``engine`` / ``runtime`` (default: a serial
    engine and a runtime with every rule of the library).
    """

    __slots__ = ("source", "stages", "readout", "readout_coef", "_traced")

    def __init__(self, source: SourceFn, stages: Sequence[Stage], readout: ReadoutFn, readout_coef: float = 1.0):
        op = "staged.Program"
        if not callable(source) or not callable(readout):
            got = f"{type(source).__name__}, {type(readout).__name__}"
            raise InvalidArgument(op, "callable source and readout", got)
        checked = []
        for i, st in enumerate(stages):
            if not (isinstance(st, tuple) and len(st) == 2 and callable(st[0])):
                raise InvalidArgument(op, f"stages[{i}]: a Stage(fn, coef)", repr(st))
            checked.append(Stage(st[0], _coef(op, f"stages[{i}].coef", st[1])))
        self.source = source
        self.stages: tuple[Stage, ...] = tuple(checked)
        self.readout = readout
        self.readout_coef = _coef(op, "readout_coef", readout_coef)
        self._traced: tuple | None = None  # (the functions, their Traced, the sides' coefficients by key)

    def __len__(self) -> int:
        return len(self.stages)

    @property
    def traced(self) -> Traced | None:
        """The recorded programs of :meth:`value_and_grad` (their counts and ``why_not``), None before its
        first replayable call."""
        return self._traced[1] if self._traced is not None else None

    # --- the value and the three sweeps -------------------------------------------------

    def value(
        self, theta: "Tensor | float", *, engine: CpuEngine | None = None, runtime: EagerRuntime | None = None
    ) -> float:
        """L alone: the forward with nothing recorded."""
        rt, eng = _setup(runtime, engine)
        with rt.no_grad():
            source_input = rt.constant_from(_as_tensor("Program.value", "theta", theta))
            return self._value_of(self._forward(rt, eng, source_input, None, max(len(self.stages), 1)))

    def value_and_grad(
        self, theta: "Tensor | float", *, engine: CpuEngine | None = None, runtime: EagerRuntime | None = None,
        checkpoint: str | None = None, replay: bool = True,
    ) -> ValueAndGrad:
        """(L, dL/dθ) by the staged reverse sweep: per stage two vjps, summed.

        On a serial engine and a runtime of its own, calls with θ of the same shape and dtype
        replay the kernels that two agreeing calls recorded, bit for bit, wherever that is safe
        (docs/traced.md); ``replay=False`` runs every call for real."""
        op = "Program.value_and_grad"
        t, segment_length = _as_tensor(op, "theta", theta), self._segment_length(op, checkpoint)
        if not (replay and runtime is None and (engine is None or engine.width == 1)):
            return self._value_and_grad(t, engine, runtime, segment_length, None)[0]
        functions = (self.source, *[st.fn for st in self.stages], self.readout)
        if self._traced is None or self._traced[0] != functions:
            self._traced = (functions, Traced(functions), {})
        traced, side_coefs = self._traced[1:]
        key = (checkpoint, tuple(st.coef for st in self.stages), self.readout_coef, t.shape, t.dtype.str,
               t.array.strides)

        def run(recorder: Recorder | None) -> tuple[ValueAndGrad, list]:
            result, outputs, side_coefs[key] = self._value_and_grad(t, engine, None, segment_length, recorder)
            return result, outputs

        def finish(arrays: Sequence[np.ndarray]) -> ValueAndGrad:
            sides, readout, grad = arrays[:-2], arrays[-2], arrays[-1]
            return ValueAndGrad(self._total([a.item() for a in sides], readout.item(), side_coefs[key]), Tensor(grad))

        return traced.call(key, [t.array], run, finish)

    def _value_and_grad(self, t: Tensor, engine: CpuEngine | None, runtime: EagerRuntime | None,
                        segment_length: int | None, recorder: Recorder | None) -> tuple[ValueAndGrad, list, list]:
        """(L, dL/dθ) as run for real (its kernels written down by ``recorder``, if any), the arrays a
        replay gives (the sides, the readout, the gradient), and the sides' coefficients."""
        rt, eng = _setup(runtime, engine)
        with rt.record(recorder):
            param = rt.variable_from(t)
            fw = self._forward(rt, eng, param, None, segment_length)

            def pull(i: int, run: _StageRun, ct: EagerTensor) -> EagerTensor:
                with rt.no_grad():
                    return self._pullback(rt, eng, i, run, ct)

            with rt.no_grad():
                ct = rt.vjp(eng, fw.readout, fw.last, _scalar_like(self.readout_coef, fw.readout))
            ct = self._fold_back(rt, eng, fw, ct, pull)
            with rt.no_grad():
                grad = rt.vjp(eng, fw.x0, param, ct)
        outputs = [side.payload for _, side in fw.sides] + [fw.readout.payload, grad.payload]
        return ValueAndGrad(self._value_of(fw), grad.value()), outputs, [c for c, _ in fw.sides]

    def value_and_jvp(
        self, theta: "Tensor | float", direction: "Tensor | float | None" = None, *,
        engine: CpuEngine | None = None, runtime: EagerRuntime | None = None,
    ) -> ValueAndJvp:
        """(L, dL/dθ · θ̇) by forward mode (θ̇ = ``direction``, default ones): no stage is kept."""
        rt, eng = _setup(runtime, engine)
        param, seed = self._seeds(rt, "Program.value_and_jvp", theta, direction)
        x = self._source(rt, eng, param)
        with rt.no_grad():
            tangent: EagerTensor | None = rt.jvp(eng, x, param, seed)
        value = dvalue = 0.0
        for i, stage in enumerate(self.stages):
            run = self._run_stage(rt, eng, i, x, tangent, record=True)
            if run.side is not None:
                value += stage.coef * run.side.item()
                with rt.no_grad():
                    dvalue += stage.coef * rt.jvp(eng, run.side, run.leaf, tangent).item()
            x, tangent = run.out, run.out_tangent
        last = rt.variable_from(x)
        out = self._readout(rt, eng, last)
        with rt.no_grad():
            dvalue += self.readout_coef * rt.jvp(eng, out, last, tangent).item()
        return ValueAndJvp(value + self.readout_coef * out.item(), dvalue)

    def value_grad_and_curvature(
        self, theta: "Tensor | float", direction: "Tensor | float | None" = None, *,
        engine: CpuEngine | None = None, runtime: EagerRuntime | None = None, checkpoint: str | None = None,
    ) -> ValueGradAndCurvature:
        """(L, dL/dθ, H·θ̇) by forward over reverse (θ̇ = ``direction``, default ones).

        No finite difference, and no graph longer than one stage (or segment).
        """
        op = "Program.value_grad_and_curvature"
        rt, eng = _setup(runtime, engine)
        param, seed = self._seeds(rt, op, theta, direction)
        fw = self._forward(rt, eng, param, seed, self._segment_length(op, checkpoint))

        def pull(i: int, run: _StageRun, cts: tuple[EagerTensor, EagerTensor]) -> tuple[EagerTensor, EagerTensor]:
            """(x̄_{i+1}, its tangent) -> (x̄_i, its tangent): the stage's pullbacks and their jvps, one pass each."""
            (ct, ct_dot), memo = cts, run.memo
            with rt.no_grad():
                through_x, through_x_dot = rt.vjp_jvp(eng, run.out, run.leaf, ct, run.tangent, ct_dot, memo=memo)
                if run.side is None:
                    return through_x, through_x_dot
                coef = _scalar_like(self.stages[i].coef, run.side)
                through_side, through_side_dot = rt.vjp_jvp(eng, run.side, run.leaf, coef, run.tangent, None, memo=memo)
                return rt.with_eager_session(
                    eng, lambda s: (s.add(through_x, through_side), s.add(through_x_dot, through_side_dot))
                )

        with rt.no_grad():
            coef = _scalar_like(self.readout_coef, fw.readout)
            cts = rt.vjp_jvp(eng, fw.readout, fw.last, coef, fw.last_tangent, None)
        ct, ct_dot = self._fold_back(rt, eng, fw, cts, pull)
        with rt.no_grad():
            grad, curvature = rt.vjp_jvp(eng, fw.x0, param, ct, seed, ct_dot)
        return ValueGradAndCurvature(self._value_of(fw), grad.value(), curvature.value())

    # --- pieces -------------------------------------------------------------------------

    def _seeds(self, rt: EagerRuntime, op: str, theta: object, direction: object) -> tuple[EagerTensor, EagerTensor]:
        """θ as a variable and its tangent θ̇ (ones by default) as a constant of θ's shape."""
        param = rt.variable_from(_as_tensor(op, "theta", theta))
        if direction is None:
            return param, rt.constant_from(Tensor.adopt(np.ones(param.shape, param.dtype)))
        seed = _as_tensor(op, "direction", direction)
        if seed.shape != param.shape or seed.dtype != param.dtype:
            raise InvalidArgument(
                op, f"direction of theta's shape {list(param.shape)} and dtype {param.dtype}",
                f"shape {list(seed.shape)}, dtype {seed.dtype}",
            )
        return param, rt.constant_from(seed)

    def _segment_length(self, op: str, checkpoint: object) -> int | None:
        """Stages per recomputed segment; None keeps every stage's graph from the forward."""
        if checkpoint not in CHECKPOINTS:
            raise InvalidArgument(op, "checkpoint None, 'stage' or 'sqrt'", repr(checkpoint))
        if checkpoint == "stage":
            return 1
        if checkpoint == "sqrt":
            return max(1, math.isqrt(len(self.stages) - 1) + 1) if self.stages else 1
        return None

    def _source(self, rt: EagerRuntime, eng: CpuEngine, theta: EagerTensor) -> EagerTensor:
        return _checked_tensor("source", self.source, rt.with_eager_session(eng, lambda s: self.source(s, theta)))

    def _readout(self, rt: EagerRuntime, eng: CpuEngine, last: EagerTensor) -> EagerTensor:
        out = rt.with_eager_session(eng, lambda s: self.readout(s, last))
        return _checked_tensor("readout", self.readout, out, scalar=True)

    def _run_stage(
        self, rt: EagerRuntime, eng: CpuEngine, i: int, x: EagerTensor, tangent: EagerTensor | None, record: bool,
        memo: bool = False,
    ) -> _StageRun:
        """Stage i on a fresh leaf holding x, recorded or not (a tangent needs the record).

        ``memo``: keep the tangents of the stage's tensors for the jvp of its pullback.
        """
        leaf = rt.variable_from(x)
        with contextlib.nullcontext() if record else rt.no_grad():
            fn = self.stages[i].fn
            out, side = _checked_stage_output(i, fn, rt.with_eager_session(eng, lambda s: fn(s, leaf)))
        if tangent is None:
            return _StageRun(leaf, out, side, None, None, None)
        kept = TangentMemo() if memo else None
        with rt.no_grad():
            return _StageRun(leaf, out, side, tangent, rt.jvp(eng, out, leaf, tangent, memo=kept), kept)

    def _run_segment(self, rt: EagerRuntime, eng: CpuEngine, seg: _Segment, record: bool) -> list[_StageRun]:
        """The segment's stages, from its input (and tangent) on, their tangents kept for the pullbacks.

        A segment that is not kept fills its memos too (whole tangents, computed otherwise
        than demanded ones), so that its re-run gives the same tangents, bit for bit.
        """
        runs: list[_StageRun] = []
        x, tangent = seg.x, seg.tangent
        for i in seg.stages:
            runs.append(self._run_stage(rt, eng, i, x, tangent, record, memo=True))
            x, tangent = runs[-1].out, runs[-1].out_tangent
        return runs

    def _forward(
        self, rt: EagerRuntime, eng: CpuEngine, theta: EagerTensor, direction: EagerTensor | None,
        segment_length: int | None,
    ) -> _Forward:
        """x₀, the stages in segments (their graphs kept when segment_length is None), the readout, L."""
        x0 = self._source(rt, eng, theta)
        x, tangent = rt.constant_from(x0), None
        if direction is not None:
            with rt.no_grad():
                tangent = rt.jvp(eng, x0, theta, direction)
        n = len(self.stages)
        keep = segment_length is None
        length = max(n, 1) if segment_length is None else segment_length
        sides, segments = [], []
        for start in range(0, n, length):
            seg = _Segment(range(start, min(start + length, n)), x, tangent, None)
            runs = self._run_segment(rt, eng, seg, record=keep or tangent is not None)
            sides += [(self.stages[i].coef, rt.constant_from(run.side)) for i, run in zip(seg.stages, runs)
                      if run.side is not None]
            segments.append(seg._replace(runs=runs) if keep else seg)
            x, tangent = rt.constant_from(runs[-1].out), runs[-1].out_tangent
            del runs  # when not kept, the segment's graphs go before the next segment runs
        last = rt.variable_from(x)
        readout = self._readout(rt, eng, last)
        return _Forward(sides, x0, segments, last, readout, tangent)

    def _total(self, sides: Sequence[float], readout: float, coefs: Sequence[float]) -> float:
        """L = Σ c_i side_i + c_out readout, summed in the stages' order."""
        value = 0.0
        for coef, side in zip(coefs, sides):
            value += coef * side
        return value + self.readout_coef * readout

    def _value_of(self, fw: _Forward) -> float:
        return self._total([t.item() for _, t in fw.sides], fw.readout.item(), [c for c, _ in fw.sides])

    def _fold_back(
        self, rt: EagerRuntime, eng: CpuEngine, fw: _Forward, state: State, pull: Callable[..., State]
    ) -> State:
        """state = pull(i, run_i, state) for every stage, newest first.

        A segment not kept is re-run, recorded, just before its stages are
        pulled back; each stage's graph is dropped as soon as it is pulled back.
        """
        for seg in reversed(fw.segments):
            runs = seg.runs if seg.runs is not None else self._run_segment(rt, eng, seg, record=True)
            for i in reversed(seg.stages):
                state = pull(i, runs.pop(), state)
        return state

    def _pullback(self, rt: EagerRuntime, eng: CpuEngine, i: int, run: _StageRun, ct: EagerTensor) -> EagerTensor:
        """x̄_i = vjp(x_{i+1}; ct) + vjp(side_i; c_i)."""
        through_x = rt.vjp(eng, run.out, run.leaf, ct)
        if run.side is None:
            return through_x
        through_side = rt.vjp(eng, run.side, run.leaf, _scalar_like(self.stages[i].coef, run.side))
        return rt.with_eager_session(eng, lambda s: s.add(through_x, through_side))
