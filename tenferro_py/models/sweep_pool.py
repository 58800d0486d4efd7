"""Where a sweep's points run: worker processes that stop with the sweep, or a Dask cluster.

``worker_pool(n)`` is a ProcessPoolExecutor whose workers stop their point quietly at Ctrl-C
(which reaches the whole process group) or when the sweep sets the pool's stop event (SIGTERM
to the main process only, an error), and exit at once when the process that started them is
gone (killed outright), which would else leave them running, holding the terminal, a pipe and
the CSV's lock. Tasks go through ``run_in_worker``. ``connect(address, task)`` is a Dask client
whose workers were checked to load the task (they need tenferro_py): a task that does not
unpickle on a worker breaks its connection, and a sweep would wait for ever.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

from .sweep_csv import SweepError

__all__ = ["ClusterUnavailable", "WATCH_SECONDS", "connect", "one_line", "run_in_worker", "worker_pool"]

WATCH_SECONDS = 0.1
"""How often a worker process looks whether the sweep stopped or its parent is gone."""


class ClusterUnavailable(SweepError):
    """A scheduler address: dask's distributed is not installed, the address is none of a
    scheduler's, no scheduler answers there, or its workers cannot load the task."""


_worker_state = {"busy": False, "stopped": False}
"""In a worker process of worker_pool: computing a point now; Ctrl-C or stop seen."""


def _on_worker_interrupt(signum, frame) -> None:
    """Ctrl-C in a worker process stops its β, and every β it was handed after (the pool
    queues a few ahead); an idle worker just notes it, so none dies with a traceback."""
    _worker_state["stopped"] = True
    if _worker_state["busy"]:
        raise KeyboardInterrupt


def _retry_interrupt(unraisable) -> None:
    """A worker's Ctrl-C that lands in a finalizer (the tape frees leaves by weakref callbacks)
    is only printed there: drop it quietly and raise it again 10 ms later (POSIX)."""
    if not issubclass(unraisable.exc_type, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
    elif hasattr(signal, "setitimer"):
        signal.signal(signal.SIGALRM, _on_worker_interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.01)


def _watch(parent: int, stop) -> None:
    """A worker's watchdog thread. When run_sweep stops (SIGTERM, an error: stop is set), it
    stops this worker's βs as Ctrl-C does; when the process that started the worker is gone
    (killed outright), it ends the worker at once, which would else run on, holding the
    terminal and any pipe (a ``| tee`` would never end)."""
    while os.getppid() == parent:
        if stop.is_set() and not _worker_state["stopped"]:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(WATCH_SECONDS)
    os._exit(1)


def _init_worker(stop) -> None:
    """Set up a worker process of worker_pool: Ctrl-C stops its βs quietly; SIGTERM
    back to its default (a fork inherits the command line's handler); the watchdog."""
    signal.signal(signal.SIGINT, _on_worker_interrupt)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.unraisablehook = _retry_interrupt
    threading.Thread(target=_watch, args=(os.getppid(), stop), name="sweep watchdog", daemon=True).start()



def worker_pool(workers: int) -> tuple[ProcessPoolExecutor, Any]:
    """(executor, stop): ``workers`` worker processes set up as above, and the event that stops
    their points (set it before shutting the executor down on an error or SIGTERM)."""
    context = multiprocessing.get_context()
    stop = context.Event()
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(stop,)), stop


def run_in_worker(function: Callable[..., Any], *args: Any) -> Any:
    """function(*args) in a worker process of worker_pool; once Ctrl-C or stop was seen, no more."""
    if _worker_state["stopped"]:
        raise KeyboardInterrupt
    _worker_state["busy"] = True
    try:
        return function(*args)
    finally:
        _worker_state["busy"] = False


def one_line(err: BaseException) -> str:
    """An exception as ``Type: message`` on one line."""
    return " ".join(f"{type(err).__name__}: {err}".split())


def connect(address: str, task: Callable[..., Any]) -> Any:
    """A distributed.Client of the Dask scheduler at address, its workers checked to load task.

    ClusterUnavailable, at once, when dask's distributed is not installed or the address is
    none of a scheduler's (malformed, an unknown scheme, a host that does not resolve);
    within dask's connect timeout (config distributed.comm.timeouts.connect, environment
    DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT; 30 s by default) when no scheduler answers;
    and when a worker cannot unpickle task (task goes by reference: the workers need
    tenferro_py, the same version).
    """
    try:
        from distributed import Client
        from distributed.comm import resolve_address
    except ImportError:
        raise ClusterUnavailable("--scheduler needs dask's distributed: pip install -e '.[distributed]' "
                                 "(or pip install \"dask[distributed]\")") from None
    try:
        if address.startswith("inproc://"):
            raise ValueError("inproc:// is an address inside one process")
        resolve_address(address)
    except Exception as err:
        raise ClusterUnavailable(f"--scheduler: {address!r} is not a Dask scheduler's address ({one_line(err)})") \
            from None
    failure = None
    try:
        client = Client(address, set_as_default=False)
    except Exception as err:  # refused, timed out: no cluster there
        failure = ClusterUnavailable(f"--scheduler: no Dask scheduler answers at {address!r} ({one_line(err)})")
    if failure is not None:
        # The half-made Client is kept alive by the exception's frames; collected now, while its event
        # loop runs, it closes at once. Left to the exit, it waits twice the connect timeout and prints.
        gc.collect()
        raise failure
    try:
        loaded = client.run(pickle.loads, pickle.dumps(task), on_error="return")
    except Exception as err:
        loaded = {address: err}
    failing = {worker: one_line(got) for worker, got in loaded.items() if isinstance(got, BaseException)}
    if failing:
        client.close()
        worker, error = next(iter(failing.items()))
        raise ClusterUnavailable(f"--scheduler: {len(failing)} of the {len(loaded)} Dask workers at {address!r} "
                                 f"cannot load the sweep's task, {worker} says {error} (the workers need tenferro_py "
                                 "installed)")
    return client
