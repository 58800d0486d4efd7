"""What the contraction benchmarks share: one thread for everyone, interleaved medians, a header
that says where and when, the machine's speed (bench/dispatch.py), and the figures written to ``bench/results/``.

Import this module first (before numpy and jax): it sets XLA_FLAGS to one XLA thread (unless the
caller set it) and pins the process to one core, so that no library runs a second thread in
parallel; the benchmarks pin BLAS to one thread with threadpoolctl besides.
"""

from __future__ import annotations

import datetime
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
# One core for the whole process, before any library starts a thread (threads inherit it): XLA still
# splits some large loops over threads despite the flags above (CPU time above wall time at chi = 24).
CORE = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {CORE})

import dispatch  # noqa: E402  (bench/dispatch.py: the machine's call cost and GEMM speed)
import numpy as np  # noqa: E402
import trg  # noqa: E402  (bench/trg.py: the harnesses' source_state)
from threadpoolctl import threadpool_info  # noqa: E402

import tenferro_py  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def interleaved(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, tuple[float, float, float]]:
    """Median (wall, user CPU, system CPU) seconds of each run, timed A, B, C, A, B, C, … after one
    warm-up each. User time leaves out what a loaded machine adds (waiting for a core); system time
    is mostly the kernel mapping and zeroing fresh memory for new arrays (page faults), which
    depends on the allocator's state and varies from run to run."""
    for run in runs.values():
        run()
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            wall, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            run()
            after = resource.getrusage(resource.RUSAGE_SELF)
            times[name].append((time.perf_counter() - wall, after.ru_utime - before.ru_utime,
                                after.ru_stime - before.ru_stime))
    return {name: tuple(statistics.median(t[i] for t in ts) for i in range(3)) for name, ts in times.items()}


def ratios(med: dict[str, tuple[float, float, float]], pairs: list[tuple[str, str]]) -> str:
    """'a/b=wall [user]' for each pair."""
    return " ".join(f"{a}/{b}={med[a][0] / med[b][0]:.3f} [{med[a][1] / med[b][1]:.3f}]" for a, b in pairs)


def milliseconds(med: dict[str, tuple[float, float, float]]) -> str:
    """'name=wall [user + sys]' in ms for each run."""
    return " ".join(f"{k}={v[0] * 1e3:.1f} [{v[1] * 1e3:.0f}+{v[2] * 1e3:.0f}]" for k, v in med.items())


def os_cost(run: Callable[[], object]) -> str:
    """One run's user and system CPU seconds and minor page faults (getrusage): the system's share is
    the kernel mapping and zeroing fresh memory for the run's new arrays."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (f"user {after.ru_utime - before.ru_utime:.3f} s sys {after.ru_stime - before.ru_stime:.3f} s "
            f"{after.ru_minflt - before.ru_minflt} page faults")


def gemm_floor(count, reference_seconds: float, reference: str) -> str:
    """The least time BLAS could take for the GEMMs ``count`` (contraction.counting) counted: their flops
    at this machine's one-thread 1024³ GEMM rate (bench/dispatch.py (iv), the best shape there is),
    and that time over the reference's: no layout, no fewer copies, can bring ours below it."""
    rate = dispatch.gemm_rate()
    floor = count.flops / (rate * 1e9)
    return (f"{count.flops:.3e} flops at {rate:.0f} GF/s = {floor * 1e3:.1f} ms, "
            f"{floor / reference_seconds:.3f} x {reference}")


def _lscpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return (f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} CPUs, "
            f"L2 {fields.get('L2 cache', '?').strip()}, L3 {fields.get('L3 cache', '?').strip()}")


def header(name: str) -> list[str]:
    """Date, command, machine (lscpu), versions, source, every BLAS threadpoolctl sees, the thread settings."""
    import jax

    lines = [
        f"# {name} {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"# command: python {' '.join(sys.argv)}",
        f"# machine: {_lscpu_model()}; python {platform.python_version()} numpy {np.__version__} "
        f"jax {jax.__version__} tenferro_py {tenferro_py.__version__}",
        f"# source: {trg.source_state('tenferro_py', 'bench')}",
    ]
    for lib in threadpool_info():
        lines.append(f"# {lib['user_api']}: {lib['internal_api']} {lib['version']} arch={lib.get('architecture')} "
                     f"({Path(lib['filepath']).name}), pinned to 1 thread while timing")
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                   if k.startswith(("OPENBLAS_", "OMP_", "XLA_", "MALLOC_", "NUMPY_")))
    lines.append(f"# env: {env}; the process pinned to CPU {CORE}")
    lines.append(f"# {dispatch.machine_line()}")
    return lines


def write(name: str, lines: list[str], label: str | None = None) -> Path:
    """The figures as bench/results/<date>-<name>[-<label>].txt (a second run the same day overwrites)."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{datetime.date.today():%Y-%m-%d}-{name}{'-' + label if label else ''}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path
