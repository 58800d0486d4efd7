"""A Ctrl-C lands wherever the sweep's main thread happens to be. Here it is injected before
each call made by the sweep's loop (models.sweep._compute) and by the futures it waits on,
one place per run: every run must then raise KeyboardInterrupt, leave its executor able to
shut down, keep a readable CSV, and be resumed by the same call.

(concurrent.futures.wait, the loop's first form, failed this: a Ctrl-C in its loop over the
futures' locks left some held, and the executor hung in shutdown; docs/sweep.md.)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tenferro_py.models import sweep

BETAS = [0.3, 0.35, 0.4, 0.45]
LIMIT = 60
"""Seconds an executor may take to shut down before the test calls it hung."""

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


def _shuts_down(executor) -> bool:
    done = threading.Thread(target=executor.shutdown, kwargs={"wait": True}, daemon=True)
    done.start()
    done.join(LIMIT)
    return not done.is_alive()


def test_a_ctrl_c_anywhere_in_the_loop_stops_the_sweep_cleanly_and_the_same_call_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "compute_point", _fake_point)
    with ThreadPoolExecutor(2) as warm:
        calls = _sweep(tmp_path / "whole", warm)
    assert calls > 50  # the loop was seen: submitting, waiting, saving
    hung = []
    for at in range(1, calls + 1):
        out = tmp_path / f"at{at}"
        executor = ThreadPoolExecutor(2)
        with pytest.raises(KeyboardInterrupt):
            _sweep(out, executor, interrupt_at=at)
        if not _shuts_down(executor):
            hung.append(at)
            continue
        saved = {float(row["beta"]) for row in sweep.read_sweep(out.with_suffix(".csv"))}
        assert saved <= set(BETAS)
        with ThreadPoolExecutor(2) as again:
            done = sweep.run_sweep(BETAS, 4, 6, None, out, executor=again)
        assert sorted(done.computed) == sorted(set(BETAS) - saved) and sorted(done.skipped) == sorted(saved)
    assert not hung, f"the executor hung after a Ctrl-C before call {hung} of {calls}"
