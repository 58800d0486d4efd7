"""Run a benchmark and keep what it printed as one dated file in bench/results/.

    python bench/record.py [--results DIR] NAME -- python bench/trg.py --repeats 5 --curvature

writes bench/results/YYYY-MM-DDTHHMM-NAME.md (UTC): the date, the machine (``lscpu``), the BLAS
NumPy and SciPy run on (threadpoolctl's view, the ``OPENBLAS_*`` variables) with the Python and
NumPy versions, the commit and whether tenferro_py/, examples/ or bench/ had uncommitted changes,
the command, and its output as it printed it (also shown while it runs). The exit status is the
command's. docs/performance.md shows the newest file of each NAME.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.linalg  # noqa: F401 (loads SciPy's BLAS, so threadpoolctl sees it)
from threadpoolctl import threadpool_info

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LSCPU_FIELDS = ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "L2 cache", "L3 cache")


def machine() -> str:
    """The CPU as lscpu names it (the model, cores and caches), or platform's guess without lscpu."""
    if shutil.which("lscpu") is None:
        return f"{platform.machine()} {platform.processor()} (no lscpu), os.cpu_count() = {os.cpu_count()}"
    out = subprocess.run(["lscpu"], capture_output=True, text=True, env=dict(os.environ, LC_ALL="C")).stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return "; ".join(f"{k} {fields[k].strip()}" for k in LSCPU_FIELDS if k in fields)


def blas() -> str:
    """Every BLAS threadpoolctl sees (library, version, architecture, threads), with the versions."""
    libraries = [f"{i.get('internal_api')} {i.get('version')} ({Path(i.get('filepath', '')).name}, "
                 f"architecture={i.get('architecture')}, threads={i.get('num_threads')})"
                 for i in threadpool_info() if i.get("user_api") == "blas"]
    variables = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_"))
    return (f"Python {platform.python_version()}, numpy {np.__version__}; " + "; ".join(libraries)
            + (f"; {variables}" if variables else ""))


def commit() -> str:
    """The commit measured, and whether the measured code had uncommitted changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown (no git)"
    dirty = git("status", "--porcelain", "--", "tenferro_py", "examples", "bench", ":!bench/results")
    return f"`{head}`, " + ("uncommitted changes in tenferro_py/, examples/ or bench/" if dirty else "clean")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="what was measured, for the file name (letters, digits, '-')")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    parser.add_argument("--results", default=str(RESULTS), help="the folder of the results (default bench/results)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not re.fullmatch(r"[a-z0-9-]+", args.name) or not command:
        parser.error("expected NAME of letters, digits and '-', then -- and a command")
    started = time.gmtime()
    header = [machine(), blas(), commit()]
    output = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT) as run:
        for line in run.stdout:
            sys.stdout.write(line)
            output.append(line)
    path = Path(args.results) / f"{time.strftime('%Y-%m-%dT%H%M', started)}-{args.name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    shown = " ".join(command)
    path.write_text(
        f"**{args.name}**\n\n- date: {time.strftime('%Y-%m-%d %H:%M UTC', started)}\n- machine: {header[0]}\n"
        f"- BLAS: {header[1]}\n- commit: {header[2]}\n- command: `{shown}` (exit status {run.returncode})\n\n"
        f"```text\n{''.join(output).rstrip()}\n```\n",
        encoding="utf-8",
    )
    print(f"recorded in {path}", file=sys.stderr)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
