"""Where kernels run: ``CpuEngine`` on a ``Pool`` of a given width.

Every kernel of every op goes through :meth:`CpuEngine.run`. While an engine is active,
BLAS/LAPACK are pinned to one thread, so each kernel gives the same bits whatever the
width; the width is how many kernels may run at once.

At width 1 every kernel runs when its op is called. A wider engine runs a session's ops as
a dataflow graph, so that independent costly kernels overlap however the program orders them:

* a costly kernel (by its primitive's flop estimate: an SVD, a large contraction) goes to
  one of the pool's worker threads as soon as its inputs are computed;
* a cheap kernel whose inputs are computed runs at once, on the session's thread;
* a cheap kernel whose inputs are still being computed is deferred, and runs on the
  session's thread later: first those that a costly kernel or a value being read waits for
  (the critical path), at the next op or read; the others while the session's thread would
  otherwise wait. Queueing cheap kernels to the workers instead would make them fight the
  session's thread for the GIL, which NumPy's LAPACK wrappers need at their ends.

A deferred or queued output is :class:`Pending` until read: reading a value (``value()``,
``item()``) waits for what it needs, and the end of a session waits for everything. Shape and
dtype errors are raised by the op itself, before any kernel runs; a kernel's own error is
raised when its value is read or the session ends.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np
from threadpoolctl import ThreadpoolController

from .errors import DTypeMismatch, InvalidArgument, ShapeMismatch

#: Kernels estimated at this many flops or more go to the workers of a wide engine.
COSTLY_FLOPS = float(2**22)

class Kernel(Protocol):
    """What an engine needs of a primitive: its name, its kernel and its cost estimate."""

    name: str
    impl: Callable[..., tuple]

    def flops(self, in_avals: tuple, out_avals: tuple, params: dict) -> float:
        """The kernel's cost in flops, from its input and output avals and parameters."""


class _BlasPin:
    """BLAS/LAPACK on one thread while any engine of the process is active, restored after the last.

    The thread count is process-wide state, so sessions of several threads share one pin: the
    first to start sets it (through threadpoolctl, whose controller scans the loaded libraries
    once), the last to end gives back what it found.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._controller: ThreadpoolController | None = None
        self._limiter: Any = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._count == 0:
                if self._controller is None:
                    self._controller = ThreadpoolController()
                self._limiter = self._controller.limit(limits=1, user_api="blas")
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1
                if self._count == 0:
                    self._limiter.restore_original_limits()
                    self._limiter = None


_BLAS_PIN = _BlasPin()


def available_parallelism() -> int:
    """The cores this process may run on (tenferro's default pool width, as Rust's ``available_parallelism``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Pool:
    """A number of worker threads; built as ``Pool.builder().threads(n).build()``.

    As in tenferro (threadteam), the width defaults to the available parallelism.
    """

    __slots__ = ("_threads",)

    def __init__(self, threads: int | None = None):
        if threads is None:
            threads = available_parallelism()
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InvalidArgument("Pool.threads", "an int >= 1", repr(threads))
        self._threads = threads

    @staticmethod
    def builder() -> "PoolBuilder":
        """A builder, as Rust's ``Pool::builder()``."""
        return PoolBuilder()

    @property
    def threads(self) -> int:
        """The pool's width: how many kernels may run at once."""
        return self._threads

    def __repr__(self) -> str:
        return f"Pool(threads={self._threads})"


class PoolBuilder:
    """Builder of a :class:`Pool`, as tenferro's ``Pool::builder()``."""

    __slots__ = ("_threads",)

    _UNSET = object()

    def __init__(self) -> None:
        self._threads: object = PoolBuilder._UNSET

    def threads(self, n: int) -> "PoolBuilder":
        """Set the width (checked when built; unset, the available parallelism)."""
        self._threads = n
        return self

    def build(self) -> Pool:
        """The pool; without ``threads(n)`` as wide as the available parallelism."""
        if self._threads is PoolBuilder._UNSET:
            return Pool()
        if self._threads is None:
            raise InvalidArgument("Pool.threads", "an int >= 1", "None")
        return Pool(self._threads)  # type: ignore[arg-type]


class _Task:
    """One kernel call of a wide engine: its inputs, then its outputs or its error."""

    __slots__ = ("kernel", "args", "params", "avals", "costly", "inputs", "missing", "dependents", "urgent", "state",
                 "outputs", "error")

    WAITING, READY, RUNNING, DONE = range(4)

    def __init__(self, kernel: Kernel, args: Sequence[Any], params: dict, avals: tuple, costly: bool):
        self.kernel = kernel
        self.args: Sequence[Any] | None = args
        self.params = params
        self.avals = avals
        self.costly = costly
        self.inputs: list[_Task] = []  # the unfinished tasks it waits for
        self.missing = 0
        self.dependents: list[_Task] = []
        self.urgent = False  # a costly kernel or a read waits for it
        self.state = _Task.WAITING
        self.outputs: tuple = ()
        self.error: BaseException | None = None


class Pending:
    """Output ``index`` of a deferred or queued kernel; :meth:`result` waits for it."""

    __slots__ = ("_engine", "_task", "_index")

    def __init__(self, engine: "CpuEngine", task: _Task, index: int):
        self._engine = engine
        self._task = task
        self._index = index

    def result(self) -> np.ndarray:
        """The kernel's output, running what it waits for first; its error, if it failed."""
        task = self._task
        if task.state != _Task.DONE:
            self._engine._drive(task)
        if task.error is not None:
            raise task.error
        return task.outputs[self._index]


def resolve(value: "np.ndarray | Pending") -> np.ndarray:
    """The array of a value, waiting for its kernel if it is still pending."""
    return value.result() if isinstance(value, Pending) else value


def _call(prim: Kernel, args: Sequence[Any], params: dict, avals: tuple) -> tuple[np.ndarray, ...]:
    """Run a kernel on computed inputs; its outputs as read-only arrays, checked against the shapes
    and dtypes ``abstract`` declared (``avals``), so that a user kernel that disagrees with its
    own declaration fails here, naming the op.

    Kernels never write to their inputs, so outputs are shared without copies.
    """
    out = prim.impl(*args, **params)
    if type(out) is tuple and len(out) == len(avals):  # the common case, checked inline
        for v, a in zip(out, avals):
            if type(v) is not np.ndarray or v.shape != a.shape or v.dtype != a.dtype:
                return _checked(prim.name, out, avals)
            v.setflags(write=False)
        return out
    return _checked(prim.name, out, avals)


def _checked(op: str, out: object, avals: tuple) -> tuple[np.ndarray, ...]:
    """A kernel's outputs as read-only arrays (NumPy scalars become 0-d arrays) of their declared
    shapes and dtypes, or an error naming ``op``."""
    if type(out) is not tuple or len(out) != len(avals):
        raise InvalidArgument(op, f"its kernel to return a tuple of {len(avals)} arrays",
                              f"{type(out).__name__}" + (f" of {len(out)}" if isinstance(out, tuple) else ""))
    values = tuple([v if type(v) is np.ndarray else np.asarray(v) for v in out])
    for i, (v, a) in enumerate(zip(values, avals)):
        if v.shape != a.shape:
            raise ShapeMismatch(op, f"kernel output {i} of shape {list(a.shape)} (as its abstract declares)",
                                f"shape {list(v.shape)}")
        if v.dtype != a.dtype:
            raise DTypeMismatch(op, f"kernel output {i} of dtype {a.dtype} (as its abstract declares)", str(v.dtype))
        v.setflags(write=False)
    return values


class CpuEngine:
    """Runs kernels on the CPU, ``pool.threads`` of them at a time at most."""

    __slots__ = ("_pool", "_serial", "_executor", "_cond", "_urgent", "_later", "_tasks", "_open", "_depth")

    def __init__(self, pool: Pool):
        if not isinstance(pool, Pool):
            raise InvalidArgument("CpuEngine", "a Pool (Pool.builder().threads(n).build())", repr(pool))
        self._pool = pool
        self._serial = pool.threads == 1  # every kernel runs when its op is called
        self._executor: ThreadPoolExecutor | None = None
        self._cond = threading.Condition()
        self._urgent: deque[_Task] = deque()  # cheap, ready, and on the critical path
        self._later: dict[_Task, None] = {}  # cheap and ready, in order of readiness
        self._tasks: list[_Task] = []  # every task since the last wait(), in order of creation
        self._open = 0  # of them, how many are not done
        self._depth = 0

    @classmethod
    def serial(cls) -> "CpuEngine":
        """An engine of width 1."""
        return cls(Pool(1))

    @property
    def width(self) -> int:
        """How many kernels may run at once (the pool's threads)."""
        return self._pool.threads

    @contextlib.contextmanager
    def active(self) -> Iterator["CpuEngine"]:
        """Pin BLAS/LAPACK to one thread while ops run here; on leaving, wait for every kernel.

        A kernel's error is raised on leaving, unless the body raised its own: that one wins,
        with the kernel's chained to it (its ``__context__``).
        """
        with _BLAS_PIN.held():
            self._depth += 1
            try:
                yield self
            except BaseException as own:
                self._depth -= 1
                if self._depth == 0:
                    try:
                        self.wait()
                    except BaseException:
                        raise own  # noqa: B904 (the kernel's error becomes own.__context__)
                raise
            self._depth -= 1
            if self._depth == 0:
                self.wait()

    # --- running ---------------------------------------------------------------------

    def run(self, prim: Kernel, args: Sequence[Any], params: dict, in_avals: tuple, avals: tuple) -> tuple:
        """Run, defer or queue one primitive's kernel: its outputs (``avals``), as arrays or :class:`Pending`."""
        if self._serial:
            return _call(prim, args, params, avals)
        if self._urgent:
            self._run_urgent()
        costly = prim.flops(in_avals, avals, params) >= COSTLY_FLOPS
        unfinished = [a._task for a in args if type(a) is Pending and a._task.state != _Task.DONE]
        if not unfinished and not costly:
            return _call(prim, [resolve(a) for a in args], params, avals)
        task = _Task(prim, args, params, avals, costly)
        with self._cond:
            self._tasks.append(task)
            self._open += 1
            for t in dict.fromkeys(unfinished):
                if t.state != _Task.DONE:
                    t.dependents.append(task)
                    task.inputs.append(t)
            task.missing = len(task.inputs)
            if task.missing == 0:
                self._make_ready(task)
            elif costly:
                self._mark_urgent(task.inputs)
        if not costly and task.state == _Task.READY:  # its inputs finished meanwhile
            self._take(task)
            self._execute(task)
        return tuple(Pending(self, task, i) for i in range(len(avals)))

    def _make_ready(self, task: _Task) -> None:
        """A task whose inputs are done: to a worker if costly, else to the session's queues (lock held)."""
        task.state = _Task.READY
        if task.costly:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._pool.threads, thread_name_prefix="tenferro")
            task.state = _Task.RUNNING
            self._executor.submit(self._execute, task)
        elif task.urgent:
            self._urgent.append(task)
        else:
            self._later[task] = None
        self._cond.notify_all()

    def _mark_urgent(self, tasks: list[_Task]) -> None:
        """Mark these deferred tasks and their deferred ancestors as on the critical path (lock held)."""
        todo = [t for t in tasks if not t.costly]
        while todo:
            t = todo.pop()
            if t.urgent or t.state in (_Task.RUNNING, _Task.DONE):
                continue
            t.urgent = True
            if t.state == _Task.READY:
                del self._later[t]
                self._urgent.append(t)
            todo.extend(i for i in t.inputs if not i.costly)

    def _take(self, task: _Task) -> None:
        """Claim a ready cheap task for the calling thread."""
        with self._cond:
            if task.urgent:
                self._urgent.remove(task)
            else:
                del self._later[task]
            task.state = _Task.RUNNING

    def _execute(self, task: _Task) -> None:
        """Run a task whose inputs are done (on a worker or the session's thread), then release its dependents."""
        try:
            args = []
            for a in task.args or ():
                if type(a) is Pending:
                    if a._task.error is not None:
                        raise a._task.error
                    a = a._task.outputs[a._index]
                args.append(a)
            task.outputs = _call(task.kernel, args, task.params, task.avals)
        except BaseException as err:  # handed to whoever reads the value, or to wait()
            task.error = err
        task.args = None
        with self._cond:
            task.state = _Task.DONE
            self._open -= 1
            for dep in task.dependents:
                dep.missing -= 1
                if dep.missing == 0:
                    self._make_ready(dep)
            task.dependents = []
            task.inputs = []
            self._cond.notify_all()

    def _next(self, allow_later: bool) -> _Task | None:
        """Claim the next ready cheap task: critical path first (lock held)."""
        if self._urgent:
            task = self._urgent.popleft()
        elif allow_later and self._later:
            task = next(iter(self._later))
            del self._later[task]
        else:
            return None
        task.state = _Task.RUNNING
        return task

    def _run_urgent(self) -> None:
        """Run the ready tasks on the critical path (so the costly kernels after them can start)."""
        while True:
            with self._cond:
                task = self._next(allow_later=False)
            if task is None:
                return
            self._execute(task)

    def _drive(self, target: _Task) -> None:
        """Work on the session's thread until ``target`` is done: its ancestors first, then any ready task."""
        with self._cond:
            if target.state != _Task.DONE:
                self._mark_urgent([target])
        while True:
            with self._cond:
                while target.state != _Task.DONE and not self._urgent and not self._later:
                    self._cond.wait()
                if target.state == _Task.DONE:
                    return
                task = self._next(allow_later=True)
            if task is not None:
                self._execute(task)

    def wait(self) -> None:
        """Run or wait for every kernel of this engine; raise the first error of one, if any."""
        if self._serial:
            return
        while True:
            with self._cond:
                while self._open and not self._urgent and not self._later:
                    self._cond.wait()
                if not self._open:
                    tasks, self._tasks = self._tasks, []
                    break
                task = self._next(allow_later=True)
            if task is not None:
                self._execute(task)
        for task in tasks:
            if task.error is not None:
                raise task.error

    def __repr__(self) -> str:
        return f"CpuEngine(width={self.width})"
