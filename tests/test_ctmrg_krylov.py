"""CTMRG and iPEPS with the enlarged corner's truncated eigh (method="krylov"): the Krylov path is
taken (its thresholds lowered, so that small corners take the code large ones take), and the
results are the full eigh's: the Ising thermodynamics, the iPEPS energy and gradient, the gradient
against central differences, one step's derivatives to second order; and "auto" picks by the
measured crossover."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import Tensor, krylov_eigh
from tenferro_py.fixed_point import FixedPointError
from tenferro_py.models import corner_cut, ctmrg
from tenferro_py.models import ipeps as ih
from tenferro_py.testing import check_grads


@pytest.fixture
def krylov_path(monkeypatch):
    """The Krylov iteration at every size and kept fraction; counts of its runs (converged ones) and of
    the discarded subspace's solves, so that a test can check the path it took."""
    monkeypatch.setattr(krylov_eigh, "KRYLOV_FROM", 1)
    monkeypatch.setattr(krylov_eigh, "KRYLOV_UP_TO", 1.0)
    counts = {"iterations": 0, "converged": 0, "solves": 0}
    iterate, solve = krylov_eigh._krylov, krylov_eigh.complement_solve

    def counted_iteration(*args):
        found = iterate(*args)
        counts["iterations"] += 1
        counts["converged"] += found is not None
        return found

    def counted_solve(*args, **kwargs):
        counts["solves"] += 1
        return solve(*args, **kwargs)

    monkeypatch.setattr(krylov_eigh, "_krylov", counted_iteration)
    monkeypatch.setattr(krylov_eigh, "complement_solve", counted_solve)
    return counts


def random_parameters(bond: int, size: float, seed: int) -> np.ndarray:
    site = np.zeros((ih.PHYSICAL,) + (bond,) * 4)
    site[0, 0, 0, 0, 0] = 1.0
    return ih.parameters_of(site) + size * np.random.default_rng(seed).standard_normal(ih.parameter_count(bond))


def test_auto_takes_the_krylov_eigh_where_the_measured_crossover_says_it_pays():
    assert ctmrg.eigh_method(64, 17) == "full"  # D = 2, χ = 16
    assert ctmrg.eigh_method(512, 33) == "full"  # D = 4, χ = 32: n below the crossover
    assert ctmrg.eigh_method(1024, 65) == "krylov"  # D = 4, χ = 64
    assert ctmrg.eigh_method(1024, 100) == "full"  # k/n above the crossover
    assert ctmrg.eigh_method(1296, 37) == "krylov"  # D = 6, χ = 36
    assert ctmrg.eigh_method(2500, 101) == "krylov"  # D = 5, χ = 100
    assert ctmrg.eigh_method(2500, 101, differentiating=True) == "full"  # the explicit derivative
    assert ctmrg.eigh_method(8, 8, "krylov") == "full"  # nothing to truncate
    assert ctmrg.eigh_method(64, 17, "krylov", differentiating=True) == "krylov"
    with pytest.raises(tf.InvalidArgument, match="method one of auto, full, krylov"):
        ctmrg.eigh_method(64, 17, "lanczos")
    with pytest.raises(tf.InvalidArgument, match="VariationalEnergy: expected method one of"):
        ih.VariationalEnergy(2, 8, method="lanczos")


def test_auto_iterates_by_krylov_and_differentiates_by_the_full_eigh(krylov_path, monkeypatch):
    """With the crossover lowered to D = 2, χ = 8: CTMRG's iterations take the Krylov iteration, the
    recorded step the full eigh (no conjugate gradients), and E and dE/dθ are the full method's."""
    monkeypatch.setattr(corner_cut, "KRYLOV_FROM", 1)
    monkeypatch.setattr(corner_cut, "KRYLOV_UP_TO", 1.0)
    theta = random_parameters(2, 0.3, seed=2)
    energy_full, gradient_full = ih.VariationalEnergy(2, 8, method="full").energy_and_gradient(theta)
    assert krylov_path["iterations"] == 0
    energy, gradient = ih.VariationalEnergy(2, 8).energy_and_gradient(theta)
    assert krylov_path["converged"] > 0 and krylov_path["solves"] == 0
    assert abs(energy - energy_full) <= 1e-12
    assert np.abs(gradient - gradient_full).max() <= 1e-10 * np.abs(gradient_full).max()


@pytest.mark.parametrize("beta", [0.3, 0.6])
def test_ising_thermodynamics_are_the_full_eighs(krylov_path, beta):
    """χ = 20, on both sides of T_c: lnZ/N, u (reverse mode), c (forward over reverse) and m as with
    the full eigh, to 1e-12. At β = 0.6 the discarded subspace's solve has right-hand sides inside the
    pairs the Krylov iteration found, to rounding (dM maps the kept vectors into M's range, and the
    rest of the space is M's null space): krylov_eigh.complement_solve measured its residual against
    that rounding and failed, until it measured it against the right-hand side."""
    full = ctmrg.ising_thermodynamics(beta, 20, method="full")
    assert krylov_path["iterations"] == 0
    krylov = ctmrg.ising_thermodynamics(beta, 20, method="krylov")
    assert krylov_path["converged"] >= krylov.iterations - 1 and krylov_path["solves"] > 0  # the start's
    # corner, of rank below χ + 1 (the boundary's padding), falls back to the full eigh
    for name in ("lnz", "u", "c", "m"):
        assert abs(getattr(krylov, name) - getattr(full, name)) <= 1e-12, name
    assert krylov.kept == full.kept


def test_ipeps_energy_and_gradient_are_the_full_eighs_and_central_differences(krylov_path):
    """D = 2, χ = 8 (a 32 × 32 corner, 9 leading pairs by the Krylov iteration), a random state: E and
    dE/dθ as with the full eigh to 1e-10, and dE/dθ against Richardson's central differences (as
    test_ipeps_heisenberg does for the full eigh)."""
    bond, chi, h = 2, 8, 1e-3
    theta = random_parameters(bond, 0.3, seed=2)
    energy_full, gradient_full = ih.VariationalEnergy(bond, chi, method="full").energy_and_gradient(theta)
    model = ih.VariationalEnergy(bond, chi, method="krylov")
    energy, gradient = model.energy_and_gradient(theta)
    assert krylov_path["converged"] > 0 and krylov_path["solves"] > 0
    assert abs(energy - energy_full) <= 1e-12
    assert np.abs(gradient - gradient_full).max() <= 1e-10 * np.abs(gradient_full).max()

    def central(step: float, e: np.ndarray) -> float:
        return (model.energy(theta + step * e) - model.energy(theta - step * e)) / (2 * step)

    difference = np.array([(4 * central(h, e) - central(2 * h, e)) / 3 for e in np.eye(theta.size)])
    assert np.abs(gradient - difference).max() <= 1e-9 * np.abs(difference).max()


def c4v_symmetric(x: np.ndarray) -> np.ndarray:
    perms = [(0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2), (1, 0, 3, 2), (0, 3, 2, 1), (3, 2, 1, 0),
             (2, 1, 0, 3)]
    return sum(np.transpose(x, p) for p in perms) / 8


@pytest.mark.parametrize("chi", [4, 6])
def test_the_step_differentiates_to_second_order(krylov_path, chi):
    """check_grads (both modes, to second order) on one step by the Krylov path: χ = 4 and 6 of a
    24 × 24 corner, the discarded subspace by conjugate gradients."""
    d, chi_in = 2, 12
    rng = np.random.default_rng(0)
    a = c4v_symmetric(rng.standard_normal((d,) * 4)) + 3 * np.einsum("u,l,d,r->uldr", *[np.eye(d)[0]] * 4)
    c, t = rng.standard_normal((chi_in, chi_in)), rng.standard_normal((chi_in, d, chi_in))
    c, t = c + c.T, t + t.transpose(2, 1, 0)

    def step(s, c, t, a):
        c_next, t_next = ctmrg.ctmrg_step(s, (c, t), a, chi, method="krylov")
        return s.concatenate([s.reshape(c_next, (chi * chi,)), s.reshape(t_next, (chi * d * chi,))], 0)

    check_grads(step, [c, t, a], order=2)
    assert krylov_path["converged"] > 0 and krylov_path["solves"] > 0


@pytest.mark.parametrize("method", ["full", "krylov"])
def test_a_cut_through_an_exact_tie_has_no_derivative(method):
    """The kept space of a corner whose χ-th and (χ+1)-th eigenvalues are equal is not a function of it:
    differentiating it is a FixedPointError naming the tie (never a derivative along a direction the
    tie leaves arbitrary). Outside differentiation the top χ are kept."""
    corner = np.diag([5.0, -4.0, 3.0, 2.0, 2.0, 1.0, 0.5, 0.25])
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    with rt.no_grad():
        kept = rt.with_eager_session(eng, lambda s: ctmrg.kept_space(
            s, s.constant_from(Tensor.from_numpy(corner)), 4, 0.0, method))
    assert kept.shape == (8, 4)
    m = rt.variable_from(Tensor.from_numpy(corner))
    with pytest.raises(FixedPointError, match="an exact tie"):
        rt.with_eager_session(eng, lambda s: ctmrg.kept_space(s, m, 4, 0.0, method))
