"""tenferro_py.models.ipeps and examples/ipeps_heisenberg.py: the C4v ansatz, the Néel state's energy,
the two-site energy against ctmrg's full network, the fixed-point gradient against central differences,
the step's gauge at the fixed point, the observables, a short optimisation, and the command line (bad
arguments, --save/--load, damaged files).

The full runs (docs/models.md, iPEPS): ``python examples/ipeps_heisenberg.py`` (D = 2, χ = 16, ~2 s) reaches
−0.66023109; ``--D 3 --chi 32``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tenferro_py import CpuEngine, EagerRuntime, InvalidArgument, Tensor
from tenferro_py.fixed_point import FixedPointError
from tenferro_py.models import ctmrg
from tenferro_py.models import ipeps as ih

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str):
    """The example script ``examples/<name>.py`` as a module, to call its ``main`` in this process."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def neel_site(bond: int) -> np.ndarray:
    """The Néel state of the rotated frame, every spin up: a D = 1 product state padded by zeros to ``bond``."""
    site = np.zeros((ih.PHYSICAL,) + (bond,) * 4)
    site[0, 0, 0, 0, 0] = 1.0
    return site


def random_parameters(bond: int, size: float, seed: int) -> np.ndarray:
    """θ of the Néel state plus ``size`` × a seeded standard normal in every entry."""
    rng = np.random.default_rng(seed)
    return ih.parameters_of(neel_site(bond)) + size * rng.standard_normal(ih.parameter_count(bond))


@pytest.mark.parametrize("bond, orbits", [(1, 1), (2, 6), (3, 21)])
def test_the_c4v_basis_is_orthonormal_and_symmetric(bond, orbits):
    basis = ih.c4v_basis(bond)
    assert basis.shape == (orbits,) + (bond,) * 4
    assert np.allclose(np.einsum("kuldr,juldr->kj", basis, basis), np.eye(orbits), atol=1e-15)
    for perm in ((0, 2, 3, 4, 1), (0, 1, 4, 3, 2)):  # a rotation of the four legs, a reflection l ↔ r
        assert np.array_equal(basis.transpose(perm), basis)


def test_the_bond_hamiltonian_is_the_rotated_heisenberg_coupling():
    sx, sy, sz = (np.array(m) / 2 for m in ([[0, 1], [1, 0]], [[0, -1j], [1j, 0]], [[1, 0], [0, -1]]))
    heisenberg = sum(np.kron(a, a) for a in (sx, sy, sz))
    rotate = np.kron(np.eye(2), np.array([[0, -1], [1, 0]]))  # exp(−iπ Sy) on the second site
    expected = (rotate.conj().T @ heisenberg @ rotate).real
    assert np.allclose(ih.bond_hamiltonian().reshape(4, 4), expected, atol=1e-15)
    assert np.linalg.eigvalsh(expected)[0] == pytest.approx(-0.75)


@pytest.mark.parametrize("bond, chi", [(1, 4), (2, 8)])
def test_the_neel_state_has_energy_minus_one_half(bond, chi):
    """Two bonds per site, each −1/4 in the product state; the zero padding to D = 2 changes nothing."""
    energy, gradient = ih.VariationalEnergy(bond, chi).energy_and_gradient(ih.parameters_of(neel_site(bond)))
    assert energy == pytest.approx(-0.5, abs=1e-14)
    assert np.abs(gradient).max() <= 1e-14  # a stationary point


def test_the_energy_is_ctmrg_full_two_site_network():
    """The mirrored half network against ctmrg.two_site_network with h = Σ_k c_k O_k ⊗ O_k inserted."""
    bond, chi = 2, 8
    theta = random_parameters(bond, 0.3, seed=1)
    model = ih.VariationalEnergy(bond, chi)
    energy = model.energy(theta)
    rt, eng = EagerRuntime(), CpuEngine.serial()
    terms = [(-1.0, [[0, 0.5], [0.5, 0]]), (-1.0, [[0, 0.5], [-0.5, 0]]), (-1.0, [[0.5, 0], [0, -0.5]])]

    def full_network_energy(s):
        env = tuple(s.constant_from(t) for t in model.environment)
        site = ih.site_tensor(s, s.constant_from(Tensor.from_numpy(theta)), model.basis)
        open_layer = ih.open_double_layer(s, site)
        norm = ctmrg.two_site_network(s, env, ih.double_layer(s, site), ih.double_layer(s, site))
        total = 0.0
        for coefficient, operator in terms:
            impurity = s.einsum([open_layer, Tensor.from_numpy(np.array(operator))], "pquldr,qp->uldr")
            total += coefficient * ctmrg.two_site_network(s, env, impurity, impurity).value().item()
        return 2 * total / norm.value().item()

    assert abs(energy - rt.with_eager_session(eng, full_network_energy)) <= 1e-13


def test_the_gradient_agrees_with_central_differences():
    """dE/dθ through the CTMRG fixed point at D = 2, χ = 8, a random state, against central differences.

    Richardson's combination of the steps h and 2h (error O(h⁴)) at h = 1e-3 keeps both the
    truncation error and the CTMRG's noise (~1e-14 in E) below 1e-11; the plain difference at any
    h is off by 1e-9 or more. The step is ctmrg.ctmrg_step, the one the Ising model uses: with a
    sign rule that broke exact ties by rounding, its gradient here was 3.8e-3 off.
    """
    bond, chi, h = 2, 8, 1e-3
    theta = random_parameters(bond, 0.3, seed=2)
    model = ih.VariationalEnergy(bond, chi)
    energy, gradient = model.energy_and_gradient(theta)

    def central(step: float, e: np.ndarray) -> float:
        return (model.energy(theta + step * e) - model.energy(theta - step * e)) / (2 * step)

    difference = np.array([(4 * central(h, e) - central(2 * h, e)) / 3 for e in np.eye(theta.size)])
    assert np.abs(gradient - difference).max() <= 1e-9 * np.abs(difference).max()
    assert abs(gradient @ theta) <= 1e-12  # E does not depend on θ's scale
    assert energy < -0.5


def test_the_step_maps_the_double_layer_fixed_point_onto_itself():
    """One more ctmrg_step from the converged environment, in a fresh session, returns it element by
    element: the sign rule takes the double layer's exactly tied couplings (ket ↔ bra) the same way
    every time. Breaking the ties by rounding, it returned an environment 0.05 away."""
    bond, chi = 2, 8
    theta = random_parameters(bond, 0.3, seed=2)
    model = ih.VariationalEnergy(bond, chi)
    model.solve(theta)
    rt, eng = EagerRuntime(), CpuEngine.serial()
    with rt.no_grad():
        corner, edge = rt.with_eager_session(eng, lambda s: ctmrg.ctmrg_step(
            s, tuple(s.constant_from(x) for x in model.environment),
            s.constant_from(model.double_layer_of(theta)), chi))
    assert np.abs(corner.value().to_numpy() - model.environment[0].to_numpy()).max() <= 1e-10
    assert np.abs(edge.value().to_numpy() - model.environment[1].to_numpy()).max() <= 1e-10


@pytest.mark.parametrize("angle", [0.0, 0.7])
def test_a_product_state_has_the_full_staggered_moment_and_no_correlations(angle):
    """The D = 1 product state of spins tilted by ``angle`` about y (in the rotated frame): ⟨S̃x⟩ = sin/2,
    ⟨S̃z⟩ = cos/2, so m = 1/2, and a transfer matrix of rank one, so ξ = 0."""
    site = np.array([np.cos(angle / 2), np.sin(angle / 2)]).reshape(2, 1, 1, 1, 1)
    theta = ih.parameters_of(site)
    model = ih.VariationalEnergy(1, 4)
    solution = model.solve(theta)
    spins = [solution.value(lambda s, env, th: ih.one_site_expectation(s, env, ih.site_tensor(s, th, model.basis), op))
             for op in (ih.SPIN_X, ih.SPIN_Z)]
    assert np.allclose(spins, [np.sin(angle) / 2, np.cos(angle) / 2], atol=1e-14, rtol=0)
    observables = model.observables(theta)
    assert observables.energy == pytest.approx(-0.5, abs=1e-14)
    assert observables.staggered_magnetisation == pytest.approx(0.5, abs=1e-14)
    assert observables.correlation_length == 0.0


def test_the_observables_of_an_entangled_state():
    """At D = 2, χ = 8, a random state: the one-site ⟨S̃z⟩ is the two-site network's with the identity on
    the second site (the environment is that of one state), 0 < m < 1/2, and 0 < ξ < ∞."""
    bond, chi = 2, 8
    theta = random_parameters(bond, 0.3, seed=2)
    model = ih.VariationalEnergy(bond, chi)
    observables = model.observables(theta)
    rt, eng = EagerRuntime(), CpuEngine.serial()

    def two_site_sz(s):
        env = tuple(s.constant_from(t) for t in model.environment)
        site = ih.site_tensor(s, s.constant_from(Tensor.from_numpy(theta)), model.basis)
        layer = ih.double_layer(s, site)
        impurity = s.einsum([ih.open_double_layer(s, site), Tensor.from_numpy(ih.SPIN_Z)], "pquldr,qp->uldr")
        return s.div(ctmrg.two_site_network(s, env, impurity, layer), ctmrg.two_site_network(s, env, layer, layer))

    sz = model.solve(theta).value(
        lambda s, env, th: ih.one_site_expectation(s, env, ih.site_tensor(s, th, model.basis), ih.SPIN_Z))
    assert abs(rt.with_eager_session(eng, two_site_sz).item() - sz) <= 1e-12
    assert observables.energy == pytest.approx(model.energy(theta), abs=1e-13)
    assert 0.05 < observables.staggered_magnetisation < 0.5
    assert 0.1 < observables.correlation_length < 10


def test_a_short_optimisation_lowers_the_energy():
    bond, chi = 2, 8
    model = ih.VariationalEnergy(bond, chi)
    theta = ih.initial_parameters(bond, seed=0)
    start = model.energy(theta)
    seen = []
    result = ih.optimise(model, theta, 4, lambda x, energy, gradient: seen.append(energy))
    assert len(seen) == result.nit == 4
    assert all(b < a for a, b in zip([start] + seen, seen))
    assert result.fun == seen[-1] < -0.655
    # the warm starts leave no trace: CTMRG from scratch at the last iterate gives its energy
    assert abs(ih.VariationalEnergy(bond, chi).energy(result.x) - result.fun) <= 1e-12


@pytest.mark.parametrize("bond, chi", [(0, 8), (2, 0), (2.0, 8), (True, 8)])
def test_a_bad_bond_or_chi_is_refused_with_a_named_error(bond, chi):
    with pytest.raises(InvalidArgument, match="VariationalEnergy: expected"):
        ih.VariationalEnergy(bond, chi)


class FailingFarAway:
    """A stand-in for VariationalEnergy: E = Σ (x − 1)², whose "CTMRG" fails wherever some x_i < 0.9."""

    environment = None
    warm_start = None

    def __init__(self):
        self.failures = 0
        self.engine = CpuEngine.serial()  # optimise holds its BLAS pin for the run

    def energy_and_gradient(self, x):
        if x.min() < 0.9:
            self.failures += 1
            raise FixedPointError("stub", "a converged CTMRG", "none")
        return float(((x - 1) ** 2).sum()), 2 * (x - 1)


def test_a_failing_trial_point_makes_the_line_search_step_back():
    """L-BFGS's first trial from (1.2, 1.2, 1.2) has length 1 and lands where the stub fails."""
    model = FailingFarAway()
    result = ih.optimise(model, np.full(3, 1.2), 20, lambda x, energy, gradient: None)
    assert model.failures >= 1
    assert np.abs(result.x - 1).max() <= 1e-6 and result.fun <= 1e-12
    with pytest.raises(FixedPointError):  # but not at the start
        ih.optimise(FailingFarAway(), np.full(3, 0.5), 20, lambda x, energy, gradient: None)


# --- the command line ---------------------------------------------------------------------------


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of the example's main in this process."""
    try:
        status = load_example("ipeps_heisenberg").main(list(argv))
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("argv", [
    ["--D", "0"], ["--chi", "16.5"], ["--seed", "-1"], ["--maxiter", "1_000"], ["--D"], ["--bond", "2"], ["2"],
    ["--save", "/nonexistent-directory/state.json"], ["--save="], ["--eigh", "lanczos"],
])
def test_bad_arguments_are_one_line_and_exit_2(capsys, argv):
    status, out, err = run_main(capsys, *argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ipeps_heisenberg.py: ")


def test_the_script_exits_2_on_a_bad_argument():
    done = subprocess.run([sys.executable, str(EXAMPLES / "ipeps_heisenberg.py"), "--chi", "zero"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "ipeps_heisenberg.py: argument --chi: must be an integer >= 1, got 'zero'\n"


def iteration_lines(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line[:4].strip().isdigit()]


def test_save_and_load_resume_the_run(capsys, tmp_path):
    path = str(tmp_path / "state.json")
    status, out, _ = run_main(capsys, "--chi", "8", "--maxiter", "2", "--save", path)
    assert status == 0
    lines = iteration_lines(out)
    assert [line[0] for line in lines] == ["1", "2"] and all(len(line) == 4 for line in lines)
    assert out.splitlines()[-1] == f"energy={float(lines[-1][1]):.10f}"
    observed = re.fullmatch(r"staggered_magnetisation=(0\.\d{8}) correlation_length=(\d+\.\d{6}) "
                            r"\(transfer matrix at chi=8\)", out.splitlines()[-2])
    assert observed and 0 < float(observed.group(1)) < 0.5 and float(observed.group(2)) > 0
    spins = out.splitlines()[-3].split()
    assert spins[:2] == ["spin_correlations", "r=1..10:"] and len(spins) == 12
    assert abs(float(spins[2]) - float(lines[-1][1]) / 2) < 1e-8  # ⟨S₀·S₁⟩ is half the energy per site
    state = json.loads(Path(path).read_text())
    assert (state["D"], state["chi"], state["seed"], state["iterations"]) == (2, 8, 0, 2)
    assert f"{state['energy']:.10f}" == lines[-1][1] and len(state["theta"]) == ih.parameter_count(2)
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left behind

    status, out, _ = run_main(capsys, "--chi", "8", "--maxiter", "1", "--load", path, "--save", path)
    assert status == 0
    (line,) = iteration_lines(out)
    assert line[0] == "3" and float(line[1]) < state["energy"]
    assert json.loads(Path(path).read_text())["iterations"] == 3


@pytest.mark.parametrize("content, complaint", [
    ('{"format": "ipeps_heisenberg/1", "D": 2, "chi": 8, "se', "damaged or not JSON"),
    (b"\xff\xfe{}", "damaged or not JSON"),
    ('{"D": 2}', "expected a file written by save_state"),
    ('{"format": "ipeps_heisenberg/1", "D": 2, "chi": 8, "seed": 0, "iterations": 1, "energy": -0.6, '
     '"theta": [1.0, 0.5]}', "theta: 12 finite numbers"),
    ('{"format": "ipeps_heisenberg/1", "D": 0, "chi": 8, "seed": 0, "iterations": 1, "energy": -0.6, '
     '"theta": []}', "D: an integer >= 1"),
])
def test_a_damaged_file_is_refused_in_one_line(capsys, tmp_path, content, complaint):
    path = tmp_path / "state.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    status, out, err = run_main(capsys, "--load", str(path))
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and complaint in err


def test_a_file_of_another_bond_dimension_is_refused(capsys, tmp_path):
    path = tmp_path / "state.json"
    theta = ih.parameters_of(neel_site(3)).tolist()
    path.write_text(json.dumps({"format": ih.SAVE_FORMAT, "D": 3, "chi": 8, "seed": 0, "iterations": 1,
                                "energy": -0.5, "theta": theta}))
    status, _, err = run_main(capsys, "--D", "2", "--load", str(path))
    assert status == 2 and err.count("\n") == 1 and "saved with D=3, but --D 2 was given" in err
