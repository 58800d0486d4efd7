"""A Ctrl-C lands wherever the sweep's main thread happens to be. Here it is injected before
each call made by the sweep's loop (models.sweep._compute) and by the futures it waits on,
one place per run: every run must then raise KeyboardInterrupt, leave no task of its executor
hung, keep a readable CSV, and be resumed by the same call.

(concurrent.futures.wait, the loop's first form, failed this: a Ctrl-C in its loop over the
futures' locks left some held, and the executor hung in shutdown; docs/sweep.md.)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import Executor, Future
from pathlib import Path

import pytest

from tenferro_py.models import sweep

BETAS = [0.3, 0.35, 0.4, 0.45]
LIMIT = 60
"""Seconds an executor's tasks may take to end before the test calls them hung."""

FUTURES = os.path.join("concurrent", "futures", "_base.py")


def _in_the_loop(frame) -> bool:
    code = frame.f_code
    return code.co_filename.endswith(FUTURES) or (code.co_filename == sweep.__file__
                                                  and code.co_name in ("_compute", "save"))


def _fake_point(beta: float, *_) -> dict:
    time.sleep(0.001)  # the main thread waits for it, as for a real β
    return {"beta": beta, "lnz": 0.0, "u": 0.0, "c": 0.0, "c_method": "ad"}


def _sweep(out: Path, executor, interrupt_at: int | None = None) -> int:
    """run_sweep of BETAS on executor; with interrupt_at, KeyboardInterrupt is raised before the
    interrupt_at-th call in the loop. The calls made in the loop (all of them, when run whole)."""
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call") and _in_the_loop(frame):
            calls += 1
            if calls == interrupt_at:
                raise KeyboardInterrupt

    compute = sweep._compute

    def profiled(*args):
        sys.setprofile(profile)
        try:
            compute(*args)
        finally:
            sys.setprofile(None)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep, "_compute", profiled)
        sweep.run_sweep(BETAS, 4, 6, None, out, executor=executor)
    return calls


class DaemonExecutor(Executor):
    """Each task on a daemon thread of its own. A task's thread blocked on a future's lock left
    held then fails the test; a ThreadPoolExecutor's worker would hang the interpreter's exit."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as err:
                    future.set_exception(err)

        self.threads.append(threading.Thread(target=run, daemon=True))
        self.threads[-1].start()
        return future

    def shuts_down(self) -> bool:
        """Whether every task's thread ends within LIMIT seconds."""
        deadline = time.monotonic() + LIMIT
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self.threads)


def test_a_ctrl_c_anywhere_in_the_loop_stops_the_sweep_cleanly_and_the_same_call_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "compute_point", _fake_point)
    calls = _sweep(tmp_path / "whole", DaemonExecutor())
    assert calls > 50  # the loop was seen: submitting, waiting, saving
    hung = []
    for at in range(1, calls + 1):
        out = tmp_path / f"at{at}"
        executor = DaemonExecutor()
        with pytest.raises(KeyboardInterrupt):
            _sweep(out, executor, interrupt_at=at)
        if not executor.shuts_down():
            hung.append(at)
            continue
        saved = {float(row["beta"]) for row in sweep.read_sweep(out.with_suffix(".csv"))}
        assert saved <= set(BETAS)
        done = sweep.run_sweep(BETAS, 4, 6, None, out, executor=DaemonExecutor())
        assert sorted(done.computed) == sorted(set(BETAS) - saved) and sorted(done.skipped) == sorted(saved)
    assert not hung, f"a task hung after a Ctrl-C before call {hung} of {calls}"
