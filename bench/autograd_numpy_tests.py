"""Run autograd's own tests/test_numpy.py (and others) against tenferro_py.numpy.

    python bench/autograd_numpy_tests.py [--sdist autograd-X.tar.gz] [--keep DIR] [--file test_linalg.py ...]

Downloads autograd's source distribution from PyPI (``pip download``; or takes a local one),
extracts tests/test_numpy.py (or the ``--file`` ones: test_scalar_ops.py, test_linalg.py,
test_systematic.py, test_binary_ops.py and test_complex.py run too) and tests/numpy_utils.py into a
scratch folder, points their imports
at ``tenferro_py.numpy`` (``autograd.numpy`` → ``tenferro_py.numpy``, ``autograd.numpy.random`` →
``numpy.random``, ``grad`` → ``tenferro_py.numpy.grad``) and their ``check_grads``/``combo_check``
at the adapter below, runs them with pytest, and sorts the outcomes: passed; failed because
tenferro_py.numpy has no such function (NumPy names it does not provide); failed otherwise
(what should be fixed). Nothing of autograd is copied into this repository.

The adapter keeps autograd's calling conventions: ``check_grads(fun, argnum, modes, order)(*args)`` checks
every argument (or those of ``argnum``), and ``combo_check(fun, argnums)(*arg_lists, **kwarg_lists)``
every combination, each by :func:`tenferro_py.numpy.check_grads` (JVP and VJP against central
differences); a function returning a tuple or a list (autograd's ``tuple`` container, split's
pieces) is checked on its outputs raveled and joined, and an argument that is a list or tuple of
arrays (concatenate's) on each of its arrays. A pytest plugin records each test's outcome and exception (``run``), which
bench/peer_suites.py sorts into its categories.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ADAPTER = '''"""autograd's check_grads and combo_check conventions on tenferro_py.numpy.check_grads."""
import itertools

import numpy as onp

import tenferro_py.numpy as tnp


def _check(fun, args, argnums, modes, order, kwargs):
    argnums = tuple(range(len(args))) if argnums is None else (
        (argnums,) if isinstance(argnums, int) else tuple(argnums))
    fixed = list(args)
    # a differentiated argument that is a list or tuple of arrays (concatenate's) is its arrays
    counts = [len(args[i]) if isinstance(args[i], (list, tuple)) else None for i in argnums]

    def of_wanted(*wanted):
        full, rest = list(fixed), list(wanted)
        for i, count in zip(argnums, counts):
            full[i] = type(args[i])(rest[:count]) if count is not None else rest[0]
            rest = rest[count if count is not None else 1:]
        out = fun(*full, **kwargs)
        return tnp.concatenate([tnp.ravel(o) for o in out]) if isinstance(out, (tuple, list)) else out

    leaves = [a for i in argnums for a in (args[i] if isinstance(args[i], (list, tuple)) else [args[i]])]
    tnp.check_grads(of_wanted, [onp.asarray(a, dtype=complex if onp.iscomplexobj(a) else float) for a in leaves],
                    modes=tuple(modes), order=order, h=1e-6, rtol=1e-5, atol=1e-7)


def check_grads(fun, argnum=None, modes=("fwd", "rev"), order=2):  # autograd's: argnum may come second
    return lambda *args, **kwargs: _check(fun, args, argnum, modes, order, kwargs)


def combo_check(fun, *args, **kwargs):
    argnums = args[0] if args else kwargs.pop("argnums", (0,))
    modes = kwargs.pop("modes", ("fwd", "rev"))
    order = kwargs.pop("order", 2)

    def check(*arg_lists, **kwarg_lists):
        names = list(kwarg_lists)
        for values in itertools.product(*arg_lists):
            for choice in itertools.product(*[kwarg_lists[n] for n in names]):
                _check(fun, values, argnums, modes, order, dict(zip(names, choice)))

    return check
'''

# A pytest plugin that records each test's outcome and, for a failure, its exception (class, module,
# message, the op of a TenferroError, whether it was raised inside tenferro_py) in outcomes.json.
RECORDER = '''import json, traceback
import pytest

RECORDS = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.when == "call" or report.outcome != "passed":
        exc = call.excinfo.value if call.excinfo is not None else None
        frames = traceback.extract_tb(exc.__traceback__) if exc is not None else []
        inside = bool(frames) and "tenferro_py" in frames[-1].filename  # raised by the library itself
        RECORDS.append(dict(test=item.name, outcome=report.outcome, when=report.when,
                            type=type(exc).__name__ if exc else None, module=type(exc).__module__ if exc else None,
                            message=str(exc)[:600] if exc else "", op=getattr(exc, "op", None), inside=inside))


def pytest_sessionfinish(session):
    with open("outcomes.json", "w") as f:
        json.dump(RECORDS, f)
'''

REWRITES = [
    (r"^import autograd\.numpy\.random as npr$", "import numpy.random as npr"),
    (r"^import autograd\.numpy as np$", "import tenferro_py.numpy as np"),
    (r"^from autograd\.test_util import (.*)$", r"from tenferro_adapter import \1"),
    (r"^from autograd import grad$", "from tenferro_py.numpy import grad"),
    (r"^from autograd import tuple$", ""),  # autograd's tuple container: the built-in one here
]


def prepare(sdist: Path, folder: Path, files: list[str]) -> list[Path]:
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            name = Path(member.name).name
            if member.name.endswith(tuple(f"tests/{f}" for f in files + ["numpy_utils.py"])):
                text = archive.extractfile(member).read().decode()
                for pattern, replacement in REWRITES:
                    text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
                (folder / name).write_text(text)
    (folder / "tenferro_adapter.py").write_text(ADAPTER)
    (folder / "conftest.py").write_text(RECORDER)
    return [folder / f for f in files]


def download(into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "autograd", "--no-binary", ":all:", "--no-deps",
                    "-q", "-d", str(into)], check=True)
    return next(into.glob("autograd-*.tar.gz"))


def run(files: list[str], sdist: Path | None = None, keep: Path | None = None) -> tuple[str, list[dict]]:
    """Run autograd's test ``files`` against tnp: (the sdist's name, one record per test as the
    recorder writes it)."""
    folder = keep or Path(tempfile.mkdtemp(prefix="autograd_tests_"))
    folder.mkdir(parents=True, exist_ok=True)
    sdist = sdist or download(folder)
    test_files = prepare(sdist, folder, files)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, test_files)],
                   capture_output=True, text=True, cwd=folder, env={**os.environ, "COLUMNS": "400"})
    return sdist.name, json.loads((folder / "outcomes.json").read_text())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", type=Path, help="a local autograd source distribution (default: from PyPI)")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument("--file", action="append", help="a test file of autograd's tests/ (default: test_numpy.py)")
    args = parser.parse_args(argv)
    files = args.file or ["test_numpy.py"]
    name, records = run(files, args.sdist, args.keep)
    passed = [r for r in records if r["outcome"] == "passed"]
    failed = [r for r in records if r["outcome"] != "passed"]
    missing = [r for r in failed if "has no attribute" in r["message"]]
    other = [r for r in failed if "has no attribute" not in r["message"]]
    print(f"autograd {name}: tests/{', tests/'.join(files)} against tenferro_py.numpy")
    print(f"  passed {len(passed)}; failed for a missing function {len(missing)}; failed otherwise {len(other)}")
    names = sorted({r["message"].split("attribute ")[-1].strip("'\"") for r in missing})
    if names:
        print(f"  functions tenferro_py.numpy does not have: {', '.join(names)}")
    for r in other:
        print(f"  FAILED {r['test']}: {r['module']}.{r['type']}: {r['message'][:160]}")
    return 0 if not other else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
