"""Kernels written down once and run again: :class:`Replay` and the :class:`Recorder` that writes one.

A recorder watches a run: the arrays that enter it, each kernel called (which one, on which
earlier arrays, with which params), and each value read into Python. A read through
:meth:`Recorder.guard` (a Python function of arrays whose result steers what runs next: an
argmax, a comparison, a branch's condition) becomes a step of the replay that computes it again
and stops the replay where it differs. Any other read makes the run unreplayable: what the
Python then did with the numbers is unknown. A replay runs the same kernels on the same slots in
the same order, so it gives the bits the run gave, without the run's Python; each value is let
go after its last read, as the run's Python let it go.

Two users: a shape-determined composite's kernel (its reference run on arrays,
:mod:`tenferro_py.kernel_sessions`) and a whole program (:mod:`tenferro_py.traced`).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Sequence

import numpy as np


class Diverged(Exception):
    """A replay's guard found another result than the recorded run's: this run must be run for real."""


class Guard:
    """A replay step that computes a recorded read again and stops the replay where it differs."""

    __slots__ = ("fn", "expected")

    def __init__(self, fn: Callable[..., Any], expected: Any):
        self.fn, self.expected = fn, expected

    def __call__(self, *arrays: np.ndarray) -> tuple:
        if not same_value(self.fn(*arrays), self.expected):
            raise Diverged(getattr(self.fn, "__name__", repr(self.fn)))
        return ()


def same_value(a: Any, b: Any) -> bool:
    """a and b equal as values: arrays of one dtype and shape, bit for bit (NaN equal to NaN)."""
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and (
            a.tobytes() == b.tobytes() if a.dtype.kind in "fc" else bool(np.array_equal(a, b)))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return same_params(a, b)
    if callable(a) and not isinstance(a, type):
        return same_function(a, b)
    return type(a) is type(b) and bool(a == b)


class Replay:
    """The steps of one recorded run, run on new arrays of the same shapes, dtypes and layouts.

    Slots 0 … count − 1 hold the inputs; ``constants`` are (slot, value) pairs; each step is
    (kernel, its input slots, its params, its first output slot, how many outputs, its inputs'
    shapes, which outputs are 0-d), a :class:`Guard` being a step with no output. The steps are
    compiled, at the first call, into one Python function of straight-line calls (a local per
    slot, deleted after its last read), so that a step costs its kernel's call and little more. A kernel with a
    ``direct`` attribute (one NumPy function, :func:`~tenferro_py.rules.ufunc_kernel`) is that
    function's call; one with ``specialized(shapes, **params)`` is what that returns, the same
    computation with its planning for these shapes done once."""

    __slots__ = ("count", "constants", "steps", "outputs", "_run")

    def __init__(self, count: int, constants: list, steps: list, outputs: list[int]):
        self.count, self.constants, self.outputs = count, constants, outputs
        self.steps = steps
        self._run: Callable[..., tuple] | None = None

    def __call__(self, arrays: Sequence[np.ndarray]) -> tuple:
        """The outputs for ``arrays``; :class:`Diverged` where a guard differs."""
        if self._run is None:
            self._run = self._compiled()
        return self._run(*arrays)

    def _compiled(self) -> Callable[..., tuple]:
        names = {slot: f"c{slot}" for slot, _ in self.constants}
        namespace: dict[str, Any] = {f"c{slot}": value for slot, value in self.constants}
        last_read = {slot: i for i, (_, slots, *_) in enumerate(self.steps) for slot in slots}
        kept = set(self.outputs) | set(names)
        done_after: list[list[str]] = [[] for _ in self.steps]
        for slot, i in sorted(last_read.items()):
            if slot not in kept:
                done_after[i].append(f"v{slot}")
        inputs = ", ".join(f"v{i}" for i in range(self.count))
        lines = [f"def run({inputs}):"]
        namespace["as_array"] = np.asarray
        for i, (impl, slots, params, first, n, shapes, scalars) in enumerate(self.steps):
            args = [names.get(slot, f"v{slot}") for slot in slots]
            specialize, direct = getattr(impl, "specialized", None), getattr(impl, "direct", None)
            targets = "".join(f"v{first + j}, " for j in range(n))
            if direct is not None and not params and n == 1:  # one NumPy function: called as it is
                namespace[f"k{i}"], targets = direct, f"v{first}"
            elif specialize is not None:  # the kernel's own work for these shapes, done once
                namespace[f"k{i}"] = specialize(shapes, **params)
            else:
                namespace[f"k{i}"] = impl
                for key, value in params.items():
                    namespace[f"p{i}_{key}"] = value
                    args.append(f"{key}=p{i}_{key}")
            lines.append("    " + (f"{targets} = " if n else "") + f"k{i}({', '.join(args)})")
            for j in scalars:  # as the engine makes a kernel's NumPy scalars: 0-d arrays
                lines.append(f"    v{first + j} = as_array(v{first + j})")
            if done_after[i]:
                lines.append("    del " + ", ".join(done_after[i]))
        lines.append("    return (" + "".join(names.get(o, f"v{o}") + ", " for o in self.outputs) + ")")
        exec(compile("\n".join(lines), "<tenferro_py replay>", "exec"), namespace)
        return namespace["run"]

    def same_as(self, other: "Replay") -> bool:
        """Whether two recorded runs are the same program: the same kernels and guards, wired alike,
        with equal params and constants equal bit for bit."""
        if (self.count, self.outputs, len(self.steps), len(self.constants)) != (
                other.count, other.outputs, len(other.steps), len(other.constants)):
            return False
        for (f, slots, params, first, n, *_), (g, slots2, params2, first2, n2, *_) in zip(self.steps, other.steps):
            if (slots, first, n) != (slots2, first2, n2) or not same_params(params, params2):
                return False
            if isinstance(f, Guard):
                if not (isinstance(g, Guard) and same_function(f.fn, g.fn) and same_value(f.expected, g.expected)):
                    return False
            elif f is not g:
                return False
        return all(i == j and same_value(x, y) for (i, x), (j, y) in zip(self.constants, other.constants))


def same_function(f: Any, g: Any) -> bool:
    """f and g the same function of their arguments: one object, one code with equal closures, or
    partials of such with equal arguments."""
    if f is g:
        return True
    if type(f) is not type(g):
        return False
    if isinstance(f, functools.partial):
        return same_function(f.func, g.func) and same_value(f.args, g.args) and same_params(f.keywords, g.keywords)
    code = getattr(f, "__code__", None)
    if code is None or code is not getattr(g, "__code__", None):
        return False
    cells = [c.cell_contents for c in f.__closure__ or ()], [c.cell_contents for c in g.__closure__ or ()]
    return same_params(dict(enumerate(cells[0])), dict(enumerate(cells[1]))) and f.__defaults__ == g.__defaults__


def same_params(p: dict, q: dict) -> bool:
    """Equal params (functions compared as functions, arrays as values)."""
    if p is q:
        return True
    if p.keys() != q.keys():
        return False
    for k, a in p.items():
        b = q[k]
        if a is not b and not same_value(a, b):
            return False
    return True


class Recorder:
    """Writes down a run as a :class:`Replay`: its inputs (:meth:`input`), kernels (:meth:`step`),
    guarded reads (:meth:`guard`) and other reads (:meth:`taint`, which leaves nothing to replay).

    An array's id names its slot while the array lives (a finalizer forgets it when it goes, so a
    later array with the same id is not taken for it). An array no step made is a constant
    (``constants_allowed``), or else makes the run unreplayable: in a composite's kernel it may
    have come from values read."""

    __slots__ = ("_count", "_size", "_slots", "_kept", "_constants", "_steps", "_constants_allowed", "tainted")

    def __init__(self, inputs: Sequence[Any] = (), constants_allowed: bool = True):
        self._size = 0
        self._slots: dict[int, int] = {}
        self._kept: list = []
        self._constants: list[tuple[int, Any]] = []
        self._steps: list[tuple] = []
        self._constants_allowed = constants_allowed
        self.tainted: str | None = None  # why nothing can be replayed, once something was read
        for x in inputs:
            self.input(x)
        self._count = len(inputs)

    def input(self, x: Any) -> None:
        """One more input (before any step)."""
        self._keep(x)
        self._count = self._size

    def _keep(self, x: Any) -> int:
        slot, self._size = self._size, self._size + 1
        self._slots[id(x)] = slot
        try:
            weakref.finalize(x, self._slots.pop, id(x), None).atexit = False
        except TypeError:  # not weakly referable: kept alive instead
            self._kept.append(x)
        return slot

    def constant(self, x: Any) -> None:
        """x, unless a step made it, is a constant of the run."""
        if id(x) not in self._slots:
            self._constants.append((self._keep(x), x))

    def _slot(self, x: Any) -> int | None:
        found = self._slots.get(id(x))
        if found is None and (self._constants_allowed or not isinstance(x, (np.ndarray, np.generic))):
            found = self._keep(x)
            self._constants.append((found, x))
        return found

    def step(self, impl: Callable[..., tuple], params: dict, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """A kernel ``impl(*inputs, **params)`` that gave ``outputs``."""
        if self.tainted is not None:
            return
        slots = [self._slot(x) for x in inputs]
        if None in slots:
            self.tainted = "an array that no op made"
            return
        shapes = tuple([getattr(x, "shape", None) for x in inputs])
        scalars = tuple([i for i, o in enumerate(outputs) if getattr(o, "ndim", None) == 0])
        self._steps.append((impl, slots, params, self._size, len(outputs), shapes, scalars))
        for o in outputs:
            self._keep(o)

    def guard(self, fn: Callable[..., Any], inputs: Sequence[Any], result: Any) -> None:
        """A read ``fn(*inputs)`` that gave ``result``: a replay computes it again and stops where it differs."""
        self.step(Guard(fn, result), {}, inputs, ())

    def taint(self, why: str) -> None:
        """A value was read into Python another way: nothing is replayed."""
        if self.tainted is None:
            self.tainted = why

    def replay(self, outputs: Sequence[Any]) -> Replay | None:
        """The run as a Replay giving ``outputs``; None if it cannot be replayed."""
        slots = [self._slots.get(id(o)) for o in outputs]
        if self.tainted is not None or None in slots:
            return None
        return Replay(self._count, self._constants, self._steps, slots)
