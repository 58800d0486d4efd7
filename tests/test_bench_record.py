"""bench/record.py keeps one run as one dated file: date, machine, BLAS, commit, command and output."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_recorded_run_has_its_header_and_output(tmp_path):
    command = [sys.executable, str(ROOT / "bench" / "record.py"), "--results", str(tmp_path), "echo-test", "--",
               sys.executable, "-c", "print('beta=0.4000 ratio=1.0')"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.glob("*.md")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{4}-echo-test\.md", path.name)
    text = path.read_text(encoding="utf-8")
    for field in ("- date: ", "- machine: ", "- BLAS: Python ", "- commit: ", "- command: "):
        assert field in text
    assert "(exit status 0)" in text and "```text\nbeta=0.4000 ratio=1.0\n```" in text
    assert "beta=0.4000 ratio=1.0" in done.stdout


def test_the_command_s_exit_status_is_kept(tmp_path):
    command = [sys.executable, str(ROOT / "bench" / "record.py"), "--results", str(tmp_path), "fails", "--",
               sys.executable, "-c", "raise SystemExit(3)"]
    assert subprocess.run(command, capture_output=True, text=True, timeout=120).returncode == 3
    assert "(exit status 3)" in next(tmp_path.glob("*.md")).read_text(encoding="utf-8")
