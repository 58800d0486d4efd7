"""Every Python block of the README and the documentation runs as written, and CI runs the
README's test command and builds the site.

Each page's ```python blocks run in order in one namespace (a page may build on its earlier
blocks), in a scratch directory. A block fenced ```python {.skip} is shown, not run. Shell
and text blocks are not run, but every script they name must exist.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", flags=re.S | re.M)
OPTIONAL = {"quimb", "autoray", "cotengra", "matplotlib", "dask", "distributed"}  # extras' modules


def blocks(page: Path):
    """(line, info string, code) of each fenced block of page."""
    text = page.read_text(encoding="utf-8")
    for m in FENCE.finditer(text):
        yield text.count("\n", 0, m.start()) + 2, m.group(1).strip(), m.group(2)


def runs(info: str) -> bool:
    return info.split()[0:1] == ["python"] and ".skip" not in info


def relative(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", [p for p in PAGES if any(runs(i) for _, i, _ in blocks(p))], ids=relative)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    for line, info, code in blocks(page):
        if not runs(info):
            continue
        try:
            exec(compile("\n" * (line - 1) + code, str(page), "exec"), namespace)
        except ModuleNotFoundError as err:
            if err.name and err.name.split(".")[0] in OPTIONAL:
                pytest.skip(f"{relative(page)} line {line} needs {err.name}, an optional extra")
            raise


def test_named_scripts_exist():
    named = set()
    for page in PAGES:
        named |= set(re.findall(r"python3? ((?:examples|bench|docs)/[\w/]+\.py)", page.read_text(encoding="utf-8")))
    missing = sorted(p for p in named if not (ROOT / p).is_file())
    assert named and not missing, missing


def test_ci_runs_the_readme_test_command_and_builds_the_site():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = re.findall(r"pip install \"\.\[test\]\" && ([^#\n]+)", readme)[0].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert command in ci and "mkdocs build --strict" in ci


def test_readme_is_short_and_its_first_screen_has_both_styles():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    first_screen = "\n".join(lines[:75])
    assert len(lines) <= 250
    assert "pip install ." in first_screen and "tnp.value_and_grad" in first_screen
    assert "rt.variable_from" in first_screen and "rt.vjp" in first_screen
    assert len((ROOT / "bench" / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_readme_links_reach_files():
    links = re.findall(r"\]\(((?!https?:)[^)#]+)[^)]*\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    missing = [link for link in links if not (ROOT / link).exists()]
    assert links and not missing, missing


def test_the_pasted_trg_output_is_the_programs():
    """The output shown in docs/models.md is a real run's: this version's header, values within the
    reference table's tolerances, and hex lines that are the bits of the printed decimals."""
    import struct

    import tenferro_py
    from tenferro_py.models.reference import REFERENCE, TOLERANCE

    (block,) = [code for _, _, code in blocks(ROOT / "docs" / "models.md")
                if code.startswith("$ python examples/ising_trg.py 16 20 1\n")]
    header, *rest = block.splitlines()[1:]
    assert header.startswith(f"tenferro_py {tenferro_py.__version__} eager staged chi=16 steps=20 width=1 h=1e-05")
    values = [line for line in rest if line.startswith("beta=")]
    bits = [line for line in rest if line.startswith(" hex ")]
    assert len(values) == len(bits) == 5
    for line, hex_line in zip(values, bits):
        v = dict(re.findall(r"(\w+/?\w*)=(-?[\d.]+)", line.split("|")[0]))
        b = dict(re.findall(r"(\w+/?\w*)=([0-9a-f]{16})", hex_line))
        as_float = {k: struct.unpack(">d", bytes.fromhex(h))[0] for k, h in b.items()}
        assert f"{as_float['lnZ/N']:.15f}" == v["lnZ/N"] and f"{-as_float['grad']:.15f}" == v["u"]
        assert f"{as_float['c']:.12f}" == v["c"] and f"{as_float['c_ad']:.12f}" == v["c_ad"]
        beta = float(v["beta"])
        if beta in REFERENCE:
            table = REFERENCE[beta]
            assert abs(float(v["lnZ/N"]) - table[0]) <= TOLERANCE[0] and abs(float(v["u"]) - table[1]) <= TOLERANCE[1]
            assert abs(float(v["c_ad"]) - table[3]) <= TOLERANCE[3]


def test_the_performance_page_shows_the_newest_record_of_each_benchmark():
    newest = {}
    for path in sorted((ROOT / "bench" / "results").glob("*.md")):
        match = re.fullmatch(r"(\d{4}-\d{2}-\d{2})(T\d{4})?-([a-z0-9-]+)\.md", path.name)
        assert match, f"bench/results/{path.name}: expected YYYY-MM-DD[THHMM]-NAME.md"
        newest[match.group(3)] = max(newest.get(match.group(3), ""), path.name)
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    included = set(re.findall(r'--8<-- "bench/results/([^"]+)"', page))
    assert newest and set(newest.values()) == included
