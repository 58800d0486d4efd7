"""The project as others get it: a wheel built from the source tree holds every module of it and
py.typed, and each module imports from that installed copy, outside the repository; .ci/run tests
the installed package, and every subprocess the suite starts imports the tenferro_py under test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tenferro_py as tf

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tenferro_py"
LIMIT = 300
"""Seconds a build or an install may take before the test fails (a hang, not a slow machine)."""
IMPORT_EVERY_MODULE = """
import importlib, sys
site, names = sys.argv[1], sys.argv[2:]
for name in names:
    module = importlib.import_module(name)
    assert module.__file__.startswith(site), (name, module.__file__)
print(len(names))
"""


def source_modules() -> list[str]:
    """Every module of the source tree, by its dotted name."""
    names = []
    for path in sorted(SOURCE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _run(argv: list[str], cwd: Path, env: dict | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=LIMIT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_wheel_installs_every_module_and_py_typed_and_each_imports_outside_the_repository(tmp_path):
    pytest.importorskip("setuptools", reason="builds the wheel offline, with the environment's setuptools")
    copy = tmp_path / "project"  # a copy, so that the build leaves nothing in the repository
    shutil.copytree(SOURCE, copy / "tenferro_py", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    dist = tmp_path / "dist"
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(dist), str(copy)], tmp_path)
    (wheel,) = dist.glob("tenferro_py-*.whl")
    site = tmp_path / "site"
    _run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)], tmp_path)
    assert (site / "tenferro_py" / "py.typed").is_file()
    modules = source_modules()
    assert {"tenferro_py.numpy", "tenferro_py.models", "tenferro_py.models.trg", "tenferro_py.linalg"} <= set(modules)
    out = _run([sys.executable, "-c", IMPORT_EVERY_MODULE, str(site), *modules], tmp_path,
               env=dict(os.environ, PYTHONPATH=str(site)))
    assert out.split() == [str(len(modules))]


def test_subprocesses_import_the_tenferro_py_under_test(tmp_path):
    out = _run([sys.executable, "-c", "import tenferro_py; print(tenferro_py.__file__)"], tmp_path)
    assert Path(out.strip()).resolve() == Path(tf.__file__).resolve()


def test_under_ci_the_suite_tests_the_installed_package():
    if not os.environ.get("TENFERRO_PY_TEST_INSTALLED"):
        pytest.skip("asked by .ci/run (TENFERRO_PY_TEST_INSTALLED=1), which installs the project first")
    assert ROOT not in Path(tf.__file__).resolve().parents, tf.__file__


def test_tests_and_harnesses_import_the_package_without_editing_the_module_path():
    """They import the installed package (and bench/'s harnesses each other, from the folder of the
    script that runs); a peer's own modules come from PYTHONPATH in the child that runs it."""
    edit = "sys." + "path"
    found = [f"{p.relative_to(ROOT)}:{n}" for folder in ("tests", "bench") for p in sorted((ROOT / folder).rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if edit in line]
    assert found == []
