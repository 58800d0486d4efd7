"""Record a program once per shapes, replay its kernels after: the traced mode of whole programs.

:class:`Traced` keeps, for one function, a :class:`~tenferro_py.replay.Replay` per key (the
shapes, dtypes and layouts of its array inputs and its static arguments). A call runs the
program for real, recorded, until two recorded runs agree; later calls replay it. It is safe
where it replays, and runs for real everywhere else:

- a value read into Python (``float(x)``, ``np.asarray(x)``, printing) leaves nothing to replay;
  a read whose result steers what runs next (a comparison, ``if x > 0``, an argmax) is replayed
  as a guard, and a replay whose guard differs is abandoned for a real run;
- what the function sees besides its arguments (its closure, the globals and module attributes
  it names, and theirs, transitively, down to the libraries) is checked on every call: each
  name bound to the same object, and each array of the same contents (:func:`free_values`); a
  function that reaches state it cannot check (an object's attributes, a bound method) is not
  replayed;
- constants the program makes (``np.eye``, a random draw) must come out bit for bit the same in
  the two recorded runs that must agree before any replay;
- a replay runs the same kernels on the same slots in the same order, under the same one-thread
  BLAS, so its numbers are the real run's bit for bit.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import types
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from .engine import CpuEngine
from .replay import Diverged, Recorder, Replay

#: Packages whose functions are taken as they are: their behaviour depends on their arguments only.
LIBRARIES = ("tenferro_py", "numpy", "scipy", "opt_einsum", "math", "cmath", "builtins", "functools", "itertools",
             "operator", "collections", "string", "typing")

#: Disagreeing pairs of recorded runs after which a key runs for real without recording.
PATIENCE = 3

#: Variants a key keeps (one per outcome of the guards met), at most.
MAX_VARIANTS = 4

#: Keys a function keeps programs for, at most.
MAX_KEYS = 64

#: Free values checked on every call, at most: a function that reaches more (a whole library outside
#: LIBRARIES, say) is not replayed.
MAX_CHECKS = 2000

_MISSING = object()
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), range, slice, np.dtype, np.generic)


def _is_library(obj: Any) -> bool:
    module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] in LIBRARIES


class _Unsafe(Exception):
    """A free value whose changes cannot be checked."""


class FreeValues:
    """What a function reads besides its arguments, with how to tell that it changed."""

    __slots__ = ("checks", "why_not")

    def __init__(self, fn: Callable[..., Any] | tuple):
        self.checks: list[tuple[Any, Any, Any, Any]] = []  # (namespace, name, object, snapshot)
        self.why_not: str | None = None
        try:
            seen: set = set()
            for f in fn if isinstance(fn, tuple) else (fn,):
                self._function(f, seen)
            if len(self.checks) > MAX_CHECKS:
                raise _Unsafe(f"more than {MAX_CHECKS} names and objects to check on every call")
        except _Unsafe as err:
            self.why_not, self.checks = str(err), []

    def holds(self) -> bool:
        """Every name still bound to its object, every array of its recorded contents."""
        for space, name, obj, snapshot in self.checks:
            current = space.get(name, _MISSING) if isinstance(space, dict) else space.cell_contents
            if current is not obj or (snapshot is not None and not _unchanged(obj, snapshot)):
                return False
        return True

    def _function(self, fn: Any, seen: set) -> None:
        if id(fn) in seen:
            return
        seen.add(id(fn))
        if isinstance(fn, functools.partial):
            for value in fn.args + tuple(fn.keywords.values()):
                self._value(value, seen)
            return self._function(fn.func, seen)
        if isinstance(fn, types.MethodType):
            raise _Unsafe(f"a bound method ({fn.__qualname__}) reads its object's state")
        if not isinstance(fn, types.FunctionType):
            if _is_library(fn):
                return
            raise _Unsafe(f"a {type(fn).__name__} ({getattr(fn, '__qualname__', fn)!r}), whose state may change")
        code, names = fn.__code__, set()
        self._names(code, names)
        for cell in fn.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # not yet assigned
                continue
            self.checks.append((cell, None, value, self._value(value, seen, names)))
        for value in (fn.__defaults__ or ()) + tuple((fn.__kwdefaults__ or {}).values()):
            self._value(value, seen)
        for name in sorted(names):
            value = fn.__globals__.get(name, _MISSING)
            if value is not _MISSING:
                self.checks.append((fn.__globals__, name, value, self._value(value, seen, names)))

    def _names(self, code: types.CodeType, names: set) -> None:
        names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._names(const, names)

    def _value(self, value: Any, seen: set, names: set = frozenset()) -> Any:
        """What tells a change of value: a snapshot of an array's contents, else None (its identity
        suffices, or what it holds is checked by the checks it adds)."""
        if isinstance(value, _IMMUTABLE) or _is_library(value) or isinstance(value, type):
            return None
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biufc":
                raise _Unsafe(f"an array of {value.dtype}")
            return Digest(value)
        if isinstance(value, types.ModuleType):  # a user's module: the attributes the code names
            for name in sorted(names):
                if name in value.__dict__:
                    self.checks.append((value.__dict__, name, value.__dict__[name],
                                        self._value(value.__dict__[name], seen, names)))
            return None
        if isinstance(value, types.FunctionType):
            self._function(value, seen)
            return None
        if isinstance(value, tuple):
            for v in value:
                if self._value(v, seen) is not None:  # an array inside: its contents, and the tuple's
                    return _deep_copy(value)
            return None
        if isinstance(value, (list, dict)):
            for v in value.values() if isinstance(value, dict) else value:
                self._value(v, seen)
            return _deep_copy(value)
        raise _Unsafe(f"a {type(value).__name__} object, whose attributes may change")


class Digest:
    """An array's dtype, shape and a cryptographic digest of its bytes: what tells a change of its
    contents without a copy of them."""

    __slots__ = ("dtype", "shape", "digest")

    def __init__(self, value: np.ndarray):
        self.dtype, self.shape, self.digest = value.dtype, value.shape, _digest(value)

    def matches(self, value: Any) -> bool:
        """Whether value is an array of the same dtype, shape and contents."""
        return (isinstance(value, np.ndarray) and value.dtype == self.dtype and value.shape == self.shape
                and _digest(value) == self.digest)


def _digest(value: np.ndarray) -> bytes:
    data = value.data if value.flags.c_contiguous else np.ascontiguousarray(value).data
    return hashlib.blake2b(data, digest_size=20).digest()


def _deep_copy(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return Digest(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_deep_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    return value


def _unchanged(value: Any, snapshot: Any) -> bool:
    if isinstance(snapshot, Digest):
        return snapshot.matches(value)
    if isinstance(snapshot, (list, tuple)):
        return (type(value) is type(snapshot) and len(value) == len(snapshot)
                and all(_unchanged(v, s) for v, s in zip(value, snapshot)))
    if isinstance(snapshot, dict):
        return (isinstance(value, dict) and value.keys() == snapshot.keys()
                and all(_unchanged(value[k], s) for k, s in snapshot.items()))
    return value is snapshot or (type(value) is type(snapshot) and isinstance(value, _IMMUTABLE) and value == snapshot)


def static_key(value: Any) -> Hashable:
    """A static argument as a key: numbers, strings, None and tuples of them by value, arrays by
    contents; anything else raises TypeError (the call is not replayed)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise TypeError(value.dtype)
        return ("array", value.dtype.str, value.shape, _digest(value))
    if isinstance(value, tuple):
        return ("tuple",) + tuple(static_key(v) for v in value)
    if isinstance(value, list):
        return ("list",) + tuple(static_key(v) for v in value)
    if isinstance(value, _IMMUTABLE):
        return (type(value).__name__, value)
    raise TypeError(type(value).__name__)


class _Entry:
    __slots__ = ("programs", "candidate", "disagreements", "never")

    def __init__(self) -> None:
        self.programs: list[Replay] = []  # variants (one per outcome of its guards), latest success first
        self.candidate: Replay | None = None  # a recorded run waiting for a second that agrees
        self.disagreements = 0
        self.never: str | None = None  # why it runs for real: a value read into Python, runs that disagree

    def promote(self, program: Replay) -> None:
        """The variant that held goes first (the next call tries it first)."""
        if self.programs and self.programs[0] is not program and program in self.programs:
            self.programs.remove(program)
            self.programs.insert(0, program)

    def learn(self, recorder: Recorder, outputs: Sequence[np.ndarray]) -> None:
        """Take a recorded run: the second of two that agree becomes a variant."""
        recorded = recorder.replay(outputs)
        if recorded is None:
            self.never = recorder.tainted or "an output that no op made"
        elif self.candidate is not None and self.candidate.same_as(recorded):
            self.programs.insert(0, recorded)
            del self.programs[MAX_VARIANTS:]
            self.candidate = None
        else:
            self.disagreements += self.candidate is not None
            if self.disagreements >= PATIENCE:
                self.never = "its runs disagree (constants made anew, or kernels that differ)"
            self.candidate = recorded


class Traced:
    """The programs of one function, by key (see the module's docstring)."""

    __slots__ = ("_fn", "_free", "_entries", "_lock", "replayed_calls", "real_calls")

    def __init__(self, fn: Callable[..., Any] | tuple):
        self._fn = fn  # the function, or the functions of one program
        self._lock = threading.Lock()
        self._free: FreeValues | None = None
        self._entries: dict[Hashable, _Entry] = {}
        self.replayed_calls = 0  # calls answered by a replay
        self.real_calls = 0  # calls run for real (recorded or not)

    @property
    def why_not(self) -> str | None:
        """Why calls run for real: state the function reads that cannot be checked, or for some key a
        value read into Python or runs that disagree; None if nothing keeps them from replaying."""
        if self._free is not None and self._free.why_not is not None:
            return self._free.why_not
        return next((e.never for e in self._entries.values() if e.never), None)

    def call(self, key: Hashable, inputs: Sequence[np.ndarray],
             run: Callable[[Recorder | None], tuple[Any, Sequence[np.ndarray]]],
             finish: Callable[[Sequence[np.ndarray]], Any]) -> Any:
        """The result for ``inputs``: ``finish`` of a replay's outputs where one holds, else of a real
        run, ``run(recorder)`` (recorder None: not recorded), which returns (its result, its outputs'
        arrays), the inputs' arrays being the first slots it uses. The bookkeeping is locked, the runs
        are not: threads may call at once."""
        with self._lock:
            entry = self._entry(key)
            programs = list(entry.programs) if entry is not None else []
            if entry is None:
                self.real_calls += 1
        if entry is None:
            return run(None)[0]
        for program in programs:
            outputs = _attempt(program, inputs)
            if outputs is _RAISED:  # the real run raises it, with the context a replay does not have
                break
            if outputs is not None:
                with self._lock:
                    entry.promote(program)
                    self.replayed_calls += 1
                return finish(outputs)
        recorder = Recorder(inputs)
        result, outputs = run(recorder)
        with self._lock:
            self.real_calls += 1
            entry.learn(recorder, outputs)
        return result

    def _entry(self, key: Hashable) -> _Entry | None:
        """The key's entry, made if new; None where calls run for real unrecorded."""
        if self._free is None or not self._free.holds():
            self._free, self._entries = FreeValues(self._fn), {}
        entry = self._entries.get(key)
        if entry is None and self._free.why_not is None and len(self._entries) < MAX_KEYS:
            entry = self._entries[key] = _Entry()
        return entry if entry is not None and entry.never is None else None


_RAISED = object()


def _attempt(program: Replay, inputs: Sequence[np.ndarray]) -> Any:
    """The program's outputs; None where a guard differs; _RAISED where a kernel raised."""
    try:
        with CpuEngine.serial().active():
            return program(inputs)
    except Diverged:
        return None
    except Exception:
        return _RAISED
