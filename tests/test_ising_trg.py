"""tenferro_py.models.trg and examples/trg.py: SPEC's numbers, the staged gradient, Onsager,
bitwise repeatability, CLI."""

from __future__ import annotations

import itertools
import math
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import tenferro_py as tf
from tenferro_py import CpuEngine, Pool
from tenferro_py.models import onsager, reference, trg

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
KS = trg.schedule(16, 20)
H = 1e-5


def test_schedule_is_the_rust_bins():
    assert KS == [2, 4, 4] + [16] * 17
    assert trg.schedule(3, 5) == [2, 3, 3, 3, 3]
    assert trg.schedule(1, 2) == [1, 1]


def _full_run(beta: float, width: int) -> tuple[float, float, float]:
    engine = CpuEngine(Pool.builder().threads(width).build())
    lnz, grad = trg.value_and_grad(beta, KS, engine)
    g_plus = trg.value_and_grad(beta + H, KS, engine)[1]
    g_minus = trg.value_and_grad(beta - H, KS, engine)[1]
    return lnz, -grad, beta * beta * (g_plus - g_minus) / (2 * H)


@pytest.fixture(scope="module")
def full_beta_05() -> dict[int, tuple[float, float, float]]:
    """β = 0.5 at χ = 16, 20 steps (SPEC's setting), at width 1 and 2."""
    return {width: _full_run(0.5, width) for width in (1, 2)}


@pytest.mark.parametrize("width", [1, 2])
def test_full_setting_matches_spec_table(full_beta_05, width):
    lnz, u, c = full_beta_05[width]
    ref = reference.REFERENCE[0.5]
    assert abs(lnz - ref[0]) <= 1e-13
    assert abs(u - ref[1]) <= 1e-10
    assert abs(c - ref[2]) <= 1e-7


def test_width_changes_no_bit(full_beta_05):
    assert full_beta_05[1] == full_beta_05[2]


def test_errors_against_onsager_are_the_truncation_errors_of_spec(full_beta_05):
    lnz, u, c = full_beta_05[1]
    beta = 0.5
    assert 7e-9 <= abs(lnz - onsager.ln_z(beta)) <= 5e-6
    assert 8e-7 <= abs(u - onsager.energy(beta)) <= 6e-4
    assert abs(c - onsager.specific_heat(beta)) <= 1e-2 * onsager.specific_heat(beta)


@pytest.mark.parametrize("beta", [0.3, 0.6])
def test_staged_gradient_equals_difference_of_staged_lnz(beta):
    ks = trg.schedule(8, 10)
    grad = trg.value_and_grad(beta, ks)[1]
    diff = (trg.value_and_grad(beta + H, ks)[0] - trg.value_and_grad(beta - H, ks)[0]) / (2 * H)
    assert abs(grad - diff) <= 1e-7


def test_thermodynamics_in_a_few_lines_is_the_staged_sweep():
    ks = trg.schedule(8, 10)
    lnz, grad, curvature = trg.value_grad_and_curvature(0.4, ks)
    assert trg.thermodynamics(0.4, ks) == (lnz, -grad, 0.4 * 0.4 * curvature)
    assert (lnz, grad) == trg.value_and_grad(0.4, ks)


def test_repeated_runs_are_bitwise_identical():
    ks = trg.schedule(8, 10)
    first = trg.value_and_grad(0.44, ks)
    assert all(trg.value_and_grad(0.44, ks) == first for _ in range(3))


def _enumerate(n_sites: int, bonds: list[tuple[int, int]], beta: float) -> tuple[float, float]:
    """Exact (lnZ/N, d(lnZ/N)/dβ) of a small Ising graph by summing over all spin states."""
    z = energy_sum = 0.0
    for spins in itertools.product((-1, 1), repeat=n_sites):
        e = sum(spins[i] * spins[j] for i, j in bonds)
        z += math.exp(beta * e)
        energy_sum += e * math.exp(beta * e)
    return math.log(z) / n_sites, energy_sum / z / n_sites


@pytest.mark.parametrize(
    "ks, n_sites, bonds",
    [
        ([2], 2, [(0, 1)] * 4),  # one step: two sites joined by four bonds
        ([2, 4], 4, [(0, 1), (1, 3), (3, 2), (2, 0)] * 2),  # two steps: a 2×2 torus, every bond doubled
    ],
)
def test_untruncated_trg_is_exact_on_tiny_tori(ks, n_sites, bonds):
    beta = 0.37
    lnz, grad = trg.value_and_grad(beta, ks)
    exact_lnz, exact_grad = _enumerate(n_sites, bonds, beta)
    assert abs(lnz - exact_lnz) <= 1e-14
    assert abs(grad - exact_grad) <= 1e-13


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / "ising_trg.py"), *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_output_format_and_compare(tmp_path):
    result = _run("--compare", "4", "6", "1", "1e-5", "0.3", "0.45")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"tenferro_py {tf.__version__} eager staged chi=4 steps=6 width=1 h=1e-05 ks=[2, 4, 4, 4, 4, 4]")
    assert lines[1].startswith("beta=0.3000 lnZ/N=") and " | value_and_grad " in lines[1] and lines[1].endswith(" ms")
    assert lines[2].startswith(" hex lnZ/N=") and len(lines[2].split("grad=")[1].split()[0]) == 16
    lnz, grad = trg.value_and_grad(0.3, trg.schedule(4, 6))
    assert lines[2].split()[1] == f"lnZ/N={struct.pack('>d', lnz).hex()}"
    assert f"lnZ/N={lnz:.15f} u={-grad:.15f} c=" in lines[1]
    assert any("onsager dlnZ/N=" in line for line in lines)
    # compare.py over two saved outputs: bit-for-bit agreement of a run with itself.
    saved = tmp_path / "run.txt"
    saved.write_text(result.stdout)
    cmp = subprocess.run(
        [sys.executable, str(EXAMPLES / "compare.py"), str(saved), str(saved)], capture_output=True, text=True
    )
    assert cmp.returncode == 0, cmp.stderr
    assert "bit-for-bit equal 8 of 8" in cmp.stdout  # lnZ/N, u, c, c_ad at two βs
    # A file that is no run's output: one line, status 2.
    damaged = tmp_path / "damaged.txt"
    damaged.write_bytes(b"\xff\xfe not text")
    for path in (damaged, tmp_path / "missing.txt"):
        bad = subprocess.run([sys.executable, str(EXAMPLES / "compare.py"), str(path)], capture_output=True, text=True)
        assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
        assert bad.stderr.startswith("compare.py: ") and "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    "args, name",
    [
        (["0"], "chi"),
        (["x"], "chi"),
        (["16", "0"], "steps"),
        (["16", "2.5"], "steps"),
        (["16", "20", "0"], "width"),
        (["16", "20", "1", "0"], "h"),
        (["16", "20", "1", "-1e-5"], "-1e-5"),  # argparse takes it for an option
        (["16", "20", "1", "inf"], "h"),
        (["16", "20", "1", "1e-5", "0"], "beta"),
        (["16", "20", "1", "1e-5", "nan"], "beta"),
        (["16", "20", "1", "1e-5", "abc"], "beta"),
        (["--bogus"], "--bogus"),
        (["16", "20", "1", "0.5", "0.5"], "h"),  # beta - h must stay > 0 for c by difference
    ],
)
def test_cli_rejects_bad_arguments(args, name):
    result = _run(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and name in err[0] and "Traceback" not in result.stderr


def test_cli_help():
    result = _run("--help")
    assert result.returncode == 0 and "usage:" in result.stdout


def test_cli_svd_flag():
    """--svd=krylov keeps the output's format; the header says which method ran."""
    result = _run("--svd=krylov", "--c=ad", "16", "6", "1", "1e-5", "0.5")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith(" svd=krylov") and lines[1].startswith("beta=0.5000 lnZ/N=")
    assert " | value_and_grad " in lines[1] and " c_ad " in lines[1]
    lnz = float(lines[1].split("lnZ/N=")[1].split()[0])
    assert abs(lnz - trg.value_and_grad(0.5, trg.schedule(16, 6))[0]) < 1e-12
    bad = _run("--svd=lanczos")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "argument --svd: invalid choice: 'lanczos'" in bad.stderr
