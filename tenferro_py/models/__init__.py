"""Tensor-network algorithms written on tenferro_py's public API: import them, do not copy a script.

``onsager``: the exact infinite 2D Ising model (the reference the others are checked against).
``trg``: Levin–Nave TRG of the 2D Ising model, staged: the tensor, one step, lnZ/N with its
gradient and curvature by the explicit sweep, the same as a ``staged.Program``.
``hotrg``: HOTRG of the same model, as a ``staged.Program``.
``ctmrg``: C4v CTMRG (one step for the Ising model and iPEPS double layers), its fixed point
differentiated implicitly, and the observables (Ising thermodynamics, correlation length);
``corner_cut``: its cut (which eigenvectors of the enlarged corner, by which eigh, differentiated).
``lattice``: local Hamiltonians given as operators (nearest, next-nearest, on-site terms), and the
Heisenberg, XXZ, J1-J2 and transverse-field Ising models written with them.
``ipeps``: the C4v iPEPS of such a model (the Heisenberg antiferromagnet by default): state, energy and
gradient, optimiser, save/load.
``ctmrg_cell``, ``cell_networks``, ``ipeps_cell``: CTMRG of an Lx × Ly unit cell without lattice symmetry,
the cell's reduced density matrices, and the variational iPEPS of any such model on it, real or complex.
``plaquette``, ``correlations``: the 2×2 plaquette's density matrix of a C4v iPEPS, and its spin-spin
correlations along a row.
``reference``: SPEC's reference table of TRG, and a run's errors against it and Onsager.
``sweep`` (with ``sweep_csv``, ``sweep_pool``; POSIX, imported on demand): a resumable β sweep
of TRG into a CSV, on worker processes or a Dask cluster.
``cli``: the examples' command-line convention.
"""

from . import (cell_networks, corner_cut, correlations, ctmrg, ctmrg_cell, hotrg, ipeps, ipeps_cell, lattice, onsager,
               plaquette, reference, trg)

__all__ = ["cell_networks", "corner_cut", "correlations", "ctmrg", "ctmrg_cell", "hotrg", "ipeps", "ipeps_cell",
           "lattice", "onsager", "plaquette", "reference", "trg"]
