"""Local Hamiltonians of the square lattice, given as operators: what a user writes a model with.

A :class:`Model` holds the operator on each nearest-neighbour bond, h[p1, p2, q1, q2] = ⟨p1 p2|h|q1 q2⟩
(the same on horizontal and vertical bonds, symmetric under swapping its two sites), optionally one on
each next-nearest (diagonal) pair, and one on each site; and, for antiferromagnets, the unitary U that
rotates the spins of sublattice B, so that the ground state is close to uniform in the rotated frame
(:func:`in_frame`). The built-in models are examples of that API, not special cases:

    >>> from tenferro_py.models import lattice
    >>> model = lattice.model(my_bond_operator, onsite=my_field, name="mine")   # any d × d sites
    >>> lattice.transverse_ising(3.5), lattice.heisenberg(), lattice.xxz(0.5), lattice.j1j2(0.5)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import InvalidArgument

__all__ = ["Model", "PAULI_X", "PAULI_Z", "SPIN_FLIP_Y", "heisenberg", "in_frame", "j1j2", "model",
           "transverse_ising", "xxz"]

PAULI_X = np.array([[0.0, 1.0], [1.0, 0.0]])
PAULI_Z = np.array([[1.0, 0.0], [0.0, -1.0]])
SPIN_FLIP_Y = np.array([[0.0, -1.0], [1.0, 0.0]])
"""exp(−iπ S_y): the rotation by π about y that maps the Néel state onto a uniform one (S_x → −S_x, S_z → −S_z)."""

_HALF_I_SY = np.array([[0.0, 0.5], [-0.5, 0.0]])  # i S_y, real: S_y ⊗ S_y = −(i S_y) ⊗ (i S_y)


class Model(NamedTuple):
    """A local Hamiltonian H = Σ_⟨ij⟩ nearest + Σ_⟨⟨ij⟩⟩ next_nearest + Σ_i onsite (see the module)."""

    name: str
    nearest: np.ndarray
    next_nearest: np.ndarray | None
    onsite: np.ndarray | None
    sublattice: np.ndarray | None


def _checked_pair(what: str, h: object, dimension: int | None) -> np.ndarray:
    h = np.asarray(h)
    if h.dtype.kind not in "fc" or h.ndim != 4 or h.shape[0] != h.shape[2] or h.shape[1] != h.shape[3] \
            or h.shape[0] != h.shape[1] or (dimension is not None and h.shape[0] != dimension):
        expected = f"d × d × d × d (d = {dimension})" if dimension else "d × d × d × d"
        raise InvalidArgument("lattice.model", f"{what}: a float or complex operator of shape {expected}",
                              f"{h.dtype} of shape {list(h.shape)}")
    d = h.shape[0]
    matrix = h.reshape(d * d, d * d)
    if not np.all(np.isfinite(matrix)) or not np.allclose(matrix, matrix.conj().T, rtol=0, atol=1e-12 * max(1.0, np.abs(matrix).max())):
        raise InvalidArgument("lattice.model", f"{what}: a finite Hermitian operator", "one that is not")
    if not np.allclose(h, h.transpose(1, 0, 3, 2), rtol=0, atol=1e-12 * max(1.0, np.abs(matrix).max())):
        raise InvalidArgument("lattice.model", f"{what}: the same operator read from either site (h[p1, p2, q1, q2] = "
                                               "h[p2, p1, q2, q1]), as on the bonds of a lattice without orientation",
                              "one that is not")
    return h


def _checked_site(what: str, o: object, dimension: int) -> np.ndarray:
    o = np.asarray(o)
    if o.dtype.kind not in "fc" or o.shape != (dimension, dimension) or not np.all(np.isfinite(o)) \
            or not np.allclose(o, o.conj().T, rtol=0, atol=1e-12 * max(1.0, np.abs(o).max())):
        raise InvalidArgument("lattice.model", f"{what}: a finite Hermitian {dimension} × {dimension} operator",
                              f"{o.dtype} of shape {list(o.shape)}")
    return o


def model(nearest: object, next_nearest: object = None, onsite: object = None, sublattice: object = None,
          name: str = "model") -> Model:
    """A :class:`Model` from its operators, checked: each Hermitian and finite, every site of one dimension d,
    the bond operators symmetric under swapping their sites, ``sublattice`` a d × d unitary."""
    h = _checked_pair("nearest", nearest, None)
    d = h.shape[0]
    hh = None if next_nearest is None else _checked_pair("next_nearest", next_nearest, d)
    o = None if onsite is None else _checked_site("onsite", onsite, d)
    u = None
    if sublattice is not None:
        u = np.asarray(sublattice)
        if u.shape != (d, d) or u.dtype.kind not in "fc" or not np.allclose(u.conj().T @ u, np.eye(d), atol=1e-12):
            raise InvalidArgument("lattice.model", f"sublattice: a {d} × {d} unitary", f"shape {list(u.shape)}, "
                                                                                       "not unitary")
    return Model(str(name), h, hh, o, u)


def in_frame(m: Model) -> Model:
    """The model in the frame where sublattice B is rotated by U: a nearest bond joins A to B, so its
    operator becomes (1 ⊗ U)† h (1 ⊗ U); a diagonal pair joins two sites of one sublattice and stays; the
    on-site operator is the average of its two sublattices' forms, o and U† o U, per site."""
    if m.sublattice is None:
        return m
    u = m.sublattice
    nearest = np.einsum("cb,acAC,CB->abAB", u.conj(), m.nearest, u)  # (1 ⊗ U)† h (1 ⊗ U)
    onsite = None if m.onsite is None else (m.onsite + u.conj().T @ m.onsite @ u) / 2
    if np.isrealobj(m.nearest) and np.isrealobj(u):
        nearest = nearest.real
    return Model(m.name, nearest, m.next_nearest, onsite, None)


def _coupling(op: str, name: str, value: object) -> float:
    """A model's coupling: a finite real number, else InvalidArgument naming the model and the coupling."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value):
        raise InvalidArgument(f"lattice.{op}", f"{name}: a finite real number", repr(value))
    return float(value)


def _spin_couplings(jx: float, jy: float, jz: float) -> np.ndarray:
    """jx SxSx + jy SySy + jz SzSz of two spins ½, real."""
    sx, sz = PAULI_X / 2, PAULI_Z / 2
    h = jx * np.kron(sx, sx) - jy * np.kron(_HALF_I_SY, _HALF_I_SY) + jz * np.kron(sz, sz)
    return h.reshape(2, 2, 2, 2)


def xxz(delta: float, j: float = 1.0) -> Model:
    """H = J Σ (Sx Sx + Sy Sy + Δ Sz Sz) on nearest neighbours, spin ½, with B rotated for J > 0 (Néel order)."""
    delta, j = _coupling("xxz", "delta", delta), _coupling("xxz", "j", j)
    return model(_spin_couplings(j, j, j * delta), sublattice=SPIN_FLIP_Y if j > 0 else None,
                 name=f"xxz(delta={delta}, j={j})")


def heisenberg(j: float = 1.0) -> Model:
    """H = J Σ S_i·S_j on nearest neighbours, spin ½ (the antiferromagnet for J > 0)."""
    j = _coupling("heisenberg", "j", j)
    return model(_spin_couplings(j, j, j), sublattice=SPIN_FLIP_Y if j > 0 else None, name=f"heisenberg(j={j})")


def j1j2(j2: float, j1: float = 1.0) -> Model:
    """H = J1 Σ_⟨ij⟩ S_i·S_j + J2 Σ_⟨⟨ij⟩⟩ S_i·S_j, spin ½, B rotated as for the Néel order of J1."""
    j2, j1 = _coupling("j1j2", "j2", j2), _coupling("j1j2", "j1", j1)
    return model(_spin_couplings(j1, j1, j1), next_nearest=_spin_couplings(j2, j2, j2),
                 sublattice=SPIN_FLIP_Y if j1 > 0 else None, name=f"j1j2(j2={j2}, j1={j1})")


def transverse_ising(h: float, j: float = 1.0) -> Model:
    """H = −J Σ_⟨ij⟩ Z_i Z_j − h Σ_i X_i (Pauli matrices; the 2D critical field is h ≈ 3.044 J)."""
    h, j = _coupling("transverse_ising", "h", h), _coupling("transverse_ising", "j", j)
    return model(-j * np.kron(PAULI_Z, PAULI_Z).reshape(2, 2, 2, 2), onsite=-h * PAULI_X,
                 name=f"transverse_ising(h={h}, j={j})")
