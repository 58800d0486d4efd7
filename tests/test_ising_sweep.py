"""tenferro_py.models.sweep and examples/ising_sweep.py: the CSV's values and bits, its format,
resuming, repair, locking, refusals, the β range, Ctrl-C and SIGTERM, dead parents, CLI, plot.

Small settings (χ = 4, 6 steps: ~15 ms per value_and_grad) keep it fast. Where a sweep must be
stopped in the middle of a β, the β never ends (ENDLESS), so no test depends on how fast the
machine is: each waits for an event, with generous limits.
"""

from __future__ import annotations

import csv
import fcntl
import io
import math
import os
import pickle
import runpy
import signal
import subprocess
import sys
import time
import weakref
from concurrent.futures import Executor, Future
from pathlib import Path

import pytest

from tenferro_py import CpuEngine
from tenferro_py.errors import LinalgError
from tenferro_py.models import onsager, sweep, sweep_csv, sweep_pool, trg

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CLI = runpy.run_path(str(EXAMPLES / "ising_sweep.py"))
main = CLI["main"]

CHI, STEPS, H = 4, 6, None  # H None: c by AD, the default
BETAS = [0.3, 0.44, 0.5]
SETTINGS = ["--chi", str(CHI), "--steps", str(STEPS)]
NUMERIC = [name for name in sweep.COLUMNS if name not in ("c_method", "h", "svd")]
LIMIT = 120
"""Seconds a test waits for an event (a row, a worker started, the sweep stopped) before it fails."""


def expected_row(beta: float, h: float | None = None, chi: int = CHI, steps: int = STEPS) -> dict[str, str]:
    """The CSV row of β as models.trg computes it: c_ad, or c by the central difference of step h."""
    ks = trg.schedule(chi, steps)
    engine = CpuEngine.serial()
    if h is None:
        lnz, grad, curvature = trg.value_grad_and_curvature(beta, ks, engine)
        c, method = beta * beta * curvature, "ad"
    else:
        lnz, grad = trg.value_and_grad(beta, ks, engine)
        g_plus = trg.value_and_grad(beta + h, ks, engine)[1]
        g_minus = trg.value_and_grad(beta - h, ks, engine)[1]
        c, method = beta * beta * (g_plus - g_minus) / (2 * h), "difference"
    exact = (onsager.ln_z(beta), onsager.energy(beta), onsager.specific_heat(beta))
    values = [beta, lnz, -grad, c, *exact, lnz - exact[0], -grad - exact[1], c - exact[2]]
    row = dict(zip(sweep.RESULT_COLUMNS, map(repr, values)))
    return dict(row, chi=str(chi), steps=str(steps), c_method=method, h="" if h is None else repr(h), svd="full")


@pytest.fixture(scope="module")
def expected() -> dict[float, dict[str, str]]:
    return {beta: expected_row(beta) for beta in BETAS}


@pytest.fixture(scope="module")
def complete_csv(tmp_path_factory) -> bytes:
    """The bytes of the CSV of BETAS, as a clean run writes it."""
    out = tmp_path_factory.mktemp("complete") / "s"
    return sweep.run_sweep(BETAS, CHI, STEPS, H, out, jobs=1).csv.read_bytes()


def rows(path: Path) -> dict[float, dict[str, str]]:
    return {float(r["beta"]): r for r in sweep.read_sweep(path)}


def counting(monkeypatch) -> list[float]:
    """Replace compute_point by a wrapper that records each β it is called with."""
    calls: list[float] = []
    real = sweep.compute_point

    def compute_point(beta, chi, steps, h, svd="full"):
        calls.append(beta)
        return real(beta, chi, steps, h, svd)

    monkeypatch.setattr(sweep, "compute_point", compute_point)
    return calls


def sweep_command(*args: str) -> list[str]:
    return [sys.executable, str(EXAMPLES / "ising_sweep.py"), *args]


def test_parse_betas_grid_includes_stop_and_reads_like_the_list():
    grid = sweep.parse_betas("0.40:0.48:0.005")
    assert grid == [round(0.4 + 0.005 * i, 3) for i in range(17)]
    assert grid[-1] == 0.48 and repr(grid[1]) == "0.405"
    assert sweep.parse_betas("0.1:0.35:0.1") == [0.1, 0.2, 0.3]
    assert sweep.parse_betas("0.3, 0.4 0.4,0.5") == [0.3, 0.4, 0.5]
    assert sweep.parse_betas("1e-14,8") == [1e-14, 8.0]  # the range's edges are in it


def test_small_sweep_writes_the_columns_and_value_and_grads_bits(tmp_path, expected):
    done = sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1)
    assert done.csv == tmp_path / "s.csv" and sorted(done.computed) == BETAS and done.skipped == []
    assert done.failed == {}
    lines = done.csv.read_text().splitlines()
    assert lines[0] == ",".join(sweep.COLUMNS) == sweep.HEADER
    assert rows(done.csv) == expected


def test_the_csv_is_standard_header_first_settings_and_numbers_in_every_row(tmp_path):
    """csv.DictReader gives one row per β, every numeric field a float, the settings in each."""
    sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "a", jobs=1)
    sweep.run_sweep([0.3], 5, STEPS, 1e-5, tmp_path / "d", jobs=1)
    with open(tmp_path / "a.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [float(r["beta"]) for r in table] == BETAS
    for row in table:
        assert all(math.isfinite(float(row[name])) for name in NUMERIC), row
        assert (row["chi"], row["steps"], row["c_method"], row["h"]) == ("4", "6", "ad", "")
    (difference,) = csv.DictReader(io.StringIO((tmp_path / "d.csv").read_text()))
    assert (difference["chi"], difference["c_method"], float(difference["h"])) == ("5", "difference", 1e-5)
    # Sweeps at several χ concatenate: one header, then every file's rows.
    both = (tmp_path / "a.csv").read_text() + (tmp_path / "d.csv").read_text().split("\n", 1)[1]
    assert [r["chi"] for r in csv.DictReader(io.StringIO(both))] == ["4", "4", "4", "5"]


def test_pandas_reads_one_numeric_row_per_beta(tmp_path):
    pandas = pytest.importorskip("pandas")
    sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "a", jobs=1)
    sweep.run_sweep(BETAS, CHI, STEPS, 1e-5, tmp_path / "d", jobs=1)
    for name, h in (("a", None), ("d", 1e-5)):
        frame = pandas.read_csv(tmp_path / f"{name}.csv")
        assert list(frame.columns) == list(sweep.COLUMNS) and list(frame["beta"]) == BETAS
        assert all(pandas.api.types.is_numeric_dtype(frame[column]) for column in NUMERIC + ["h"])
        assert list(frame["chi"]) == [CHI] * 3
        assert frame["h"].isna().all() if h is None else list(frame["h"]) == [h] * 3


def test_c_by_difference_and_its_crossing_guard(tmp_path):
    """--c difference: c as models.trg's central difference; a β whose [β−h, β+h] holds a crossing is marked."""
    done = sweep.run_sweep([0.3], CHI, STEPS, 1e-5, tmp_path / "d", jobs=1)
    assert rows(done.csv)[0.3] == expected_row(0.3, 1e-5)
    crossing = 0.37634229  # χ = 6, 8 steps: lnZ/N jumps there (see tests/test_c_ad.py)
    assert sweep.compute_point(crossing, 6, 8, 1e-5)["c_method"] == "difference-crossing"


def test_worker_processes_give_the_same_bits_and_stay_quiet_off_a_terminal(tmp_path, expected):
    argv = sweep_command(*SETTINGS, "--betas", "0.3,0.44 0.5", "--jobs", "2", "--out", str(tmp_path / "s"))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar when stderr is not a TTY
    assert done.stdout.splitlines()[0] == f"{tmp_path / 's.csv'}: 3 betas computed, 0 already there"
    assert rows(tmp_path / "s.csv") == expected
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == ["0.3", "0.44", "0.5"]  # in β order at the end


def test_rerun_computes_only_the_missing_betas(tmp_path, monkeypatch, expected):
    sweep.run_sweep(BETAS[:2], CHI, STEPS, H, tmp_path / "s", jobs=1)
    calls = counting(monkeypatch)
    done = sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1)
    assert calls == [0.5] and done.computed == [0.5] and done.skipped == BETAS[:2]
    assert rows(done.csv) == expected
    assert sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1).computed == []
    assert calls == [0.5]


class InlineExecutor(Executor):
    """A user's executor: runs each task at submit and counts them."""

    def __init__(self):
        self.submitted, self.shut = 0, False

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future

    def shutdown(self, wait=True, *, cancel_futures=False):
        self.shut = True


def test_any_executor_runs_the_points_and_stays_the_callers(tmp_path, expected):
    executor = InlineExecutor()
    done = sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", executor=executor)
    assert executor.submitted == 3 and not executor.shut
    assert rows(done.csv) == expected
    assert pickle.loads(pickle.dumps(sweep.compute_point)) is sweep.compute_point
    with pytest.raises(ValueError, match="at most one of executor, jobs and scheduler"):
        sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", executor=executor, jobs=2)


def test_a_torn_last_line_is_dropped_and_its_beta_computed_again(tmp_path, monkeypatch, capsys, expected):
    sweep.run_sweep(BETAS[:2], CHI, STEPS, H, tmp_path / "s", jobs=1)
    path = tmp_path / "s.csv"
    whole = path.read_text()
    path.write_text(whole + expected[0.5]["beta"] + "," + expected[0.5]["lnz"][:6])  # killed mid-row
    calls = counting(monkeypatch)
    sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1)
    assert calls == [0.5] and capsys.readouterr().err == ""  # a torn line is expected after a kill: quietly
    text = path.read_text()
    assert text.startswith(whole) and text.endswith("\n") and len(text.splitlines()) == 1 + 3
    assert rows(path) == expected


def test_a_torn_header_is_written_again(tmp_path, monkeypatch, complete_csv):
    (tmp_path / "s.csv").write_text(sweep.HEADER[:17])  # killed while writing the header
    sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1)
    assert (tmp_path / "s.csv").read_bytes() == complete_csv


def _with_line_of_044(complete: bytes, change) -> bytes:
    """The complete CSV with the row of β = 0.44 (its line 3) changed."""
    lines = complete.split(b"\n")
    lines[2] = change(lines[2])
    return b"\n".join(lines)


def _replace_field(index: int, text: bytes):
    return lambda line: b",".join(text if i == index else f for i, f in enumerate(line.split(b",")))


def _garble_a_digit(index: int):
    """The field's sixth decimal changed, whatever digits this machine's kernels wrote there."""

    def change(line: bytes) -> bytes:
        fields = line.split(b",")
        at = fields[index].index(b".") + 6
        digit = str((int(fields[index][at:at + 1]) + 1) % 10).encode()
        fields[index] = fields[index][:at] + digit + fields[index][at + 1:]
        return b",".join(fields)

    return change


DAMAGES = {
    "a missing field": (lambda line: b",".join(line.split(b",")[:2] + line.split(b",")[3:]), "14 fields, not 15"),
    "a non-number": (_replace_field(2, b"-1.49x"), "u is not a number: '-1.49x'"),
    "a NaN": (_replace_field(1, b"nan"), "lnz is not a number: 'nan'"),
    "a garbled beta": (lambda line: b"0.45" + line[4:], "lnz_onsager is not Onsager's value at beta=0.45"),
    "a garbled digit": (_garble_a_digit(1), "lnz_err is not lnz - lnz_onsager"),
    "bytes that are not UTF-8": (lambda line: line[:8] + b"\xff\xfe" + line[10:], "bytes that are not UTF-8"),
    "a garbled setting": (lambda line: line.removesuffix(b",4,6,ad,,full") + b",4x,6,ad,,full",
                          "chi, steps or h is not a number"),
    "an unknown method": (lambda line: line.removesuffix(b",full") + b",lanczos", "svd is not one of full, krylov"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_row_is_named_in_one_line_dropped_and_computed_again(damage, tmp_path, monkeypatch, capsys,
                                                                       complete_csv):
    change, why = DAMAGES[damage]
    damaged = _with_line_of_044(complete_csv, change)
    assert damaged != complete_csv
    (tmp_path / "s.csv").write_bytes(damaged)
    calls = counting(monkeypatch)
    assert main([*SETTINGS, "--betas", "0.3,0.44,0.5", "--jobs", "1", "--out", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "s.csv line 3 dropped" in err and why in err, err
    assert calls == [0.44]
    assert (tmp_path / "s.csv").read_bytes() == complete_csv


def test_repeated_rows_are_dropped_with_one_line_each_and_not_computed(tmp_path, monkeypatch, capsys, complete_csv):
    lines = complete_csv.splitlines(keepends=True)
    (tmp_path / "s.csv").write_bytes(b"".join(lines + lines[1:3]))  # the rows of 0.3 and 0.44 twice
    calls = counting(monkeypatch)
    assert main([*SETTINGS, "--betas", "0.3,0.44,0.5", "--jobs", "1", "--out", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"ising_sweep.py: {tmp_path / 's.csv'} line 5 dropped: beta=0.3 is in the file already",
                   f"ising_sweep.py: {tmp_path / 's.csv'} line 6 dropped: beta=0.44 is in the file already"]
    assert calls == [] and (tmp_path / "s.csv").read_bytes() == complete_csv


def _former_format(complete: bytes, settings_line: str) -> str:
    """The CSV of the former format: the settings line, the former header, the former columns."""
    table = list(csv.DictReader(io.StringIO(complete.decode())))
    lines = [settings_line, ",".join(sweep_csv.FORMER_COLUMNS)]
    lines += [",".join(row[name] for name in sweep_csv.FORMER_COLUMNS) for row in table]
    return "\n".join(lines) + "\n"


def test_a_former_format_csv_is_converted_by_a_run_of_its_settings(tmp_path, monkeypatch, capsys, complete_csv):
    monkeypatch.chdir(tmp_path)
    former = _former_format(complete_csv, "# chi=4 steps=6 c=ad")
    Path("s.csv").write_text(former)
    assert main(["--chi", "5", "--steps", "6", "--betas", "0.3", "--out", "s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "chi=4 steps=6 c=ad (in the former format" in err and "chi=5" in err
    assert Path("s.csv").read_text() == former  # refused: untouched
    calls = counting(monkeypatch)
    assert main([*SETTINGS, "--betas", "0.3,0.44,0.5,0.6", "--jobs", "1", "--out", "s"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "s.csv is in the former format" in err and "converted" in err
    assert calls == [0.6]
    assert Path("s.csv").read_bytes().startswith(complete_csv)  # the former rows, bit for bit, and 0.6
    assert len(rows(Path("s.csv"))) == 4 and rows(Path("s.csv"))[0.6] == expected_row(0.6)
    assert main([*SETTINGS, "--betas", "0.3", "--jobs", "1", "--out", "s"]) == 0
    assert capsys.readouterr().err == ""  # converted once


def test_other_settings_are_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([*SETTINGS, "--betas", "0.3", "--jobs", "1", "--out", "s"]) == 0
    before = Path("s.csv").read_text()
    capsys.readouterr()
    assert main(["--chi", "5", "--steps", "6", "--betas", "0.3", "--out", "s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "chi=4 steps=6 c=ad" in err and "chi=5 steps=6 c=ad" in err
    assert Path("s.csv").read_text() == before
    assert main([*SETTINGS, "--c", "difference", "--betas", "0.3", "--out", "s"]) == 2
    assert "c=difference h=1e-05" in capsys.readouterr().err
    Path("notes.csv").write_text("my notes\nnot a sweep")  # another file: refused, not repaired
    assert main([*SETTINGS, "--betas", "0.3", "--out", "notes"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a sweep CSV" in err
    assert Path("notes.csv").read_text() == "my notes\nnot a sweep"


def _hold_lock(csv_path: Path) -> int:
    """Take the sweep's lock as a run at work would; closing the descriptor releases it."""
    fd = os.open(sweep.lock_path(csv_path), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, b"4242\n", 0)
    return fd


def _wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_concurrent_runs_wait_and_neither_duplicate_nor_lose_rows(tmp_path):
    """Two real runs, overlapping βs, started while a third holds the lock: each waits its turn; at
    the end every β is in the CSV once, in order, and none was computed twice."""
    path = tmp_path / "s.csv"
    lock = _hold_lock(path)
    grids = {"a": "0.30:0.50:0.01", "b": "0.40:0.60:0.01"}
    procs, errs = {}, {}
    for name, grid in grids.items():
        errs[name] = tmp_path / f"{name}.err"
        with open(errs[name], "w") as err:
            procs[name] = subprocess.Popen(sweep_command(*SETTINGS, "--betas", grid, "--jobs", "2", "--out",
                                                         str(tmp_path / "s")),
                                           stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        waiting = f"ising_sweep.py: waiting for the run writing {path} (pid 4242) to finish\n"
        _wait_for(lambda: all(e.read_text() == waiting for e in errs.values()), LIMIT, "both runs to wait")
        assert not path.exists()  # neither has read or written it
    finally:
        os.close(lock)
    outs = {name: proc.communicate(timeout=LIMIT)[0] for name, proc in procs.items()}
    assert all(proc.returncode == 0 for proc in procs.values()), [e.read_text() for e in errs.values()]
    union = sorted(set(sweep.parse_betas(grids["a"])) | set(sweep.parse_betas(grids["b"])))
    lines = path.read_text().splitlines()
    assert [float(line.split(",")[0]) for line in lines[1:]] == union  # each once, in order
    assert sorted(rows(path)) == union  # and each a whole row
    computed = [int(out.split(": ")[1].split()[0]) for out in outs.values()]
    assert sorted(computed) == [10, 21] and sum(computed) == len(union)  # the second computed only what was missing


@pytest.mark.parametrize(
    "argv, name",
    [
        (["--betas", "0.4:0.5"], "--betas"),
        (["--betas", "0.4:0.5:0"], "--betas"),
        (["--betas", "0.4:0.5:-0.01"], "--betas"),
        (["--betas", "0.4:x:0.01"], "--betas"),
        (["--betas", "0.5:0.4:0.01"], "--betas"),
        (["--betas", "0,0.4"], "--betas"),
        (["--betas", "-0.1:0.4:0.1"], "--betas"),
        (["--betas", "nan"], "--betas"),
        (["--betas", "1_000"], "--betas"),  # float() reads it as 1000
        (["--betas", "0.4:0.5:0.0_1"], "--betas"),
        (["--betas", "360"], "--betas"),  # beyond the range: u and c are not finite
        (["--betas", "8.5"], "--betas"),
        (["--betas", "1e-300"], "--betas"),
        (["--betas", "7:9:0.5"], "--betas"),
        (["--chi", "0"], "--chi"),
        (["--chi", "2.5"], "--chi"),
        (["--chi", "1_6"], "--chi"),
        (["--steps", "0"], "--steps"),
        (["--jobs", "0"], "--jobs"),
        (["--h", "0"], "--h"),
        (["--h", "inf"], "--h"),
        (["--c", "difference", "--h", "0.5", "--betas", "0.3,0.6"], "--h"),  # beta - h must stay in the range
        (["--c", "difference", "--betas", "8"], "--h"),  # beta + h too
        (["--c", "spline"], "--c"),
        (["--jobs", "2", "--scheduler", "tcp://127.0.0.1:8786"], "--scheduler"),
        (["--bogus"], "--bogus"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_naming_them(argv, name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err, err
    assert not Path("runs").exists()


def test_the_beta_range_is_finite_at_both_edges_at_small_and_default_settings():
    """trg.BETA_RANGE's promise, at its edges (the docstring gives where it breaks)."""
    low, high = trg.BETA_RANGE
    for chi, steps, h in ((CHI, STEPS, None), (CHI, STEPS, 1e-5), (16, 20, None)):
        margin = h or 0.0  # c by difference evaluates at beta ± h
        for beta in (low + margin, high - margin):
            point = sweep.compute_point(beta, chi, steps, h)
            assert all(math.isfinite(point[name]) for name in ("lnz", "u", "c")), (beta, chi, steps, point)


@pytest.mark.parametrize(
    "argv, name",
    [
        (["16", "20", "1", "1e-5", "360"], "beta"),
        (["16", "20", "1", "1e-5", "1e-300"], "beta"),
        (["16", "20", "1", "1e-5", "8.5"], "beta"),
        (["16", "20", "1", "1e-5", "1_000"], "beta"),
        (["16", "20", "1", "360"], "h"),  # the 4th number is h: beta ± h leave the range
        (["4", "6", "1", "1e-5", "8"], "h"),
        (["1_6"], "chi"),
    ],
)
def test_ising_trg_refuses_betas_outside_the_finite_range_in_one_line(argv, name, capsys):
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(EXAMPLES / "ising_trg.py"))["main"](argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"ising_trg.py: argument {name}: must"), err


def test_both_help_texts_give_the_beta_range(capsys):
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(EXAMPLES / "ising_trg.py"))["main"](["--help"])
    assert stop.value.code == 0
    assert "in [1e-14, 8]" in " ".join(capsys.readouterr().out.split())
    text = " ".join(CLI["parser"]().format_help().split())
    assert "in [1e-14, 8]" in text and "--scheduler ADDRESS" in text and "143 SIGTERM" in text


@pytest.mark.parametrize("failure", ["nan", "LinalgError"])
def test_a_beta_without_a_finite_result_is_one_line_no_row_and_exit_2(failure, tmp_path, monkeypatch, capsys,
                                                                     expected):
    real = sweep.compute_point

    def compute_point(beta, chi, steps, h, svd="full"):
        if beta != 0.44:
            return real(beta, chi, steps, h)
        if failure == "LinalgError":
            raise LinalgError("svd", "a matrix of finite entries", "inf or NaN entries")
        return dict(real(beta, chi, steps, h), u=math.nan)

    monkeypatch.setattr(sweep, "compute_point", compute_point)
    argv = [*SETTINGS, "--betas", "0.3,0.44,0.5", "--jobs", "1", "--out", str(tmp_path / "s")]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("ising_sweep.py: error: beta=0.44 has no finite result"), err
    assert ("u=nan" if failure == "nan" else "LinalgError") in err
    assert out.splitlines()[0].endswith("2 betas computed, 0 already there, 1 without a finite result (no row; "
                                        "see above)")
    assert rows(tmp_path / "s.csv") == {0.3: expected[0.3], 0.5: expected[0.5]}


def test_a_task_that_fails_otherwise_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, expected):
    def compute_point(beta, chi, steps, h, svd="full"):
        raise RuntimeError("a worker lost its way\nsecond line")

    monkeypatch.setattr(sweep, "compute_point", compute_point)
    assert main([*SETTINGS, "--betas", "0.3", "--jobs", "1", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err == "ising_sweep.py: error: beta=0.3 failed: RuntimeError: a worker lost its way second line\n"


def _read_only_directory(tmp_path: Path) -> Path:
    """A directory this process cannot write: mode 555, or, as root (whom modes do not stop), /sys."""
    place = tmp_path / "read-only"
    place.mkdir()
    place.chmod(0o555)
    if os.access(place, os.W_OK):
        place = Path("/sys")
        probe = place / "tenferro_py_probe"
        try:
            probe.mkdir()
        except OSError:
            return place
        probe.rmdir()
        pytest.skip("no directory here that this process cannot write")
    return place


UNWRITABLE = {  # where --out points: (what is there already, --out)
    "a directory at OUT.csv": (lambda tmp_path: Path("s.csv").mkdir(), lambda tmp_path: "s"),
    "a directory at OUT.png": (lambda tmp_path: Path("s.png").mkdir(), lambda tmp_path: "s"),
    "under a regular file": (lambda tmp_path: Path("file").write_text("x"), lambda tmp_path: "file/s"),
    "deeper under a regular file": (lambda tmp_path: Path("file").write_text("x"), lambda tmp_path: "file/sub/s"),
    "a read-only directory": (lambda tmp_path: None, lambda tmp_path: str(_read_only_directory(tmp_path) / "s")),
}


@pytest.mark.parametrize("where", UNWRITABLE)
def test_an_out_that_cannot_be_written_is_one_line_before_any_computation(where, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    make, out = UNWRITABLE[where]
    make(tmp_path)
    out = out(tmp_path)
    calls = counting(monkeypatch)
    assert main([*SETTINGS, "--betas", "0.3", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ising_sweep.py: error: --out: cannot write "), err
    assert calls == []


def test_keyboard_interrupt_keeps_the_finished_betas_and_exits_130(tmp_path, monkeypatch, capsys, expected):
    real = sweep.compute_point

    def interrupted_at_05(beta, chi, steps, h, svd="full"):
        if beta == 0.5:
            raise KeyboardInterrupt
        return real(beta, chi, steps, h)

    monkeypatch.setattr(sweep, "compute_point", interrupted_at_05)
    argv = [*SETTINGS, "--betas", "0.3,0.5", "--jobs", "1", "--out", str(tmp_path / "s")]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted; 1 of 2 betas are saved" in err
    assert rows(tmp_path / "s.csv") == {0.3: expected[0.3]}


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie, dead but not yet reaped, does not)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


LONG_SWEEP = ["--chi", "8", "--steps", "14", "--betas", "0.30:0.69:0.005", "--jobs", "2"]
ENDLESS_SWEEP = ["--chi", "8", "--steps", "10", "--betas", "0.3,0.35,0.4,0.45", "--jobs", "2"]
ENDLESS = '''
import os
import pathlib

from tenferro_py.models import trg


def point(beta, chi, steps, h=None, svd="full"):
    """A beta that never ends: TRG again and again, its start marked by a file named by this worker's pid."""
    pathlib.Path(os.environ["ENDLESS_STARTED"], str(os.getpid())).touch()
    while True:
        trg.value_and_grad(beta, trg.schedule(chi, steps))
'''
RUN_ENDLESS = ("import runpy, sys, endless; from tenferro_py.models import sweep; sweep.compute_point = endless.point; "
               "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
"""examples/ising_sweep.py with every β endless: the task is endless.point, which the workers import."""


def _start_long_sweep(tmp_path: Path, **popen) -> subprocess.Popen:
    """A sweep of 79 short βs on two worker processes, once its first row is saved."""
    proc = subprocess.Popen(sweep_command(*LONG_SWEEP, "--out", str(tmp_path / "s")), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)
    path = tmp_path / "s.csv"
    _wait_for(lambda: path.exists() and len(path.read_text().splitlines()) > 1, LIMIT, "a first row")
    return proc


@pytest.fixture
def endless_sweep(tmp_path):
    """start() runs ENDLESS_SWEEP in a process group of its own and returns, once both worker
    processes are in their β, (process, worker pids). No β ever ends, so a sweep that stops
    within LIMIT stopped its workers' βs. Whatever is left of the group is killed after the test."""
    (tmp_path / "endless.py").write_text(ENDLESS)
    started = tmp_path / "started"
    started.mkdir()
    env = dict(os.environ, ENDLESS_STARTED=str(started),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    argv = [sys.executable, "-c", RUN_ENDLESS, str(EXAMPLES / "ising_sweep.py"), *ENDLESS_SWEEP, "--out",
            str(tmp_path / "s")]
    groups = []

    def start() -> tuple[subprocess.Popen, set[int]]:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        groups.append(proc.pid)
        _wait_for(lambda: len(list(started.iterdir())) == 2, LIMIT, "both workers to start a beta")
        return proc, {int(p.name) for p in started.iterdir()}

    yield start
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_ctrl_c_keeps_the_finished_rows_and_the_same_command_computes_the_rest(tmp_path, monkeypatch):
    path = tmp_path / "s.csv"
    betas = sweep.parse_betas("0.30:0.69:0.005")
    proc = _start_long_sweep(tmp_path, start_new_session=True)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the parent and its workers
    out, err = proc.communicate(timeout=LIMIT)
    assert proc.returncode == 130 and out == ""
    assert err.count("\n") == 1 and err.startswith("ising_sweep.py: interrupted;"), err
    text = path.read_text()
    saved = rows(path)
    assert text.endswith("\n") and 1 <= len(saved) < len(betas)
    calls: list[float] = []
    fake = {"lnz": 0.0, "u": 0.0, "c": 0.0, "c_method": "ad"}
    monkeypatch.setattr(sweep, "compute_point", lambda beta, *_: calls.append(beta) or dict(fake, beta=beta))
    sweep.run_sweep(betas, 8, 14, H, tmp_path / "s", jobs=1)
    assert sorted(calls) == sorted(set(betas) - set(saved))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="looks at the workers in /proc")
@pytest.mark.parametrize("signal_name", ["Ctrl-C", "SIGTERM"])
def test_ctrl_c_and_sigterm_stop_the_workers_betas_and_leave_no_worker(signal_name, tmp_path, endless_sweep):
    """Ctrl-C reaches the whole process group; SIGTERM only the main process, as kill(1) or a service
    manager sends it, and the sweep stops its workers itself. Either way the βs in progress stop."""
    proc, workers = endless_sweep()
    if signal_name == "Ctrl-C":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=LIMIT)
    how, status = ("interrupted", 130) if signal_name == "Ctrl-C" else ("terminated", 143)
    assert proc.returncode == status and out == ""
    assert err == (f"ising_sweep.py: {how}; 0 of 4 betas are saved in {tmp_path / 's.csv'}, "
                   "the same command resumes\n")
    assert not any(_alive(pid) for pid in workers)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="looks at the workers in /proc")
def test_workers_exit_when_the_sweep_is_killed_and_free_the_lock(tmp_path, endless_sweep):
    proc, workers = endless_sweep()
    proc.kill()  # SIGKILL: no handler runs in the main process
    proc.communicate(timeout=LIMIT)  # its pipes close once the workers, which hold them too, are gone
    _wait_for(lambda: not any(_alive(pid) for pid in workers), LIMIT, "the orphaned workers to exit")
    fd = os.open(sweep.lock_path(tmp_path / "s.csv"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again: no worker holds it
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the retry needs an interval timer")
def test_a_workers_ctrl_c_lost_in_a_finalizer_is_raised_again(monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", sweep_pool._retry_interrupt)
    monkeypatch.setitem(sweep_pool._worker_state, "busy", True)
    monkeypatch.setitem(sweep_pool._worker_state, "stopped", False)
    previous = signal.getsignal(signal.SIGALRM)

    class Leaf:
        pass

    def interrupted(_):  # Ctrl-C inside a weakref callback: Python only reports it to the hook
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            leaf = Leaf()
            ref = weakref.ref(leaf, interrupted)
            del leaf
            deadline = time.monotonic() + LIMIT
            while time.monotonic() < deadline:  # the β going on, until the retried interrupt
                pass
        assert ref() is None and sweep_pool._worker_state["stopped"]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_progress_bar_on_stderr_only_when_asked_or_on_a_terminal(tmp_path, capsys):
    sweep.run_sweep([0.3, 0.5], CHI, STEPS, H, tmp_path / "a", jobs=1)
    assert capsys.readouterr().err == ""  # pytest's stderr is no TTY
    sweep.run_sweep([0.3, 0.5], CHI, STEPS, H, tmp_path / "b", jobs=1, progress=True)
    err = capsys.readouterr().err
    assert "\r[" in err and "2/2 betas" in err and "left" in err and err.endswith("\n")


def test_plot_is_drawn_with_matplotlib(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    assert main([*SETTINGS, "--betas", "0.3,0.44,0.5", "--jobs", "1", "--out", "s"]) == 0
    assert Path("s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out.splitlines()[-1].startswith("s.png: ")


def test_without_matplotlib_the_csv_is_written_and_one_line_says_how_to_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib... raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.chdir(tmp_path)
    assert main([*SETTINGS, "--betas", "0.3", "--jobs", "1", "--out", "s"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "s.csv: 1 betas computed, 0 already there"
    assert len(out) == 2 and "pip install -e '.[plot]'" in out[1] and "s.png" in out[1]
    assert Path("s.csv").exists() and not Path("s.png").exists()


def test_a_krylov_sweep_records_its_method_and_agrees_with_the_full_one(tmp_path, expected):
    """--svd krylov: the method is a setting of every row (a full sweep into that file is refused);
    at these settings the Krylov path falls back to the full SVD, so the numbers are the same."""
    done = sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "k", jobs=1, svd="krylov")
    got = rows(done.csv)
    for beta in BETAS:
        assert got[beta]["svd"] == "krylov"
        assert abs(float(got[beta]["u"]) - float(expected[beta]["u"])) < 1e-10
    with pytest.raises(sweep.SettingsMismatch):
        sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "k", jobs=1)
