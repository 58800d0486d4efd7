"""examples/ising_sweep.py --scheduler and tenferro_py.models.sweep's scheduler: a β sweep on a
real Dask cluster, and its one-line errors.

Each cluster is a distributed.LocalCluster (2 worker processes, 1 thread each) started by a
process of its own, outside the repository, as on a remote cluster: its workers import the
tenferro_py under test, nothing of examples/. Needs dask[distributed] (the test extra).
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from tenferro_py.models import sweep

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SETTINGS = ["--chi", "4", "--steps", "6", "--betas", "0.3,0.44,0.5"]
ENV = {name: value for name, value in os.environ.items() if not name.startswith("DASK_")}
LIMIT = 120
"""Seconds a command may take before the test fails: a hang, not a slow machine."""
CLUSTER = """
import sys
from distributed import LocalCluster

with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                  preload=sys.argv[1:]) as cluster:
    print(cluster.scheduler_address, flush=True)
    sys.stdin.read()  # until the test closes it
"""
needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="needs dask[distributed] (the test extra)")


@contextmanager
def cluster(tmp_path: Path, preload: tuple[str, ...] = ()):
    """The address of a LocalCluster run by a process of its own (in tmp_path), for the block."""
    with open(tmp_path / "cluster.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-c", CLUSTER, *preload], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, text=True, cwd=tmp_path, env=ENV)
    try:
        address = proc.stdout.readline().strip()
        assert address.startswith("tcp://"), (tmp_path / "cluster.log").read_text()
        yield address
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / "ising_sweep.py"), *args], capture_output=True, text=True,
                          env=env or ENV, timeout=LIMIT)


@needs_dask
def test_a_sweep_on_a_dask_cluster_writes_the_csv_of_jobs_1_bit_for_bit(tmp_path):
    """From the command line and from Python (models.sweep.run_sweep)."""
    with cluster(tmp_path) as address:
        remote = run_cli(*SETTINGS, "--scheduler", address, "--out", str(tmp_path / "remote"))
        from_python = sweep.run_sweep([0.3, 0.44, 0.5], 4, 6, None, tmp_path / "python", scheduler=address)
    local = run_cli(*SETTINGS, "--jobs", "1", "--out", str(tmp_path / "local"))
    assert remote.returncode == 0 and local.returncode == 0, remote.stderr + local.stderr
    assert remote.stderr == ""
    assert remote.stdout.splitlines()[0] == f"{tmp_path / 'remote.csv'}: 3 betas computed, 0 already there"
    assert (tmp_path / "remote.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    assert len((tmp_path / "remote.csv").read_bytes().splitlines()) == 1 + 3
    assert sorted(from_python.computed) == [0.3, 0.44, 0.5]
    assert (tmp_path / "python.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()


@needs_dask
def test_workers_that_cannot_load_the_task_are_one_line_not_a_hang(tmp_path):
    """Workers without tenferro_py (a preload hides it): the check before the first task says so."""
    hide = tmp_path / "without_tenferro_py.py"
    hide.write_text("import sys\nsys.modules['tenferro_py'] = None  # import tenferro_py fails\n")
    with cluster(tmp_path, (str(hide),)) as address:
        done = run_cli(*SETTINGS, "--scheduler", address, "--out", str(tmp_path / "s"))
    assert done.returncode == 2 and done.stdout == ""
    err = done.stderr
    assert err.count("\n") == 1 and err.startswith("ising_sweep.py: error: --scheduler: 2 of the 2 Dask workers "), err
    assert "cannot load the sweep's task" in err and "tenferro_py" in err
    assert (tmp_path / "s.csv").read_text() == sweep.HEADER + "\n"  # no row


@needs_dask
def test_an_unreachable_scheduler_is_one_line_within_the_connect_timeout(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(ENV, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="1s")
    done = run_cli(*SETTINGS, "--scheduler", f"tcp://127.0.0.1:{port}", "--out", str(tmp_path / "s"), env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"ising_sweep.py: error: --scheduler: no Dask scheduler answers at "
                                  f"'tcp://127.0.0.1:{port}'")


def test_without_dask_the_scheduler_is_one_line_saying_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    calls: list[float] = []
    monkeypatch.setattr(sweep, "compute_point", lambda beta, *_: calls.append(beta))
    main = runpy.run_path(str(EXAMPLES / "ising_sweep.py"))["main"]
    assert main([*SETTINGS, "--scheduler", "tcp://127.0.0.1:8786", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install -e '.[distributed]'" in err and calls == []


@needs_dask
@pytest.mark.parametrize("address", ["not-an-address", "", "http://127.0.0.1:8786", "tcp://127.0.0.1",
                                     "inproc://sweep"])
def test_an_address_of_no_scheduler_is_one_line_and_the_process_ends_at_once(address, tmp_path):
    """Refused before a Client is made: no lingering client, no 'Exception ignored in Client.__del__'
    (the process used to wait twice the connect timeout, 60 s, for it). LIMIT is the generous bound."""
    done = run_cli(*SETTINGS, "--scheduler", address, "--out", str(tmp_path / "s"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        f"ising_sweep.py: error: --scheduler: {address!r} is not a Dask scheduler's address ("), done.stderr


@needs_dask
def test_a_client_that_fails_half_made_is_closed_at_once(tmp_path):
    """tls:// without a TLS configuration: distributed's Client raises inside its constructor, after
    starting its event loop. Without care its __del__ waits at the exit, then prints a TimeoutError."""
    env = dict(ENV, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="30s")
    done = run_cli(*SETTINGS, "--scheduler", "tls://127.0.0.1:1", "--out", str(tmp_path / "s"), env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "ising_sweep.py: error: --scheduler: no Dask scheduler answers at 'tls://127.0.0.1:1'"), done.stderr
