"""autograd's own test files against tnp, through bench/autograd_numpy_tests.py (which rewrites their
imports to tenferro_py.numpy and their check_grads/combo_check to tnp.check_grads): each pytest test
is one case, its recorded exception sorted into the report's categories."""

from __future__ import annotations

import tempfile
from pathlib import Path

import tenferro_py.errors as errors

from .harness import Case, Missing, NotPorted, WrongValue

FILES = ["test_numpy.py", "test_scalar_ops.py", "test_linalg.py", "test_systematic.py", "test_binary_ops.py",
         "test_complex.py"]


def _replay(record: dict) -> None:
    """Raise what the test raised, as the harness sorts it."""
    if record["outcome"] == "passed":
        return
    kind, message = record["type"], record["message"]
    if kind == "AttributeError" and "has no attribute" in message:
        name = message.split("attribute ")[-1].strip("'")
        if name.startswith("_"):
            raise NotPorted(f"the test calls autograd's private {name}")
        raise Missing(f"tnp.{name}")
    if kind == "TypeError" and "unsupported operand type" in message and not record["inside"]:
        raise Missing(f"an operator of tnp.ndarray: {message}")
    if record["module"] == "tenferro_py.errors":
        cls = getattr(errors, kind)
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        err.op = record["op"]
        raise err
    if kind == "AssertionError":
        if message.startswith("check_grads"):
            raise AssertionError(message)
        raise WrongValue(message)
    if not record["inside"]:
        raise NotPorted(f"the test's own code or the adapter raised {kind}: {message[:200]}")
    raise RuntimeError(f"raw {kind} inside tenferro_py: {message[:200]}")


def cases(sdist: Path | None = None) -> list[Case]:
    import autograd_numpy_tests  # in bench/, the folder of the script that runs (bench/peer_suites.py)

    sdist = sdist or autograd_numpy_tests.download(Path(tempfile.mkdtemp(prefix="autograd_sdist_")))
    out = []
    for file in FILES:
        name, records = autograd_numpy_tests.run([file], sdist)
        out += [Case("autograd", f"{name}:tests/{file}::{r['test']}", lambda r=r: _replay(r)) for r in records]
    return out
