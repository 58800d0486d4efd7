"""tenferro_py.models.hotrg and examples/hotrg_ising.py: exact on a small torus, Onsager at χ = 16, its AD derivatives
against finite differences of its own lnZ/N, and the command line.

The full table (five βs at χ = 16, 30 steps, ~25 s): ``python examples/hotrg_ising.py``.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tenferro_py as tf

from tenferro_py.models import hotrg, onsager

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_schedule():
    assert hotrg.schedule(16, 6) == [4, 4, 16, 16, 16, 16]
    assert hotrg.schedule(2, 3) == [2, 2, 2]
    assert hotrg.schedule(64, 6) == [4, 4, 16, 16, 64, 64]


def torus_4x4(beta):
    """lnZ/N, u and c of the 4×4 periodic lattice by enumerating its 2^16 states."""
    spins = 1 - 2 * ((np.arange(2**16)[:, None] >> np.arange(16)) & 1).reshape(-1, 4, 4)
    bonds = (spins * np.roll(spins, 1, axis=1)).sum((1, 2)) + (spins * np.roll(spins, 1, axis=2)).sum((1, 2))
    energy = -bonds.astype(float)
    weights = np.exp(-beta * energy - beta * 32)  # shifted by the ground state, E = -32
    z = weights.sum()
    mean = (weights * energy).sum() / z
    var = (weights * (energy - mean) ** 2).sum() / z
    return (np.log(z) + 32 * beta) / 16, mean / 16, beta**2 * var / 16


@pytest.mark.parametrize("beta", [0.3, 0.44, 0.7])
def test_untruncated_steps_are_exact_on_the_4x4_torus(beta):
    """χ = 16, 4 steps: no bond is cut (k = D² each time), so HOTRG is the exact 4×4 torus."""
    lnz, u, c = hotrg.thermodynamics(beta, hotrg.schedule(16, 4))
    exact = torus_4x4(beta)
    assert abs(lnz - exact[0]) < 1e-14
    assert abs(u - exact[1]) < 1e-13
    assert abs(c - exact[2]) < 1e-12


@pytest.fixture(scope="module")
def chi16():
    """χ = 16, 30 steps (N = 2^30): the program and its thermodynamics at β = 0.44 and 0.5."""
    ks = hotrg.schedule(16, 30)
    return hotrg.program(ks), {b: hotrg.thermodynamics(b, ks) for b in (0.44, 0.5)}


# (β, relative error of lnZ/N, error of u, relative error of c): the truncation errors at χ = 16
ONSAGER_BOUNDS = [(0.44, 1e-6, 1e-4, 1e-3), (0.5, 1e-7, 1e-5, 1e-4)]


@pytest.mark.parametrize("beta, lnz_rel, u_abs, c_rel", ONSAGER_BOUNDS)
def test_against_onsager(chi16, beta, lnz_rel, u_abs, c_rel):
    lnz, u, c = chi16[1][beta]
    assert abs(lnz / onsager.ln_z(beta) - 1) <= lnz_rel
    assert abs(u - onsager.energy(beta)) <= u_abs
    assert abs(c / onsager.specific_heat(beta) - 1) <= c_rel


@pytest.mark.parametrize("beta", [0.44, 0.5])
def test_gradient_against_differences_of_lnz(chi16, beta):
    """u by reverse mode against −(lnZ/N(β+h) − lnZ/N(β−h))/2h of the program's own forward."""
    program, results = chi16
    h = 1e-6
    difference = (program.value(beta + h) - program.value(beta - h)) / (2 * h)
    assert abs(-results[beta].u - difference) < 2e-9


@pytest.mark.parametrize("beta", [0.44, 0.5])
def test_curvature_against_differences_of_the_gradient(beta):
    """c by forward over reverse against the central difference of the AD gradient (χ = 8, 16 steps)."""
    program = hotrg.program(hotrg.schedule(8, 16))
    h = 1e-5
    curvature = program.value_grad_and_curvature(beta).curvature
    difference = (program.value_and_grad(beta + h).grad.item() - program.value_and_grad(beta - h).grad.item()) / (2 * h)
    assert abs(curvature.item() / difference - 1) < 1e-5


# --- command line ---------------------------------------------------------------------------


def run_cli(*args):
    return subprocess.run([sys.executable, str(EXAMPLES / "hotrg_ising.py"), *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_output():
    done = run_cli("6", "10", "0.4", "0.5")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("tenferro_py ") and "HOTRG chi=6 steps=10" in lines[0]
    for line, beta in zip(lines[1:3], (0.4, 0.5)):
        lnz, u, c = hotrg.thermodynamics(beta, hotrg.schedule(6, 10))
        assert line == f"beta={beta:.4f} lnZ/N={lnz:.15f} u={u:.15f} c_ad={c:.12f}"
    assert lines[3].startswith("against Onsager")
    assert [line.split()[0] for line in lines[4:]] == ["beta=0.4000", "beta=0.5000"]


@pytest.mark.parametrize(
    "args, message",
    [(["0"], "argument chi: must be an integer >= 1, got '0'"),
     (["16", "x"], "argument steps: must be an integer >= 1, got 'x'"),
     (["4", "4", "-1"], "argument beta: must be a number in [1e-14, 150] (outside, u and c are not finite; see --help), "
                        "got '-1'"),
     (["4", "4", "nan"], "argument beta: must be a number in [1e-14, 150]"), (["4", "4", "360"], "got '360'"),
     (["4", "4", "1e-300"], "got '1e-300'"), (["4", "4", "1_000"], "got '1_000'"),
     (["--chi", "4"], "unrecognized arguments: --chi")],
)
def test_cli_rejects_bad_arguments(args, message):
    done = run_cli(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr and done.stderr.startswith("hotrg_ising.py: ")


@pytest.mark.parametrize("failure", ["nan", "linalg"])
def test_cli_names_a_beta_without_a_finite_result_in_one_line(monkeypatch, capsys, failure):
    def thermodynamics(beta, ks):
        if failure == "linalg":
            raise tf.LinalgError("eigh", "a matrix of finite entries", "inf or NaN entries")
        return hotrg.Thermo(0.7, float("nan"), 0.1)

    monkeypatch.setattr(hotrg, "thermodynamics", thermodynamics)
    assert runpy.run_path(str(EXAMPLES / "hotrg_ising.py"))["main"](["4", "4", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hotrg_ising.py: beta=0.5: ")


def test_cli_help():
    done = run_cli("--help")
    assert done.returncode == 0 and "usage: hotrg_ising.py" in done.stdout and "in [1e-14, 150]" in done.stdout
