"""c_ad: the second derivative by forward-over-reverse through the staged sweep, and the crossing guard."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from tenferro_py import CpuEngine, Pool
from tenferro_py.models import reference, trg

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SMALL = trg.schedule(6, 8)
#: For χ = 6 and 8 steps, lnZ/N(β) jumps by 2.2e-5 between 0.3763418 and 0.3763428 (a crossing).
CROSSING = 0.37634229


def test_c_ad_matches_spec_jvp_column_at_full_setting():
    beta = 0.5
    lnz, grad, curvature = trg.value_grad_and_curvature(beta, trg.schedule(16, 20))
    assert abs(beta * beta * curvature - reference.REFERENCE[beta][3]) <= 1e-8
    assert (lnz, grad) == trg.value_and_grad(beta, trg.schedule(16, 20))


@pytest.mark.parametrize("beta", [0.3, 0.45, 0.6])
def test_c_ad_equals_central_difference_of_staged_gradient(beta):
    h = 1e-6
    lnz, grad, curvature = trg.value_grad_and_curvature(beta, SMALL)
    (lnz_m, g_m), (lnz_p, g_p) = trg.value_and_grad(beta - h, SMALL), trg.value_and_grad(beta + h, SMALL)
    assert abs((lnz_p - lnz_m) - h * (g_p + g_m)) <= trg.trapezoid_tolerance(h)  # no crossing inside
    assert abs(curvature - (g_p - g_m) / (2 * h)) <= 1e-6 * max(1.0, abs(curvature))


def test_value_and_gradient_of_curvature_sweep_are_the_plain_sweeps():
    lnz, grad, _ = trg.value_grad_and_curvature(0.41, SMALL)
    assert (lnz, grad) == trg.value_and_grad(0.41, SMALL)


def test_c_ad_is_bitwise_the_same_at_width_2():
    """Memos hold pending tangents on a wide engine (256×256 SVDs go to its workers); every bit must agree."""
    ks = trg.schedule(16, 6)
    wide = CpuEngine(Pool.builder().threads(2).build())
    assert trg.value_grad_and_curvature(0.43, ks, wide) == trg.value_grad_and_curvature(0.43, ks)


def _guard(beta, h, c_ad=None):
    below, above = [], []
    m = (*trg.value_and_grad(beta - h, SMALL, spectra=below), below)
    p = (*trg.value_and_grad(beta + h, SMALL, spectra=above), above)
    c = beta * beta * (p[1] - m[1]) / (2 * h)
    warning = trg.crossing_warning(beta, h, SMALL, m, p, c, c_ad)
    assert trg.difference_curvature(beta, h, SMALL, c_ad=c_ad) == (c, warning)
    return warning


def test_guard_fires_on_a_crossing_and_names_a_step():
    warning = _guard(CROSSING, 1e-5)
    assert warning is not None
    assert "jumps by 2.2e-05" in warning and "at step" in warning and "c_ad" in warning


def test_guard_is_quiet_where_lnz_is_smooth():
    assert _guard(0.3, 1e-5) is None
    beta = 0.3
    c_ad = beta * beta * trg.value_grad_and_curvature(beta, SMALL)[2]
    assert _guard(beta, 1e-5, c_ad) is None


def test_guard_fires_when_c_disagrees_with_c_ad():
    assert "trust c_ad" in _guard(0.3, 1e-5, c_ad=1.0)


def test_cli_prints_c_ad_and_the_warning():
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "ising_trg.py"), "6", "8", "1", "1e-5", str(CROSSING)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    value, hexes, warning = result.stdout.splitlines()[1:4]
    assert " c=" in value and " c_ad=" in value and " c_ad " in value.split("|")[1]
    assert hexes.split()[-1].startswith("c_ad=") and len(hexes.split("c_ad=")[1]) == 16
    assert warning.startswith(" warning: ") and "at step" in warning
    runs, _ = runpy.run_path(str(EXAMPLES / "compare.py"))["parse"](iter(result.stdout.splitlines(True)))
    lnz, grad, curvature = trg.value_grad_and_curvature(CROSSING, SMALL)
    assert runs[round(CROSSING, 4)][3] == CROSSING * CROSSING * curvature  # the β line has 4 decimals
