"""A uniform MPS of the transverse-field Ising chain, written once in NumPy style, run by
tenferro_py.numpy and by JAX's jit: the small-tensor case, hundreds of ops on D² × D² matrices.

:func:`energy` takes the array module ``xp`` (tnp or jax.numpy) and its ``eig``: A[D, 2, D] gives the
transfer matrix E = Σ_s A_s ⊗ A_s; its dominant right and left eigenvectors come either from
``eig`` (of E and of Eᵀ, the largest |w| picked by argmax) or from ``--steps`` power iterations;
the energy per bond of H = −Σ ZZ − g Σ X is lᵀ(AA h AA)r / (λ² lᵀr). Per D and variant, timed
interleaved on one core (bench/figures.py):

- (r)  ``tnp.value_and_grad``: its calls replay the recorded kernels (docs/traced.md);
- (e)  the same with ``replay=False``: every call runs the tape;
- (j)  ``jax.jit(jax.value_and_grad)``, eig by ``lax.linalg.eig(enable_eigvec_derivs=True)``.

Compile time apart: JAX's first call, and our first two (recorded) calls. Checks: (r) equal to (e)
bit for bit, and to JAX to 1e-9 relative. ``--lbfgs`` optimises the energy by SciPy's L-BFGS-B at
D = 16 from one random start for both, to the exact TFIM energy within 1e-6, and reports the wall
time of each, compile included.

Usage: python bench/umps.py [--sizes 8:eig 16:eig 8:power] [--steps 20] [--g 0.5] [--repeats 7]
                            [--calls 20] [--lbfgs]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import figures  # noqa: F401  (first: one core and one XLA thread for everyone)
import dispatch
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
import scipy.optimize

import tenferro_py.numpy as tnp

jax.config.update("jax_enable_x64", True)


def bond_hamiltonian(g: float) -> np.ndarray:
    """h[s, t, u, v] of −ZZ − g (X⊗1 + 1⊗X)/2 on one bond."""
    x, z, one = np.array([[0.0, 1], [1, 0]]), np.diag([1.0, -1]), np.eye(2)
    return (-np.kron(z, z) - 0.5 * g * (np.kron(x, one) + np.kron(one, x))).reshape(2, 2, 2, 2)


def exact_energy(g: float) -> float:
    """The TFIM ground-state energy per site, −(1/π) ∫₀^π √(1 + g² + 2g cos k) dk."""
    return -scipy.integrate.quad(lambda k: np.sqrt(1 + g * g + 2 * g * np.cos(k)), 0, np.pi, epsabs=1e-14)[0] / np.pi


def energy(xp, eig, a, h, variant: str, steps: int):
    """The energy per bond of the uMPS a[D, 2, D] (see the module's docstring)."""
    d = a.shape[0]
    e = xp.einsum("asb,csd->acbd", a, a).reshape(d * d, d * d)
    if variant == "eig":
        w, vr = eig(e)
        i = xp.argmax(xp.abs(w))
        lam, r = xp.real(w[i]), xp.real(vr[:, i])
        wl, vl = eig(e.T)
        l = xp.real(vl[:, xp.argmax(xp.abs(wl))])
    else:
        r = l = xp.ones(d * d)
        for _ in range(steps):
            r = e @ r
            r = r / xp.linalg.norm(r)
            l = l @ e
            l = l / xp.linalg.norm(l)
        lam = (l @ (e @ r)) / (l @ r)
    aa = xp.einsum("asb,btc->astc", a, a)
    left, right = l.reshape(d, d), r.reshape(d, d)
    num = xp.einsum("ac,astb,stuv,cuvd,bd->", left, aa, h, aa, right)
    return num / (lam**2 * xp.sum(left * right))


def jax_eig(m):
    return jax.lax.linalg.eig(m, compute_left_eigenvectors=False, enable_eigvec_derivs=True)


def programs(h: np.ndarray, variant: str, steps: int) -> dict:
    ours = lambda a: energy(tnp, tnp.linalg.eig, a, h, variant, steps)  # noqa: E731
    theirs = jax.jit(jax.value_and_grad(lambda a: energy(jnp, jax_eig, a, h, variant, steps)))
    return {"r": tnp.value_and_grad(ours), "e": tnp.value_and_grad(ours, replay=False),
            "j": lambda a: jax.block_until_ready(theirs(a))}


def timed(size: int, variant: str, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, 2, size)) / np.sqrt(2 * size)
    runs = programs(bond_hamiltonian(args.g), variant, args.steps)
    firsts = {}
    for name in ("j", "r"):  # compile: JAX's trace and compile; our two recorded calls
        start = time.perf_counter()
        for _ in range(1 if name == "j" else 2):
            runs[name](a)
        firsts[name] = time.perf_counter() - start
    (vr, gr), (ve, ge), (vj, gj) = (runs[k](a) for k in "rej")
    bitwise = vr.tobytes() == ve.tobytes() and gr.tobytes() == ge.tobytes()
    close = abs(vr - vj) <= 1e-9 * abs(vj) and np.max(np.abs(gr - gj)) <= 1e-9 * np.max(np.abs(gj))
    calls = args.calls

    def loop(run):
        return lambda: [run(a) for _ in range(calls)]

    med = figures.interleaved({k: loop(run) for k, run in runs.items()}, args.repeats)
    ms = {k: med[k][0] / calls * 1e3 for k in med}
    label = f"D={size} {variant}" + (f"({args.steps})" if variant == "power" else "")
    print(f"{label}: ms per value_and_grad r={ms['r']:.3f} e={ms['e']:.3f} j={ms['j']:.3f} | "
          f"r/j={ms['r'] / ms['j']:.3f} e/j={ms['e'] / ms['j']:.3f} r/e={ms['r'] / ms['e']:.3f} | compile: "
          f"jax {firsts['j']:.2f} s, ours (2 recorded calls) {firsts['r'] * 1e3:.1f} ms | replayed "
          f"{runs['r'].traced.replayed_calls} | E={float(vr):.12f} | r==e bitwise {'ok' if bitwise else 'MISMATCH'}, "
          f"|r-j| {'ok' if close else 'MISMATCH'}")
    if not (bitwise and close):
        sys.exit(1)


def lbfgs(args: argparse.Namespace, size: int = 16) -> None:
    """L-BFGS-B from one random start, to within 1e-6 of the exact energy: wall time, compile included."""
    h, target = bond_hamiltonian(args.g), exact_energy(args.g)
    rng = np.random.default_rng(1)
    start = rng.standard_normal(size * 2 * size) / np.sqrt(2 * size)
    ours = tnp.value_and_grad(lambda a: energy(tnp, tnp.linalg.eig, a.reshape(size, 2, size), h, "eig", 0))
    theirs = jax.jit(jax.value_and_grad(lambda a: energy(jnp, jax_eig, a.reshape(size, 2, size), h, "eig", 0)))
    for name, fun in (("ours", lambda x: tuple(map(np.asarray, ours(x)))),
                      ("jax", lambda x: tuple(map(np.asarray, theirs(x))))):
        hit, calls = [None], [0]

        def objective(x, fun=fun, hit=hit, calls=calls):
            calls[0] += 1
            value, grad = fun(x)
            if hit[0] is None and value - target < 1e-6:
                hit[0] = time.perf_counter() - begin
            return float(value), grad

        begin = time.perf_counter()
        result = scipy.optimize.minimize(objective, start, jac=True, method="L-BFGS-B",
                                         options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-10})
        total = time.perf_counter() - begin
        reached = f"{hit[0]:.2f} s" if hit[0] is not None else "never"
        print(f"L-BFGS D={size} g={args.g} {name}: E-E_exact {result.fun - target:.2e} after {calls[0]} evaluations "
              f"in {total:.2f} s; within 1e-6 at {reached}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["8:eig", "16:eig", "8:power", "16:power"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--g", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--lbfgs", action="store_true")
    args = parser.parse_args()
    print(dispatch.machine_line())
    for spec in args.sizes:
        size, variant = spec.split(":")
        timed(int(size), variant, args)
    if args.lbfgs:
        lbfgs(args)


if __name__ == "__main__":
    main()
