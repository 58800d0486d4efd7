"""A β sweep of the 2D Ising model by TRG, into a CSV and a plot against Onsager.

Usage: python examples/ising_sweep.py [--chi 16] [--steps 20] [--c ad|difference] [--h 1e-5]
           [--betas 0.40:0.48:0.005] [--jobs N] [--out runs/sweep]

Per β, compute_point gives lnZ/N, u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ²: by default
c_ad, the AD second derivative through the staged sweep (ising_trg.value_grad_and_curvature);
with ``--c difference`` the central difference (step h) of the AD gradient, as ising_trg.py,
checked by its crossing guard (c_method ``difference-crossing`` where the guard fires). Each
finished β is appended to OUT.csv at once, with Onsager's exact values and the errors
(TRG − exact); OUT.png then plots u and c against the exact curves and |error| on a log
scale (it needs matplotlib: ``pip install -e .[plot]``).

Resumable: a row is written in one call, flushed and fsynced, so a killed run leaves at
worst a torn last line, dropped on the next start; the same command again computes only
the βs missing from the CSV (matched by their exact repr). The CSV's first line records
the settings (``# chi=16 steps=20 c=ad``); a run with other settings into
the same file is refused. Ctrl-C cancels what is pending and exits with status 130.

Parallel: each β is one task ``compute_point(beta, chi, steps, h)`` (h None: c by AD; a module-level
function, so it pickles) for a ``concurrent.futures.Executor``. The command line uses
``--jobs`` worker processes (default: the cores), or with ``--jobs 1`` one thread of this
process. From Python, run_sweep takes any executor, e.g. a Dask cluster's::

    from dask.distributed import Client
    from ising_sweep import parse_betas, plot_sweep, run_sweep

    with Client("tcp://scheduler:8786") as client:   # workers: tenferro_py and examples/ importable
        run_sweep(parse_betas("0.40:0.48:0.001"), 32, 20, None, "runs/chi32",
                  executor=client.get_executor())
    plot_sweep("runs/chi32.csv", "runs/chi32.png")

The rows are written by the calling process, never by the workers.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Iterable, NamedTuple

from ising_trg import crossing_warning, schedule, value_and_grad, value_grad_and_curvature
from onsager import BETA_C, energy, ln_z, specific_heat
from tenferro_py import CpuEngine

COLUMNS = ("beta", "lnz", "u", "c", "c_method", "lnz_onsager", "u_onsager", "c_onsager", "lnz_err", "u_err", "c_err")
MAX_BETAS = 100_000


class SettingsMismatch(ValueError):
    """The CSV was written with other settings (or is no sweep CSV): appending would mix runs."""


class Sweep(NamedTuple):
    """What run_sweep did: the CSV, the βs computed now, and those already in it."""

    csv: Path
    computed: list[float]
    skipped: list[float]


def c_method(h: float | None) -> str:
    """How c is computed: ``ad`` (h None) or ``difference`` (step h)."""
    return "ad" if h is None else "difference"


def compute_point(beta: float, chi: int, steps: int, h: float | None = None) -> dict:
    """TRG's lnZ/N, u and c at β: the one place that decides how c is computed (c_method).

    h None: c_ad = β² d²(lnZ/N)/dβ² by forward-over-reverse, exactly as examples/ising_trg.py
    (so the bits agree). Else c = β² (g(β+h) − g(β−h)) / (2h), g the AD gradient, which is
    wrong by percents where [β−h, β+h] straddles a crossing of the kept singular values
    (SPEC §4): ising_trg's guard then marks the row ``difference-crossing``.
    """
    ks = schedule(chi, steps)
    engine = CpuEngine.serial()
    if h is None:
        lnz, grad, curvature = value_grad_and_curvature(beta, ks, engine)
        return {"beta": beta, "lnz": lnz, "u": -grad, "c": beta * beta * curvature, "c_method": "ad"}
    lnz, grad = value_and_grad(beta, ks, engine)
    spectra_m, spectra_p = [], []
    below = (*value_and_grad(beta - h, ks, engine, spectra=spectra_m), spectra_m)
    above = (*value_and_grad(beta + h, ks, engine, spectra=spectra_p), spectra_p)
    c = beta * beta * (above[1] - below[1]) / (2 * h)
    suspect = crossing_warning(beta, h, ks, below, above, c, None) is not None
    return {"beta": beta, "lnz": lnz, "u": -grad, "c": c, "c_method": "difference-crossing" if suspect else "difference"}


def parse_betas(text: str) -> list[float]:
    """βs from "START:STOP:STEP" (STOP included when on the grid) or a comma/space list.

    Grid points are START + i·STEP in decimal, then rounded once to float, so 0.40:0.48:0.005
    gives 0.405, not 0.40500000000000003, and a β reads the same in both forms.
    """
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(f"expected START:STOP:STEP or a list like 0.40,0.44, got {text!r}")
        try:
            start, stop, step = (Decimal(p) for p in parts)
        except InvalidOperation:
            raise ValueError(f"START, STOP and STEP must be numbers, got {text!r}") from None
        if not step.is_finite() or step <= 0:
            raise ValueError(f"the step must be a number > 0, got {parts[2]!r}")
        if not (start.is_finite() and stop.is_finite()) or stop < start:
            raise ValueError(f"the grid {text!r} is empty (STOP must be finite and >= START)")
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
            beta = float(word)
        except ValueError:
            beta = math.nan
        if not (math.isfinite(beta) and beta > 0):
            raise ValueError(f"every beta must be a finite number > 0, got {word!r}")
        betas.append(beta)
    return list(dict.fromkeys(betas))


def output_paths(out: str | os.PathLike) -> tuple[Path, Path]:
    """(OUT.csv, OUT.png); OUT may also be given with its .csv."""
    stem = str(out).removesuffix(".csv")
    return Path(stem + ".csv"), Path(stem + ".png")


def settings_line(chi: int, steps: int, h: float | None) -> str:
    """The CSV's first line: what must match for a run to append to it."""
    return f"# chi={chi} steps={steps} c=ad" if h is None else f"# chi={chi} steps={steps} c=difference h={h!r}"


def _append(path: Path, text: str) -> None:
    """Append text in one write, flushed and fsynced: on disk once this returns; a crash
    before leaves at worst a torn last line, which _prepare cuts off."""
    with open(path, "ab") as f:
        f.write(text.encode())
        f.flush()
        os.fsync(f.fileno())


def _prepare(path: Path, settings: str) -> set[str]:
    """Make path ready to append to, and return the reprs of the βs already in it.

    A missing or empty file gets the header. An existing one must carry the same header, or
    SettingsMismatch (and it is left untouched); then a torn last line (no newline: a killed
    run) is cut off.
    """
    header = [settings, ",".join(COLUMNS)]
    data = path.read_bytes() if path.exists() else b""
    whole = data[: data.rfind(b"\n") + 1]
    lines = whole.decode(errors="replace").splitlines()
    if not whole and not "\n".join(header).encode().startswith(data):  # one line, and not a torn header
        lines = [data.decode(errors="replace")]
    if lines and lines[0] != settings:
        raise SettingsMismatch(
            f"{path} holds a sweep with {lines[0].lstrip('# ')!r}, not {settings.lstrip('# ')!r}: "
            "choose another --out or remove the file"
        )
    if lines[1:] and lines[1] != header[1]:
        raise SettingsMismatch(f"{path} has the columns {lines[1]!r}, not {header[1]!r}: choose another --out")
    if whole != data:
        os.truncate(path, len(whole))
    if len(lines) < 2:
        path.parent.mkdir(parents=True, exist_ok=True)
        _append(path, "\n".join(header[len(lines):]) + "\n")
    return {line.split(",", 1)[0] for line in lines[2:]}


def _sort_rows(path: Path) -> None:
    """Put the rows in β order once a run is complete (they come in completion order): a new
    file, fsynced, then renamed over the old one, so no row is ever at risk."""
    lines = path.read_text().splitlines(keepends=True)
    rows = sorted(lines[2:], key=lambda line: float(line.split(",", 1)[0]))
    if rows != lines[2:]:
        tmp = path.with_name(path.name + ".tmp")
        tmp.unlink(missing_ok=True)
        _append(tmp, "".join(lines[:2] + rows))
        os.replace(tmp, path)


def read_sweep(path: str | os.PathLike) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(settings, rows) of a sweep CSV; rows as strings, in β order."""
    with open(path, newline="") as f:
        settings = dict(item.split("=", 1) for item in f.readline().lstrip("# ").split())
        rows = list(csv.DictReader(f))
    return settings, sorted(rows, key=lambda r: float(r["beta"]))


def _row(point: dict) -> str:
    """One CSV line: the point, Onsager's values and the errors; floats by repr (exact)."""
    beta = point["beta"]
    values = dict(point, lnz_onsager=ln_z(beta), u_onsager=energy(beta), c_onsager=specific_heat(beta))
    for q in ("lnz", "u", "c"):
        values[f"{q}_err"] = values[q] - values[f"{q}_onsager"]
    return ",".join(v if isinstance(v, str) else repr(float(v)) for v in (values[c] for c in COLUMNS)) + "\n"


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class _Progress:
    """βs done of the total, time elapsed and left, redrawn in place on one stderr line."""

    WIDTH = 24

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.start = total, enabled, time.monotonic()

    def draw(self, done: int) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        left = _clock(elapsed / done * (self.total - done)) if done else "?"
        filled = self.WIDTH * done // self.total
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{self.total} betas, "
                         f"{_clock(elapsed)} elapsed, {left} left  ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


_worker_state = {"busy": False, "stopped": False}
"""In a worker process of run_sweep's pool: computing a β now; Ctrl-C seen."""


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


def _init_worker() -> None:
    signal.signal(signal.SIGINT, _on_worker_interrupt)
    sys.unraisablehook = _retry_interrupt


def _worker_point(beta: float, chi: int, steps: int, h: float | None) -> dict:
    """compute_point in a worker process of run_sweep's pool; after Ctrl-C, no more."""
    if _worker_state["stopped"]:
        raise KeyboardInterrupt
    _worker_state["busy"] = True
    try:
        return compute_point(beta, chi, steps, h)
    finally:
        _worker_state["busy"] = False


def cores() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_sweep(
    betas: Iterable[float],
    chi: int,
    steps: int,
    h: float | None,
    out: str | os.PathLike,
    executor: Executor | None = None,
    jobs: int | None = None,
    progress: bool | None = None,
) -> Sweep:
    """Compute the βs not yet in OUT.csv, appending each row as soon as its β finishes
    (then, the run complete, putting the rows in β order).

    executor: any concurrent.futures.Executor; it stays yours (not shut down), and on an
    exception or KeyboardInterrupt the futures still pending are cancelled. Without one,
    run_sweep makes min(jobs, βs to do) worker processes (jobs default: the cores; one
    worker: a thread of this process) and shuts them down. progress: draw the bar on stderr
    (default: when stderr is a terminal). Raises SettingsMismatch for a CSV of other settings.
    """
    betas, h = [float(b) for b in betas], None if h is None else float(h)
    if not all(math.isfinite(b) and b > 0 for b in betas):
        raise ValueError(f"every beta must be a finite number > 0, got {betas}")
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    path = output_paths(out)[0]
    done = _prepare(path, settings_line(chi, steps, h))
    todo = list({repr(b): b for b in betas if repr(b) not in done}.values())
    skipped = [b for b in betas if repr(b) in done]
    computed: list[float] = []
    if not todo:
        _sort_rows(path)
        return Sweep(path, computed, skipped)

    own, task = executor is None, compute_point
    if own:
        workers = min(jobs or cores(), len(todo))
        if workers == 1:
            executor = ThreadPoolExecutor(1)
        else:
            executor = ProcessPoolExecutor(workers, initializer=_init_worker)
            task = _worker_point
    bar = _Progress(len(todo), sys.stderr.isatty() if progress is None else progress)
    futures = [executor.submit(task, b, chi, steps, h) for b in todo]
    saved: set[Future] = set()

    def save(future: Future) -> None:
        point = future.result()
        _append(path, _row(point))
        saved.add(future)
        computed.append(point["beta"])

    finished = False
    try:
        pending = set(futures)
        bar.draw(0)
        while pending:
            ready, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in ready:
                save(future)
            bar.draw(len(computed))
        finished = True
    except BaseException:
        for future in futures:
            future.cancel()
        for future in futures:  # finished while we were stopped: still saved
            if future not in saved and future.done() and not future.cancelled() and future.exception() is None:
                save(future)
        raise
    finally:
        bar.close()
        if own:
            executor.shutdown(wait=finished, cancel_futures=True)
    _sort_rows(path)
    return Sweep(path, computed, skipped)


def plot_sweep(csv_path: str | os.PathLike, png_path: str | os.PathLike) -> None:
    """Draw the sweep into png_path: u and c with Onsager's curves; |TRG − Onsager| on a log scale.

    Raises ImportError without matplotlib (an optional extra: pip install -e .[plot]).
    """
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    settings, rows = read_sweep(csv_path)
    col = {name: [float(r[name]) for r in rows] for name in COLUMNS if name != "c_method"}
    lo, hi = min(col["beta"]), max(col["beta"])
    pad = 0.05 * (hi - lo) or 0.01
    # A dense exact curve; c = inf at β_c exactly, so that point is left out.
    dense = [b for b in (lo - pad + i * (hi - lo + 2 * pad) / 800 for i in range(801)) if b > 0 and b != BETA_C]

    fig = Figure(figsize=(8, 8), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    trg = f"TRG χ={settings['chi']}"
    for name, label, color, exact in (("u", "u", "C0", energy), ("c", "c", "C3", specific_heat)):
        top.plot(dense, [exact(b) for b in dense], color=color, lw=1.2, label=f"{label} Onsager (exact)")
        top.plot(col["beta"], col[name], "o", color=color, mfc="none", label=f"{label} {trg}")
    top.set_ylabel("per site:  u = −∂(lnZ/N)/∂β,  c = β² ∂²(lnZ/N)/∂β²")
    steps = settings["steps"]
    top.set_title(f"2D Ising model: {trg}, {steps} steps (N = $2^{{{steps}}}$ sites) against Onsager\n"
                  + ("c by AD (forward over reverse)" if settings["c"] == "ad"
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """One line naming the argument, exit status 2 (argparse's default adds the usage)."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _checked(convert, allowed: str, ok):
    """An argparse type: convert the text and refuse it, saying what is allowed, unless ok."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}")
        return value

    return parse


def _betas_argument(text: str) -> list[float]:
    try:
        return parse_betas(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parser() -> argparse.ArgumentParser:
    """The command line: every argument validated, a bad one is one line and exit status 2."""
    count = _checked(int, "an integer >= 1", lambda v: v >= 1)
    p = _Parser(prog="ising_sweep.py", description=__doc__.split("\n\n")[0],
                epilog="Each finished β is saved at once: the same command resumes an interrupted sweep.")
    p.add_argument("--chi", type=count, default=16, help="bond dimension χ (default 16)")
    p.add_argument("--steps", type=count, default=20, help="TRG steps: N = 2^steps sites (default 20)")
    p.add_argument("--c", choices=("ad", "difference"), default="ad",
                   help="c by AD (default) or by the central difference of the AD gradient")
    p.add_argument("--h", type=_checked(float, "a finite number > 0", lambda v: math.isfinite(v) and v > 0),
                   default=1e-5, help="step of c's central difference, with --c difference (default 1e-5)")
    p.add_argument("--betas", type=_betas_argument, default="0.40:0.48:0.005",
                   help="START:STOP:STEP (STOP included when on the grid) or a list '0.4,0.44 0.5' "
                        "(default 0.40:0.48:0.005)")
    p.add_argument("--jobs", type=count, default=None,
                   help=f"worker processes (default: the cores, {cores()} here); 1: in this process")
    p.add_argument("--out", default="runs/sweep", help="writes OUT.csv and OUT.png (default runs/sweep)")
    return p


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if args.c == "difference" and args.h >= min(args.betas):
        cli.error(f"argument --h: must be smaller than every beta (beta - h > 0), got {args.h!r} for beta={min(args.betas)!r}")
    csv_path, png_path = output_paths(args.out)
    try:
        h = args.h if args.c == "difference" else None
        sweep = run_sweep(args.betas, args.chi, args.steps, h, args.out, jobs=args.jobs)
    except SettingsMismatch as err:
        print(f"ising_sweep.py: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        done = {r["beta"] for r in read_sweep(csv_path)[1]} if csv_path.exists() else set()
        have = sum(repr(b) in done for b in args.betas)
        print(f"ising_sweep.py: interrupted; {have} of {len(args.betas)} betas are saved in {csv_path}, "
              "the same command resumes", file=sys.stderr)
        return 130
    print(f"{csv_path}: {len(sweep.computed)} betas computed, {len(sweep.skipped)} already there")
    try:
        plot_sweep(csv_path, png_path)
    except ImportError:
        print(f"no plot: matplotlib is not installed; pip install -e '.[plot]' (or pip install matplotlib) "
              f"and run again to draw {png_path}")
    else:
        print(f"{png_path}: u and c against Onsager, and the errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
