"""Variational iPEPS on an Lx × Ly unit cell, real or complex, for any nearest/next-nearest-neighbour
model (``lattice.Model``), with the energy's gradient through the unit cell's CTMRG fixed point.

Every site of the cell has its own tensor a[p, u, l, d, r], no symmetry imposed. θ is one real
vector: the site tensors' entries, row by row over the sites, and for complex tensors their real
parts, then their imaginary parts, so that scipy's optimisers and the gradient (∂E/∂θ, real) need
no convention; ``site_tensors`` reads it back. The model is taken in its physical frame: a unit cell
holds the sublattices itself (``Model.sublattice`` is for one-site ansätze). A user's model on a
2 × 2 cell:

    >>> from tenferro_py.models import ipeps, ipeps_cell, lattice
    >>> energy = ipeps_cell.CellEnergy(ipeps_cell.Cell(2, 2), bond=2, chi=16, model=lattice.j1j2(0.5))
    >>> result = ipeps.optimise(energy, energy.initial_parameters(seed=0), maxiter=200)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..engine import CpuEngine
from ..errors import InvalidArgument
from ..fixed_point import FixedPointError, FixedPointSolution
from ..ops.structural import SliceConfig
from ..runtime import EagerRuntime
from ..session import EagerSession
from ..tape import EagerTensor
from ..tensor import Tensor
from . import cell_networks as nets
from . import ctmrg_cell, lattice
from .ctmrg_cell import Cell

__all__ = ["BondEnergies", "Cell", "CellEnergy", "CellObservables", "DTYPES", "NOISE", "bond_energies", "energy_per_site",
           "site_tensors"]

DTYPES = ("float64", "complex128")
NOISE = 0.1
"""The random part of ``CellEnergy.initial_parameters``' start, beside its product state."""


def site_tensors(s: EagerSession, theta: EagerTensor, cell: Cell, shape: tuple[int, ...], complex_: bool) -> dict:
    """{(x, y): a[p, u, l, d, r] / ‖a‖} from θ (see the module): E does not depend on each site's scale."""
    size = math.prod(shape)
    sites = cell.sites()
    half = size * len(sites)
    tensors = {}
    for i, site in enumerate(sites):
        part = s.slice(theta, SliceConfig([i * size], [(i + 1) * size]))
        if complex_:
            imaginary = s.slice(theta, SliceConfig([half + i * size], [half + (i + 1) * size]))
            norm = s.sqrt(s.add(s.reduce_sum(s.mul(part, part)), s.reduce_sum(s.mul(imaginary, imaginary))))
            scale = s.broadcast_in_dim(norm, (size,), ())
            entries = s.complex(s.div(part, scale), s.div(imaginary, scale))
        else:
            norm = s.sqrt(s.reduce_sum(s.mul(part, part)))
            entries = s.div(part, s.broadcast_in_dim(norm, (size,), ()))
        tensors[site] = s.reshape(entries, shape, order="C")
    return tensors


class BondEnergies(NamedTuple):
    """⟨h⟩ on each site's bonds and pairs, and ⟨o⟩ on the site, all keyed by the site (x, y): its bond to the
    right, its bond downward, its diagonal to the lower right, the anti-diagonal from its right neighbour
    to its lower neighbour (the pairs None where the model has no such term)."""

    right: dict
    down: dict
    diagonal: dict | None
    anti_diagonal: dict | None
    onsite: dict | None


def bond_energies(s: EagerSession, frame: ctmrg_cell.Frame, sites: dict, model: lattice.Model) -> BondEnergies:
    """Every term of ``model`` on the cell, each from its reduced density matrix (session ops)."""
    opened = {site: nets.open_layer(s, a) for site, a in sites.items()}
    cell = frame.cell
    right = {site: nets.bond_expectation(s, nets.horizontal_density(s, frame, opened, site), model.nearest)
             for site in cell.sites()}
    down = {site: nets.bond_expectation(s, nets.vertical_density(s, frame, opened, site), model.nearest)
            for site in cell.sites()}
    diagonal = anti = onsite = None
    if model.next_nearest is not None:
        diagonal, anti = {}, {}
        for site in cell.sites():
            rho = nets.plaquette_density(s, frame, opened, site)
            diagonal[site] = nets.bond_expectation(s, s.einsum([rho], "abcdAbCd->aAcC"), model.next_nearest)
            anti[site] = nets.bond_expectation(s, s.einsum([rho], "abcdaBcD->bBdD"), model.next_nearest)
    if model.onsite is not None:
        onsite = {}
        for site in cell.sites():
            rho = nets.site_density(s, frame, opened, site)
            value = nets.trace_with(s, rho, model.onsite.astype(np.result_type(model.onsite, rho.dtype)), "aA,Aa->")
            onsite[site] = s.real(value) if value.dtype.kind == "c" else value
    return BondEnergies(right, down, diagonal, anti, onsite)


def energy_per_site(s: EagerSession, frame: ctmrg_cell.Frame, sites: dict, model: lattice.Model) -> EagerTensor:
    """E = (1/N) Σ over the cell's terms (``bond_energies``): two bonds, two diagonal pairs and one site each."""
    terms = bond_energies(s, frame, sites, model)
    total = None
    for group in terms:
        for value in (group or {}).values():
            total = value if total is None else s.add(total, value)
    return s.scale_real(total, 1.0 / len(frame.cell.sites()))


class CellObservables(NamedTuple):
    """A state's energy per site, its terms (``BondEnergies`` of floats) and ⟨operator⟩ per site for each
    operator asked for."""

    energy: float
    terms: BondEnergies
    expectations: dict


class CellEnergy:
    """E(θ) and dE/dθ for the ``cell`` at bond dimension ``bond`` and environment dimension ``chi`` of
    ``model`` (physical frame), with real (``dtype="float64"``) or complex site tensors.

    It has what ``ipeps.optimise`` uses (``energy_and_gradient``, ``engine``, ``warm_start``,
    ``environment``), with the same warm-start rule as ``ipeps.VariationalEnergy``: every trial point
    of a line search starts from the last accepted iterate's environment, a fresh one where that fails.
    """

    def __init__(self, cell: Cell, bond: int, chi: int, model: lattice.Model, dtype: str = "float64",
                 engine: CpuEngine | None = None, tol: float = ctmrg_cell.CONVERGENCE_TOL, maxiter: int = 1000):
        if not (isinstance(cell, Cell) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                               for v in cell)):
            raise InvalidArgument("CellEnergy", "cell: a Cell(width, height) of ints >= 1", repr(cell))
        for name, value in (("bond", bond), ("chi", chi)):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise InvalidArgument("CellEnergy", f"{name}: an int >= 1", repr(value))
        if not isinstance(model, lattice.Model):
            raise InvalidArgument("CellEnergy", "model: a lattice.Model", type(model).__name__)
        if dtype not in DTYPES:
            raise InvalidArgument("CellEnergy", f"dtype one of {', '.join(DTYPES)}", repr(dtype))
        if dtype == "float64" and not all(x is None or np.isrealobj(x) for x in
                                          (model.nearest, model.next_nearest, model.onsite)):
            raise InvalidArgument("CellEnergy", "real operators for real tensors (or dtype='complex128')",
                                  "complex ones")
        self.cell, self.bond, self.chi, self.model = cell, bond, chi, model
        self.complex = dtype == "complex128"
        self.shape = (model.nearest.shape[0],) + (bond,) * 4
        self.engine = engine if engine is not None else CpuEngine.serial()
        self.fixed_point = ctmrg_cell.environment_fixed_point(cell, self._bulk, chi, tol, maxiter)
        self.warm_start: tuple[Tensor, ...] | None = None
        self.environment: tuple[Tensor, ...] | None = None

    @property
    def parameter_count(self) -> int:
        """The length of θ."""
        return math.prod(self.shape) * len(self.cell.sites()) * (2 if self.complex else 1)

    def initial_parameters(self, seed: int, pattern: dict | None = None) -> np.ndarray:
        """θ of a product state plus NOISE × a seeded standard normal everywhere. ``pattern`` maps sites to
        the physical index of their product state (default: 0 and 1 on the two sublattices, a Néel state
        for spins ½)."""
        rng = np.random.default_rng(seed)
        theta = NOISE * rng.standard_normal(self.parameter_count)
        size = math.prod(self.shape)
        for i, (x, y) in enumerate(self.cell.sites()):
            index = (x + y) % 2 if pattern is None else pattern[(x, y)]
            theta[i * size + np.ravel_multi_index((index, 0, 0, 0, 0), self.shape)] += 1.0
        return theta

    def _sites(self, s: EagerSession, theta: EagerTensor) -> dict:
        return site_tensors(s, theta, self.cell, self.shape, self.complex)

    def _bulk(self, s: EagerSession, theta: EagerTensor) -> dict:
        return {site: nets.double_layer(s, a) for site, a in self._sites(s, theta).items()}

    def _frame(self, s: EagerSession, env: tuple, theta: EagerTensor) -> ctmrg_cell.Frame:
        """The environment as a Frame (the readouts take open layers, not the bulk)."""
        return ctmrg_cell.unpack(self.cell, env, {})

    def _energy(self, s: EagerSession, env: tuple, theta: EagerTensor) -> EagerTensor:
        return energy_per_site(s, self._frame(s, env, theta), self._sites(s, theta), self.model)

    def _checked(self, theta: np.ndarray) -> Tensor:
        theta = np.asarray(theta)
        if theta.shape != (self.parameter_count,) or theta.dtype.kind != "f" or not np.all(np.isfinite(theta)):
            raise InvalidArgument("CellEnergy", f"theta: {self.parameter_count} finite real numbers",
                                  f"{theta.dtype} of shape {list(theta.shape)}")
        return Tensor.from_numpy(theta.astype(np.float64))

    def fresh_environment(self, theta: np.ndarray) -> tuple[Tensor, ...]:
        """ctmrg_cell.initial_environment of θ's double layers."""
        rt = EagerRuntime()
        with rt.no_grad(), self.engine.active():
            bulk = rt.with_eager_session(self.engine, lambda s: tuple(
                self._bulk(s, s.constant_from(self._checked(theta))).values()))
        arrays = {site: b.value().to_numpy() for site, b in zip(self.cell.sites(), bulk)}
        return ctmrg_cell.initial_environment(self.cell, arrays, self.chi)

    def solve(self, theta: np.ndarray) -> FixedPointSolution:
        """The CTMRG fixed point at θ from ``warm_start`` (a fresh start where that fails)."""
        theta_t = self._checked(theta)
        solution = None
        if self.warm_start is not None:
            try:
                solution = self.fixed_point.solve(theta_t, self.warm_start, engine=self.engine)
            except FixedPointError:
                solution = None
        if solution is None:
            solution = self.fixed_point.solve(theta_t, self.fresh_environment(theta), engine=self.engine)
        self.environment = solution.x
        if self.warm_start is None:
            self.warm_start = self.environment
        return solution

    def energy(self, theta: np.ndarray) -> float:
        """E(θ) per site."""
        with self.engine.active():
            return self.solve(theta).value(self._energy)

    def energy_and_gradient(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """(E(θ), dE/dθ), the gradient by implicit differentiation of the CTMRG fixed point."""
        with self.engine.active():
            energy, gradient = self.solve(theta).value_and_grad(self._energy)
        return energy, gradient.to_numpy()

    def observables(self, theta: np.ndarray, operators: dict | None = None) -> CellObservables:
        """E, every term of it, and ⟨op⟩ on each site for each of ``operators`` ({name: d × d array})."""
        operators = operators or {}
        with self.engine.active():
            solution = self.solve(theta)

            def terms(s: EagerSession, env: tuple, th: EagerTensor) -> tuple:
                frame, sites = self._frame(s, env, th), self._sites(s, th)
                found = bond_energies(s, frame, sites, self.model)
                opened = {site: nets.open_layer(s, a) for site, a in sites.items()}
                rhos = {site: nets.site_density(s, frame, opened, site) for site in self.cell.sites()}
                return found, rhos

            rt = EagerRuntime()
            with rt.no_grad():
                found, rhos = rt.with_eager_session(self.engine, lambda s: terms(
                    s, tuple(s.constant_from(x) for x in solution.x), s.constant_from(self._checked(theta))))
        floats = BondEnergies(*[None if g is None else {k: float(v.value().to_numpy().real) for k, v in g.items()}
                                for g in found])
        energy = sum(sum(g.values()) for g in floats if g is not None) / len(self.cell.sites())
        expectations = {name: {site: float(np.einsum("aA,Aa->", rho.value().to_numpy(), np.asarray(op)).real)
                               for site, rho in rhos.items()} for name, op in operators.items()}
        return CellObservables(energy, floats, expectations)
