"""Spin-spin correlations of a C4v iPEPS state along a row, ⟨S₀·S_r⟩ for r = 1 … distance, in the
physical frame: the environment's row network (``ctmrg.row_correlators``) with one impurity per spin
component, the spins of sublattice B rotated back by the model's unitary (values, no derivative)."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgument
from ..runtime import EagerRuntime
from ..tensor import Tensor
from . import ctmrg, ipeps, lattice

__all__ = ["SPIN_COMPONENTS", "spin_correlations"]

SPIN_COMPONENTS = ((1.0, lattice.PAULI_X / 2), (-1.0, np.array([[0.0, 0.5], [-0.5, 0.0]])), (1.0, lattice.PAULI_Z / 2))
"""(sign, real operator) with S·S' = Σ sign · O ⊗ O': Sx, i Sy (S_y S_y' = −(i S_y)(i S_y)'), Sz."""


def spin_correlations(energy: ipeps.VariationalEnergy, theta: np.ndarray, distance: int = 10,
                      sublattice: np.ndarray | None = lattice.SPIN_FLIP_Y) -> np.ndarray:
    """⟨S₀·S_r⟩ for r = 1 … ``distance`` of θ's state in ``energy``'s environment at its χ. ``sublattice``:
    the unitary U of the frame (the Heisenberg model's by default; None where the frame is the physical
    one): at odd r the spin is read as U† S U."""
    if not (isinstance(distance, int) and not isinstance(distance, bool) and distance >= 1):
        raise InvalidArgument("spin_correlations", "distance: an int >= 1", repr(distance))
    if sublattice is not None and not np.isrealobj(sublattice):
        raise InvalidArgument("spin_correlations", "a real sublattice unitary (the C4v ansatz is real)", "a complex one")
    solution = energy.solve(theta)
    rt = EagerRuntime()
    with rt.no_grad(), energy.engine.active():
        def open_site(s):
            site = ipeps.site_tensor(s, s.constant_from(Tensor.from_numpy(np.asarray(theta, dtype=np.float64))),
                                     energy.basis)
            return ipeps.open_double_layer(s, site)

        opened = rt.with_eager_session(energy.engine, open_site).value().to_numpy()
    bulk = np.einsum("ppuldr->uldr", opened)
    total = np.zeros(distance)
    for sign, op in SPIN_COMPONENTS:
        impurity = np.einsum("pquldr,qp->uldr", opened, op)
        far = op if sublattice is None else sublattice.conj().T @ op @ sublattice
        even = ctmrg.row_correlators(solution.x, bulk, impurity, impurity, distance)
        odd = ctmrg.row_correlators(solution.x, bulk, impurity, np.einsum("pquldr,qp->uldr", opened, far), distance)
        total += sign * np.where(np.arange(1, distance + 1) % 2 == 1, odd, even)
    return total
