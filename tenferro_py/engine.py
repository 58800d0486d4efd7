"""Where ops run: ``CpuEngine`` on a ``Pool`` of a given width.

Every kernel of every op goes through :meth:`CpuEngine.run`. While an engine is
active, BLAS/LAPACK are pinned to one thread, so each kernel gives the same bits
whatever the width. The width is how many kernels may run at once: at width 1
a kernel runs when its op is called; at width n > 1 it is queued on n worker
threads and its outputs are :class:`Pending` until read, so independent ops
(the two SVDs of a TRG step) run side by side. NumPy's LAPACK and BLAS calls
release the GIL, so the threads really do run in parallel.

A costly kernel (by its primitive's flop estimate) is handed to the workers
once its inputs are computed (a countdown over its pending inputs), so no
worker ever sits waiting for another kernel. A cheap kernel runs on the
session's thread: at once when its inputs are ready, else as soon as they are
(checked at each later op, and when a value is read or the session ends).
Queueing it on a worker would cost more than it does.
"""

from __future__ import annotations

import contextlib
import threading
import sys
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np
from threadpoolctl import ThreadpoolController

from .errors import InvalidArgument

if TYPE_CHECKING:
    from .rules import Primitive

#: Kernels estimated at this many flops or more go to the workers of a wide engine.
COSTLY_FLOPS = float(2**20)
#: The GIL switch interval (s) while a wide engine is active (CPython's default is 5 ms).
GIL_SWITCH_INTERVAL = 5e-4

_CONTROLLER: ThreadpoolController | None = None


def _controller() -> ThreadpoolController:
    """The process's BLAS thread controller, found once (finding it scans the libraries)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


class Pool:
    """A number of worker threads; built as ``Pool.builder().threads(n).build()``."""

    __slots__ = ("_threads",)

    def __init__(self, threads: int = 1):
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InvalidArgument("Pool.threads", "an int >= 1", repr(threads))
        self._threads = threads

    @staticmethod
    def builder() -> "PoolBuilder":
        return PoolBuilder()

    @property
    def threads(self) -> int:
        return self._threads

    def __repr__(self) -> str:
        return f"Pool(threads={self._threads})"


class PoolBuilder:
    """Builder of a :class:`Pool`, as tenferro's ``Pool::builder()``."""

    __slots__ = ("_threads",)

    def __init__(self) -> None:
        self._threads = 1

    def threads(self, n: int) -> "PoolBuilder":
        """Set the width (checked when built)."""
        self._threads = n
        return self

    def build(self) -> Pool:
        return Pool(self._threads)


class Pending:
    """Output ``index`` of a kernel queued on ``engine``; :meth:`result` waits for it."""

    __slots__ = ("_future", "_index", "_engine")

    def __init__(self, future: Future, index: int, engine: "CpuEngine"):
        self._future = future
        self._index = index
        self._engine = engine

    def result(self) -> np.ndarray:
        if not self._future.done():
            self._engine._drive(self._future)
        return self._future.result()[self._index]


def resolve(value: "np.ndarray | Pending") -> np.ndarray:
    """The array of a value, waiting for its kernel if it is still pending."""
    return value.result() if type(value) is Pending else value


class _Countdown:
    """Calls ``then`` when :meth:`tick` has been called ``n`` times (from any thread)."""

    __slots__ = ("_left", "_lock", "_then")

    def __init__(self, n: int, then: Callable[[], Any]):
        self._left = n
        self._lock = threading.Lock()
        self._then = then

    def tick(self, _: object = None) -> None:
        with self._lock:
            self._left -= 1
            ready = self._left == 0
        if ready:
            self._then()


def _call(kernel: Callable[..., Any], args: Sequence[Any], params: dict) -> tuple[np.ndarray, ...]:
    """Run a kernel on resolved inputs; outputs as arrays (NumPy scalars become 0-d arrays).

    Kernels never write to their inputs, so outputs are shared without copies;
    they are made read-only where they leave the library (``Tensor``).
    """
    out = kernel(*[a.result() if type(a) is Pending else a for a in args], **params)
    return tuple(v if type(v) is np.ndarray else np.asarray(v) for v in out)


def _fulfil(future: Future, kernel: Callable[..., Any], args: Sequence[Any], params: dict) -> None:
    """Run a kernel whose inputs are ready and settle its future with the outputs or the error."""
    try:
        future.set_result(_call(kernel, args, params))
    except BaseException as err:  # handed to whoever reads the value
        future.set_exception(err)


class _Deferred(NamedTuple):
    """A cheap kernel waiting, on the calling thread, for inputs still being computed."""

    future: Future
    inputs: list
    kernel: Callable[..., Any]
    args: Sequence[Any]
    params: dict


class CpuEngine:
    """Runs kernels on the CPU, ``pool.threads`` of them at a time at most.

    A wide engine is driven by one thread (the one running the session): cheap
    kernels run there, in program order, as soon as their inputs are computed;
    costly ones go to the workers. Keeping Python-heavy work off the workers
    leaves them in LAPACK and BLAS, where they do not hold the GIL.
    """

    __slots__ = ("_pool", "_executor", "_queued", "_deferred", "_depth", "_switch")

    def __init__(self, pool: Pool):
        if not isinstance(pool, Pool):
            raise InvalidArgument("CpuEngine", "a Pool (Pool.builder().threads(n).build())", repr(pool))
        self._pool = pool
        self._executor: ThreadPoolExecutor | None = None
        self._queued: list[Future] = []
        self._deferred: list[_Deferred] = []
        self._depth = 0
        self._switch = 0.0

    @classmethod
    def serial(cls) -> "CpuEngine":
        """An engine of width 1."""
        return cls(Pool(1))

    @property
    def width(self) -> int:
        return self._pool.threads

    @contextlib.contextmanager
    def active(self) -> Iterator["CpuEngine"]:
        """Pin BLAS/LAPACK to one thread while ops run here; on leaving, wait for every kernel.

        A wide engine also shortens the interpreter's GIL switch interval meanwhile,
        so a worker back from LAPACK gets the GIL without waiting 5 ms for it.
        """
        with _controller().limit(limits=1, user_api="blas"):
            if self._depth == 0 and self.width > 1:
                self._switch = sys.getswitchinterval()
                sys.setswitchinterval(GIL_SWITCH_INTERVAL)
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
                if self._depth == 0:
                    try:
                        self.wait()
                    finally:
                        if self.width > 1:
                            sys.setswitchinterval(self._switch)

    def run(self, prim: "Primitive", args: Sequence[Any], params: dict, in_avals: tuple, avals: tuple) -> tuple:
        """Run or queue one primitive's kernel: its outputs (``avals``), as arrays or :class:`Pending`."""
        kernel = prim.impl
        if self._pool.threads == 1:
            return _call(kernel, args, params)
        if self._deferred:
            self._run_ready()
        inputs = list({id(a._future): a._future for a in args if type(a) is Pending and not a._future.done()}.values())
        costly = prim.flops(in_avals, avals, params) >= COSTLY_FLOPS
        if not inputs and not costly:
            return _call(kernel, args, params)
        future: Future = Future()
        self._queued.append(future)
        if not costly:
            self._deferred.append(_Deferred(future, inputs, kernel, args, params))
        else:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._pool.threads, thread_name_prefix="tenferro")
            executor = self._executor

            def start() -> None:
                executor.submit(_fulfil, future, kernel, args, params)

            if inputs:
                countdown = _Countdown(len(inputs), start)
                for f in inputs:
                    f.add_done_callback(countdown.tick)
            else:
                start()
        return tuple(Pending(future, i, self) for i in range(len(avals)))

    def _run_ready(self) -> bool:
        """Run, in order, the deferred kernels whose inputs are computed; True if any ran."""
        waiting: list[_Deferred] = []
        ran = False
        for task in self._deferred:
            if all(f.done() for f in task.inputs):
                _fulfil(task.future, task.kernel, task.args, task.params)
                ran = True
            else:
                waiting.append(task)
        self._deferred = waiting
        return ran

    def _drive(self, target: Future | None = None) -> None:
        """Run deferred kernels as their inputs arrive, until ``target`` (or everything) is done."""
        while not (target.done() if target is not None else not self._deferred):
            if not self._run_ready() and self._deferred:
                wait([f for task in self._deferred for f in task.inputs], return_when=FIRST_COMPLETED)
            elif target is not None and not self._deferred:
                wait([target])

    def wait(self) -> None:
        """Wait until every queued kernel has finished; raise the first error of one, if any."""
        self._drive()
        queued, self._queued = self._queued, []
        wait(queued)
        for future in queued:
            if future.exception() is not None:
                raise future.exception()

    def __repr__(self) -> str:
        return f"CpuEngine(width={self.width})"
