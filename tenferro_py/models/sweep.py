"""A β sweep of the 2D Ising model by TRG: each β a task, each finished β a row of a CSV at once.

``run_sweep(betas, chi, steps, h, out)`` computes the βs not yet in OUT.csv (the format, its
checks and repair: :mod:`tenferro_py.models.sweep_csv`) and appends each row as soon as its β
finishes, with Onsager's exact values and the errors; a killed run is resumed by the same call.
Per β, ``compute_point`` gives lnZ/N, u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ²: by default
c_ad, the AD second derivative through the staged sweep (:func:`tenferro_py.models.trg.value_grad_and_curvature`);
with h the central difference (step h) of the AD gradient, checked by TRG's crossing guard
(c_method ``difference-crossing`` where the guard fires). A β whose result is not finite gets
no row and is reported in ``Sweep.failed``.

Who computes: any ``concurrent.futures.Executor``, the worker processes of
:mod:`tenferro_py.models.sweep_pool` (the default: as many as the cores; one: a thread of this
process), or the workers of a Dask cluster (``scheduler``; they need tenferro_py). The rows are
written by the calling process, never by the workers. ``plot_sweep`` draws u and c against
Onsager's curves and the errors on a log scale (it needs matplotlib).
"""

from __future__ import annotations

import math
import os
import queue
import re
import sys
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from ..engine import CpuEngine, available_parallelism
from .cli import plain_number
from .onsager import BETA_C, energy, specific_heat
from .sweep_csv import (
    COLUMNS, HEADER, RESULT_COLUMNS, Notify, OutputNotWritable, Settings, SettingsMismatch, SweepError,
    append_durably, exclusive, format_row, lock_path, output_paths, prepare, read_sweep, sort_rows,
)
from .sweep_pool import ClusterUnavailable, connect, one_line, run_in_worker, worker_pool
from .trg import BETA_RANGE, SVD_METHODS, difference_curvature, difference_in_range, in_beta_range, schedule
from .trg import value_and_grad, value_grad_and_curvature

__all__ = [
    "COLUMNS", "HEADER", "MAX_BETAS", "RESULT_COLUMNS", "ClusterUnavailable", "OutputNotWritable", "PointFailed",
    "Settings", "SettingsMismatch", "Sweep", "SweepError", "beta_range_text", "compute_point", "lock_path",
    "output_paths", "parse_betas", "plot_rows", "plot_sweep", "read_sweep", "run_sweep",
]

MAX_BETAS = 100_000


class PointFailed(SweepError):
    """A β's task failed other than numerically (a worker that cannot import, one that died)."""


class Sweep(NamedTuple):
    """What run_sweep did: the CSV, the βs computed now, those already in it, and those
    without a finite result (β: why; no row was written for them)."""

    csv: Path
    computed: list[float]
    skipped: list[float]
    failed: dict[float, str]


def compute_point(beta: float, chi: int, steps: int, h: float | None = None, svd: str = "full") -> dict:
    """TRG's lnZ/N, u and c at β: the one place that decides how c is computed (c_method).

    h None: c_ad = β² d²(lnZ/N)/dβ² by forward-over-reverse, exactly as examples/ising_trg.py
    (so the bits agree). Else c = β² (g(β+h) − g(β−h)) / (2h), g the AD gradient, which is
    wrong by percents where [β−h, β+h] straddles a crossing of the kept singular values
    (SPEC §4): the crossing guard then marks the row ``difference-crossing``.
    """
    ks = schedule(chi, steps)
    engine = CpuEngine.serial()
    if h is None:
        lnz, grad, curvature = value_grad_and_curvature(beta, ks, engine, svd=svd)
        return {"beta": beta, "lnz": lnz, "u": -grad, "c": beta * beta * curvature, "c_method": "ad"}
    lnz, grad = value_and_grad(beta, ks, engine, svd=svd)
    c, warning = difference_curvature(beta, h, ks, engine, svd)
    return {"beta": beta, "lnz": lnz, "u": -grad, "c": c, "c_method": "difference" if warning is None
            else "difference-crossing"}


def beta_range_text() -> str:
    """TRG's β range, as the messages give it: [1e-14, 8]."""
    return f"[{BETA_RANGE[0]:g}, {BETA_RANGE[1]:g}]"


def parse_betas(text: str) -> list[float]:
    """βs from "START:STOP:STEP" (STOP included when on the grid) or a comma/space list.

    Grid points are START + i·STEP in decimal, then rounded once to float, so 0.40:0.48:0.005
    gives 0.405, not 0.40500000000000003, and a β reads the same in both forms. Numbers are
    plain decimals (not 1_000, inf or nan), every β in BETA_RANGE, where TRG's values are finite.
    """
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(f"expected START:STOP:STEP or a list like 0.40,0.44, got {text!r}")
        try:
            for part in parts:
                plain_number(part, float)
        except ValueError:
            raise ValueError(f"START, STOP and STEP must be plain decimal numbers, got {text!r}") from None
        start, stop, step = (Decimal(part) for part in parts)
        if step <= 0:
            raise ValueError(f"the step must be a number > 0, got {parts[2]!r}")
        if stop < start:
            raise ValueError(f"the grid {text!r} is empty (STOP must be >= START)")
        count = int((stop - start) / step + Decimal("1e-9")) + 1
        if count > MAX_BETAS:
            raise ValueError(f"the grid {text!r} has {count} points, more than {MAX_BETAS}")
        words = [str(start + i * step) for i in range(count)]
    else:
        words = [w for w in re.split(r"[,\s]+", text) if w]
        if not words:
            raise ValueError("no beta given")
    betas = []
    for word in words:
        try:
            beta = plain_number(word, float)
        except ValueError:
            beta = math.nan
        if not in_beta_range(beta):
            raise ValueError(f"every beta must be a plain decimal number in {beta_range_text()}, where TRG's "
                             f"values are finite, got {word!r}")
        betas.append(beta)
    return list(dict.fromkeys(betas))



def _to_stderr(line: str) -> None:
    print(f"tenferro_py.models.sweep: {line}", file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class _Progress:
    """βs done of the total, time elapsed and left, redrawn in place on one stderr line."""

    WIDTH = 24

    def __init__(self, total: int, enabled: bool, notify: Notify):
        self.total, self.enabled, self.start, self.notify = total, enabled, time.monotonic(), notify

    def draw(self, done: int) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        left = _clock(elapsed / done * (self.total - done)) if done else "?"
        filled = self.WIDTH * done // self.total
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{self.total} betas, "
                         f"{_clock(elapsed)} elapsed, {left} left  ")
        sys.stderr.flush()

    def note(self, message: str) -> None:
        """A line of its own (to notify), above the bar (redrawn by the next draw)."""
        if self.enabled:
            sys.stderr.write("\r\033[K")
        self.notify(message)

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _compute(executor: Executor, task: Callable[..., dict], todo: list[float], settings: Settings, path: Path,
             bar: _Progress, computed: list[float], failed: dict[float, str]) -> None:
    """Run task for each β of todo on executor, appending each row as its β finishes.

    A β whose result is not finite (or whose SVD refuses its input) goes into failed, said in
    one line; any other failure of a task is PointFailed. On any exception or interruption
    the pending βs are cancelled and those finished meanwhile still saved.
    """
    futures = {executor.submit(task, beta, settings.chi, settings.steps, settings.h, settings.svd): beta
               for beta in todo}
    saved: set[Future] = set()

    def save(future: Future) -> None:
        saved.add(future)
        beta = futures[future]
        try:
            line = format_row(future.result(), settings)
        except ArithmeticError as err:  # NotFinite, or LinalgError: the SVD met inf or NaN
            failed[beta] = one_line(err)
            bar.note(f"error: beta={beta!r} has no finite result ({failed[beta]}): no row written")
            return
        except Exception as err:
            raise PointFailed(f"beta={beta!r} failed: {one_line(err)}") from err
        append_durably(path, line)
        computed.append(beta)

    # Finished futures arrive through a queue, not concurrent.futures.wait: a Ctrl-C landing in
    # wait's loop over the futures' locks leaves some held, and the executor then hangs.
    finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
    for future in futures:
        future.add_done_callback(finished.put)
    try:
        bar.draw(0)
        while len(saved) < len(futures):
            try:
                save(finished.get(timeout=1.0))
            except queue.Empty:
                pass
            bar.draw(len(computed) + len(failed))
    except BaseException:
        for future in futures:
            future.cancel()
        for future in futures:  # finished while we were stopped: still saved
            if future not in saved and future.done() and not future.cancelled() and future.exception() is None:
                save(future)
        raise
    finally:
        bar.close()


def run_sweep(
    betas: Iterable[float],
    chi: int,
    steps: int,
    h: float | None,
    out: str | os.PathLike,
    executor: Executor | None = None,
    jobs: int | None = None,
    progress: bool | None = None,
    scheduler: str | None = None,
    svd: str = "full",
    notify: Notify | None = None,
) -> Sweep:
    """Compute the βs not yet in OUT.csv, appending each row as soon as its β finishes
    (then, the run complete, putting the rows in β order), all under OUT.csv.lock.

    Who computes: executor, any concurrent.futures.Executor (it stays yours: not shut down);
    or scheduler, the address of a Dask scheduler (connect; the client is closed after);
    or min(jobs, βs to do) worker processes (jobs default: the cores; one worker: a thread
    of this process), shut down after. At most one of the three. On an exception or an
    interruption (KeyboardInterrupt, or any BaseException a signal handler raises) the pending
    βs are cancelled and the worker processes stop theirs. progress: draw the bar on stderr
    (default: when stderr is a terminal). notify(line) receives what the user should read: a
    wait for another run's lock, a dropped or converted row, a β without a finite result
    (default: a line on stderr). Raises SweepError (one line) for a CSV of other settings, an
    output that cannot be written, no cluster at scheduler, or a task that failed other than
    numerically; a β without a finite result is in Sweep.failed, and has no row.
    """
    notify = notify or _to_stderr
    betas, h = [float(b) for b in betas], None if h is None else float(h)
    if not all(in_beta_range(b) for b in betas):
        raise ValueError(f"every beta must be in {beta_range_text()}, got {betas}")
    if h is not None and not all(difference_in_range(b, h) for b in betas):
        raise ValueError(f"h={h!r} takes beta - h or beta + h out of {beta_range_text()}")
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if sum(choice is not None for choice in (executor, jobs, scheduler)) > 1:
        raise ValueError("give at most one of executor, jobs and scheduler")
    if svd not in SVD_METHODS:
        raise ValueError(f"svd must be one of {', '.join(SVD_METHODS)}, got {svd!r}")
    settings, path = Settings(chi, steps, h, svd), output_paths(out)[0]
    computed: list[float] = []
    failed: dict[float, str] = {}
    with exclusive(path, notify):
        done = prepare(path, settings, notify)
        todo = list(dict.fromkeys(b for b in betas if b not in done))
        skipped = [b for b in betas if b in done]
        if todo:
            bar = _Progress(len(todo), sys.stderr.isatty() if progress is None else progress, notify)
            _run(todo, settings, path, executor, jobs, scheduler, bar, computed, failed)
        sort_rows(path)
    return Sweep(path, computed, skipped, failed)


def _run(todo: list[float], settings: Settings, path: Path, executor: Executor | None, jobs: int | None,
         scheduler: str | None, bar: _Progress, computed: list[float], failed: dict[float, str]) -> None:
    """run_sweep's computing part: make the executor it was not given, run, and clean up."""
    client, stop, own, task = None, None, executor is None and scheduler is None, compute_point
    if scheduler is not None:
        client = connect(scheduler, compute_point)
        executor = client.get_executor()
    elif own:
        workers = min(jobs or available_parallelism(), len(todo))
        if workers == 1:
            executor = ThreadPoolExecutor(1)
        else:
            executor, stop = worker_pool(workers)
            task = partial(run_in_worker, compute_point)
    try:
        _compute(executor, task, todo, settings, path, bar, computed, failed)
    except BaseException:
        if stop is not None:
            stop.set()  # the workers stop their βs (a Ctrl-C reached them already; SIGTERM, an error did not)
        raise
    finally:
        if own:  # waited for even when stopping (workers stop within WATCH_SECONDS): a pool left running
            # races the interpreter's exit, which then prints a traceback of its closed pipe
            executor.shutdown(wait=True, cancel_futures=True)
        if client is not None:
            client.close()


def plot_sweep(csv_path: str | os.PathLike, png_path: str | os.PathLike) -> None:
    """Draw the sweep into png_path: u and c with Onsager's curves; |TRG − Onsager| on a log scale.

    Raises ImportError without matplotlib (an optional extra: pip install -e .[plot]), and
    ValueError when the CSV has no row.
    """
    rows = read_sweep(csv_path)
    if not rows:
        raise ValueError(f"{csv_path} has no row to plot")
    plot_rows(rows, png_path)


def plot_rows(rows: list[dict[str, str]], png_path: str | os.PathLike) -> None:
    """plot_sweep's drawing, of rows already read (and checked) by read_sweep."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    settings = rows[0]
    col = {name: [float(r[name]) for r in rows] for name in RESULT_COLUMNS}
    lo, hi = min(col["beta"]), max(col["beta"])
    pad = 0.05 * (hi - lo) or 0.01
    # A dense exact curve; c = inf at β_c exactly, so that point is left out.
    dense = [b for b in (lo - pad + i * (hi - lo + 2 * pad) / 800 for i in range(801)) if b > 0 and b != BETA_C]

    fig = Figure(figsize=(8, 8), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    method = f"TRG χ={settings['chi']}"
    for name, label, color, exact in (("u", "u", "C0", energy), ("c", "c", "C3", specific_heat)):
        top.plot(dense, [exact(b) for b in dense], color=color, lw=1.2, label=f"{label} Onsager (exact)")
        top.plot(col["beta"], col[name], "o", color=color, mfc="none", label=f"{label} {method}")
    top.set_ylabel("per site:  u = −∂(lnZ/N)/∂β,  c = β² ∂²(lnZ/N)/∂β²")
    steps = settings["steps"]
    top.set_title(f"2D Ising model: {method}, {steps} steps (N = $2^{{{steps}}}$ sites) against Onsager\n"
                  + ("c by AD (forward over reverse)" if settings["c_method"] == "ad"
                     else f"c by central difference of the AD gradient, h = {settings['h']}"))
    for name, label, color in (("lnz", "lnZ/N", "C2"), ("u", "u", "C0"), ("c", "c", "C3")):
        pairs = [(b, abs(e)) for b, e in zip(col["beta"], col[f"{name}_err"]) if math.isfinite(e) and e != 0]
        if pairs:
            bottom.plot(*zip(*pairs), "o-", color=color, ms=4, label=f"|{label} error|")
    bottom.set_yscale("log")
    bottom.set_ylabel("|TRG − Onsager|")
    bottom.set_xlabel("β")
    for ax in (top, bottom):
        ax.axvline(BETA_C, color="gray", ls=":", lw=1, label=f"β$_c$ = {BETA_C:.6f}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.savefig(png_path, dpi=120)

