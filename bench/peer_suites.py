"""Run ports of the peers' own test cases (JAX, PyTorch, autograd, opt_einsum) against tenferro_py.

    python bench/peer_suites.py [--suite jax|torch|autograd|opt_einsum|all] [--match TEXT]
                                [--results FILE] [--show passed,refused,...]

Each suite is a list of cases ported from the peer's test files (bench/peers/: the cases are
the peer's shapes, dtypes, inputs and checks; JAX and PyTorch, when installed, are also the
reference for values and derivatives; autograd's own test files run through
bench/autograd_numpy_tests.py). Every case ends in one category: passed, wrong value, wrong
derivative, library error, missing function, refused (documented), not ported
(bench/peers/harness.py says what each means). The report gives per suite the cases run and
the count of each category, then every wrong value, wrong derivative and library error, named, with what happened, and the
other cases that did not pass grouped by reason (``--show passed,...`` names every case).

``--results FILE`` also writes the report with its date, commit and command (the figures of
bench/results/). The exit status is 1 when a case is a wrong value, a wrong derivative or a
library error.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent

from peers.harness import CATEGORIES, FAILURES, PASSED, Outcome, outcome_of  # bench/peers, beside this file

SUITES = ("jax", "torch", "autograd", "opt_einsum")


def collect(suite: str, autograd_sdist: Path | None = None) -> list:
    """The cases of one suite (importing its peer only now, so one missing peer skips one suite)."""
    if suite == "jax":
        from peers import jax_linalg, jax_numpy, jax_spectral, session_api

        return jax_linalg.cases() + jax_spectral.cases() + jax_numpy.cases() + session_api.cases()
    if suite == "torch":
        from peers import torch_opinfo

        return torch_opinfo.cases()
    if suite == "opt_einsum":
        from peers import opt_einsum_contract

        return opt_einsum_contract.cases()
    if suite == "autograd":
        from peers import autograd_suite

        return autograd_suite.cases(autograd_sdist)
    raise ValueError(suite)


def run_suite(suite: str, match: str | None, progress: bool, autograd_sdist: Path | None) -> list[Outcome]:
    with warnings.catch_warnings():  # the peers' deprecation notes while they make their inputs
        warnings.simplefilter("ignore")
        cases = [c for c in collect(suite, autograd_sdist) if match is None or match in c.name]
    outcomes = []
    for i, case in enumerate(cases):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            category, detail = outcome_of(case)
        outcomes.append(Outcome(case, category, detail, time.perf_counter() - start))
        if progress:
            print(f"\r{suite}: {i + 1}/{len(cases)}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return outcomes


def report(suite: str, outcomes: list[Outcome], show: set[str], seconds: float) -> list[str]:
    counts = Counter(o.category for o in outcomes)
    lines = [f"== {suite}: {len(outcomes)} cases in {seconds:.0f} s: "
             + ", ".join(f"{c} {counts.get(c, 0)}" for c in CATEGORIES)]
    for category in CATEGORIES:
        if category == PASSED and PASSED not in show:
            continue
        chosen = [o for o in outcomes if o.category == category]
        if not chosen or category not in show:
            continue
        lines.append(f"  -- {category} ({len(chosen)})")
        if category in FAILURES or PASSED in show:  # every failure named
            lines += [f"    {o.case.name}: {o.detail}" if o.detail else f"    {o.case.name}" for o in chosen]
            continue
        by_reason: dict[str, list[Outcome]] = {}  # the rest by reason, with one case each
        for o in chosen:
            by_reason.setdefault(_reason(o.detail), []).append(o)
        lines += [f"    {len(group)} × {reason} (e.g. {group[0].case.name})" for reason, group in by_reason.items()]
    return lines


def _reason(detail: str) -> str:
    """A detail without what varies between cases (shapes, orders, values)."""
    return re.sub(r"got .*? \[", "got … [", re.sub(r"shape \[[^]]*\]", "shape …", detail))


def header(argv: list[str]) -> list[str]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True, cwd=HERE.parent).stdout.strip()
        except OSError:
            return "?"

    import numpy
    import scipy

    versions = [f"numpy {numpy.__version__}", f"scipy {scipy.__version__}"]
    from importlib import metadata

    for name in ("jax", "torch", "autograd", "opt_einsum"):
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} not installed")
    dirty = git("status", "--porcelain", "--", "tenferro_py", "bench", ":!bench/results")
    return [f"date: {datetime.datetime.now().isoformat(timespec='seconds')}",
            f"commit: {git('rev-parse', 'HEAD')}{' (with uncommitted changes)' if dirty else ''}",
            f"command: python bench/peer_suites.py {' '.join(argv)}",
            f"python {platform.python_version()}; {'; '.join(versions)}"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=SUITES + ("all",), default="all")
    parser.add_argument("--match", help="only the cases whose name contains this text")
    parser.add_argument("--results", type=Path, help="also write the report, with date, commit and command, here")
    parser.add_argument("--autograd-sdist", type=Path, help="a local autograd source distribution (default: from PyPI)")
    parser.add_argument("--show", default=",".join(c for c in CATEGORIES if c != PASSED),
                        help="the categories whose cases are listed by name (comma-separated)")
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    written = header(argv)
    print("\n".join(written), flush=True)
    failed = False
    for suite in SUITES if args.suite == "all" else (args.suite,):
        start = time.perf_counter()
        try:
            outcomes = run_suite(suite, args.match, sys.stderr.isatty(), args.autograd_sdist)
        except ImportError as err:
            lines = [f"== {suite}: not run ({err})"]
        else:
            lines = report(suite, outcomes, set(args.show.split(",")), time.perf_counter() - start)
            failed |= any(o.category in FAILURES for o in outcomes)
        print("\n".join(lines), flush=True)
        written += lines
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text("\n".join(written) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
