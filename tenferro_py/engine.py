"""Where ops run: ``CpuEngine`` on a ``Pool`` of a given width.

Every kernel of every op goes through :meth:`CpuEngine.run`. While an engine is
active, BLAS/LAPACK are pinned to one thread, so each kernel gives the same bits
whatever the width. The width is how many kernels may run at once: at width 1
every kernel runs when its op is called; at width n > 1 a costly kernel (by its
primitive's flop estimate: an SVD, a large contraction) goes to n worker threads
and its outputs are :class:`Pending` until read, so independent costly ops (the
two SVDs of a TRG step) run side by side. A cheap kernel runs at once on the
session's thread, waiting for its inputs if they are pending: queueing it would
cost more than it does, and a session thread that waits instead of running
Python leaves the GIL to the workers, whose NumPy LAPACK calls need it at their
ends. A costly kernel is handed to the workers only once its inputs are
computed (a countdown over them), so no worker sits waiting for another.
"""

from __future__ import annotations

import contextlib
import ctypes
import platform
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np
from threadpoolctl import ThreadpoolController

from .errors import InvalidArgument

if TYPE_CHECKING:
    from .rules import Primitive

#: Kernels estimated at this many flops or more go to the workers of a wide engine.
COSTLY_FLOPS = float(2**22)
#: The GIL switch interval (s) while a wide engine is active (CPython's default is 5 ms).
GIL_SWITCH_INTERVAL = 5e-4

#: glibc malloc: blocks below this come from the heap (not fresh mmaps), and this much free heap is kept.
MALLOC_MMAP_THRESHOLD = 32 * 2**20
MALLOC_TRIM_THRESHOLD = 64 * 2**20

_CONTROLLER: ThreadpoolController | None = None


def _controller() -> ThreadpoolController:
    """The process's BLAS thread controller, found once (finding it scans the libraries).

    That first call, when the first engine runs, is also when malloc is tuned (:func:`_keep_freed_memory`).
    """
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
        _keep_freed_memory()
    return _CONTROLLER


def _keep_freed_memory() -> None:
    """On glibc, keep freed memory for the next kernel's temporaries instead of unmapping it.

    Kernels allocate and free large temporaries (a 256³ contraction: three 512 KiB
    arrays). With glibc's default, adaptive thresholds, freeing them shrinks the heap
    and the next kernel faults fresh zeroed pages in again: such a contraction took
    1.1–1.2 ms instead of 0.6. The thresholds set here (the largest glibc's own
    adaptation reaches after freeing one 32 MiB block) keep up to 64 MiB of free heap.
    Once per process; elsewhere than glibc, nothing.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, MALLOC_MMAP_THRESHOLD)
    libc.mallopt(m_trim_threshold, MALLOC_TRIM_THRESHOLD)


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
    """Output ``index`` of a queued kernel; :meth:`result` waits for it."""

    __slots__ = ("_future", "_index")

    def __init__(self, future: Future, index: int):
        self._future = future
        self._index = index

    def result(self) -> np.ndarray:
        return self._future.result()[self._index]


def resolve(value: "np.ndarray | Pending") -> np.ndarray:
    """The array of a value, waiting for its kernel if it is still pending."""
    return value.result() if isinstance(value, Pending) else value


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
    return tuple([v if type(v) is np.ndarray else np.asarray(v) for v in out])


def _fulfil(future: Future, kernel: Callable[..., Any], args: Sequence[Any], params: dict) -> None:
    """Run a kernel whose inputs are ready and settle its future with the outputs or the error."""
    try:
        future.set_result(_call(kernel, args, params))
    except BaseException as err:  # handed to whoever reads the value
        future.set_exception(err)


class CpuEngine:
    """Runs kernels on the CPU, ``pool.threads`` of them at a time at most."""

    __slots__ = ("_pool", "_executor", "_queued", "_depth", "_switch")

    def __init__(self, pool: Pool):
        if not isinstance(pool, Pool):
            raise InvalidArgument("CpuEngine", "a Pool (Pool.builder().threads(n).build())", repr(pool))
        self._pool = pool
        self._executor: ThreadPoolExecutor | None = None
        self._queued: list[Future] = []
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
        if self._pool.threads == 1 or prim.flops(in_avals, avals, params) < COSTLY_FLOPS:
            return _call(kernel, args, params)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._pool.threads, thread_name_prefix="tenferro")
        future: Future = Future()
        self._queued.append(future)
        executor = self._executor

        def start() -> None:
            executor.submit(_fulfil, future, kernel, args, params)

        inputs = list({id(a._future): a._future for a in args if type(a) is Pending}.values())
        if inputs:
            countdown = _Countdown(len(inputs), start)
            for f in inputs:
                f.add_done_callback(countdown.tick)
        else:
            start()
        return tuple(Pending(future, i) for i in range(len(avals)))

    def wait(self) -> None:
        """Wait until every queued kernel has finished; raise the first error of one, if any."""
        queued, self._queued = self._queued, []
        wait(queued)
        for future in queued:
            err = future.exception()
            if err is not None:
                raise err

    def __repr__(self) -> str:
        return f"CpuEngine(width={self.width})"
