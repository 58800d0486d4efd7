"""tenferro_py.models.ctmrg and examples/ctmrg_ising.py: C4v CTMRG of the 2D Ising model against Onsager
and Yang, u and c by implicit differentiation of the fixed point, the step's derivatives, its gauge
fixing, the transfer matrix's correlation length, and the command line."""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import Tensor
from tenferro_py.models import ctmrg, onsager
from tenferro_py.testing import check_grads

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str):
    """The example script ``examples/<name>.py`` as a module, to call its ``main`` in this process."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHI = 20
BETAS = (0.3, 0.6)  # far from β_c on either side


@pytest.fixture(scope="module")
def thermo():
    return {beta: ctmrg.ising_thermodynamics(beta, CHI) for beta in BETAS}


@pytest.fixture(scope="module")
def environment():
    """The converged (C, T) and the bulk and impurity tensors at β = 0.6."""
    q, a, b = ctmrg.ising_tensors(0.6)
    env = ctmrg.converge(a, CHI, ctmrg.initial_environment(a, CHI, boundary=q[0]))
    return env, a, b


@pytest.mark.parametrize("beta", BETAS)
def test_against_onsager_and_yang(thermo, beta):
    r = thermo[beta]
    assert abs(r.lnz - onsager.ln_z(beta)) <= 1e-12
    assert abs(r.u - onsager.energy(beta)) <= 1e-9
    assert abs(r.c - onsager.specific_heat(beta)) <= 1e-6
    assert abs(r.m - onsager.spontaneous_magnetisation(beta)) <= 1e-8


def test_the_magnetisation_vanishes_above_tc_and_is_yangs_below(thermo):
    assert abs(thermo[0.3].m) <= 1e-11
    assert thermo[0.6].m > 0.97


def test_nearest_neighbour_correlation_from_the_two_site_network(environment):
    """⟨σσ'⟩ of a bond = −u/2 (two bonds per site): the 4 × 3 network with two impurities over the one
    without."""
    (c, t), a, b = environment
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()

    def ratio(s):
        env = (s.constant_from(c), s.constant_from(t))
        a_t, b_t = s.constant_from(Tensor.from_numpy(a)), s.constant_from(Tensor.from_numpy(b))
        return s.div(ctmrg.two_site_network(s, env, b_t, b_t), ctmrg.two_site_network(s, env, a_t, a_t))

    with rt.no_grad():
        correlation = rt.with_eager_session(eng, ratio).item()
    assert abs(correlation + onsager.energy(0.6) / 2) <= 1e-12


def test_the_fixed_point_is_a_fixed_point_in_any_input_gauge(environment):
    """step(x*) = x* element by element, and step(OᵀCO, OᵀTO) = step(C, T) for an orthogonal O: the
    step's output depends only on the gauge-invariant content of its input."""
    (c, t), a, _ = environment
    o, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((CHI, CHI)))
    rotated = (Tensor.from_numpy(o.T @ c.to_numpy() @ o),
               Tensor.from_numpy(np.einsum("ak,aib,bm->kim", o, t.to_numpy(), o)))
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    with rt.no_grad():
        for start in ((c, t), rotated):
            c2, t2 = rt.with_eager_session(eng, lambda s: ctmrg.ctmrg_step(
                s, tuple(s.constant_from(x) for x in start), s.constant_from(Tensor.from_numpy(a)), CHI))
            assert np.abs(c2.value().to_numpy() - c.to_numpy()).max() <= 1e-11
            assert np.abs(t2.value().to_numpy() - t.to_numpy()).max() <= 1e-11


def test_the_step_gives_the_same_bits_whether_or_not_it_is_differentiated(environment):
    """Outside any differentiation kept_space skips its derivative's terms (zero in value): the step's
    output is bit for bit the recorded step's, and nothing else is computed."""
    (c, t), a, _ = environment
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    outputs = []
    for plain in (True, False):
        with rt.no_grad() if plain else rt.enable_grad():
            c_in = rt.constant_from(c) if plain else rt.variable_from(c)
            out = rt.with_eager_session(eng, lambda s: ctmrg.ctmrg_step(
                s, (c_in, s.constant_from(t)), s.constant_from(Tensor.from_numpy(a)), CHI))
        assert all(x.is_tracked != plain for x in out)
        outputs.append([x.value().to_numpy() for x in out])
    assert all(np.array_equal(p, q) for p, q in zip(*outputs))


def test_the_cut_keeps_neither_part_of_a_multiplet_nor_unresolved_states():
    magnitudes = np.array([1.0, 0.5, 0.2, 0.2, 0.199, 0.1, 0.05])
    assert ctmrg.kept_count(magnitudes, 4) == 2  # 0.2, 0.2, 0.199 stay together, outside
    assert ctmrg.kept_count(magnitudes, 5) == 5
    assert ctmrg.kept_count(np.array([1.0, 0.3, 1e-6, 1e-7]), 4) == 2  # below RESOLVED
    assert ctmrg.kept_count(magnitudes, 4, multiplet_gap=0.0) == 4  # the top χ, the multiplet split
    assert ctmrg.kept_count(np.array([1.0, 0.3, 1e-6, 1e-7]), 4, multiplet_gap=0.0) == 2


def c4v_symmetric(x: np.ndarray) -> np.ndarray:
    """The average of x[u, l, d, r] over C4v: the four rotations of its legs and their reflections."""
    perms = [(0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2), (1, 0, 3, 2), (0, 3, 2, 1), (3, 2, 1, 0),
             (2, 1, 0, 3)]
    return sum(np.transpose(x, p) for p in perms) / 8


def test_the_step_differentiates_to_second_order():
    """check_grads on one step at χ = 4 from a generic input (no multiplets: all 4 states kept)."""
    chi, d = 4, 2
    rng = np.random.default_rng(0)
    a = c4v_symmetric(rng.standard_normal((d,) * 4)) + 3 * np.einsum("u,l,d,r->uldr", *[np.eye(d)[0]] * 4)
    c = rng.standard_normal((chi, chi))
    t = rng.standard_normal((chi, d, chi))
    c, t = c + c.T, t + t.transpose(2, 1, 0)
    corner = np.einsum("pq,pux,qly,uldr->xryd", c, t, t, a).reshape(chi * d, chi * d, order="F")
    assert ctmrg.kept_count(np.sort(np.abs(np.linalg.eigvalsh(corner)))[::-1], chi) == chi

    def step(s, c, t, a):
        c_next, t_next = ctmrg.ctmrg_step(s, (c, t), a, chi)
        return s.concatenate([s.reshape(c_next, (chi * chi,)), s.reshape(t_next, (chi * d * chi,))], 0)

    check_grads(step, [c, t, a], order=2)


def exact_correlation_length(beta: float) -> float:
    """The 2D Ising model's correlation length along an axis (the transfer matrix's gap; Wu and McCoy):
    1/ξ = 2(K* − K) above T_c and 4(K − K*) below, K = β, K* = ½ ln coth β the dual coupling."""
    dual = 0.5 * math.log(1 / math.tanh(beta))
    return 1 / (2 * (dual - beta)) if beta < onsager.BETA_C else 1 / (4 * (beta - dual))


@pytest.mark.parametrize("beta", BETAS)
def test_the_correlation_length_approaches_the_exact_one_from_below(beta):
    """A boundary of few states underestimates ξ (its transfer matrix's gap is too large), and far more
    than lnZ/N: at χ = 20 (13 and 10 states above RESOLVED) ξ is 1.8% and 4.2% below at β = 0.3 and
    0.6, and it rises towards the exact value as more states are kept (measured: 1.2% and 1.6% below
    with 38 and 33 states)."""
    q, a, _ = ctmrg.ising_tensors(beta)
    env = ctmrg.converge(a, CHI, ctmrg.initial_environment(a, CHI, boundary=q[0]))
    xi, exact = ctmrg.correlation_length(env, a), exact_correlation_length(beta)
    assert 0.95 * exact < xi < exact


def test_the_transfer_matrix_by_arpack_is_the_dense_one(environment, monkeypatch):
    (c, t), a, _ = environment
    dense = ctmrg.transfer_matrix_eigenvalues((c, t), a, 3)
    monkeypatch.setattr(ctmrg, "DENSE_UP_TO", 0)
    assert np.allclose(ctmrg.transfer_matrix_eigenvalues((c, t), a, 3), dense, rtol=1e-12, atol=0)
    assert dense[0] > abs(dense[1]) >= abs(dense[2])


def test_bad_input_is_refused_with_a_named_error():
    _, a, _ = ctmrg.ising_tensors(0.6)
    with pytest.raises(tf.ShapeMismatch, match="initial_environment"):
        ctmrg.initial_environment(a[0], 4)
    with pytest.raises(tf.InvalidArgument, match="ising_thermodynamics"):
        ctmrg.ising_thermodynamics(-0.5)
    env = ctmrg.initial_environment(a, 4)
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    with pytest.raises(tf.InvalidArgument, match="ctmrg_step: expected chi in \\[1, 8\\]"):
        rt.with_eager_session(eng, lambda s: ctmrg.ctmrg_step(
            s, tuple(s.constant_from(x) for x in env), s.constant_from(Tensor.from_numpy(a)), 9))


LINE = re.compile(r"beta=(\d\.\d{4}) lnZ/N=(-?\d\.\d{15}) u=(-?\d\.\d{15}) c=(\d\.\d{12}) m=(\d\.\d{12})")


def test_command_line_output_and_compare():
    out = subprocess.run([sys.executable, str(EXAMPLES / "ctmrg_ising.py"), "--chi", "20", "--compare", "0.3", "0.6"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith("tenferro_py ") and "chi=20" in out[0]
    lines = [LINE.fullmatch(line) for line in out[1:3]]
    assert all(lines) and [m.group(1) for m in lines] == ["0.3000", "0.6000"]
    for m in lines:
        beta = float(m.group(1))
        assert abs(float(m.group(2)) - onsager.ln_z(beta)) <= 1e-12
        assert abs(float(m.group(5)) - onsager.spontaneous_magnetisation(beta)) <= 1e-8
    assert float(lines[0].group(5)) <= 1e-11  # above T_c
    assert out[3].startswith("against Onsager") and len(out) == 6
    assert out[4].startswith("beta=0.3000 lnZ/N ") and "kept" in out[4] and "iterations" in out[4]


@pytest.mark.parametrize("argv", [["--chi", "0"], ["--chi"], ["--chi=2.5"], ["--bogus"], ["inf"], ["1_000"],
                                  ["0.3", "nan"], ["200"], ["0"], ["-0.5"]])
def test_bad_arguments_exit_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        load_example("ctmrg_ising").main(argv)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert captured.err.startswith("ctmrg_ising.py: ")
