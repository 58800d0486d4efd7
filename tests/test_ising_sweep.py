"""examples/ising_sweep.py: the CSV's values and bits, resuming, repair, refusals, Ctrl-C, CLI, plot.

Small settings (χ = 4, 6 steps: ~15 ms per value_and_grad) keep it fast.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
import weakref
from concurrent.futures import Executor, Future
from pathlib import Path

import pytest

from tenferro_py import CpuEngine

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))

import ising_sweep  # noqa: E402
import ising_trg  # noqa: E402
import onsager  # noqa: E402

CHI, STEPS, H = 4, 6, None  # H None: c by AD, the default
BETAS = [0.3, 0.44, 0.5]
SETTINGS = ["--chi", str(CHI), "--steps", str(STEPS)]


def expected_row(beta: float, h: float | None = None, chi: int = CHI, steps: int = STEPS) -> dict[str, str]:
    """The CSV row of β as ising_trg computes it: c_ad, or c by the central difference of step h."""
    ks = ising_trg.schedule(chi, steps)
    engine = CpuEngine.serial()
    if h is None:
        lnz, grad, curvature = ising_trg.value_grad_and_curvature(beta, ks, engine)
        c, method = beta * beta * curvature, "ad"
    else:
        lnz, grad = ising_trg.value_and_grad(beta, ks, engine)
        g_plus = ising_trg.value_and_grad(beta + h, ks, engine)[1]
        g_minus = ising_trg.value_and_grad(beta - h, ks, engine)[1]
        c, method = beta * beta * (g_plus - g_minus) / (2 * h), "difference"
    exact = (onsager.ln_z(beta), onsager.energy(beta), onsager.specific_heat(beta))
    values = [beta, lnz, -grad, c, method, *exact, lnz - exact[0], -grad - exact[1], c - exact[2]]
    return dict(zip(ising_sweep.COLUMNS, (v if isinstance(v, str) else repr(v) for v in values)))


@pytest.fixture(scope="module")
def expected() -> dict[float, dict[str, str]]:
    return {beta: expected_row(beta) for beta in BETAS}


def rows(path: Path) -> dict[float, dict[str, str]]:
    return {float(r["beta"]): r for r in ising_sweep.read_sweep(path)[1]}


def counting(monkeypatch) -> list[float]:
    """Replace compute_point by a wrapper that records each β it is called with."""
    calls: list[float] = []
    real = ising_sweep.compute_point

    def compute_point(beta, chi, steps, h):
        calls.append(beta)
        return real(beta, chi, steps, h)

    monkeypatch.setattr(ising_sweep, "compute_point", compute_point)
    return calls


def test_parse_betas_grid_includes_stop_and_reads_like_the_list():
    grid = ising_sweep.parse_betas("0.40:0.48:0.005")
    assert grid == [round(0.4 + 0.005 * i, 3) for i in range(17)]
    assert grid[-1] == 0.48 and repr(grid[1]) == "0.405"
    assert ising_sweep.parse_betas("0.1:0.35:0.1") == [0.1, 0.2, 0.3]
    assert ising_sweep.parse_betas("0.3, 0.4 0.4,0.5") == [0.3, 0.4, 0.5]


def test_small_sweep_writes_the_columns_and_value_and_grads_bits(tmp_path, expected):
    sweep = ising_sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1)
    assert sweep.csv == tmp_path / "s.csv" and sorted(sweep.computed) == BETAS and sweep.skipped == []
    lines = sweep.csv.read_text().splitlines()
    assert lines[0] == "# chi=4 steps=6 c=ad"
    assert lines[1] == ",".join(ising_sweep.COLUMNS)
    assert rows(sweep.csv) == expected


def test_c_by_difference_and_its_crossing_guard(tmp_path):
    """--c difference: c as ising_trg's central difference; a β whose [β−h, β+h] holds a crossing is marked."""
    sweep = ising_sweep.run_sweep([0.3], CHI, STEPS, 1e-5, tmp_path / "d", jobs=1)
    assert sweep.csv.read_text().splitlines()[0] == "# chi=4 steps=6 c=difference h=1e-05"
    assert rows(sweep.csv)[0.3] == expected_row(0.3, 1e-5)
    crossing = 0.37634229  # χ = 6, 8 steps: lnZ/N jumps there (see tests/test_c_ad.py)
    assert ising_sweep.compute_point(crossing, 6, 8, 1e-5)["c_method"] == "difference-crossing"


def test_worker_processes_give_the_same_bits_and_stay_quiet_off_a_terminal(tmp_path, expected):
    env = dict(os.environ, PYTHONPATH=str(EXAMPLES.parent))
    argv = [sys.executable, str(EXAMPLES / "ising_sweep.py"), *SETTINGS, "--betas", "0.3,0.44 0.5",
            "--jobs", "2", "--out", str(tmp_path / "s")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar when stderr is not a TTY
    assert done.stdout.splitlines()[0] == f"{tmp_path / 's.csv'}: 3 betas computed, 0 already there"
    assert rows(tmp_path / "s.csv") == expected
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in lines[2:]] == ["0.3", "0.44", "0.5"]  # in β order at the end


def test_rerun_computes_only_the_missing_betas(tmp_path, monkeypatch, expected):
    ising_sweep.run_sweep(BETAS[:2], CHI, STEPS, H, tmp_path / "s", jobs=1)
    calls = counting(monkeypatch)
    sweep = ising_sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1)
    assert calls == [0.5] and sweep.computed == [0.5] and sweep.skipped == BETAS[:2]
    assert rows(sweep.csv) == expected
    assert ising_sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1).computed == []
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
    sweep = ising_sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", executor=executor)
    assert executor.submitted == 3 and not executor.shut
    assert rows(sweep.csv) == expected
    assert pickle.loads(pickle.dumps(ising_sweep.compute_point)) is ising_sweep.compute_point


def test_a_torn_last_line_is_dropped_and_its_beta_computed_again(tmp_path, monkeypatch, expected):
    ising_sweep.run_sweep(BETAS[:2], CHI, STEPS, H, tmp_path / "s", jobs=1)
    path = tmp_path / "s.csv"
    whole = path.read_text()
    path.write_text(whole + expected[0.5]["beta"] + "," + expected[0.5]["lnz"][:6])  # killed mid-row
    calls = counting(monkeypatch)
    ising_sweep.run_sweep(BETAS, CHI, STEPS, H, tmp_path / "s", jobs=1)
    assert calls == [0.5]
    text = path.read_text()
    assert text.startswith(whole) and text.endswith("\n") and len(text.splitlines()) == 2 + 3
    assert rows(path) == expected


def test_other_settings_are_refused_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert ising_sweep.main([*SETTINGS, "--betas", "0.3", "--jobs", "1", "--out", "s"]) == 0
    before = Path("s.csv").read_text()
    capsys.readouterr()
    assert ising_sweep.main(["--chi", "5", "--steps", "6", "--betas", "0.3", "--out", "s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "chi=4 steps=6" in err and "chi=5 steps=6" in err
    assert Path("s.csv").read_text() == before
    Path("notes.csv").write_text("my notes\nnot a sweep")  # another file: refused, not repaired
    assert ising_sweep.main([*SETTINGS, "--betas", "0.3", "--out", "notes"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert Path("notes.csv").read_text() == "my notes\nnot a sweep"


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
        (["--chi", "0"], "--chi"),
        (["--chi", "2.5"], "--chi"),
        (["--steps", "0"], "--steps"),
        (["--jobs", "0"], "--jobs"),
        (["--h", "0"], "--h"),
        (["--h", "inf"], "--h"),
        (["--c", "difference", "--h", "0.5", "--betas", "0.3,0.6"], "--h"),  # beta - h must stay > 0
        (["--c", "spline"], "--c"),
        (["--bogus"], "--bogus"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_naming_them(argv, name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        ising_sweep.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err, err
    assert not Path("runs").exists()


def test_keyboard_interrupt_keeps_the_finished_betas_and_exits_130(tmp_path, monkeypatch, capsys, expected):
    real = ising_sweep.compute_point

    def interrupted_at_05(beta, chi, steps, h):
        if beta == 0.5:
            raise KeyboardInterrupt
        return real(beta, chi, steps, h)

    monkeypatch.setattr(ising_sweep, "compute_point", interrupted_at_05)
    argv = [*SETTINGS, "--betas", "0.3,0.5", "--jobs", "1", "--out", str(tmp_path / "s")]
    assert ising_sweep.main(argv) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted; 1 of 2 betas are saved" in err
    assert rows(tmp_path / "s.csv") == {0.3: expected[0.3]}


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_ctrl_c_stops_the_worker_processes_at_once_and_loses_no_row(tmp_path, monkeypatch):
    path = tmp_path / "s.csv"
    betas = ising_sweep.parse_betas("0.30:0.69:0.01")
    argv = [sys.executable, str(EXAMPLES / "ising_sweep.py"), "--chi", "8", "--steps", "14",
            "--betas", "0.30:0.69:0.01", "--jobs", "2", "--out", str(tmp_path / "s")]
    env = dict(os.environ, PYTHONPATH=str(EXAMPLES.parent))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while not (path.exists() and len(path.read_text().splitlines()) > 2) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the parent and its workers
    stopped = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and out == ""
    assert time.monotonic() - stopped < 5  # prompt: the workers stop their βs too
    assert err.count("\n") == 1 and err.startswith("ising_sweep.py: interrupted;"), err
    text = path.read_text()
    saved = rows(path)
    assert text.endswith("\n") and 1 <= len(saved) < len(betas)
    calls: list[float] = []
    fake = {"lnz": 0.0, "u": 0.0, "c": 0.0, "c_method": "difference"}
    monkeypatch.setattr(ising_sweep, "compute_point", lambda beta, *_: calls.append(beta) or dict(fake, beta=beta))
    ising_sweep.run_sweep(betas, 8, 14, H, tmp_path / "s", jobs=1)
    assert sorted(calls) == sorted(set(betas) - set(saved))


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the retry needs an interval timer")
def test_a_workers_ctrl_c_lost_in_a_finalizer_is_raised_again(monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", ising_sweep._retry_interrupt)
    monkeypatch.setitem(ising_sweep._worker_state, "busy", True)
    monkeypatch.setitem(ising_sweep._worker_state, "stopped", False)
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
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # the β going on
                pass
        assert ref() is None and ising_sweep._worker_state["stopped"]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_progress_bar_on_stderr_only_when_asked_or_on_a_terminal(tmp_path, capsys):
    ising_sweep.run_sweep([0.3, 0.5], CHI, STEPS, H, tmp_path / "a", jobs=1)
    assert capsys.readouterr().err == ""  # pytest's stderr is no TTY
    ising_sweep.run_sweep([0.3, 0.5], CHI, STEPS, H, tmp_path / "b", jobs=1, progress=True)
    err = capsys.readouterr().err
    assert "\r[" in err and "2/2 betas" in err and "left" in err and err.endswith("\n")


def test_plot_is_drawn_with_matplotlib(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    assert ising_sweep.main([*SETTINGS, "--betas", "0.3,0.44,0.5", "--jobs", "1", "--out", "s"]) == 0
    assert Path("s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out.splitlines()[-1].startswith("s.png: ")


def test_without_matplotlib_the_csv_is_written_and_one_line_says_how_to_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib... raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.chdir(tmp_path)
    assert ising_sweep.main([*SETTINGS, "--betas", "0.3", "--jobs", "1", "--out", "s"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "s.csv: 1 betas computed, 0 already there"
    assert len(out) == 2 and "pip install -e '.[plot]'" in out[1] and "s.png" in out[1]
    assert Path("s.csv").exists() and not Path("s.png").exists()
