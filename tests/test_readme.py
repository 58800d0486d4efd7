"""The README's Python snippets run as written, and CI runs the README's test command."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_python_snippets_run():
    snippets = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert snippets
    for code in snippets:
        if "import quimb" in code and importlib.util.find_spec("quimb") is None:
            continue  # the interop extra's example
        exec(compile(code, "README.md", "exec"), {})


def test_ci_runs_the_readme_test_command():
    command = re.findall(r"pip install \"\.\[test\]\" && (.+)", README)[0].strip()
    assert command in (ROOT / ".ci" / "run").read_text()
