"""A sweep's CSV: one row per β, written so that no interruption loses or garbles a finished row.

The CSV is a standard one: the header first, then one row per β with every setting in it
(COLUMNS: beta, lnz, u, c, lnz_onsager, u_onsager, c_onsager, lnz_err, u_err, c_err, chi, steps,
c_method, h, svd; h is empty for c by AD), floats by repr, so csv.DictReader and pandas.read_csv
read it and the CSVs of several χ concatenate.

A row is written in one call, flushed and fsynced (``append_durably``), so a killed run leaves at worst
a torn last line; a rewrite goes to a new file renamed over the old one (``replace_durably``). Before a
run appends, ``prepare`` checks the rows: one that does not parse (a missing field, a
non-number, a β that does not match its Onsager values, bytes that are not UTF-8) is named,
dropped, and its β left to compute again; a repeated β is dropped; a torn last line quietly
so; a CSV of other settings is refused; one of the former format (a ``# chi=… steps=… c=…``
line before the header) is converted in place. One run at a time: ``exclusive`` holds an
flock on OUT.csv.lock from reading the CSV to its last write.
"""

from __future__ import annotations

import csv
import fcntl
import math
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from .cli import plain_number
from .onsager import energy, ln_z, specific_heat
from .trg import SVD_METHODS

__all__ = [
    "COLUMNS", "HEADER", "RESULT_COLUMNS", "DamagedRow", "NotFinite", "OutputNotWritable", "Settings",
    "SettingsMismatch", "SweepError", "append_durably", "c_method", "cannot_write", "check_row", "check_writable",
    "exclusive", "format_row", "lock_path", "output_paths", "prepare", "read_sweep", "replace_durably", "sort_rows",
]

Notify = Callable[[str], None]
"""Where a line for the user goes (one line, without a newline)."""

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


class SweepError(Exception):
    """A sweep that cannot go on, said in one line (the command line exits with status 2)."""


class SettingsMismatch(SweepError):
    """The CSV holds rows of other settings (or is no sweep CSV): appending would mix runs."""


class OutputNotWritable(SweepError):
    """OUT.csv (or its lock, or OUT.png) cannot be written there."""


class NotFinite(ArithmeticError):
    """A β's lnZ/N, u or c is not finite: an error for that β, never a row."""


class DamagedRow(ValueError):
    """A CSV line that is not a whole, self-consistent row; the message says what is wrong."""


class Settings(NamedTuple):
    """What every row of one CSV shares: χ, the steps, how c is computed (h None: by AD), and how
    each step's leading singular triplets are (svd: "full" or "krylov", models.trg.step's svd)."""

    chi: int
    steps: int
    h: float | None
    svd: str = "full"

    def __str__(self) -> str:
        return (f"chi={self.chi} steps={self.steps} c={c_method(self.h)}" + ("" if self.h is None else f" h={self.h!r}")
                + ("" if self.svd == "full" else f" svd={self.svd}"))


def c_method(h: float | None) -> str:
    """How c is computed: ``ad`` (h None) or ``difference`` (step h)."""
    return "ad" if h is None else "difference"


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


def cannot_write(path: Path, err: OSError) -> OutputNotWritable:
    """The error for an OSError met writing path, in one line."""
    return OutputNotWritable(f"--out: cannot write {path}: {err.strerror or err}")


@contextmanager
def exclusive(csv_path: Path, notify: Notify) -> Iterator[None]:
    """Hold the CSV's lock file (flock, exclusive), waiting for another run that holds it.

    The waiting is said in one line to notify, naming the other run's pid (kept in the lock
    file while it is held). Worker processes forked meanwhile share the lock until they exit
    (at once when this process is killed: models.sweep_pool). Raises OutputNotWritable when
    the lock file cannot be made.
    """
    lock = lock_path(csv_path)
    try:
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as err:
        raise cannot_write(lock, err) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            notify(f"waiting for the run writing {csv_path} (pid {holder}) to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def check_writable(path: Path) -> None:
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


def append_durably(path: Path, text: str) -> None:
    """Append text in one write, flushed and fsynced: on disk once this returns; a crash
    before leaves at worst a torn last line, which the next run drops."""
    try:
        with open(path, "ab") as f:
            f.write(text.encode())
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        raise cannot_write(path, err) from None


def replace_durably(path: Path, text: str) -> None:
    """Make text the content of path at once: a new file, fsynced, renamed over the old one
    (and the rename fsynced), so an interruption leaves either the old file or the new."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.unlink(missing_ok=True)
        append_durably(tmp, text)
        os.replace(tmp, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as err:
        raise cannot_write(path, err) from None


def _number(text: str) -> float:
    """A CSV cell's float: as repr writes them (Onsager's c is inf at β_c), nothing else."""
    return float(text) if text in ("inf", "-inf") else plain_number(text, float)


def _agrees(value: float, exact: float) -> bool:
    return value == exact or abs(value - exact) <= ONSAGER_AGREEMENT * max(1.0, abs(exact))


def check_row(line: bytes) -> tuple[float, Settings]:
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


def format_row(point: dict, settings: Settings) -> str:
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
    kept as it is, for prepare to name as damaged."""
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


def prepare(path: Path, settings: Settings, notify: Notify) -> set[float]:
    """Make OUT.csv ready to append to (under its lock) and return the βs it holds.

    A missing or empty file (or a torn header) gets the header. A file of other settings, or
    no sweep CSV, is SettingsMismatch and left untouched. Else a torn last line is dropped,
    each row that does not parse and each repeated β is named in one line to notify and
    dropped, a former-format file is converted; if anything changed, the file is rewritten
    at once (replace_durably).
    """
    check_writable(path)
    try:
        data = path.read_bytes() if path.exists() else b""
    except OSError as err:
        raise cannot_write(path, err) from None
    header = (HEADER + "\n").encode()
    if header.startswith(data):  # nothing yet, or a header torn by a kill
        if data != header:
            replace_durably(path, header.decode())
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
        notify(f"{path} is in the former format (a '# chi=' line first): converted to the standard CSV "
               "(the header first, the settings in every row)")
    else:
        first = lines[0][:80].decode(errors="replace")
        raise SettingsMismatch(f"{path} is not a sweep CSV (its first line is {first!r}, not the header "
                               f"{HEADER!r}): choose another --out")
    checked = []
    for number, line in enumerate(rows, start=first_row):
        try:
            checked.append((number, line, *check_row(line)))
        except DamagedRow as damage:
            checked.append((number, line, None, damage))
    for number, _, beta, row_settings in checked:
        if beta is not None and row_settings != settings:
            raise SettingsMismatch(f"{path} holds a sweep with {row_settings} (line {number}), not {settings}: "
                                   "choose another --out or remove the file")
    kept, done = [], set()
    for number, line, beta, settings_or_damage in checked:
        if beta is None:
            notify(f"{path} line {number} dropped, it is damaged ({settings_or_damage}); a beta it held is "
                   "computed again")
        elif beta in done:
            notify(f"{path} line {number} dropped: beta={beta!r} is in the file already")
        else:
            kept.append(line)
            done.add(beta)
    if former is not None or len(kept) != len(rows) or whole != data:
        replace_durably(path, b"\n".join([header[:-1], *kept, b""]).decode())
    return done


def sort_rows(path: Path) -> None:
    """Put the rows in β order once a run is complete (they come in completion order), by
    replace_durably, so no row is ever at risk. Under the lock, on a CSV prepare has checked."""
    try:
        header, *rows = path.read_bytes().splitlines(keepends=True)
    except OSError as err:
        raise cannot_write(path, err) from None
    ordered = sorted(rows, key=lambda line: float(line.split(b",", 1)[0]))
    if ordered != rows:
        replace_durably(path, b"".join([header, *ordered]).decode())


def read_sweep(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a sweep CSV, as strings, in β order; lines that are no whole row (one being
    appended by a run at work, a damaged one) are left out."""
    lines = Path(path).read_bytes().split(b"\n")[1:-1]  # the header; a last line without its newline
    rows = []
    for line in lines:
        try:
            check_row(line)
        except DamagedRow:
            continue
        rows.append(dict(zip(COLUMNS, next(csv.reader([line.decode()])))))
    return sorted(rows, key=lambda r: float(r["beta"]))
