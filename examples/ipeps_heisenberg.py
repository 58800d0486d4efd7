"""Spin-½ Heisenberg antiferromagnet on the square lattice by variational iPEPS, with the gradient
of the energy by implicit differentiation of the CTMRG fixed point.

The method of Liao, Liu, Wang and Xiang (PRX 9, 031041 (2019)): one real site tensor
a[p, u, l, d, r] (physical p of dimension 2, four virtual bonds of dimension D), symmetric
under the point group C4v of the square (rotations and reflections of its four bonds), placed
on every site. The Néel order is made uniform by rotating the spins of one sublattice by π
about y (Sx → −Sx, Sz → −Sz there), which turns every bond's S_i·S_j into the real
h = −Sx⊗Sx + Sy⊗Sy − Sz⊗Sz; the Néel state is then every spin up, a product state of energy
−1/2 per site.

The energy per site is 2⟨h⟩ (two bonds per site, equal by symmetry), read from the two-site
reduced density matrix in the environment (C, T) of the double-layer tensor
A = Σ_p a[p] ⊗ a[p], which C4v-symmetric CTMRG (examples/ctmrg_c4v.py) iterates to its fixed
point at bond dimension χ. The parameters θ are the independent C4v-symmetric entries of a.
dE/dθ comes from tenferro_py.fixed_point: one recorded CTMRG step at the fixed point and a
linear solve with its pullback (no graph of the iterations is kept), and L-BFGS
(scipy.optimize) minimises E(θ), each CTMRG starting from the environment of the last iterate.

Usage: python examples/ipeps_heisenberg.py [--D 2] [--chi 16] [--seed 0] [--maxiter 100] [--save FILE] [--load FILE]
(--D: bond dimension; --chi: the environment's bond dimension; --seed: the random start, the
 Néel state plus noise of size 0.1 in its D > 1 entries; --maxiter: L-BFGS iterations;
 --save FILE: after each iteration, write θ with D, chi, seed, the iteration count and the
 energy to FILE (JSON, replaced atomically); --load FILE: go on from such a file (its D and
 seed; --D and --seed, if given, must agree; --chi may differ). Prints one line per iteration:
 iteration, energy per site, |dE/dθ|, seconds; then the stop reason and energy=E with 10
 decimals. The published D = 2 energy is −0.6602310935.)
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
import tempfile
import time
from typing import Callable, Sequence

import numpy as np
import scipy.optimize

import ctmrg_c4v
from tenferro_py.models.cli import plain_number


class UsageError(Exception):
    """A bad command-line argument (until this example moves onto models.cli's parser)."""


def number_argument(name, text, kind, allowed, ok):
    try:
        value = plain_number(text, kind)
    except ValueError:
        raise UsageError(f"{name} must be {allowed}, got {text!r}") from None
    if not ok(value):
        raise UsageError(f"{name} must be {allowed}, got {text!r}")
    return value

import tenferro_py as tf
from tenferro_py import CpuEngine, EagerRuntime, EagerSession, EagerTensor, Tensor
from tenferro_py.fixed_point import FixedPoint, FixedPointError, FixedPointSolution

PHYSICAL = 2
NOISE = 0.1
"""Size of the random entries added to the Néel state at the start. The Néel state is a stationary
point of E, and near it the environment's spectrum falls off as powers of the noise: at 1e-2 and
χ = 16 its last values are rounding errors whose eigenvectors never settle, and CTMRG does not
converge; from 3e-2 it does (0.1 was tried with seeds 0 to 5)."""
CTMRG_TOL = 1e-11
"""CTMRG stops when C and T change by at most this (relative, element by element): the gradient
is that of the fixed point, so its error follows the environment's."""
CTMRG_MAXITER = 1000
"""The most CTMRG steps per evaluation (near the D = 3 optimum ~160 are needed at χ = 32, ~500 at χ = 48)."""
FAILED_TRIAL_ENERGY = 1.0
"""What a line search's trial point where CTMRG does not converge counts as: above every state's
energy per site (at most 2 × 1/4, the largest eigenvalue of h), so the line search steps back."""
Environment = tuple[EagerTensor, EagerTensor]
"""(C, T): the corner matrix C[α, β] (χ × χ) and the edge tensor T[α, i, β] (χ × D² × χ) of ctmrg_c4v."""
SAVE_FORMAT = "ipeps_heisenberg/1"


def bond_hamiltonian() -> np.ndarray:
    """h[p1, p2, q1, q2] = ⟨p1 p2| S_1·S_2 |q1 q2⟩ with site 2's spin rotated by π about y.

    Sx → −Sx and Sz → −Sz on site 2 give −Sx⊗Sx + Sy⊗Sy − Sz⊗Sz, real because
    Sy⊗Sy = −(J/2)⊗(J/2) with the real J = i σy. Index 0 is spin up.
    """
    sx = np.array([[0.0, 0.5], [0.5, 0.0]])
    sz = np.array([[0.5, 0.0], [0.0, -0.5]])
    j_half = np.array([[0.0, 0.5], [-0.5, 0.0]])  # i Sy
    h = -np.kron(sx, sx) - np.kron(j_half, j_half) - np.kron(sz, sz)
    return h.reshape(PHYSICAL, PHYSICAL, PHYSICAL, PHYSICAL)


def c4v_basis(bond: int) -> np.ndarray:
    """An orthonormal basis B[k, u, l, d, r] of the C4v-symmetric tensors of four bonds of dimension ``bond``.

    C4v permutes the four bond positions (u, l, d, r) as the square's rotations and
    reflections do; B[k] is the normalised indicator of the k-th orbit of index tuples,
    orbits ordered by their smallest tuple, so k = 0 is the orbit of (0, 0, 0, 0).
    """
    rotation, reflection = (1, 2, 3, 0), (0, 3, 2, 1)  # (u,l,d,r) → (l,d,r,u); l ↔ r
    group = [(0, 1, 2, 3)]
    for g in group:
        for h in (rotation, reflection):
            composed = tuple(g[i] for i in h)
            if composed not in group:
                group.append(composed)
    orbits: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for index in itertools.product(range(bond), repeat=4):
        key = min(tuple(index[i] for i in g) for g in group)
        orbits.setdefault(key, []).append(index)
    basis = np.zeros((len(orbits), bond, bond, bond, bond))
    for k, key in enumerate(sorted(orbits)):
        members = set(orbits[key])
        for index in members:
            basis[(k, *index)] = 1.0 / math.sqrt(len(members))
    return basis


def parameter_count(bond: int) -> int:
    """The length of θ at bond dimension ``bond``: the physical dimension times the C4v orbits."""
    return PHYSICAL * c4v_basis(bond).shape[0]


def parameters_of(site: np.ndarray) -> np.ndarray:
    """θ of a C4v-symmetric site tensor a[p, u, l, d, r] (its projection on the basis, θ[p, k] row-major)."""
    basis = c4v_basis(site.shape[1])
    return np.einsum("puldr,kuldr->pk", site, basis).reshape(-1)


def site_tensor(s: EagerSession, theta: EagerTensor, basis: np.ndarray) -> EagerTensor:
    """a[p, u, l, d, r] = Σ_k θ[p, k] B[k, u, l, d, r] / ‖θ‖: E(θ) does not depend on θ's scale."""
    norm = s.sqrt(s.reduce_sum(s.mul(theta, theta)))
    unit = s.div(theta, s.broadcast_in_dim(norm, theta.shape, ()))
    coefficients = s.reshape(unit, (PHYSICAL, basis.shape[0]), order="C")
    return s.einsum([coefficients, Tensor.from_numpy(basis)], "pk,kuldr->puldr")


def double_layer(s: EagerSession, site: EagerTensor) -> EagerTensor:
    """A[u, l, d, r] = Σ_p a[p, u, l, d, r] a[p, u', l', d', r'], each ket–bra pair fused (ket fastest)."""
    bond = site.shape[1]
    pairs = s.einsum([site, site], "puldr,pvmes->uvlmders")
    return s.reshape(pairs, (bond * bond,) * 4)


def open_double_layer(s: EagerSession, site: EagerTensor) -> EagerTensor:
    """O[p, p', u, l, d, r] = a[p, u, l, d, r] a[p', u', l', d', r'] with A's fusion: the physical legs left open."""
    bond = site.shape[1]
    pairs = s.einsum([site, site], "puldr,qvmes->pquvlmders")
    return s.reshape(pairs, (PHYSICAL, PHYSICAL) + (bond * bond,) * 4)


def bond_energy(s: EagerSession, env: Environment, site: EagerTensor) -> EagerTensor:
    """⟨h⟩ on a horizontal bond: the two-site reduced density matrix in the environment (C, T), traced with h.

    The network is 4 C, 6 T and the two sites with their physical legs open (O), divided by
    the same network closed (its trace). The left half, C T T C T around O, is contracted
    once: the right half is its mirror image (a and the environment are reflection
    symmetric), so ρ[p1, p1', p2, p2'] = Σ half[z, p1, p1', k, q] half[z, p2, p2', k, q].
    """
    corner, edge = env
    half = s.einsum([corner, edge, edge, corner, edge, open_double_layer(s, site)],
                    "xy,yuz,xlw,wv,vdq,pculdr->zpcrq")
    rho = s.einsum([half, half], "zpckq,zPCkq->pcPC")
    weighted = s.einsum([rho, Tensor.from_numpy(bond_hamiltonian())], "pcPC,cCpP->")
    trace = s.einsum([rho], "ppPP->")
    return s.div(weighted, trace)


def energy_per_site(s: EagerSession, env: Environment, site: EagerTensor) -> EagerTensor:
    """E = 2⟨h⟩: two bonds per site, the vertical one equal to the horizontal one by C4v."""
    return s.scale_real(bond_energy(s, env, site), 2.0)


def initial_parameters(bond: int, seed: int) -> np.ndarray:
    """θ of the Néel state (every spin up in the rotated frame, a D = 1 product state padded by
    zeros) plus NOISE × a seeded standard normal in every entry beyond D = 1."""
    site = np.zeros((PHYSICAL,) + (bond,) * 4)
    site[0, 0, 0, 0, 0] = 1.0
    theta = parameters_of(site).reshape(PHYSICAL, -1)
    noise = NOISE * np.random.default_rng(seed).standard_normal(theta.shape)
    noise[:, 0] = 0.0  # the D = 1 entries: the orbit of (0, 0, 0, 0)
    return (theta + noise).reshape(-1)


class VariationalEnergy:
    """E(θ) and dE/dθ at bond dimension ``bond`` and environment dimension ``chi``.

    Each evaluation runs CTMRG to a change of at most CTMRG_TOL, then differentiates the fixed
    point. It starts from ``warm_start``: the first evaluation's environment (which starts from
    ctmrg_c4v.initial_environment), until the caller moves it; ``optimise`` moves it to the
    environment of each accepted iterate, so every trial point of a line search starts from the
    same place. Starting from the last trial point instead is not safe: CTMRG at finite χ can
    have more than one fixed point, and after a long trial step and back the iteration can stay
    on another one (at D = 3, χ = 32 near the optimum, one 1.2e-5 higher in E), so that E would
    depend on the path and L-BFGS would stop on the jump. A warm start that does not converge
    falls back to ctmrg_c4v.initial_environment.
    """

    def __init__(self, bond: int, chi: int, engine: CpuEngine | None = None):
        self.bond, self.chi = bond, chi
        self.basis = c4v_basis(bond)
        self.engine = engine if engine is not None else CpuEngine.serial()
        self.fixed_point = FixedPoint(self._step, tol=CTMRG_TOL, maxiter=CTMRG_MAXITER)
        self.warm_start: tuple[Tensor, Tensor] | None = None
        self.environment: tuple[Tensor, Tensor] | None = None  # the last evaluation's fixed point

    def _step(self, s: EagerSession, env: Environment, theta: EagerTensor) -> Environment:
        """One CTMRG step of the double layer of θ's site tensor: the map whose fixed point is differentiated."""
        return ctmrg_c4v.ctmrg_step_signed(s, env, double_layer(s, site_tensor(s, theta, self.basis)), self.chi)

    def _energy(self, s: EagerSession, env: Environment, theta: EagerTensor) -> EagerTensor:
        """The readout: E per site at the fixed point (C, T) and θ."""
        return energy_per_site(s, env, site_tensor(s, theta, self.basis))

    def fresh_environment(self, theta: np.ndarray) -> tuple[Tensor, Tensor]:
        """ctmrg_c4v's initial environment of θ's double layer."""
        rt = EagerRuntime()
        with rt.no_grad():
            bulk = rt.with_eager_session(self.engine, lambda s: double_layer(
                s, site_tensor(s, s.constant_from(Tensor.from_numpy(theta)), self.basis)))
        return ctmrg_c4v.initial_environment(bulk.value().to_numpy(), self.chi)

    def solve(self, theta: np.ndarray) -> FixedPointSolution:
        """The CTMRG fixed point at θ (a FixedPointSolution) from ``warm_start``; FixedPointError if it fails."""
        theta_t = Tensor.from_numpy(np.asarray(theta, dtype=np.float64))
        solution = None
        if self.warm_start is not None:
            try:
                solution = self.fixed_point.solve(theta_t, self.warm_start, engine=self.engine)
            except FixedPointError:
                solution = None
        if solution is None:
            solution = self.fixed_point.solve(theta_t, self.fresh_environment(theta), engine=self.engine)
        corner, edge = solution.x
        self.environment = (corner, edge)
        if self.warm_start is None:
            self.warm_start = self.environment
        return solution

    def energy(self, theta: np.ndarray) -> float:
        """E(θ) per site."""
        return self.solve(theta).value(self._energy)

    def energy_and_gradient(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """(E(θ), dE/dθ) as float64, the gradient by implicit differentiation of the CTMRG fixed point."""
        energy, gradient = self.solve(theta).value_and_grad(self._energy)
        return energy, gradient.to_numpy()


# --- the command line ---------------------------------------------------------------------------

OPTIONS = {"--D": "D", "--chi": "chi", "--seed": "seed", "--maxiter": "maxiter", "--save": "save", "--load": "load"}
DEFAULTS = {"D": 2, "chi": 16, "seed": 0, "maxiter": 100, "save": None, "load": None}


def parse_args(argv: Sequence[str]) -> dict:
    """The settings from ``--name value`` or ``--name=value`` options (UsageError when one is bad).

    The result has DEFAULTS' keys, and "given": the names set on the command line.
    """
    out: dict = dict(DEFAULTS, given=set())
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, has_value, value = arg.partition("=")
        if name not in OPTIONS:
            raise UsageError(f"unknown argument {arg!r}; allowed: --help, {', '.join(o + ' VALUE' for o in OPTIONS)}")
        if not has_value:
            if not args:
                raise UsageError(f"{name} needs a value")
            value = args.pop(0)
        key = OPTIONS[name]
        if key in ("save", "load"):
            if not value:
                raise UsageError(f"{name} needs a file name")
            out[key] = value
        else:
            least = 0 if key == "seed" else 1
            out[key] = number_argument(name, value, int, f"an integer >= {least}", lambda v, least=least: v >= least)
        out["given"].add(key)
    if out["save"] is not None:
        check_writable(out["save"])
    return out


def check_writable(path: str) -> None:
    """UsageError unless ``path`` can be (re)written by ``save_state``: its directory exists and is writable."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(directory) or not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"--save {path!r}: cannot write a file there")


def save_state(path: str, state: dict) -> None:
    """Write ``state`` as JSON to ``path`` atomically: a temporary file in the same directory,
    flushed and fsynced, then renamed over ``path``, so ``path`` is always a whole file."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(state, file)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    directory_handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_handle)  # the rename itself survives a crash
    finally:
        os.close(directory_handle)


def load_state(path: str) -> dict:
    """The state ``save_state`` wrote to ``path``, checked field by field (UsageError naming what is wrong)."""
    where = f"--load {path!r}"
    try:
        with open(path, encoding="utf-8") as file:
            state = json.load(file)
    except OSError as err:
        raise UsageError(f"{where}: cannot read it ({err.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"{where}: not a file written by --save (damaged or not JSON: {err})") from None
    if not isinstance(state, dict) or state.get("format") != SAVE_FORMAT:
        raise UsageError(f"{where}: not a file written by --save (no \"format\": {SAVE_FORMAT!r})")

    def whole(key: str, least: int) -> int:
        value = state.get(key)
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= least):
            raise UsageError(f"{where}: {key} must be an integer >= {least}, got {value!r}")
        return value

    bond = whole("D", 1)
    for key, least in (("chi", 1), ("seed", 0), ("iterations", 0)):
        whole(key, least)
    theta = state.get("theta")
    count = parameter_count(bond)
    if not (isinstance(theta, list) and len(theta) == count
            and all(isinstance(v, float) and math.isfinite(v) for v in theta) and any(theta)):
        raise UsageError(f"{where}: theta must be {count} finite numbers, not all zero (D={bond})")
    energy = state.get("energy")
    if not (isinstance(energy, float) and math.isfinite(energy)):
        raise UsageError(f"{where}: energy must be a finite number, got {energy!r}")
    return state


IterationFn = Callable[[np.ndarray, float, np.ndarray], None]


def optimise(
    model: VariationalEnergy, theta: np.ndarray, maxiter: int, on_iteration: IterationFn
) -> scipy.optimize.OptimizeResult:
    """L-BFGS on E(θ) from ``theta``, at most ``maxiter`` iterations; ``on_iteration(θ, E, dE/dθ)`` after each.

    It stops when an iteration lowers E by less than a relative 1e-12, which is still above the
    noise that the CTMRG's tolerance leaves in E (~1e-14): at D = 2, χ = 16 the last digits then
    settle at −0.66023109348 from every seed tried (35–45 iterations).

    A trial point of a line search where CTMRG does not converge counts as FAILED_TRIAL_ENERGY
    with a zero gradient, so the line search steps back instead of the run ending. Such points
    exist: L-BFGS's first trial step has length ‖θ‖, and where the state it reaches has exactly
    degenerate corner eigenvalues (seen at D = 3, χ = 48 on resuming a χ = 32 optimum), the
    eigenvectors, hence C and T, never settle. At ``theta`` itself the FixedPointError propagates.
    """
    evaluated: dict[bytes, tuple[float, np.ndarray, tuple[Tensor, Tensor] | None]] = {}
    first_call = True  # L-BFGS evaluates ``theta`` first

    def energy_and_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal first_call
        at_start, first_call = first_call, False
        try:
            energy, gradient = model.energy_and_gradient(x)
        except FixedPointError:
            if at_start:
                raise
            return FAILED_TRIAL_ENERGY, np.zeros_like(x)
        evaluated[x.tobytes()] = energy, gradient, model.environment
        return energy, gradient

    def callback(x: np.ndarray) -> None:
        energy, gradient, environment = evaluated[x.tobytes()]
        model.warm_start = environment
        evaluated.clear()
        on_iteration(x, energy, gradient)

    return scipy.optimize.minimize(energy_and_gradient, theta, jac=True, method="L-BFGS-B", callback=callback,
                                   options={"maxiter": maxiter, "ftol": 1e-12, "gtol": 1e-8})


def main(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    try:
        cfg = parse_args(argv)
        if cfg["load"] is not None:
            state = load_state(cfg["load"])
            for key in ("D", "seed"):
                if key in cfg["given"] and cfg[key] != state[key]:
                    raise UsageError(f"--load {cfg['load']!r}: saved with {key}={state[key]}, but --{key} "
                                     f"{cfg[key]} was given")
                cfg[key] = state[key]
            theta, done = np.array(state["theta"]), state["iterations"]
            start = f"{cfg['load']} (iteration {done})"
        else:
            theta, done, start = initial_parameters(cfg["D"], cfg["seed"]), 0, "Néel + noise"
    except UsageError as err:
        print(f"ipeps_heisenberg.py: {err}", file=sys.stderr)
        return 2
    bond, chi = cfg["D"], cfg["chi"]
    print(f"tenferro_py {tf.__version__} iPEPS Heisenberg D={bond} chi={chi} seed={cfg['seed']} "
          f"parameters={theta.size} start={start}")
    print("iter energy |grad| seconds", flush=True)
    model = VariationalEnergy(bond, chi)
    iterations, clock = done, time.perf_counter()

    def on_iteration(x: np.ndarray, energy: float, gradient: np.ndarray) -> None:
        nonlocal iterations, clock
        iterations, now = iterations + 1, time.perf_counter()
        print(f"{iterations:4d} {energy:.10f} {np.linalg.norm(gradient):.1e} {now - clock:.2f}", flush=True)
        clock = now
        if cfg["save"] is not None:
            save_state(cfg["save"], {"format": SAVE_FORMAT, "D": bond, "chi": chi, "seed": cfg["seed"],
                                     "iterations": iterations, "energy": energy, "theta": x.tolist()})

    try:
        result = optimise(model, theta, cfg["maxiter"], on_iteration)
    except FixedPointError as err:
        print(f"ipeps_heisenberg.py: stopped after iteration {iterations}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        saved = f", saved in {cfg['save']}" if cfg["save"] is not None and iterations > done else ""
        print(f"ipeps_heisenberg.py: interrupted after iteration {iterations}{saved}", file=sys.stderr)
        return 130
    print(f"stop: {result.message}")
    print(f"energy={result.fun:.10f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
