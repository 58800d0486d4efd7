"""Models given as operators (tenferro_py.models.lattice), and the C4v iPEPS of any of them."""

import numpy as np
import opt_einsum
import pytest

import tenferro_py as tf
from tenferro_py.models import ipeps, lattice, plaquette

RNG = np.random.default_rng(3)


def assert_gradient_is_the_central_difference(model, theta, h=1e-5):
    """dE/dθ along a random direction against the central difference of E; E(θ)."""
    energy, gradient = model.energy_and_gradient(theta)
    direction = RNG.standard_normal(theta.shape)
    slope = (model.energy(theta + h * direction) - model.energy(theta - h * direction)) / (2 * h)
    np.testing.assert_allclose(gradient @ direction, slope, rtol=1e-5, atol=1e-8)
    return energy


def test_the_built_in_heisenberg_model_in_its_frame_is_the_ipeps_coupling():
    framed = lattice.in_frame(lattice.heisenberg())
    assert np.array_equal(framed.nearest, ipeps.bond_hamiltonian())
    assert lattice.in_frame(lattice.xxz(1.0)).nearest.tobytes() == framed.nearest.tobytes()


def test_the_rotation_flips_x_and_z_on_sublattice_b():
    u = lattice.SPIN_FLIP_Y
    np.testing.assert_array_equal(u.T @ lattice.PAULI_X @ u, -lattice.PAULI_X)
    np.testing.assert_array_equal(u.T @ lattice.PAULI_Z @ u, -lattice.PAULI_Z)


def test_the_spin_couplings_are_the_matrices_of_their_definition():
    sx, sz = lattice.PAULI_X / 2, lattice.PAULI_Z / 2
    sy = np.array([[0, -0.5j], [0.5j, 0]])
    for delta in (0.0, 0.5, 2.0):
        want = np.kron(sx, sx) + np.kron(sy, sy).real + delta * np.kron(sz, sz)
        np.testing.assert_allclose(lattice.xxz(delta).nearest.reshape(4, 4), want, atol=1e-15)
    j1j2 = lattice.j1j2(0.5)
    np.testing.assert_allclose(j1j2.next_nearest, 0.5 * lattice.heisenberg().nearest, atol=1e-15)
    assert lattice.in_frame(j1j2).next_nearest is j1j2.next_nearest  # one sublattice: not rotated


@pytest.mark.parametrize("field", [0.5, 2.5, 3.5])
def test_product_states_of_the_transverse_ising_model_have_their_exact_energies(field):
    """D = 1 is a product state: |+x> has E = -h per site, |up> has E = -2J (two bonds per site)."""
    model = ipeps.VariationalEnergy(bond=1, chi=1, model=lattice.transverse_ising(field))
    np.testing.assert_allclose(model.energy(np.array([1.0, 1.0])), -field, rtol=1e-12)
    np.testing.assert_allclose(model.energy(np.array([1.0, 0.0])), -2.0, rtol=1e-12)
    theta = np.array([np.cos(0.3), np.sin(0.3)])  # cos θ|up> + sin θ|down>: ZZ = cos²2θ, X = sin 2θ
    np.testing.assert_allclose(model.energy(theta), -2 * np.cos(0.6) ** 2 - field * np.sin(0.6), rtol=1e-12)


def test_the_energy_of_a_model_agrees_with_central_differences_and_the_default():
    theta = ipeps.initial_parameters(2, seed=1)
    default = ipeps.VariationalEnergy(bond=2, chi=8)
    given = ipeps.VariationalEnergy(bond=2, chi=8, model=lattice.heisenberg())
    assert default.energy_and_gradient(theta)[0] == given.energy_and_gradient(theta)[0]
    assert_gradient_is_the_central_difference(ipeps.VariationalEnergy(bond=2, chi=8,
                                                                      model=lattice.transverse_ising(2.5)), theta)


def test_an_optimised_state_lies_between_the_product_state_and_the_bond_bound():
    """At h = 3.5 (paramagnetic) D = 2 lowers E below the product state's −h, and no state lies below
    twice the least eigenvalue of a bond's share of H (−ZZ − h (X⊗1 + 1⊗X)/4, each site on four bonds)."""
    field = 3.5
    model = ipeps.VariationalEnergy(bond=2, chi=8, model=lattice.transverse_ising(field))
    start = np.zeros(ipeps.parameter_count(2))
    start[0], start[ipeps.parameter_count(2) // 2] = 1.0, 1.0  # |+x> on every site
    start += 0.05 * RNG.standard_normal(start.shape)
    result = ipeps.optimise(model, start, maxiter=30)
    share = -np.kron(lattice.PAULI_Z, lattice.PAULI_Z) - field / 4 * (np.kron(lattice.PAULI_X, np.eye(2))
                                                                      + np.kron(np.eye(2), lattice.PAULI_X))
    assert 2 * np.linalg.eigvalsh(share)[0] < result.fun < -field - 1e-3


@pytest.mark.parametrize("kwargs, match", [
    (dict(nearest=np.zeros((2, 2))), "d × d × d × d"),
    (dict(nearest=np.arange(16.0).reshape(2, 2, 2, 2)), "Hermitian"),
    (dict(nearest=np.kron(lattice.PAULI_Z, np.eye(2)).reshape(2, 2, 2, 2)), "either site"),
    (dict(nearest=lattice.heisenberg().nearest, onsite=np.ones((3, 3))), "2 × 2"),
    (dict(nearest=lattice.heisenberg().nearest, sublattice=2 * np.eye(2)), "unitary"),
])
def test_bad_operators_are_refused_with_a_named_error(kwargs, match):
    with pytest.raises(tf.InvalidArgument, match=match):
        lattice.model(**kwargs)


@pytest.mark.parametrize("make", [lambda: lattice.xxz("a"), lambda: lattice.transverse_ising(float("nan")),
                                  lambda: lattice.heisenberg(np.inf), lambda: lattice.j1j2(True)])
def test_bad_couplings_are_refused_with_a_named_error(make):
    with pytest.raises(tf.InvalidArgument, match="a finite real number"):
        make()


def _state(bond=2, chi=4, seed=2):
    """A random C4v state's θ, its converged environment (C, T) and site tensor, as arrays."""
    model = ipeps.VariationalEnergy(bond=bond, chi=chi)
    theta = ipeps.initial_parameters(bond, seed=seed) + 0.3 * np.random.default_rng(seed).standard_normal(
        ipeps.parameter_count(bond))
    corner, edge = model.solve(theta).x
    rt = tf.EagerRuntime()
    with rt.no_grad():
        site = rt.with_eager_session(model.engine, lambda s: ipeps.site_tensor(
            s, s.constant_from(tf.Tensor.from_numpy(theta)), model.basis)).value().to_numpy()
    return theta, corner.to_numpy(), edge.to_numpy(), site


def _in_session(fn, *arrays):
    rt = tf.EagerRuntime()
    with rt.no_grad():
        return rt.with_eager_session(tf.CpuEngine.serial(), lambda s: fn(
            s, *[s.constant_from(tf.Tensor.from_numpy(a)) for a in arrays])).value().to_numpy()


def test_the_plaquette_density_is_the_whole_network_contracted():
    """ρ of the 2×2 plaquette against numpy.einsum of all 16 tensors: C T T C / T a a T / T a a T / C T T C,
    sites 1-4 clockwise from the upper left."""
    _, c, t, site = _state()
    rho = _in_session(lambda s, c_, t_, a: plaquette.plaquette_density(s, (c_, t_), ipeps.open_double_layer(s, a)),
                      c, t, site)
    bond = site.shape[1]
    o = np.einsum("puldr,qvmes->pquvlmders", site, site).reshape((2, 2) + (bond * bond,) * 4)
    full = opt_einsum.contract("ab,bnc,cod,de,erf,fsg,gh,hti,iuj,jk,kvm,mwa,BGnwyx,CHoxzr,EIzAts,FJyvuA->BCEFGHIJ",
                               c, t, t, c, t, t, c, t, t, c, t, t, o, o, o, o, optimize="greedy")
    full /= np.einsum("abcdabcd->", full)
    np.testing.assert_allclose(rho, full, atol=1e-12 * np.abs(full).max())


def test_a_j2_of_zero_is_heisenberg_and_j2_has_its_gradient():
    theta, *_ = _state(chi=8)
    heisenberg = ipeps.VariationalEnergy(bond=2, chi=8).energy(theta)
    np.testing.assert_allclose(ipeps.VariationalEnergy(bond=2, chi=8, model=lattice.j1j2(0.0)).energy(theta),
                               heisenberg, atol=1e-13)
    energy = assert_gradient_is_the_central_difference(
        ipeps.VariationalEnergy(bond=2, chi=8, model=lattice.j1j2(0.5)), theta)
    assert energy != heisenberg


def test_what_the_c4v_path_cannot_take_is_refused():
    spin_one = lattice.model(np.eye(9).reshape(3, 3, 3, 3))
    with pytest.raises(tf.InvalidArgument, match="dimension 2"):
        ipeps.VariationalEnergy(bond=2, chi=8, model=spin_one)
    with pytest.raises(tf.InvalidArgument, match="real"):
        ipeps.VariationalEnergy(bond=2, chi=8, model=lattice.model(lattice.heisenberg().nearest,
                                                                     onsite=np.array([[0, -1j], [1j, 0]])))


def test_spin_correlations_along_a_row():
    """⟨S₀·S_r⟩: at r = 1 the bond energy (the same network), far away (−1)^r m², and a product state's
    exact ±1/4."""
    from tenferro_py.models import correlations

    np.testing.assert_allclose(correlations.spin_correlations(ipeps.VariationalEnergy(bond=1, chi=1),
                                                              np.array([1.0, 0.0]), 4), [-0.25, 0.25, -0.25, 0.25],
                               atol=1e-15)
    energy = ipeps.VariationalEnergy(bond=2, chi=8)
    theta = ipeps.optimise(energy, ipeps.initial_parameters(2, seed=0), maxiter=60).x  # ξ ≈ 0.66
    found = correlations.spin_correlations(energy, theta, 10)
    observables = energy.observables(theta)
    np.testing.assert_allclose(found[0], observables.energy / 2, rtol=1e-12)
    connected = found - (-1.0) ** np.arange(1, 11) * observables.staggered_magnetisation**2
    assert abs(connected[-1]) <= 10 * np.exp(-10 / observables.correlation_length) < 1e-5
    assert abs(connected[-1]) < abs(connected[1]) / 100
    for distance in (0, 2.0, "x"):
        with pytest.raises(tf.InvalidArgument, match="distance"):
            correlations.spin_correlations(energy, theta, distance)
