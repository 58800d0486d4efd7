"""Tests for tenferro_py.models.onsager, the exact 2D Ising solution used as the TRG
reference: values are checked against independent results (Catalan's
constant at β_c, high- and low-temperature series, a direct evaluation of
Onsager's double integral, scipy's elliptic integrals, the critical
asymptotics) and the functions against finite differences of each other.
"""

import math
import re
import subprocess
import sys
from decimal import Decimal, localcontext
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ellipe, ellipk

from tenferro_py.models import onsager

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "onsager.py"
BETA_C = onsager.BETA_C

CATALAN = 0.915965594177219015054603514932384110774


def _deriv(f, beta, h=1e-4):
    """Fourth-order central difference f'(beta)."""
    return (f(beta - 2 * h) - 8 * f(beta - h) + 8 * f(beta + h) - f(beta + 2 * h)) / (12 * h)


def _delta_from_critical(beta):
    """beta − β_c, exact to double precision (β_c from 40-digit decimals)."""
    with localcontext() as ctx:
        ctx.prec = 40
        return float(Decimal(beta) - (1 + Decimal(2).sqrt()).ln() / 2)


def test_beta_c():
    assert math.sinh(2 * BETA_C) == pytest.approx(1, abs=2e-16)


def test_ln_z_at_critical_point_is_catalan():
    # lnZ/N(β_c) = 2G/π + ln(2)/2.
    assert onsager.ln_z(BETA_C) == pytest.approx(2 * CATALAN / math.pi + math.log(2) / 2, abs=1e-14)


@pytest.mark.parametrize("beta", [0.01, 0.02, 0.05])
def test_ln_z_high_temperature_series(beta):
    # Closed-polygon expansion, t = tanh β:
    # ln 2 + 2 ln cosh β + t⁴ + 2t⁶ + 9/2 t⁸ + 12 t¹⁰ + 112/3 t¹² + O(t¹⁴).
    t = math.tanh(beta)
    series = t**4 + 2 * t**6 + 4.5 * t**8 + 12 * t**10 + 112 / 3 * t**12
    rest = onsager.ln_z(beta) - math.log(2) - 2 * math.log(math.cosh(beta))
    assert rest == pytest.approx(series, abs=1e-15)


@pytest.mark.parametrize("beta", [2.0, 2.5, 3.0])
def test_ln_z_low_temperature_series(beta):
    # Flipped-cluster expansion, x = e^{−2β}: 2β + x⁴ + 2x⁶ + 9/2 x⁸ + 12 x¹⁰ + O(x¹²).
    x = math.exp(-2 * beta)
    series = x**4 + 2 * x**6 + 4.5 * x**8 + 12 * x**10
    assert onsager.ln_z(beta) - 2 * beta == pytest.approx(series, abs=2e-15)


@pytest.mark.parametrize("beta", [20.0, 400.0, 1e300])
def test_ln_z_ground_state_limit(beta):
    assert onsager.ln_z(beta) == 2 * beta


@pytest.mark.parametrize("beta", [0.3, 0.43, 0.45, 0.5, 0.7])
def test_ln_z_matches_double_integral(beta):
    # Trapezoid rule on the periodic 2D integrand converges exponentially;
    # n = 1024 reaches double precision down to |β − β_c| ≈ 0.01.
    n = 1024
    c = np.cos(2 * np.pi * np.arange(n) / n)
    integrand = np.log(np.cosh(2 * beta) ** 2 - np.sinh(2 * beta) * (c[:, None] + c[None, :]))
    assert onsager.ln_z(beta) == pytest.approx(math.log(2) + integrand.mean() / 2, abs=1e-14)


@pytest.mark.parametrize("beta", [0.1, 0.3, 0.43, 0.45, 0.6, 1.0])
def test_energy_is_minus_derivative_of_ln_z(beta):
    assert onsager.energy(beta) == pytest.approx(-_deriv(onsager.ln_z, beta), abs=1e-9)


@pytest.mark.parametrize("beta", [0.1, 0.3, 0.43, 0.45, 0.6, 1.0])
def test_specific_heat_is_derivative_of_energy(beta):
    expected = -beta**2 * _deriv(onsager.energy, beta)
    assert onsager.specific_heat(beta) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("beta", [0.2, 0.3, 0.43, 0.45, 0.5, 0.7])
def test_closed_forms_match_scipy_elliptic_integrals(beta):
    # Onsager's formulas with K, E at m = k² straight from scipy.  Only away
    # from β_c: there 1 − m is computed with relative error ε/(1 − m)
    # (already 3e-11 at β = 0.44), which test_critical_asymptotics guards.
    coth, sech2 = 1 / math.tanh(2 * beta), 1 / math.cosh(2 * beta) ** 2
    s = 2 * math.tanh(2 * beta) ** 2 - 1
    m = (2 * math.sinh(2 * beta) * sech2) ** 2
    k, e = ellipk(m), ellipe(m)
    u = -coth * (1 + 2 / math.pi * s * k)
    c = 4 / math.pi * (beta * coth) ** 2 * (k - e - sech2 * (math.pi / 2 + s * k))
    assert onsager.energy(beta) == pytest.approx(u, rel=1e-12)
    assert onsager.specific_heat(beta) == pytest.approx(c, rel=1e-12)


def test_critical_point():
    assert onsager.energy(BETA_C) == pytest.approx(-math.sqrt(2), abs=1e-15)
    assert onsager.specific_heat(BETA_C) == math.inf


@pytest.mark.parametrize("offset", [-1e-9, 1e-9, -1e-10, 1e-10, -1e-12, 1e-12])
def test_critical_asymptotics(offset):
    # With δ = β − β_c: u = −√2 + 2δ − (8/π) δ ln(√2/|δ|) + O(δ² ln|δ|) and
    # c = β²[(8/π)(ln(√2/|δ|) − 1) − 2] + O(δ ln|δ|).  Here 1 − k² ~ δ² is far
    # below machine epsilon, so any 1 − k² cancellation would show up.
    beta = BETA_C + offset
    delta = _delta_from_critical(beta)
    log = math.log(math.sqrt(2) / abs(delta))
    u = -math.sqrt(2) + 2 * delta - 8 / math.pi * delta * log
    c = beta**2 * (8 / math.pi * (log - 1) - 2)
    assert onsager.energy(beta) == pytest.approx(u, abs=1e-15)
    assert onsager.specific_heat(beta) == pytest.approx(c, rel=1e-8)


@pytest.mark.parametrize("beta, ln_z, u", [(0.4, 0.879363, -1.10604), (0.5, 1.025793, -1.7456)])
def test_trg_chi16_reference_values(beta, ln_z, u):
    # Values a TRG at χ = 16 gives; u is quoted to fewer digits.
    assert abs(onsager.ln_z(beta) - ln_z) < 1e-5
    assert abs(onsager.energy(beta) - u) < 5e-5


@pytest.mark.parametrize("func", [onsager.ln_z, onsager.energy, onsager.specific_heat])
@pytest.mark.parametrize("beta", [0, -0.4, -0.0, math.nan, math.inf, -math.inf])
def test_invalid_beta(func, beta):
    message = f"{func.__name__}: expected a finite beta > 0, got {float(beta)!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        func(beta)


def test_script_output():
    out = subprocess.run([sys.executable, str(SCRIPT), "0.4", "0.5"],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert len(lines) == 2
    for beta, line in zip([0.4, 0.5], lines):
        match = re.fullmatch(r"beta=(\S+) lnZ/N=(-?\d+\.\d{15}) u=(-?\d+\.\d{15}) c=(-?\d+\.\d{12})", line)
        assert match, line
        assert float(match[1]) == beta
        assert float(match[2]) == pytest.approx(onsager.ln_z(beta), abs=1e-15)
        assert float(match[3]) == pytest.approx(onsager.energy(beta), abs=1e-15)
        assert float(match[4]) == pytest.approx(onsager.specific_heat(beta), abs=1e-12)


def test_spontaneous_magnetisation_is_yangs():
    assert onsager.spontaneous_magnetisation(0.3) == 0.0
    assert onsager.spontaneous_magnetisation(BETA_C) == 0.0
    beta = 0.6
    assert onsager.spontaneous_magnetisation(beta) == pytest.approx((1 - math.sinh(2 * beta) ** -4) ** 0.125, rel=1e-15)
    assert onsager.spontaneous_magnetisation(20.0) == 1.0


@pytest.mark.parametrize("argv", [["0"], ["nan"], ["1_000"], ["x"]])
def test_script_usage_error_is_one_line_and_exit_2(argv):
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "beta" in done.stderr and "must be a finite number > 0" in done.stderr
