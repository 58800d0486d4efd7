"""quimb networks differentiated by this library, side by side with quimb's autograd and JAX backends.

Three harnesses (issue 23), each printing a header (date, versions, commit) and checks that print
MISMATCH (exit status 1) when a number disagrees:

    python bench/quimb_interop.py [--repeats 5] [--mps 12 8] [--peps 4 2]
        value and gradient of the MPS energy <psi|H|psi>/<psi|psi> (MPS_rand_state, MPO_ham_heis: L, bond)
        and of a 4x4 PEPS norm contracted exactly (side, bond), through quimb on tnp arrays (t), on
        autograd (g) and on JAX, jit (j: steady; jc: the first call, with tracing and compilation);
        one thread everywhere; medians of interleaved rounds after one warm-up each.
    python bench/quimb_interop.py --planner [--peps 6 3] [--repeats 3]
        an exact PEPS norm (bond 3, physical 2) by tnp.einsum planned by opt_einsum's default ('auto')
        and by cotengra's HyperOptimizer: each planner's reported cost, both paths' cost by
        opt_einsum's count, search time, value-and-gradient time; the gradients agree.
    python bench/quimb_interop.py --dmrg [--mps 16 16] [--max-evals 40000] [--backends tenferro_py]
        quimb's TNOptimizer (L-BFGS-B) on the Heisenberg chain until its energy is within 1e-8 of
        the optimum of the bond's manifold (DMRG1 sweeps after quimb's DMRG2, converged), so within
        1e-8 of quimb's DMRG energy (DMRG2), or below it (DMRG2's truncation stops above the optimum).

Neither quimb, cotengra, autograd nor JAX is a dependency of the library: what is not importable is
skipped with a note (quimb, autoray and cotengra are its ``interop`` extra).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
ROOT = Path(__file__).resolve().parent.parent
warnings.simplefilter("ignore")  # cotengra's notes on optional planners it cannot import

import numpy as np  # noqa: E402
import opt_einsum  # noqa: E402
import trg  # noqa: E402  (bench/trg.py: the harnesses' source_state)
from threadpoolctl import threadpool_limits  # noqa: E402

import tenferro_py.numpy as tnp  # noqa: E402

try:
    import quimb
    import quimb.tensor as qtn
except ImportError:
    sys.exit("bench/quimb_interop.py needs quimb (the interop extra: pip install '.[interop]')")

TOL = 1e-12


def optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def header(mode: str) -> None:
    versions = [f"{m.__name__} {m.__version__}" for m in (np, quimb, optional("cotengra"), optional("autoray"),
                                                         optional("jax")) if m is not None]
    print(f"# bench/quimb_interop.py {mode} {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} "
          f"python {platform.python_version()} {' '.join(versions)} nproc={os.cpu_count()}")
    print(f"# source: {trg.source_state('tenferro_py')}; XLA_FLAGS={os.environ.get('XLA_FLAGS')!r}", flush=True)


def with_arrays(tn, arrays):
    tn = tn.copy()
    for t, a in zip(tn, arrays):
        t.modify(data=a)
    return tn


def normalised(tn):
    return with_arrays(tn, [t.data / np.linalg.norm(t.data) for t in tn])


# --- value and gradient, side by side -----------------------------------------------------------


def runners(tn, loss) -> dict[str, Callable[[], tuple[float, list]]]:
    """(value, gradient) of loss(network holding the arrays): t (tnp), g (autograd), j (JAX jit);
    gradients of complex arrays as ∂/∂Re + i ∂/∂Im (autograd's and JAX's conjugated, as quimb does)."""
    arrays = [t.data for t in tn]
    argnums = tuple(range(len(arrays)))
    tnp_vg = tnp.value_and_grad(lambda *xs: loss(with_arrays(tn, xs)), argnums)
    out = {"t": lambda: tnp_vg(*arrays)}
    autograd = optional("autograd")
    if autograd is not None:
        ag = autograd.value_and_grad(lambda xs: loss(with_arrays(tn, xs)))

        def run_autograd():
            with threadpool_limits(1, "blas"):
                value, grads = ag(arrays)
            return value, [np.conj(g) for g in grads]

        out["g"] = run_autograd
    jax = optional("jax")
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        jitted = jax.jit(jax.value_and_grad(lambda xs: loss(with_arrays(tn, xs))))
        jax_arrays = [jax.numpy.asarray(a) for a in arrays]

        def run_jax():
            with threadpool_limits(1, "blas"):
                value, grads = jax.block_until_ready(jitted(jax_arrays))
            return float(value), [np.conj(np.asarray(g)) for g in grads]

        out["j"] = run_jax
    return out


def agreement(reference, other) -> tuple[float, float]:
    """(relative difference of the values, largest gradient difference over the largest entry)."""
    (v, gs), (w, hs) = reference, other
    scale = max(np.max(np.abs(g)) for g in gs)
    return abs(float(v) - float(w)) / abs(float(v)), max(np.max(np.abs(g - h)) for g, h in zip(gs, hs)) / scale


def side_by_side(args: argparse.Namespace) -> int:
    header("value and gradient")
    L, bond = args.mps
    side, peps_bond = args.peps
    H = qtn.MPO_ham_heis(L)
    cases = {
        f"MPS energy L={L} bond={bond}": (qtn.MPS_rand_state(L, bond, seed=1),
                                          lambda p: qtn.expec_TN_1D(p.H, H, p) / (p.H @ p)),
        f"PEPS {side}x{side} bond={peps_bond} norm, exact": (
            normalised(qtn.PEPS.rand(side, side, peps_bond, seed=2)),
            lambda p: p.make_norm().contract(all, optimize="auto-hq")),
    }
    print("# t = tenferro_py.numpy, g = autograd, j = JAX jit (steady), jc = JAX's first call (trace + compile "
          "+ run); ms are medians", flush=True)
    ok = True
    for name, (tn, loss) in cases.items():
        run = runners(tn, loss)
        first = {}
        results = {}
        for key, f in run.items():
            start = time.perf_counter()
            results[key] = f()
            first[key] = time.perf_counter() - start
        times: dict[str, list[float]] = {key: [] for key in run}
        for _ in range(args.repeats):
            for key, f in run.items():
                start = time.perf_counter()
                f()
                times[key].append(time.perf_counter() - start)
        med = {key: statistics.median(ts) for key, ts in times.items()}
        cells = [f"{key} {1e3 * med[key]:.1f}" for key in run]
        if "j" in run:
            cells.append(f"jc {1e3 * first['j']:.0f}")
        ratios = [f"t/{key} {med['t'] / med[key]:.2f}" for key in run if key != "t"]
        checks = []
        for key in run:
            if key != "t":
                dv, dg = agreement(results["t"], results[key])
                good = dv <= TOL and dg <= TOL
                ok &= good
                checks.append(f"{key}: value {dv:.0e} grad {dg:.0e}" + ("" if good else " MISMATCH"))
        print(f"{name}: ms " + ", ".join(cells) + " | " + ", ".join(ratios) + " | " + "; ".join(checks), flush=True)
    for missing in {"g": "autograd", "j": "jax"}.items():
        if optional(missing[1]) is None:
            print(f"# ({missing[0]}) skipped: {missing[1]} is not importable")
    return 0 if ok else 1


# --- planners -----------------------------------------------------------------------------------


def peps_norm(side: int, bond: int, phys: int, seed: int = 3) -> tuple[str, list[np.ndarray]]:
    """Subscripts (letters, as numpy.einsum takes) and ket arrays of <psi|psi> for a random side x side
    PEPS; the bra (conjugated ket) is the second half of the operands."""
    letters = iter(c for c in map(chr, range(0x41, 0x3000)) if c.isalpha())
    bonds: dict = {}
    terms: dict[str, list[str]] = {"ket": [], "bra": []}
    shapes = []
    for r in range(side):
        for c in range(side):
            near = [(r + dr, c + dc) for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
                    if 0 <= r + dr < side and 0 <= c + dc < side]
            physical = next(letters)
            for layer in terms:
                terms[layer].append(physical + "".join(bonds.setdefault((min((r, c), n), max((r, c), n), layer),
                                                                        next(letters)) for n in near))
            shapes.append((phys,) + (bond,) * len(near))
    rng = np.random.default_rng(seed)
    return ",".join(terms["ket"] + terms["bra"]) + "->", [rng.standard_normal(s) / np.sqrt(np.prod(s)) for s in shapes]


def planners(args: argparse.Namespace) -> int:
    header("planner")
    ctg = optional("cotengra")
    if ctg is None:
        print("# skipped: cotengra is not importable")
        return 0
    side, bond = args.peps
    subscripts, ket = peps_norm(side, bond, 2)
    shapes = [k.shape for k in ket] * 2
    print(f"# {side}x{side} PEPS norm, bond {bond}, physical 2, exact: {2 * len(ket)} operands", flush=True)
    start = time.perf_counter()
    default = opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize="auto")[1]
    oe_search = time.perf_counter() - start
    planner = ctg.HyperOptimizer(max_repeats=args.max_repeats, progbar=False)
    inputs, output = subscripts.split("->")[0].split(","), subscripts.split("->")[1]
    sizes = {c: n for sub, s in zip(inputs, shapes) for c, n in zip(sub, s)}
    start = time.perf_counter()
    tree = planner.search(inputs, output, sizes)
    ctg_search = time.perf_counter() - start
    ctg_count = opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=list(tree.get_path()))[1]
    print(f"opt_einsum 'auto': cost {default.opt_cost:.3e} (opt_einsum's count), largest intermediate "
          f"{default.largest_intermediate:.3e}, search {oe_search:.2f} s")
    print(f"cotengra HyperOptimizer: cost {tree.contraction_cost():.3e} (cotengra's count: multiply-adds), "
          f"{ctg_count.opt_cost:.3e} (opt_einsum's count), largest intermediate {2 ** tree.contraction_width():.3e}, "
          f"search {ctg_search:.2f} s ({args.max_repeats} trials)", flush=True)
    argnums = tuple(range(len(ket)))
    results, med = {}, {}
    for name, optimize in (("auto", None), ("cotengra", planner)):
        f = tnp.value_and_grad(lambda *k: tnp.einsum(subscripts, *k, *[tnp.conj(x) for x in k], optimize=optimize),
                               argnums)
        results[name] = f(*ket)  # the warm-up plans once (cached per subscripts, shapes and planner)
        ts = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            f(*ket)
            ts.append(time.perf_counter() - start)
        med[name] = statistics.median(ts)
    dv, dg = agreement(results["auto"], results["cotengra"])
    good = dv <= TOL and dg <= TOL
    print(f"value and gradient through tnp.einsum: auto {med['auto']:.2f} s, cotengra {med['cotengra']:.2f} s "
          f"(ratio {med['auto'] / med['cotengra']:.1f}); agreement value {dv:.0e} grad {dg:.0e}"
          + ("" if good else " MISMATCH"))
    return 0 if good else 1


# --- TNOptimizer to the DMRG energy -----------------------------------------------------------------


def dmrg_energies(H, bond: int) -> tuple[float, float]:
    """(quimb's DMRG energy: two-site sweeps; the optimum of the bond's manifold: one-site sweeps
    from there at the fixed bond, converged, below the first by the two-site truncation's loss)."""
    two = qtn.DMRG2(H, bond_dims=[bond])
    two.solve(tol=1e-13, max_sweeps=40, verbosity=0)
    one = qtn.DMRG1(H, bond_dims=[bond], p0=two.state)
    one.solve(tol=1e-14, max_sweeps=20, verbosity=0)
    return float(two.energy), float(one.energy)


def dmrg(args: argparse.Namespace) -> int:
    header("TNOptimizer")
    from tenferro_py.numpy import quimb_handler

    quimb_handler.register()
    if "jax" in args.backends:
        optional("jax").config.update("jax_enable_x64", True)  # else float32, which stops near 1e-6
    L, bond = args.mps
    H = qtn.MPO_ham_heis(L)
    start = time.perf_counter()
    target, optimum = dmrg_energies(H, bond)
    print(f"# Heisenberg chain L={L}, bond {bond}: quimb's DMRG (DMRG2) {target!r}, the bond's optimum (DMRG1 "
          f"after it) {optimum!r}, {time.perf_counter() - start:.1f} s; target: E - E_optimum < 1e-8", flush=True)
    ok = True
    for backend in args.backends:
        opt = qtn.TNOptimizer(qtn.MPS_rand_state(L, bond, seed=7), lambda p, H: qtn.expec_TN_1D(p.H, H, p) / (p.H @ p),
                              loss_constants={"H": H}, autodiff_backend=backend, progbar=False)
        start = time.perf_counter()
        while True:
            before = opt.loss  # inf before the first evaluation
            opt.optimize(args.chunk, tol=1e-16, maxcor=args.maxcor)
            print(f"{backend}: {opt._n} evaluations, E = {opt.loss!r}, E - E_DMRG = {opt.loss - target:.2e}, "
                  f"E - E_optimum = {opt.loss - optimum:.2e}, {time.perf_counter() - start:.0f} s", flush=True)
            reached = opt.loss - optimum < 1e-8  # then within 1e-8 of quimb's DMRG too, or below it
            if reached or opt._n >= args.max_evals or not opt.loss < before:
                break  # reached, out of evaluations, or a chunk that lowered nothing (scipy stopped for good)
        ok &= reached
        print(f"{backend}: {'reached' if reached else 'MISMATCH: did not reach'} the bond's optimum to 1e-8 in "
              f"{opt._n} evaluations, {time.perf_counter() - start:.0f} s", flush=True)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--planner", action="store_true", help="cotengra against opt_einsum's default path")
    mode.add_argument("--dmrg", action="store_true", help="TNOptimizer to quimb's DMRG energy")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mps", type=int, nargs=2, metavar=("L", "BOND"), default=None)
    parser.add_argument("--peps", type=int, nargs=2, metavar=("SIDE", "BOND"), default=None)
    parser.add_argument("--max-repeats", type=int, default=128, help="cotengra's trials")
    parser.add_argument("--max-evals", type=int, default=40000)
    parser.add_argument("--chunk", type=int, default=1000, help="evaluations between progress lines")
    parser.add_argument("--maxcor", type=int, default=50, help="L-BFGS-B's memory (scipy's default: 10)")
    parser.add_argument("--backends", nargs="+", default=["tenferro_py"], help="TNOptimizer's autodiff backends")
    args = parser.parse_args()
    if args.planner:
        args.peps = args.peps or [6, 3]
        return planners(args)
    if args.dmrg:
        args.mps = args.mps or [16, 16]
        return dmrg(args)
    args.mps, args.peps = args.mps or [12, 8], args.peps or [4, 2]
    return side_by_side(args)


if __name__ == "__main__":
    sys.exit(main())
