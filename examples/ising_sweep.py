"""A β sweep of the 2D Ising model by TRG, into a CSV and a plot against Onsager.

Usage: python examples/ising_sweep.py [--chi 16] [--steps 20] [--c ad|difference] [--h 1e-5] [--svd full|krylov]
           [--betas 0.40:0.48:0.005] [--jobs N | --scheduler ADDRESS] [--out runs/sweep]

Per β, compute_point gives lnZ/N, u = −d(lnZ/N)/dβ and c = β² d²(lnZ/N)/dβ²: by default
c_ad, the AD second derivative through the staged sweep (ising_trg.value_grad_and_curvature);
with ``--c difference`` the central difference (step h) of the AD gradient, as ising_trg.py,
checked by its crossing guard (c_method ``difference-crossing`` where the guard fires). Each
finished β is appended to OUT.csv at once, with Onsager's exact values and the errors
(TRG − exact); OUT.png then plots u and c against the exact curves and |error| on a log
scale (it needs matplotlib: ``pip install -e .[plot]``).

The CSV is a standard one: the header first, then one row per β with every setting in it
(COLUMNS: beta, lnz, u, c, lnz_onsager, u_onsager, c_onsager, lnz_err, u_err, c_err, chi, steps,
c_method, h; h is empty for c by AD), floats by repr, so csv.DictReader and pandas.read_csv
read it and the CSVs of several χ concatenate. βs must lie in ising_trg.BETA_RANGE,
[1e-14, 8], where lnZ/N, u and c are finite; a β whose result is not finite all the same
(χ = 2 over many steps, say) is one line on stderr and no row, and the exit status is 2.

Resumable: a row is written in one call, flushed and fsynced, so a killed run leaves at
worst a torn last line; the same command again computes only the βs missing from the CSV.
Each start checks the rows: one that does not parse (a missing field, a non-number, a β
that does not match its Onsager values, bytes that are not UTF-8) is named on stderr,
dropped, and its β computed again; a repeated β is dropped; a torn last line quietly so.
A run with other settings into the same file is refused. A CSV of the former format (a
``# chi=… steps=… c=…`` line before the header) is converted in place, once, by a run of
its settings. Ctrl-C cancels what is pending and exits with status 130, SIGTERM likewise
with 143; the worker processes stop with it, and exit by themselves if it is killed.

One run at a time per CSV: a run holds an exclusive lock (flock) on OUT.csv.lock from
reading the CSV to its last write (a file left in place); a second run into the same OUT
says on stderr that it waits, then computes only what the first left missing.

Parallel: each β is one task ``compute_point(beta, chi, steps, h, svd)`` (h None: c by AD; a
module-level function, so it pickles) for a ``concurrent.futures.Executor``. The command
line uses ``--jobs`` worker processes (default: the cores), with ``--jobs 1`` one thread of
this process, or with ``--scheduler ADDRESS`` the workers of a Dask cluster (``pip install
-e .[distributed]``): this file and ising_trg.py travel with the tasks, so the workers need
only tenferro_py. From Python, run_sweep takes the same choices (jobs, scheduler) or any
executor. The rows are written by the calling process, never by the workers.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import math
import multiprocessing
import os
import pickle
import re
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

import ising_trg
from ising_trg import (
    BETA_RANGE, SVD_METHODS, crossing_warning, difference_in_range, in_beta_range, plain_number, schedule,
    value_and_grad, value_grad_and_curvature,
)
from tenferro_py.models.onsager import BETA_C, energy, ln_z, specific_heat
from tenferro_py import CpuEngine
from tenferro_py.engine import available_parallelism

RESULT_COLUMNS = ("beta", "lnz", "u", "c", "lnz_onsager", "u_onsager", "c_onsager", "lnz_err", "u_err", "c_err")
SETTING_COLUMNS = ("chi", "steps", "c_method", "h", "svd")
COLUMNS = RESULT_COLUMNS + SETTING_COLUMNS
HEADER = ",".join(COLUMNS)
FORMER_COLUMNS = ("beta", "lnz", "u", "c", "c_method", "lnz_onsager", "u_onsager", "c_onsager", "lnz_err", "u_err",
                  "c_err")
FORMER_SETTINGS = re.compile(r"# chi=([0-9]+) steps=([0-9]+) c=(?:ad|difference h=(\S+))")
"""The first line of the former format, the settings, which came before the header."""
C_METHODS = ("ad", "difference", "difference-crossing")
ONSAGER = {"lnz": ln_z, "u": energy, "c": specific_heat}
ONSAGER_AGREEMENT = 1e-9
"""How closely a row's Onsager values must match Onsager's at its β (relative): loose enough for
another scipy or libm, tight enough that a garbled β or digit shows."""
MAX_BETAS = 100_000
WATCH_SECONDS = 0.1
"""How often a worker process looks whether the sweep stopped or its process is gone."""


class SweepError(Exception):
    """A sweep that cannot go on, said in one line (the command line exits with status 2)."""


class SettingsMismatch(SweepError):
    """The CSV holds rows of other settings (or is no sweep CSV): appending would mix runs."""


class OutputNotWritable(SweepError):
    """OUT.csv (or its lock, or OUT.png) cannot be written there."""


class ClusterUnavailable(SweepError):
    """--scheduler: dask's distributed is not installed, no scheduler answers at the address, or
    its workers cannot load the task."""


class PointFailed(SweepError):
    """A β's task failed other than numerically (a worker that cannot import, one that died)."""


class NotFinite(ArithmeticError):
    """A β's lnZ/N, u or c is not finite: an error for that β, never a row."""


class DamagedRow(ValueError):
    """A CSV line that is not a whole, self-consistent row; the message says what is wrong."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that it stops the sweep as Ctrl-C does."""


class Settings(NamedTuple):
    """What every row of one CSV shares: χ, the steps, how c is computed (h None: by AD), and how
    each step's leading singular triplets are (svd: "full" or "krylov", ising_trg.py's --svd)."""

    chi: int
    steps: int
    h: float | None
    svd: str = "full"

    def __str__(self) -> str:
        return (f"chi={self.chi} steps={self.steps} c={c_method(self.h)}" + ("" if self.h is None else f" h={self.h!r}")
                + ("" if self.svd == "full" else f" svd={self.svd}"))


class Sweep(NamedTuple):
    """What run_sweep did: the CSV, the βs computed now, those already in it, and those
    without a finite result (β: why; no row was written for them)."""

    csv: Path
    computed: list[float]
    skipped: list[float]
    failed: dict[float, str]


def c_method(h: float | None) -> str:
    """How c is computed: ``ad`` (h None) or ``difference`` (step h)."""
    return "ad" if h is None else "difference"


def compute_point(beta: float, chi: int, steps: int, h: float | None = None, svd: str = "full") -> dict:
    """TRG's lnZ/N, u and c at β: the one place that decides how c is computed (c_method).

    h None: c_ad = β² d²(lnZ/N)/dβ² by forward-over-reverse, exactly as examples/ising_trg.py
    (so the bits agree). Else c = β² (g(β+h) − g(β−h)) / (2h), g the AD gradient, which is
    wrong by percents where [β−h, β+h] straddles a crossing of the kept singular values
    (SPEC §4): ising_trg's guard then marks the row ``difference-crossing``.
    """
    ks = schedule(chi, steps)
    engine = CpuEngine.serial()
    if h is None:
        lnz, grad, curvature = value_grad_and_curvature(beta, ks, engine, svd=svd)
        return {"beta": beta, "lnz": lnz, "u": -grad, "c": beta * beta * curvature, "c_method": "ad"}
    lnz, grad = value_and_grad(beta, ks, engine, svd=svd)
    spectra_m, spectra_p = [], []
    below = (*value_and_grad(beta - h, ks, engine, spectra=spectra_m, svd=svd), spectra_m)
    above = (*value_and_grad(beta + h, ks, engine, spectra=spectra_p, svd=svd), spectra_p)
    c = beta * beta * (above[1] - below[1]) / (2 * h)
    suspect = crossing_warning(beta, h, ks, below, above, c, None) is not None
    return {"beta": beta, "lnz": lnz, "u": -grad, "c": c, "c_method": "difference-crossing" if suspect else "difference"}


def _beta_range_text() -> str:
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
            raise ValueError(f"every beta must be a plain decimal number in {_beta_range_text()}, where TRG's "
                             f"values are finite, got {word!r}")
        betas.append(beta)
    return list(dict.fromkeys(betas))


def output_paths(out: str | os.PathLike) -> tuple[Path, Path]:
    """(OUT.csv, OUT.png); OUT may also be given with its .csv."""
    stem = str(out).removesuffix(".csv")
    return Path(stem + ".csv"), Path(stem + ".png")


def lock_path(csv_path: Path) -> Path:
    """The file run_sweep locks while it reads and writes csv_path: OUT.csv.lock.

    A file of its own, because rewriting the CSV (repair, sorting) renames a new file over
    it, which a lock held on the CSV itself would not survive.
    """
    return csv_path.with_name(csv_path.name + ".lock")


def _cannot_write(path: Path, err: OSError) -> OutputNotWritable:
    return OutputNotWritable(f"--out: cannot write {path}: {err.strerror or err}")


@contextmanager
def _exclusive(csv_path: Path) -> Iterator[None]:
    """Hold the CSV's lock file (flock, exclusive), waiting for another run that holds it.

    The waiting is said in one line on stderr, naming the other run's pid (kept in the lock
    file while it is held). Worker processes forked meanwhile share the lock until they exit
    (at once when this process is killed: _watch). Raises OutputNotWritable when the lock
    file cannot be made.
    """
    lock = lock_path(csv_path)
    try:
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as err:
        raise _cannot_write(lock, err) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            print(f"ising_sweep.py: waiting for the run writing {csv_path} (pid {holder}) to finish", file=sys.stderr,
                  flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def _check_writable(path: Path) -> None:
    """OutputNotWritable unless path can be (re)written, as far as can be told before writing:
    not a directory, in a writable directory (or one yet to be made), not read-only."""
    if path.is_dir():
        raise OutputNotWritable(f"--out: cannot write {path}: it is a directory")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise OutputNotWritable(f"--out: cannot write {path}: {parent} is not a directory")
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise OutputNotWritable(f"--out: cannot write {path}: the directory {parent} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputNotWritable(f"--out: cannot write {path}: it is read-only")


def _append(path: Path, text: str) -> None:
    """Append text in one write, flushed and fsynced: on disk once this returns; a crash
    before leaves at worst a torn last line, which the next run drops."""
    try:
        with open(path, "ab") as f:
            f.write(text.encode())
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        raise _cannot_write(path, err) from None


def _replace(path: Path, text: str) -> None:
    """Make text the content of path at once: a new file, fsynced, renamed over the old one
    (and the rename fsynced), so an interruption leaves either the old file or the new."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.unlink(missing_ok=True)
        _append(tmp, text)
        os.replace(tmp, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as err:
        raise _cannot_write(path, err) from None


def _number(text: str) -> float:
    """A CSV cell's float: as repr writes them (Onsager's c is inf at β_c), nothing else."""
    return float(text) if text in ("inf", "-inf") else plain_number(text, float)


def _agrees(value: float, exact: float) -> bool:
    return value == exact or abs(value - exact) <= ONSAGER_AGREEMENT * max(1.0, abs(exact))


def _check_row(line: bytes) -> tuple[float, Settings]:
    """β and the settings of one CSV line (without its newline), or DamagedRow saying why not.

    A row holds together: its values are finite, each error is exactly value − Onsager's
    value, and those are Onsager's at its β; so a garbled digit, field or β shows.
    """
    try:
        text = line.decode()
    except UnicodeDecodeError:
        raise DamagedRow("bytes that are not UTF-8") from None
    fields = next(csv.reader([text]), [])
    if len(fields) != len(COLUMNS):
        raise DamagedRow(f"{len(fields)} fields, not {len(COLUMNS)}")
    row = dict(zip(COLUMNS, fields))
    numbers = {}
    for name in RESULT_COLUMNS:
        try:
            numbers[name] = _number(row[name])
        except ValueError:
            raise DamagedRow(f"{name} is not a number: {row[name]!r}") from None
    beta = numbers["beta"]
    if not (math.isfinite(beta) and beta > 0):
        raise DamagedRow(f"beta is not a finite number > 0: {row['beta']!r}")
    for name, exact in ONSAGER.items():
        value, onsager = numbers[name], numbers[f"{name}_onsager"]
        if not math.isfinite(value):
            raise DamagedRow(f"{name} is not finite: {row[name]!r}")
        if not _agrees(onsager, exact(beta)):
            raise DamagedRow(f"{name}_onsager is not Onsager's value at beta={row['beta']}")
        if numbers[f"{name}_err"] != value - onsager:
            raise DamagedRow(f"{name}_err is not {name} - {name}_onsager")
    try:
        chi, steps = plain_number(row["chi"], int), plain_number(row["steps"], int)
        h = None if row["h"] == "" else plain_number(row["h"], float)
    except ValueError:
        raise DamagedRow(f"chi, steps or h is not a number: {row['chi']!r}, {row['steps']!r}, {row['h']!r}") from None
    if row["c_method"] not in C_METHODS or (row["c_method"] == "ad") != (h is None):
        raise DamagedRow(f"c_method {row['c_method']!r} and h {row['h']!r} do not go together")
    if chi < 1 or steps < 1 or (h is not None and not (math.isfinite(h) and h > 0)):
        raise DamagedRow(f"chi, steps or h is out of range: {row['chi']}, {row['steps']}, {row['h']}")
    if row["svd"] not in SVD_METHODS:
        raise DamagedRow(f"svd is not one of {', '.join(SVD_METHODS)}: {row['svd']!r}")
    return beta, Settings(chi, steps, h, row["svd"])


def _row(point: dict, settings: Settings) -> str:
    """One CSV line: the point, Onsager's values, the errors and the settings; floats by repr
    (exact). NotFinite when lnZ/N, u or c is not finite: such a result is never a row."""
    beta = point["beta"]
    bad = [f"{name}={point[name]!r}" for name in ONSAGER if not math.isfinite(point[name])]
    if bad:
        raise NotFinite(f"{', '.join(bad)} at {settings}")
    cells = {name: repr(float(point[name])) for name in ONSAGER}
    for name, exact in ONSAGER.items():
        onsager = float(exact(beta))
        cells[f"{name}_onsager"], cells[f"{name}_err"] = repr(onsager), repr(float(point[name]) - onsager)
    cells.update(beta=repr(float(beta)), chi=str(settings.chi), steps=str(settings.steps), c_method=point["c_method"],
                 h="" if settings.h is None else repr(settings.h), svd=settings.svd)
    return ",".join(cells[name] for name in COLUMNS) + "\n"


def _convert_former(lines: list[bytes], settings: Settings) -> list[bytes]:
    """The rows of a former-format CSV in the columns of now; a line that is no former row is
    kept as it is, for _prepare to name as damaged."""
    tail = [str(settings.chi), str(settings.steps), "", "" if settings.h is None else repr(settings.h), settings.svd]
    converted = []
    for line in lines:
        try:
            fields = next(csv.reader([line.decode()]), [])
        except UnicodeDecodeError:
            fields = []
        if len(fields) != len(FORMER_COLUMNS):
            converted.append(line)
            continue
        row = dict(zip(FORMER_COLUMNS, fields))
        tail[2] = row["c_method"]
        converted.append(",".join([row[name] for name in RESULT_COLUMNS] + tail).encode())
    return converted


def _former_settings(line: bytes) -> Settings | None:
    """The settings of a former-format CSV's first line, else None."""
    match = FORMER_SETTINGS.fullmatch(line.decode(errors="replace"))
    if not match:
        return None
    try:
        return Settings(int(match[1]), int(match[2]), None if match[3] is None else plain_number(match[3], float), "full")
    except ValueError:
        return None


def _warn(message: str) -> None:
    print(f"ising_sweep.py: {message}", file=sys.stderr, flush=True)


def _prepare(path: Path, settings: Settings) -> set[float]:
    """Make OUT.csv ready to append to (under its lock) and return the βs it holds.

    A missing or empty file (or a torn header) gets the header. A file of other settings, or
    no sweep CSV, is SettingsMismatch and left untouched. Else a torn last line is dropped,
    each row that does not parse and each repeated β is named in one line on stderr and
    dropped, a former-format file is converted; if anything changed, the file is rewritten
    at once (_replace).
    """
    _check_writable(path)
    try:
        data = path.read_bytes() if path.exists() else b""
    except OSError as err:
        raise _cannot_write(path, err) from None
    header = (HEADER + "\n").encode()
    if header.startswith(data):  # nothing yet, or a header torn by a kill
        if data != header:
            _replace(path, header.decode())
        return set()
    whole = data[: data.rfind(b"\n") + 1]  # without a torn last line
    lines = whole.split(b"\n")[:-1] or [data]
    former = _former_settings(lines[0]) if lines[1:2] == [",".join(FORMER_COLUMNS).encode()] else None
    if lines[0] == header[:-1]:
        rows, first_row = lines[1:], 2
    elif former is not None:
        if former != settings:
            raise SettingsMismatch(f"{path} holds a sweep with {former} (in the former format, a '# chi=' line "
                                   f"first), not {settings}: choose another --out or remove the file")
        rows, first_row = _convert_former(lines[2:], settings), 3
        _warn(f"{path} is in the former format (a '# chi=' line first): converted to the standard CSV "
              "(the header first, the settings in every row)")
    else:
        first = lines[0][:80].decode(errors="replace")
        raise SettingsMismatch(f"{path} is not a sweep CSV (its first line is {first!r}, not the header "
                               f"{HEADER!r}): choose another --out")
    checked = []
    for number, line in enumerate(rows, start=first_row):
        try:
            checked.append((number, line, *_check_row(line)))
        except DamagedRow as damage:
            checked.append((number, line, None, damage))
    for number, _, beta, row_settings in checked:
        if beta is not None and row_settings != settings:
            raise SettingsMismatch(f"{path} holds a sweep with {row_settings} (line {number}), not {settings}: "
                                   "choose another --out or remove the file")
    kept, done = [], set()
    for number, line, beta, settings_or_damage in checked:
        if beta is None:
            _warn(f"{path} line {number} dropped, it is damaged ({settings_or_damage}); a beta it held is computed "
                  "again")
        elif beta in done:
            _warn(f"{path} line {number} dropped: beta={beta!r} is in the file already")
        else:
            kept.append(line)
            done.add(beta)
    if former is not None or len(kept) != len(rows) or whole != data:
        _replace(path, b"\n".join([header[:-1], *kept, b""]).decode())
    return done


def _sort_rows(path: Path) -> None:
    """Put the rows in β order once a run is complete (they come in completion order), by
    _replace, so no row is ever at risk. Under the lock, on a CSV _prepare has checked."""
    try:
        header, *rows = path.read_bytes().splitlines(keepends=True)
    except OSError as err:
        raise _cannot_write(path, err) from None
    ordered = sorted(rows, key=lambda line: float(line.split(b",", 1)[0]))
    if ordered != rows:
        _replace(path, b"".join([header, *ordered]).decode())


def read_sweep(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a sweep CSV, as strings, in β order; lines that are no whole row (one being
    appended by a run at work, a damaged one) are left out."""
    lines = Path(path).read_bytes().split(b"\n")[1:-1]  # the header; a last line without its newline
    rows = []
    for line in lines:
        try:
            _check_row(line)
        except DamagedRow:
            continue
        rows.append(dict(zip(COLUMNS, next(csv.reader([line.decode()])))))
    return sorted(rows, key=lambda r: float(r["beta"]))


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

    def note(self, message: str) -> None:
        """A line of its own on stderr, above the bar (redrawn by the next draw)."""
        if self.enabled:
            sys.stderr.write("\r\033[K")
        _warn(message)

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
    """Set up a worker process of run_sweep's pool: Ctrl-C stops its βs quietly; SIGTERM
    back to its default (a fork inherits the command line's handler); the watchdog."""
    signal.signal(signal.SIGINT, _on_worker_interrupt)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.unraisablehook = _retry_interrupt
    threading.Thread(target=_watch, args=(os.getppid(), stop), name="sweep watchdog", daemon=True).start()


def _worker_point(beta: float, chi: int, steps: int, h: float | None, svd: str = "full") -> dict:
    """compute_point in a worker process of run_sweep's pool; after Ctrl-C, no more."""
    if _worker_state["stopped"]:
        raise KeyboardInterrupt
    _worker_state["busy"] = True
    try:
        return compute_point(beta, chi, steps, h, svd)
    finally:
        _worker_state["busy"] = False


def _one_line(err: BaseException) -> str:
    return " ".join(f"{type(err).__name__}: {err}".split())


class _ByValue:
    """function, pickled by value (through cloudpickle) whichever pickler takes it, and
    unpickled as the function itself. The Dask scheduler unpickles tasks too: it and the
    workers then need tenferro_py, but neither this file nor ising_trg.py (see connect)."""

    def __init__(self, function):
        self.function = function

    def __call__(self, *args):
        """As the function (dask's submit takes callables only)."""
        return self.function(*args)

    def __reduce__(self):
        import cloudpickle

        return cloudpickle.loads, (cloudpickle.dumps(self.function),)


def _unpickle_error(payload: bytes) -> str | None:
    """On a Dask worker: None when payload (the pickled task function) loads there, else why not."""
    try:
        pickle.loads(payload)
    except Exception as err:
        return _one_line(err)
    return None


def connect(address: str):
    """A distributed.Client of the Dask scheduler at address, its workers checked for the task.

    The task, compute_point, travels by value with this file's and ising_trg.py's functions
    (_ByValue; cloudpickle's register_pickle_by_value), so the scheduler and the workers need
    tenferro_py, not examples/. ClusterUnavailable when dask's distributed is not installed,
    when no scheduler answers within dask's connect timeout (config
    distributed.comm.timeouts.connect, environment DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT;
    30 s by default), or when a worker cannot load the task: checked first, as a task that
    does not unpickle on a worker breaks its connection, and the sweep would wait for ever.
    """
    try:
        import cloudpickle
        from distributed import Client
    except ImportError:
        raise ClusterUnavailable("--scheduler needs dask's distributed: pip install -e '.[distributed]' "
                                 "(or pip install \"dask[distributed]\")") from None
    for module in (ising_trg, sys.modules[__name__]):
        if module.__name__ != "__main__":  # __main__ goes by value anyway
            cloudpickle.register_pickle_by_value(module)
    try:
        client = Client(address, set_as_default=False)
    except Exception as err:  # refused, timed out, a malformed address: all mean no cluster there
        raise ClusterUnavailable(f"--scheduler: no Dask scheduler answers at {address!r} ({_one_line(err)})") from None
    try:
        errors = client.run(_ByValue(_unpickle_error), pickle.dumps(_ByValue(compute_point)))
    except Exception as err:
        errors = {address: _one_line(err)}
    failing = {worker: error for worker, error in errors.items() if error is not None}
    if failing:
        client.close()
        worker, error = next(iter(failing.items()))
        raise ClusterUnavailable(f"--scheduler: {len(failing)} of the {len(errors)} Dask workers at {address!r} "
                                 f"cannot load the sweep's task, {worker} says {error} (the workers need tenferro_py "
                                 "installed)")
    return client


def _compute(executor: Executor, task, todo: list[float], settings: Settings, path: Path, bar: _Progress,
             computed: list[float], failed: dict[float, str]) -> None:
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
            line = _row(future.result(), settings)
        except ArithmeticError as err:  # NotFinite, or LinalgError: the SVD met inf or NaN
            failed[beta] = _one_line(err)
            bar.note(f"error: beta={beta!r} has no finite result ({failed[beta]}): no row written")
            return
        except Exception as err:
            raise PointFailed(f"beta={beta!r} failed: {_one_line(err)}") from err
        _append(path, line)
        computed.append(beta)

    try:
        pending = set(futures)
        bar.draw(0)
        while pending:
            ready, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in ready:
                save(future)
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
) -> Sweep:
    """Compute the βs not yet in OUT.csv, appending each row as soon as its β finishes
    (then, the run complete, putting the rows in β order), all under OUT.csv.lock.

    Who computes: executor, any concurrent.futures.Executor (it stays yours: not shut down);
    or scheduler, the address of a Dask scheduler (connect; the client is closed after);
    or min(jobs, βs to do) worker processes (jobs default: the cores; one worker: a thread
    of this process), shut down after. At most one of the three. On an exception or an
    interruption (KeyboardInterrupt, Terminated) the pending βs are cancelled and the
    worker processes stop theirs. progress: draw the bar on stderr (default: when stderr
    is a terminal). Raises SweepError (one line) for a CSV of other settings, an output
    that cannot be written, no cluster at scheduler, or a task that failed other than
    numerically; a β without a finite result is in Sweep.failed, and has no row.
    """
    betas, h = [float(b) for b in betas], None if h is None else float(h)
    if not all(in_beta_range(b) for b in betas):
        raise ValueError(f"every beta must be in {_beta_range_text()}, got {betas}")
    if h is not None and not all(difference_in_range(b, h) for b in betas):
        raise ValueError(f"h={h!r} takes beta - h or beta + h out of {_beta_range_text()}")
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if sum(choice is not None for choice in (executor, jobs, scheduler)) > 1:
        raise ValueError("give at most one of executor, jobs and scheduler")
    if svd not in SVD_METHODS:
        raise ValueError(f"svd must be one of {', '.join(SVD_METHODS)}, got {svd!r}")
    settings, path = Settings(chi, steps, h, svd), output_paths(out)[0]
    computed: list[float] = []
    failed: dict[float, str] = {}
    with _exclusive(path):
        done = _prepare(path, settings)
        todo = list(dict.fromkeys(b for b in betas if b not in done))
        skipped = [b for b in betas if b in done]
        if todo:
            _run(todo, settings, path, executor, jobs, scheduler, progress, computed, failed)
        _sort_rows(path)
    return Sweep(path, computed, skipped, failed)


def _run(todo: list[float], settings: Settings, path: Path, executor: Executor | None, jobs: int | None,
         scheduler: str | None, progress: bool | None, computed: list[float], failed: dict[float, str]) -> None:
    """run_sweep's computing part: make the executor it was not given, run, and clean up."""
    client, stop, own, task = None, None, executor is None and scheduler is None, compute_point
    if scheduler is not None:
        client = connect(scheduler)
        executor, task = client.get_executor(), _ByValue(compute_point)
    elif own:
        workers = min(jobs or available_parallelism(), len(todo))
        if workers == 1:
            executor = ThreadPoolExecutor(1)
        else:
            context = multiprocessing.get_context()
            stop = context.Event()
            executor = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(stop,))
            task = _worker_point
    bar = _Progress(len(todo), sys.stderr.isatty() if progress is None else progress)
    finished = False
    try:
        _compute(executor, task, todo, settings, path, bar, computed, failed)
        finished = True
    except BaseException:
        if stop is not None:
            stop.set()  # the workers stop their βs (a Ctrl-C reached them already; SIGTERM, an error did not)
        raise
    finally:
        if own:
            executor.shutdown(wait=finished, cancel_futures=True)
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
    _plot_rows(rows, png_path)


def _plot_rows(rows: list[dict[str, str]], png_path: str | os.PathLike) -> None:
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
    trg = f"TRG χ={settings['chi']}"
    for name, label, color, exact in (("u", "u", "C0", energy), ("c", "c", "C3", specific_heat)):
        top.plot(dense, [exact(b) for b in dense], color=color, lw=1.2, label=f"{label} Onsager (exact)")
        top.plot(col["beta"], col[name], "o", color=color, mfc="none", label=f"{label} {trg}")
    top.set_ylabel("per site:  u = −∂(lnZ/N)/∂β,  c = β² ∂²(lnZ/N)/∂β²")
    steps = settings["steps"]
    top.set_title(f"2D Ising model: {trg}, {steps} steps (N = $2^{{{steps}}}$ sites) against Onsager\n"
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """One line naming the argument, exit status 2 (argparse's default adds the usage)."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _checked(kind: type, allowed: str, ok):
    """An argparse type: the plain decimal number of kind, refused, saying what is allowed, unless ok."""

    def parse(text: str):
        try:
            value = plain_number(text, kind)
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


EPILOG = (
    f"Every beta (and with --c difference every beta - h and beta + h) must lie in {_beta_range_text()}: outside, "
    "double precision no longer resolves the first TRG step's singular values and u and c come out NaN (see "
    "ising_trg.py --help), and nothing is lost there: below 1e-14, lnZ/N = ln 2 and u = -2 beta to every digit, "
    "above 8, u = -2 and c = 0. A beta whose result is not finite all the same gets no row, one line on stderr, "
    "and exit status 2. Each finished beta is saved at once: the same command "
    "resumes an interrupted sweep; rows that do not parse are named and computed again. A second run into the "
    "same --out waits for the first (OUT.csv.lock). Exit status: 0 done; 2 a bad argument, an --out that cannot be "
    "written, a CSV of other settings, no cluster at --scheduler, a failed task, or a beta without a finite "
    "result; 130 Ctrl-C; 143 SIGTERM."
)


def parser() -> argparse.ArgumentParser:
    """The command line: every argument validated, a bad one is one line and exit status 2."""
    count = _checked(int, "an integer >= 1", lambda v: v >= 1)
    p = _Parser(prog="ising_sweep.py", description=__doc__.split("\n\n")[0], epilog=EPILOG)
    p.add_argument("--chi", type=count, default=16, help="bond dimension χ (default 16)")
    p.add_argument("--steps", type=count, default=20, help="TRG steps: N = 2^steps sites (default 20)")
    p.add_argument("--c", choices=("ad", "difference"), default="ad",
                   help="c by AD (default) or by the central difference of the AD gradient")
    p.add_argument("--h", type=_checked(float, "a finite number > 0", lambda v: math.isfinite(v) and v > 0),
                   default=1e-5, help="step of c's central difference, with --c difference (default 1e-5)")
    p.add_argument("--svd", choices=SVD_METHODS, default="full",
                   help="each step's k leading singular triplets from the full SVD (default) or a block Krylov "
                        "method with exact derivatives, faster at large chi (README, 'Truncated SVD')")
    p.add_argument("--betas", type=_betas_argument, default="0.40:0.48:0.005",
                   help="START:STOP:STEP (STOP included when on the grid) or a list '0.4,0.44 0.5', each beta in "
                        f"{_beta_range_text()} (default 0.40:0.48:0.005)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=count, default=None,
                       help=f"worker processes (default: the cores, {available_parallelism()} here); 1: in this process")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run the betas on the Dask cluster of this scheduler, e.g. tcp://127.0.0.1:8786 (needs "
                            "pip install -e '.[distributed]'; the workers need tenferro_py; not with --jobs); this "
                            "process writes the CSV")
    p.add_argument("--out", default="runs/sweep",
                   help="writes OUT.csv (locked through OUT.csv.lock) and OUT.png (default runs/sweep)")
    return p


def _raise_terminated(signum, frame) -> None:
    """SIGTERM: stop the sweep as Ctrl-C does; a second SIGTERM does not cut the cleanup short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    h = args.h if args.c == "difference" else None
    if h is not None:
        for beta in (min(args.betas), max(args.betas)):
            if not difference_in_range(beta, h):
                cli.error(f"argument --h: must keep beta - h and beta + h in {_beta_range_text()}, got {h!r} for "
                          f"beta={beta!r}")
    csv_path, png_path = output_paths(args.out)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        _check_writable(png_path)
        sweep = run_sweep(args.betas, args.chi, args.steps, h, args.out, jobs=args.jobs, scheduler=args.scheduler,
                          svd=args.svd)
    except SweepError as err:
        print(f"ising_sweep.py: error: {err}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated) as stop:
        done = {float(r["beta"]) for r in read_sweep(csv_path)} if csv_path.is_file() else set()
        have = sum(b in done for b in args.betas)
        how, status = ("interrupted", 130) if isinstance(stop, KeyboardInterrupt) else ("terminated", 143)
        print(f"ising_sweep.py: {how}; {have} of {len(args.betas)} betas are saved in {csv_path}, "
              "the same command resumes", file=sys.stderr)
        return status
    finally:
        signal.signal(signal.SIGTERM, previous)
    failed = f", {len(sweep.failed)} without a finite result (no row; see above)" if sweep.failed else ""
    print(f"{csv_path}: {len(sweep.computed)} betas computed, {len(sweep.skipped)} already there{failed}")
    status = 2 if sweep.failed else 0
    rows = read_sweep(csv_path)
    if not rows:
        print(f"no plot: {csv_path} has no row")
        return status
    try:
        _plot_rows(rows, png_path)
    except ImportError:
        print(f"no plot: matplotlib is not installed; pip install -e '.[plot]' (or pip install matplotlib) "
              f"and run again to draw {png_path}")
    except OSError as err:
        print(f"ising_sweep.py: error: {_cannot_write(png_path, err)}", file=sys.stderr)
        return 2
    else:
        print(f"{png_path}: u and c against Onsager, and the errors")
    return status


if __name__ == "__main__":
    sys.exit(main())
