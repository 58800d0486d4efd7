"""The C4v iPEPS optimisation's CPU time per iteration and peak memory with the enlarged corner's full
and truncated (Krylov) eigh, and peps-torch's side by side (issue 25, item 5).

Every run is a fresh subprocess (its peak RSS, ru_maxrss, is its own; one BLAS thread), and the
rounds interleave the runs: per (D, χ) and round, ours with method "full", then with each of
--methods ("krylov" by default; "auto" too on request) (examples/ipeps_heisenberg.py's optimisation, tenferro_py.models.ipeps, from the Néel state plus
seed-0 noise, ITER L-BFGS iterations or fewer where it converges), then peps-torch when --peps-torch names a checkout: its
examples/j1j2/optim_j1j2_c4v.py with --j2 0 --omp_cores 1 --seed 0 at the same D, χ and iterations
(OMP_NUM_THREADS=1, torch.set_num_threads(1); its own start, CTMRG settings and observables per
epoch, unchanged). CPU s/iteration is the mean from the first iteration's end to the last's (the
first, with the CTMRG from scratch, is printed apart). Each method's energies after each
iteration must agree with the full eigh's to 1e-8 (else MISMATCH, exit status 1). Each run also
counts the enlarged corner's eigendecompositions and their CPU time; the full run's time outside
them bounds what any eigh could reach.

--corners D:χ[:ITER] times, on the converged environment of the state after ITER iterations (default
0: the start), LAPACK's full eigh of the enlarged corner against the truncated eigh of its χ + 1
leading pairs (the forward of a CTMRG step; min of 3): the crossover behind corner_cut.KRYLOV_FROM and
corner_cut.KRYLOV_UP_TO (tenferro_py.models).

Beside the ratios it prints bench/dispatch.py's machine line (the NumPy call cost and the GEMM
rate: this machine's speed at small and large calls), and writes everything, with the date, the
machine (lscpu, NumPy's BLAS), the commit and the command, to --out (default
bench/results/<date>T<time>-ipeps.md, the name bench/record.py gives).

Usage: python bench/ipeps.py [--sizes 2:16:10 3:32:5 4:64:3] [--rounds 2] [--methods krylov auto]
                             [--peps-torch DIR] [--corners 4:64:3 6:36] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# --- the runs, each in its own process ---------------------------------------------------------


class CornerEighs:
    """Counts the calls, and sums the CPU time, of eigendecompositions of n × n matrices (the enlarged
    corner's, n = χD²) made through the wrapped functions; a call inside another counts once."""

    def __init__(self, n: int):
        self.n, self.count, self.seconds, self.inside = n, 0, 0.0, False

    def wrap(self, module, name: str) -> None:
        inner = getattr(module, name)

        def timed(matrix, *args, **kwargs):
            if self.inside or tuple(matrix.shape) != (self.n, self.n):
                return inner(matrix, *args, **kwargs)
            self.inside, start = True, time.process_time()
            try:
                return inner(matrix, *args, **kwargs)
            finally:
                self.seconds += time.process_time() - start
                self.count += 1
                self.inside = False

        setattr(module, name, timed)

    def snapshot(self) -> tuple[int, float]:
        return self.count, self.seconds


def run_ours(bond: int, chi: int, iterations: int, method: str) -> dict:
    import numpy as np

    from tenferro_py import krylov_eigh
    from tenferro_py.models import ipeps

    eighs = CornerEighs(chi * bond * bond)
    eighs.wrap(np.linalg, "eigh")
    eighs.wrap(krylov_eigh, "truncated_eigh")
    model = ipeps.VariationalEnergy(bond, chi, method=method)
    stamps, energies, corner = [], [], []

    def on_iteration(x, energy, gradient) -> None:
        stamps.append(time.process_time())
        energies.append(energy)
        corner.append(eighs.snapshot())

    start = time.process_time()
    result = ipeps.optimise(model, ipeps.initial_parameters(bond, 0), iterations, on_iteration)
    return {"start": start, "stamps": stamps, "energies": energies, "evaluations": int(result.nfev),
            "corner": corner}


def run_peps_torch(checkout: str, bond: int, chi: int, iterations: int) -> dict:
    """peps-torch's optim_j1j2_c4v.py as its command line runs it, its epoch lines time-stamped."""
    import builtins
    import runpy
    import types

    from packaging import version  # its config.py asks pkg_resources, gone from setuptools >= 81
    sys.modules.setdefault("pkg_resources", types.SimpleNamespace(parse_version=version.parse))
    import torch

    torch.set_num_threads(1)
    eighs = CornerEighs(chi * bond * bond)  # its CTMRG's projectors: torch.linalg.eigh of the enlarged corner
    eighs.wrap(torch.linalg, "eigh")
    folder = os.path.join(checkout, "examples", "j1j2")
    os.chdir(folder)  # its modules come from PYTHONPATH, which spawn sets to this folder
    epochs: dict[int, tuple[float, float, tuple[int, float]]] = {}
    plain_print = builtins.print

    def stamped(*args, **kwargs) -> None:
        fields = " ".join(str(a) for a in args).split(",")
        if len(fields) > 2 and fields[0].strip().isdigit() and int(fields[0]) not in epochs:
            epochs[int(fields[0])] = (time.process_time(), float(fields[1]), eighs.snapshot())
        plain_print(*args, **kwargs)

    builtins.print = stamped
    prefix = os.path.join(tempfile.mkdtemp(prefix="peps_torch_"), "run")
    sys.argv = ["optim_j1j2_c4v.py", "--bond_dim", str(bond), "--chi", str(chi), "--j2", "0", "--seed", "0",
                "--opt_max_iter", str(iterations), "--omp_cores", "1", "--out_prefix", prefix]
    start = time.process_time()
    try:
        runpy.run_path("optim_j1j2_c4v.py", run_name="__main__")
    finally:
        builtins.print = plain_print
    done = [epochs[e] for e in sorted(epochs) if 1 <= e <= iterations]
    return {"start": start, "stamps": [t for t, _, _ in done], "energies": [e for _, e, _ in done],
            "evaluations": None, "corner": [c for _, _, c in done]}


def run_corner(bond: int, chi: int, iterations: int) -> dict:
    import numpy as np
    from threadpoolctl import threadpool_limits

    from tenferro_py import EagerRuntime, krylov_eigh
    from tenferro_py.models import ctmrg, ipeps

    model = ipeps.VariationalEnergy(bond, chi)
    theta = ipeps.initial_parameters(bond, 0)
    if iterations:
        theta = ipeps.optimise(model, theta, iterations).x
    environment = model.solve(theta).x
    rt = EagerRuntime()
    with rt.no_grad():
        corner = rt.with_eager_session(model.engine, lambda s: ctmrg.enlarged_corner(
            s, tuple(s.constant_from(t) for t in environment), s.constant_from(model.double_layer_of(theta))))
    m = corner.value().to_numpy()
    m = (m + m.T) * 0.5
    krylov_eigh.KRYLOV_FROM, krylov_eigh.KRYLOV_UP_TO = 1, 1.0  # the Krylov iteration, wherever

    def best(f) -> float:
        times = []
        for _ in range(3):
            start = time.process_time()
            f()
            times.append(time.process_time() - start)
        return min(times)

    with threadpool_limits(1, "blas"):
        magnitudes = np.sort(np.abs(np.linalg.eigvalsh(m)))[::-1]
        full, krylov = best(lambda: np.linalg.eigh(m)), best(lambda: krylov_eigh.truncated_eigh(m, chi + 1))
    return {"n": m.shape[0], "full": full, "krylov": krylov, "decay": magnitudes[chi - 1] / magnitudes[0],
            "ratio_at_cut": magnitudes[chi] / magnitudes[chi - 1]}


def child(argv: list[str]) -> int:
    kind, rest = argv[0], argv[1:]
    if kind == "ours":
        out = run_ours(int(rest[0]), int(rest[1]), int(rest[2]), rest[3])
    elif kind == "peps-torch":
        out = run_peps_torch(rest[0], int(rest[1]), int(rest[2]), int(rest[3]))
    else:
        out = run_corner(int(rest[0]), int(rest[1]), int(rest[2]))
    out["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out), flush=True)
    return 0


def spawn(args: list[str]) -> dict:
    """One child run in a fresh process; peps-torch's imports its example folder, as its command line would."""
    path = [os.path.join(args[1], "examples", "j1j2")] if args[0] == "peps-torch" else []
    env = dict(os.environ, **ONE_THREAD, PYTHONPATH=os.pathsep.join([*path, str(ROOT)]))
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", *args], env=env,
                          capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {done.returncode}: " + " | ".join(tail)}
    return json.loads(lines[-1][len("RESULT "):])


# --- the parent: rounds, summary, the results file ----------------------------------------------


def per_iteration(run: dict) -> tuple[float, float]:
    """(CPU s per iteration after the first, CPU s of the first)."""
    stamps = run["stamps"]
    steady = (stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1 else float("nan")
    return steady, stamps[0] - run["start"]


def corner_per_iteration(run: dict) -> tuple[float, float]:
    """(the enlarged corner's eigendecompositions per iteration, their CPU s per iteration), after the first."""
    (count0, seconds0), (count1, seconds1) = run["corner"][0], run["corner"][-1]
    done = len(run["corner"]) - 1
    return ((count1 - count0) / done, (seconds1 - seconds0) / done) if done else (float("nan"), float("nan"))


def machine() -> str:
    import numpy as np
    from threadpoolctl import threadpool_info

    try:
        cpu = "\n".join(line for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                        if not line.startswith(("Flags", "Vulnerability")))
    except OSError:
        cpu = platform.processor()
    config = np.show_config(mode="dicts").get("Build Dependencies", {})
    blas = {k: {f: config.get(k, {}).get(f) for f in ("name", "version")} for k in ("blas", "lapack")}
    pools = [{k: p.get(k) for k in ("internal_api", "version", "num_threads")} for p in threadpool_info()]
    return f"{cpu}\nnumpy {np.__version__} build: {json.dumps(blas)}\nthread pools: {json.dumps(pools)}"


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--", "tenferro_py", "bench", ":!bench/results")
    return git("rev-parse", "--short", "HEAD") + (" (with uncommitted changes)" if dirty else "")


def triple(text: str, parts: int) -> tuple[int, ...]:
    values = tuple(int(p) for p in text.split(":"))
    if not parts - 1 <= len(values) <= parts or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected D:chi:ITER (ITER optional for --corners), got {text!r}")
    return values if len(values) == parts else values + (0,)


def compare(bond: int, chi: int, iterations: int, rounds: int, torch_dir: str | None, methods: list[str],
            say) -> bool:
    """The interleaved runs at one (D, χ) and their summary; False where one of ours failed or a method's
    energies differ from the full eigh's by more than 1e-8."""
    kinds = ["full", *[m for m in methods if m != "full"]] + (["peps-torch"] if torch_dir else [])
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    size = [str(bond), str(chi), str(iterations)]
    for _ in range(rounds):
        for kind in kinds:
            theirs = kind == "peps-torch"
            runs[kind].append(spawn(["peps-torch", torch_dir, *size] if theirs else ["ours", *size, kind]))
    say(f"## D = {bond}, chi = {chi}, {iterations} iterations, {rounds} interleaved rounds")
    say(f"{'run':<11} {'s/iter (each round)':<24} {'first s':>8} {'iters':>6} {'evals':>6} {'peak MiB':>9} "
        f"{'eighs/iter':>10} {'eigh s/iter':>11}  energy after the last")
    ok, steady, eigh_share = True, {}, {}
    for kind in kinds:
        good = [r for r in runs[kind] if "error" not in r and len(r["stamps"]) >= 2]  # (it may converge sooner)
        if len(good) < len(runs[kind]):
            ok = ok and kind == "peps-torch"
            bad = next(r for r in runs[kind] if r not in good)
            say(f"{kind:<11} FAILED: {bad.get('error', 'fewer than two iterations')}")
        if not good:
            continue
        steady[kind] = [per_iteration(r)[0] for r in good]
        first = statistics.median(per_iteration(r)[1] for r in good)
        evals = good[0]["evaluations"]
        count, seconds = (statistics.median(x) for x in zip(*(corner_per_iteration(r) for r in good)))
        eigh_share[kind] = seconds
        say(f"{kind:<11} {' '.join(f'{t:.3f}' for t in steady[kind]):<24} {first:8.2f} {len(good[0]['stamps']):>6} "
            f"{'-' if evals is None else evals:>6} {max(r['maxrss_mib'] for r in good):9.0f} {count:10.1f} "
            f"{seconds:11.3f}  {good[0]['energies'][-1]:.10f}")
    ours = [kind for kind in kinds if kind != "peps-torch" and kind in steady]
    for kind in ours[1:] if "full" in steady else ():
        full, other = runs["full"][0]["energies"], runs[kind][0]["energies"]
        gap = max(abs(x - y) for x, y in zip(full, other)) if len(full) == len(other) else float("inf")
        ok = ok and gap <= 1e-8
        ratios = " ".join(f"{x / y:.2f}" for x, y in zip(steady[kind], steady["full"]))
        say(f"{kind}/full s/iter: {ratios} (per round); energies after each iteration: max |{kind} - full| = "
            f"{gap:.1e} {'ok' if gap <= 1e-8 else 'MISMATCH'}")
    for kind in ours if "peps-torch" in steady else ():
        ratios = " ".join(f"{x / y:.2f}" for x, y in zip(steady[kind], steady["peps-torch"]))
        say(f"{kind}/peps-torch s/iter: {ratios} (per round)")
    if "full" in steady:  # what no eigh, however fast, can remove: the full run's time outside its corner eighs
        full = statistics.median(steady["full"])
        rest = full - eigh_share["full"]
        bound = f"a corner eigh taking no time at all leaves full's other {rest:.3f} s/iter: any method/full >= {rest / full:.2f}"
        if "peps-torch" in steady:
            bound += f", any method/peps-torch >= {rest / statistics.median(steady['peps-torch']):.2f}"
        say(bound)
    return ok


def corner(bond: int, chi: int, iterations: int, say) -> None:
    r = spawn(["corner", str(bond), str(chi), str(iterations)])
    if "error" in r:
        say(f"D = {bond}, chi = {chi}: FAILED {r['error']}")
        return
    say(f"D = {bond}, chi = {chi} (after {iterations} iterations): n = {r['n']}, (chi+1)/n = {(chi + 1) / r['n']:.3f}, "
        f"|w_chi/w_1| = {r['decay']:.1e}, |w_chi+1/w_chi| = {r['ratio_at_cut']:.3f}: full {r['full'] * 1e3:.0f} ms, "
        f"truncated {r['krylov'] * 1e3:.0f} ms, ratio {r['krylov'] / r['full']:.2f}")


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        return child(argv[1:])
    p = argparse.ArgumentParser(prog="bench/ipeps.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="*", type=lambda t: triple(t, 3), default=[(2, 16, 10), (3, 32, 5), (4, 64, 3)],
                   help="D:chi:iterations (default 2:16:10 3:32:5 4:64:3)")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    p.add_argument("--methods", nargs="+", choices=["full", "krylov", "auto"], default=["full", "krylov"],
                   help="our eigh methods, each against the full one (default full krylov)")
    p.add_argument("--peps-torch", metavar="DIR", help="a peps-torch checkout (skipped if absent)")
    p.add_argument("--corners", nargs="*", type=lambda t: triple(t, 3), default=[], help="D:chi[:ITER]")
    p.add_argument("--out", help="the results file (default bench/results/<date>T<time>-ipeps.md)")
    args = p.parse_args(argv)
    now = datetime.datetime.now(datetime.timezone.utc)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    torch_dir = args.peps_torch if args.peps_torch and Path(args.peps_torch, "examples", "j1j2").is_dir() else None
    if args.peps_torch and torch_dir is None:
        say(f"# peps-torch: no checkout at {args.peps_torch!r}; skipped")
    import dispatch  # bench/dispatch.py, beside this file; here, not at the top: the children need none of it

    say(f"# {dispatch.machine_line()}")
    ok = all([compare(bond, chi, iterations, args.rounds, torch_dir, args.methods, say)
              for bond, chi, iterations in args.sizes])
    if args.corners:
        say("## the enlarged corner's eigh: truncated (chi + 1 pairs) / full, on converged corners (min of 3)")
        for bond, chi, iterations in args.corners:
            corner(bond, chi, iterations, say)
    out = Path(args.out) if args.out else ROOT / "bench" / "results" / f"{now:%Y-%m-%dT%H%M}-ipeps.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    header = [f"date: {now:%Y-%m-%d %H:%M} UTC", f"commit: {commit()}",
              f"command: python bench/ipeps.py {' '.join(argv)}", "machine:", machine(), "", "output:"]
    with open(out, "a", encoding="utf-8") as file:
        file.write("\n".join(header + lines) + "\n\n")
    print(f"# written to {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
