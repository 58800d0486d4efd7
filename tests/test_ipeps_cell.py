"""The unit-cell CTMRG and iPEPS (tenferro_py.models.ctmrg_cell, cell_networks, ipeps_cell): element-wise
convergence, agreement with the C4v path on a C4v state, gradients against finite differences (real and
complex, nearest and next-nearest terms), and clear errors for bad input."""

import numpy as np
import pytest

from tenferro_py import CpuEngine, EagerRuntime, Tensor
from tenferro_py.errors import InvalidArgument, TenferroError
from tenferro_py.models import ctmrg_cell, ipeps, ipeps_cell, lattice


def _double_layer(a: np.ndarray) -> np.ndarray:
    """b[n, e, s, w] of a[p, u, l, d, r], as cell_networks.double_layer fuses it."""
    d = a.shape[1]
    return np.einsum("puldr,pvmes->uvrsdelm", a, a.conj()).reshape((d * d,) * 4, order="F")


@pytest.mark.parametrize("width, height, dtype", [(2, 2, complex), (3, 2, float), (1, 1, complex)])
def test_random_cells_converge_element_by_element(width, height, dtype):
    rng = np.random.default_rng(1)
    cell = ctmrg_cell.Cell(width, height)
    bulk = {}
    for x, y in cell.sites():
        a = rng.standard_normal((2, 2, 2, 2, 2)) + (1j * rng.standard_normal((2, 2, 2, 2, 2)) if dtype is complex else 0)
        a[(x + y) % 2, 0, 0, 0, 0] += 3.0
        bulk[(x, y)] = _double_layer(a)
    env = ctmrg_cell.converge(cell, bulk, chi=10, tol=1e-10)
    assert len(env) == 8 * width * height
    assert all(t.shape in ((10, 10), (10, 4, 10)) for t in env)
    assert all(np.all(np.isfinite(t.to_numpy())) for t in env)


def test_four_turns_are_the_identity():
    rt, eng = EagerRuntime(), CpuEngine.serial()
    cell = ctmrg_cell.Cell(3, 2)
    rng = np.random.default_rng(0)
    env = [Tensor.from_numpy(rng.standard_normal((2, 2) if i < 24 else (2, 3, 2))) for i in range(48)]
    bulk = {site: Tensor.from_numpy(rng.standard_normal((3, 3, 3, 3))) for site in cell.sites()}

    def turned(s):
        frame = ctmrg_cell.unpack(cell, tuple(s.constant_from(t) for t in env), {k: s.constant_from(v)
                                                                                 for k, v in bulk.items()})
        once = frame.rotated(s)
        assert once.cell == ctmrg_cell.Cell(2, 3)
        for _ in range(3):
            once = once.rotated(s)
        return ctmrg_cell.pack(once), tuple(once.bulk[site] for site in cell.sites())

    with rt.no_grad():
        packed, turned_bulk = rt.with_eager_session(eng, turned)
    assert all(np.array_equal(p.value().to_numpy(), t.to_numpy()) for p, t in zip(packed, env))
    assert all(np.array_equal(b.value().to_numpy(), bulk[site].to_numpy())
               for b, site in zip(turned_bulk, cell.sites()))


@pytest.fixture(scope="module")
def c4v_state():
    """A C4v Heisenberg state at D = 2 and its energy by the C4v path at χ = 8."""
    energy = ipeps.VariationalEnergy(bond=2, chi=8)
    result = ipeps.optimise(energy, ipeps.initial_parameters(2, seed=0), maxiter=15)
    site = np.einsum("pk,kuldr->puldr", result.x.reshape(2, -1) / np.linalg.norm(result.x), ipeps.c4v_basis(2))
    return site, energy.energy(result.x)


def test_a_c4v_state_on_a_two_by_two_cell_has_the_c4v_energy(c4v_state):
    site, expected = c4v_state
    rotated = np.einsum("pq,quldr->puldr", lattice.SPIN_FLIP_Y, site)  # sublattice B in the physical frame
    cell = ipeps_cell.Cell(2, 2)
    energy = ipeps_cell.CellEnergy(cell, bond=2, chi=8, model=lattice.heisenberg())
    theta = np.concatenate([(site if (x + y) % 2 == 0 else rotated).reshape(-1) for x, y in cell.sites()])
    found = energy.observables(theta, {"sz": lattice.PAULI_Z / 2})
    assert abs(found.energy - expected) < 1e-10
    assert abs(energy.energy(theta) - expected) < 1e-10
    staggered = [found.expectations["sz"][s] * (-1) ** (s[0] + s[1]) for s in cell.sites()]
    assert np.ptp(staggered) < 1e-9  # the Néel pattern: one magnitude, alternating signs
    assert all(abs(v - found.terms.right[(0, 0)]) < 1e-9 for g in (found.terms.right, found.terms.down)
               for v in g.values())  # every bond alike


def _directional_derivatives(energy, theta, count=2, h=1e-4):
    """(dE·v by AD, by the fourth-order central difference) along ``count`` seeded unit directions v."""
    value, gradient = energy.energy_and_gradient(theta)
    energy.warm_start = energy.environment
    rng = np.random.default_rng(0)
    pairs = []
    for _ in range(count):
        v = rng.standard_normal(theta.size)
        v /= np.linalg.norm(v)
        e = [energy.energy(theta + k * h * v) for k in (1, -1, 2, -2)]
        pairs.append((gradient @ v, (8 * (e[0] - e[1]) - (e[2] - e[3])) / (12 * h)))
    return value, pairs


@pytest.mark.parametrize("cell, model, dtype", [
    (ipeps_cell.Cell(2, 1), lattice.j1j2(0.5), "float64"),
    (ipeps_cell.Cell(2, 2), lattice.transverse_ising(2.5), "complex128"),
])
def test_the_gradient_agrees_with_finite_differences(cell, model, dtype):
    energy = ipeps_cell.CellEnergy(cell, bond=2, chi=8, model=model, dtype=dtype)
    value, pairs = _directional_derivatives(energy, energy.initial_parameters(seed=3))
    assert np.isfinite(value)
    for ad, fd in pairs:
        assert abs(fd) > 1e-3  # a direction that moves E
        assert abs(ad - fd) < 1e-8 * max(1.0, abs(fd))


def test_bad_input_is_refused_by_name():
    with pytest.raises(InvalidArgument, match="CellEnergy.*cell"):
        ipeps_cell.CellEnergy((2, 2), 2, 8, lattice.heisenberg())
    with pytest.raises(InvalidArgument, match="dtype"):
        ipeps_cell.CellEnergy(ipeps_cell.Cell(2, 2), 2, 8, lattice.heisenberg(), dtype="float32")
    complex_model = lattice.model(np.kron(lattice.PAULI_X, np.array([[0, -1j], [1j, 0]])).reshape(2, 2, 2, 2) * 0
                                  + 1j * 0 + np.eye(4).reshape(2, 2, 2, 2).astype(complex))
    complex_model = complex_model._replace(onsite=np.array([[0, -1j], [1j, 0]]))
    with pytest.raises(InvalidArgument, match="real operators"):
        ipeps_cell.CellEnergy(ipeps_cell.Cell(1, 1), 2, 8, complex_model)
    energy = ipeps_cell.CellEnergy(ipeps_cell.Cell(1, 1), 2, 4, lattice.heisenberg())
    with pytest.raises(InvalidArgument, match="theta"):
        energy.energy(np.zeros(3))
    with pytest.raises(TenferroError):
        ctmrg_cell.converge(ctmrg_cell.Cell(2, 1), {(0, 0): np.ones((2, 2, 2, 2))}, chi=4)
