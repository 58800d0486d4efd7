"""Timing harness of the staged TRG, side by side and interleaved, in two spellings.

Per β, after one warm-up each, runs the programs below in turn ``--repeats`` times and
prints medians and ratios:
  (a) ``numpy_forward``: plain NumPy forward-only TRG, no AD, BLAS pinned to 1 thread — the floor;
  (h) ``bench/handwritten_trg.py``: the value and gradient written by hand in NumPy, the reverse
      with the fewest kernels — what any AD engine over NumPy is measured against;
  (b) the staged ``value_and_grad`` of tenferro_py.models.trg (run by examples/ising_trg.py) on ``CpuEngine``
      of width ``--width``;
  (p) ``bench/ported_trg.py``: the same algorithm as a line-by-line port of a tenferro (Rust)
      program reads (see that file), same width;
  (b1), (p1) the same at width 1 (only when --width > 1);
  (c) JAX ``jit(value_and_grad)`` of the same algorithm (bench/jax_trg.py), BLAS pinned to 1 thread,
      when jax is importable;
  (d) with ``--curvature``: the staged ``value_grad_and_curvature`` (value, gradient and c_ad by
      forward over reverse) at the same width, and the ratio d/b.
Agreement with (b) is checked: lnZ/N to 1e-12 for every program; the gradient to 1e-12 for (d),
(h) and (p), to 1e-9 for JAX. (At β = 0.4 the gradient is conditioning-limited: one-ulp
perturbations of T₀ move the example's own gradient by 1e-13 … 2e-10, see bench/results/2026-12-01T0445-trg-issue12.md.)
A failed check exits 1.

``--scaling`` runs χ = 8, 16, 24, 32 each in a fresh subprocess and fits time ∝ χ^p.

``--truncated`` compares the SVD methods at χ = 16, 24, 32, 48, each χ in a fresh subprocess, all at
width 1: (b) value_and_grad with the full SVD, (k) the same with ``svd="krylov"``, (c) JAX's jit with
a full SVD; with ``--curvature`` also value+grad+c_ad for both methods, (d) and (dk), at χ <= 32.
It fits time per full step ∝ χ^p per program and reports each program's peak RSS at χ = 48 from a
process of its own. Agreement of (k) with (b): lnZ/N to 1e-12, the gradient to 1e-10 relative,
c_ad to 1e-8 relative.

Usage: python bench/trg.py [--chi 16] [--steps 20] [--betas 0.4 0.5] [--repeats 5] [--width 1] [--curvature]
       python bench/trg.py --scaling
       python bench/trg.py --truncated [--curvature] [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import resource
import runpy
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import dispatch  # beside this file: Python runs a script with its folder first on the path
import handwritten_trg
import numpy as np
import opt_einsum
import ported_trg
from threadpoolctl import threadpool_info, threadpool_limits

import tenferro_py
from tenferro_py import CpuEngine, Pool
from tenferro_py.models.trg import schedule, value_and_grad, value_grad_and_curvature

ROOT = Path(__file__).resolve().parent.parent

LNZ_TOL, GRAD_TOL, JAX_GRAD_TOL = 1e-12, 1e-12, 1e-9
SCALING_POINTS = ((8, 20), (16, 20), (24, 12), (32, 8))  # (χ, steps); fit over χ >= SCALING_FIT_MIN
SCALING_FIT_MIN = 16
TRUNCATED_POINTS = ((16, 10), (24, 10), (32, 10), (48, 8))  # (χ, steps) of --truncated
TRUNCATED_CURVATURE_UP_TO = 32  # c_ad by forward over reverse at χ = 48 would take minutes per run
KRYLOV_GRAD_TOL, KRYLOV_CURVATURE_TOL = 1e-10, 1e-8  # relative, against the full SVD


# --- the implementations ------------------------------------------------------


def _half(m: np.ndarray, d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(U_k √s_k, V_k √s_k) of m, each reshaped column-major to (D, D, k)."""
    u, s, vt = np.linalg.svd(m, full_matrices=False)
    root = np.sqrt(s[:k])
    left = u[:, :k] * root
    right = vt[:k, :].T * root
    return left.reshape((d, d, k), order="F"), right.reshape((d, d, k), order="F")


def numpy_forward(beta: float, ks: Sequence[int]) -> float:
    """lnZ/N by the same TRG in plain NumPy (no AD): the floor of (b)."""
    n = len(ks)
    c = math.sqrt(0.5 * (math.exp(beta) + math.exp(-beta)))
    sh = math.sqrt(0.5 * (math.exp(beta) - math.exp(-beta)))
    q = np.array([[c, sh], [c, -sh]])
    t = opt_einsum.contract("su,sl,sd,sr->uldr", q, q, q, q)
    acc = 0.0
    for i, k in enumerate(ks):
        d = t.shape[0]
        norm = math.sqrt(np.sum(t * t))
        t = t / norm
        acc += 2.0 ** (n - i) * math.log(norm)
        ma = t.transpose(2, 1, 0, 3).reshape((d * d, d * d), order="F")
        mb = t.transpose(3, 2, 1, 0).reshape((d * d, d * d), order="F")
        s1, s3 = _half(ma, d, k)
        s2, s4 = _half(mb, d, k)
        t = opt_einsum.contract("war,abu,bgl,gwd->ruld", s1, s2, s3, s4)
    return (acc + math.log(np.einsum("xyxy->", t))) / 2.0**n


def floor_runner(ks: Sequence[int]) -> Callable[[float], float]:
    """(a): numpy_forward with BLAS pinned to one thread."""

    def run(beta: float) -> float:
        with threadpool_limits(1, "blas"):
            return numpy_forward(beta, ks)

    return run


def handwritten_runner(ks: Sequence[int]) -> Callable[[float], tuple[float, float]]:
    """(h): the hand-written NumPy value and gradient with BLAS pinned to one thread."""

    def run(beta: float) -> tuple[float, float]:
        with threadpool_limits(1, "blas"):
            return handwritten_trg.value_and_grad(beta, ks)

    return run


def tenferro_runner(ks: Sequence[int], width: int, svd: str = "full") -> Callable[[float], tuple[float, float]]:
    """(b), or (k) with svd="krylov": the example's staged value_and_grad on an engine of the given width."""
    engine = CpuEngine(Pool.builder().threads(width).build())
    return lambda beta: value_and_grad(beta, ks, engine, svd=svd)


def ported_runner(ks: Sequence[int], width: int) -> Callable[[float], tuple[float, float]]:
    """(p): the ported program's value_and_grad on an engine of the given width."""
    engine = CpuEngine(Pool.builder().threads(width).build())
    return lambda beta: ported_trg.value_and_grad(beta, ks, engine)


def numpy_style_runner(ks: Sequence[int]) -> Callable[[float], tuple[float, float]]:
    """(n): examples/trg_numpy.py, the same TRG in NumPy's spelling through tenferro_py.numpy (one tape)."""
    import tenferro_py.numpy as tnp

    lnz_per_site = runpy.run_path(str(ROOT / "examples" / "trg_numpy.py"))["lnz_per_site"]
    both = tnp.value_and_grad(lnz_per_site)
    return lambda beta: tuple(float(v) for v in both(beta, ks))


def curvature_runner(
    ks: Sequence[int], width: int, svd: str = "full"
) -> Callable[[float], tuple[float, float, float]]:
    """(d), or (dk) with svd="krylov": the example's value_grad_and_curvature (forward over reverse)."""
    engine = CpuEngine(Pool.builder().threads(width).build())
    return lambda beta: value_grad_and_curvature(beta, ks, engine, svd=svd)


def jax_runner(ks: Sequence[int]) -> tuple[Callable[[float], tuple[float, float]], str] | None:
    """(c): (JAX jit(value_and_grad) with BLAS pinned to 1 thread, a description), or None without jax."""
    try:
        import jax_trg
    except ImportError:
        return None
    fn = jax_trg.make_value_and_grad(ks)

    def run(beta: float) -> tuple[float, float]:
        with threadpool_limits(1, "blas"):
            return fn(beta)

    return run, jax_trg.describe()


# --- timing -------------------------------------------------------------------


def interleaved(runners: dict[str, Callable], beta: float, repeats: int) -> tuple[dict, dict]:
    """One warm-up each, then ``repeats`` rounds a, b, c, a, b, c, …: (results, median seconds)."""
    results = {name: run(beta) for name, run in runners.items()}
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            run(beta)
            times[name].append(time.perf_counter() - start)
    return results, {name: statistics.median(ts) for name, ts in times.items()}


def source_state(*folders: str) -> str:
    """The git commit of the tree measured, and whether ``folders`` (default tenferro_py/ and
    examples/) differ from it: the harnesses' one account of what they measured."""
    folders = folders or ("tenferro_py", "examples")

    def git(*cmd: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *cmd], capture_output=True, text=True, check=True).stdout

    try:
        commit = git("rev-parse", "--short", "HEAD").strip()
        dirty = git("status", "--porcelain", "--", *folders, ":!bench/results").strip()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    where = " or ".join(f"{folder}/" for folder in folders)
    return f"commit {commit}" + (f" + uncommitted changes in {where}" if dirty else " (clean)")


def header(args: argparse.Namespace, settings: bool = True) -> str:
    """Machine, versions, source, BLAS (threadpoolctl) and, if ``settings``, the schedule of this run."""
    lines = [
        f"# bench/trg.py {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} "
        f"python {platform.python_version()} numpy {np.__version__} tenferro_py {tenferro_py.__version__} "
        f"nproc={os.cpu_count()}",
        f"# source: {source_state()}",
    ]
    for lib in threadpool_info():
        lines.append(
            f"# {lib['user_api']}: {lib['internal_api']} {lib['version']} arch={lib.get('architecture')} "
            f"threads={lib['num_threads']} ({Path(lib['filepath']).name})"
        )
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(("OPENBLAS_", "OMP_")))
    lines.append(f"# env: {env or '(no OPENBLAS_/OMP_ variables)'}")
    lines.append(f"# {dispatch.machine_line()}")
    if settings:
        lines.append(
            f"# chi={args.chi} steps={args.steps} ks={schedule(args.chi, args.steps)} width={args.width} "
            f"repeats={args.repeats} (medians of interleaved runs after one warm-up each)"
        )
    return "\n".join(lines)


def compare(args: argparse.Namespace) -> int:
    """The side-by-side table per β and a summary line; 1 when a check fails."""
    ks = schedule(args.chi, args.steps)
    runners: dict[str, Callable] = {"a": floor_runner(ks), "h": handwritten_runner(ks),
                                    "b": tenferro_runner(ks, args.width), "p": ported_runner(ks, args.width),
                                    "n": numpy_style_runner(ks)}
    if args.width > 1:
        runners["b1"] = tenferro_runner(ks, 1)
        runners["p1"] = ported_runner(ks, 1)
    if args.curvature:
        runners["d"] = curvature_runner(ks, args.width)
    jax = jax_runner(ks)
    print(header(args))  # after importing jax: threadpool_info then lists any BLAS it loaded
    if jax is None:
        print("# (c) skipped: jax is not importable")
    else:
        runners["c"], description = jax
        print(f"# (c) {description}")
    names = {"a": "NumPy forward floor (1 BLAS thread)", "h": "hand-written NumPy value and gradient",
             "b": f"models.trg value_and_grad (width {args.width})",
             "p": f"bench/ported_trg.py value_and_grad (width {args.width})", "b1": "b at width 1",
             "p1": "p at width 1", "c": "JAX jit(value_and_grad) (1 BLAS thread)",
             "d": "value_grad_and_curvature (same width)",
             "n": "examples/trg_numpy.py value_and_grad (tenferro_py.numpy, width 1)"}
    print("# " + ", ".join(f"{k} = {names[k]}" for k in runners), flush=True)
    ok = True
    ratios: dict[str, list[float]] = {}
    for beta in args.betas:
        results, med = interleaved(runners, beta, args.repeats)
        lnz, grad = results["b"]
        checks = [("a", abs(results["a"] - lnz), None, None)]
        for name in ("h", "p", "p1", "n", "d", "c"):
            if name in results:
                tol = JAX_GRAD_TOL if name == "c" else GRAD_TOL
                checks.append((name, abs(results[name][0] - lnz), abs(results[name][1] - grad), tol))
        notes = []
        for name, d_lnz, d_grad, tol in checks:
            good = d_lnz <= LNZ_TOL and (d_grad is None or d_grad <= tol)
            ok &= good
            text = f"|{name}-b| lnZ/N {d_lnz:.1e}" + ("" if d_grad is None else f" grad {d_grad:.1e}")
            notes.append(text + (" ok" if good else " MISMATCH"))
        row = {"h/a": med["h"] / med["a"], "b/a": med["b"] / med["a"], "p/a": med["p"] / med["a"],
               "p/b": med["p"] / med["b"], "n/a": med["n"] / med["a"]}
        if "b1" in med:
            row[f"b({args.width})/b(1)"] = med["b"] / med["b1"]
            row[f"p({args.width})/p(1)"] = med["p"] / med["p1"]
        if "c" in med:
            row["b/c"] = med["b"] / med["c"]
        if "d" in med:
            row["d/b"] = med["d"] / med["b"]
        for key, value in row.items():
            ratios.setdefault(key, []).append(value)
        times = " ".join(f"{name}={med[name] * 1e3:.1f}" for name in runners)
        print(f"beta={beta:.4f} lnZ/N={lnz:.15f} grad={grad:.15f} | ms {times} | "
              + " ".join(f"{k}={v:.3f}" for k, v in row.items()) + " | " + "; ".join(notes), flush=True)
    print("summary (median over betas): " + " ".join(f"{k}={statistics.median(v):.3f}" for k, v in ratios.items())
          + f" | checks {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


# --- scaling ------------------------------------------------------------------


def one_scaling_point(chi: int, steps: int, betas: Sequence[float], repeats: int) -> int:
    """Print 'chi steps ms_b ms_a maxrss_kib' for one χ (run in a fresh process)."""
    ks = schedule(chi, steps)
    runners = {"a": floor_runner(ks), "b": tenferro_runner(ks, 1)}
    med = {"a": [], "b": []}
    for beta in betas:
        _, m = interleaved(runners, beta, repeats)
        for name in med:
            med[name].append(m[name])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{chi} {steps} {statistics.median(med['b']) * 1e3:.3f} {statistics.median(med['a']) * 1e3:.3f} {rss}")
    return 0


def fit_exponent(chis: Sequence[float], times: Sequence[float]) -> float:
    """Least-squares slope of log(time) against log(χ)."""
    return float(np.polyfit(np.log(chis), np.log(times), 1)[0])


def full_steps(chi: int, steps: int) -> int:
    """How many steps run at input bond dimension D = χ (the ones that cost ~χ⁶)."""
    d, count = 2, 0
    for k in schedule(chi, steps):
        count += d == chi
        d = k
    return count


def scaling(args: argparse.Namespace) -> int:
    """Each χ in a fresh subprocess (its own peak RSS); time per β and per full step; fit the exponent."""
    print(header(args, settings=False))
    print(f"# scaling: (chi, steps) = {list(SCALING_POINTS)}, width 1, betas {args.betas}, repeats {args.repeats}; "
          "peak RSS = ru_maxrss of each subprocess; 'full' = steps at D = chi, 'per full step' = time per beta / full; "
          f"exponent fitted on time per full step over chi >= {SCALING_FIT_MIN}")
    print(f"{'chi':>4} {'steps':>5} {'full':>4} {'b ms/beta':>10} {'a ms/beta':>10} {'b ms/full':>10} "
          f"{'a ms/full':>10} {'b/a':>6} {'peak RSS MiB':>12}", flush=True)
    points = []
    for chi, steps in SCALING_POINTS:
        cmd = [sys.executable, __file__, "--one-scaling-point", str(chi), str(steps), "--repeats", str(args.repeats),
               "--betas", *map(str, args.betas)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
        _, _, ms_b, ms_a, rss = (float(x) for x in out)
        full = full_steps(chi, steps)
        points.append((chi, ms_b / full, ms_a / full))
        print(f"{chi:>4} {steps:>5} {full:>4} {ms_b:>10.1f} {ms_a:>10.1f} {ms_b / full:>10.2f} {ms_a / full:>10.2f} "
              f"{ms_b / ms_a:>6.2f} {rss / 1024:>12.1f}", flush=True)
    fit = [p for p in points if p[0] >= SCALING_FIT_MIN]
    chis = [p[0] for p in fit]
    print(f"exponent of time per full step vs chi (chi >= {SCALING_FIT_MIN}): "
          f"b {fit_exponent(chis, [p[1] for p in fit]):.2f}, a {fit_exponent(chis, [p[2] for p in fit]):.2f} "
          "(an SVD of a chi^2 x chi^2 matrix alone is chi^6)")
    return 0


# --- full against truncated SVD ------------------------------------------------


def one_truncated_point(chi: int, steps: int, args: argparse.Namespace) -> int:
    """Print one JSON line: medians over betas of each program's seconds, and the worst disagreements."""
    ks = schedule(chi, steps)
    runners: dict[str, Callable] = {"b": tenferro_runner(ks, 1), "k": tenferro_runner(ks, 1, "krylov")}
    if args.curvature and chi <= TRUNCATED_CURVATURE_UP_TO:
        runners["d"] = curvature_runner(ks, 1)
        runners["dk"] = curvature_runner(ks, 1, "krylov")
    jax = jax_runner(ks)
    if jax is not None:
        runners["c"] = jax[0]
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    worst = {"lnz": 0.0, "grad": 0.0, "c_ad": 0.0, "jax_grad": 0.0}
    for beta in args.betas:
        results, med = interleaved(runners, beta, args.repeats)
        for name in runners:
            seconds[name].append(med[name])
        (lnz, grad), (lnz_k, grad_k) = results["b"], results["k"]
        worst["lnz"] = max(worst["lnz"], abs(lnz_k - lnz))
        worst["grad"] = max(worst["grad"], abs(grad_k - grad) / abs(grad))
        if "d" in results:
            worst["c_ad"] = max(worst["c_ad"], abs(results["dk"][2] - results["d"][2]) / abs(results["d"][2]))
        if "c" in results:
            worst["jax_grad"] = max(worst["jax_grad"], abs(results["c"][1] - grad) / abs(grad))
    print(json.dumps({"seconds": {n: statistics.median(s) for n, s in seconds.items()}, "worst": worst}))
    return 0


def one_peak_memory(chi: int, steps: int, program: str) -> int:
    """Print 'rss_before_kib rss_peak_kib' around one value_and_grad of ``program`` (b, k or c) at β = 0.5."""
    ks = schedule(chi, steps)
    run = jax_runner(ks)[0] if program == "c" else tenferro_runner(ks, 1, "krylov" if program == "k" else "full")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run(0.5)
    print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return 0


def truncated(args: argparse.Namespace) -> int:
    """Full SVD, Krylov truncated SVD and JAX per χ, side by side; exponents; peak memory at the largest χ."""
    has_jax = jax_runner([2]) is not None
    print(header(args, settings=False))
    print(f"# truncated: (chi, steps) = {list(TRUNCATED_POINTS)}, width 1, betas {args.betas}, repeats {args.repeats} "
          "(medians of interleaved runs in one fresh process per chi); b = value_and_grad, full SVD; "
          "k = value_and_grad, svd='krylov'; c = JAX jit(value_and_grad), full SVD"
          + ("" if has_jax else " (skipped: jax is not importable)")
          + (f"; d, dk = value+grad+c_ad, full and krylov (chi <= {TRUNCATED_CURVATURE_UP_TO})" if args.curvature
             else ""))
    columns = ["b", "k"] + (["c"] if has_jax else []) + (["d", "dk"] if args.curvature else [])
    print(f"{'chi':>4} {'steps':>5} {'full':>4} " + " ".join(f"{n + ' s':>8}" for n in columns)
          + f" {'k/b':>6}" + (f" {'k/c':>6} {'b/c':>6}" if has_jax else "") + (f" {'dk/d':>6}" if args.curvature else "")
          + "  worst |k-b|: lnZ/N, grad (rel), c_ad (rel)", flush=True)
    ok, per_full_step = True, {n: [] for n in columns}
    for chi, steps in TRUNCATED_POINTS:
        cmd = [sys.executable, __file__, "--one-truncated-point", str(chi), str(steps), "--repeats", str(args.repeats),
               "--betas", *map(str, args.betas)] + (["--curvature"] if args.curvature else [])
        point = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        sec, worst, full = point["seconds"], point["worst"], full_steps(chi, steps)
        for name, value in sec.items():
            per_full_step[name].append((chi, value / full))
        good = (worst["lnz"] <= LNZ_TOL and worst["grad"] <= KRYLOV_GRAD_TOL
                and worst["c_ad"] <= KRYLOV_CURVATURE_TOL and worst["jax_grad"] <= JAX_GRAD_TOL)
        ok &= good
        cells = " ".join(f"{sec[n]:>8.3f}" if n in sec else f"{'-':>8}" for n in columns)
        ratios = f" {sec['k'] / sec['b']:>6.3f}"
        if has_jax:
            ratios += f" {sec['k'] / sec['c']:>6.3f} {sec['b'] / sec['c']:>6.3f}"
        if args.curvature:
            ratios += f" {sec['dk'] / sec['d']:>6.3f}" if "d" in sec else f" {'-':>6}"
        print(f"{chi:>4} {steps:>5} {full:>4} {cells}{ratios}  {worst['lnz']:.1e}, {worst['grad']:.1e}, "
              f"{worst['c_ad']:.1e}" + ("" if good else " MISMATCH"), flush=True)
    exponents = []
    for name, points in per_full_step.items():
        fit = [p for p in points if p[0] >= SCALING_FIT_MIN]
        if len(fit) >= 2:
            exponents.append(f"{name} {fit_exponent([p[0] for p in fit], [p[1] for p in fit]):.2f}")
    print(f"exponent of time per full step vs chi (chi >= {SCALING_FIT_MIN}): " + ", ".join(exponents))
    chi, steps = TRUNCATED_POINTS[-1]
    peaks = []
    for name in ["b", "k"] + (["c"] if has_jax else []):
        cmd = [sys.executable, __file__, "--one-peak-memory", str(chi), str(steps), name]
        before, peak = (int(x) for x in subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split())
        peaks.append(f"{name} {peak / 1024:.0f} MiB (+{(peak - before) / 1024:.0f} over the imports)")
    print(f"peak RSS of one value_and_grad at chi={chi}, {steps} steps, beta=0.5: " + "; ".join(peaks))
    print(f"checks {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


# --- command line -------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(kind: type, what: str) -> Callable[[str], float]:
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} expected, got {text!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{what} expected, got {text!r}")
        return value

    return parse


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The options; a bad value is a one-line error and exit status 2."""
    p = _Parser(prog="bench/trg.py", description=__doc__.split("\n\n")[0])
    pos_int, pos_float = _positive(int, "an integer >= 1"), _positive(float, "a finite number > 0")
    p.add_argument("--chi", type=pos_int, default=16, help="bond dimension cap (default 16)")
    p.add_argument("--steps", type=pos_int, default=20, help="RG steps (default 20)")
    p.add_argument("--betas", type=pos_float, nargs="+", default=[0.4, 0.5], help="inverse temperatures")
    p.add_argument("--repeats", type=pos_int, default=5, help="timed rounds per beta (default 5)")
    p.add_argument("--width", type=pos_int, default=1, help="CpuEngine width of (b) (default 1)")
    p.add_argument("--curvature", action="store_true", help="also time value_grad_and_curvature (d) and d/b")
    p.add_argument("--scaling", action="store_true", help=f"time chi, steps = {list(SCALING_POINTS)}")
    p.add_argument("--one-scaling-point", type=pos_int, nargs=2, metavar=("CHI", "STEPS"),
                   help="internal: one point of --scaling")
    p.add_argument("--truncated", action="store_true",
                   help=f"full against krylov SVD and JAX at (chi, steps) = {list(TRUNCATED_POINTS)}")
    p.add_argument("--one-truncated-point", type=pos_int, nargs=2, metavar=("CHI", "STEPS"),
                   help="internal: one point of --truncated")
    p.add_argument("--one-peak-memory", nargs=3, metavar=("CHI", "STEPS", "PROGRAM"),
                   help="internal: peak memory of one program (b, k or c) for --truncated")
    args = p.parse_args(argv)
    modes = [m for m in ("scaling", "one_scaling_point", "truncated", "one_truncated_point", "one_peak_memory")
             if getattr(args, m)]
    if len(modes) > 1:
        p.error(" and ".join("--" + m.replace("_", "-") for m in modes) + " exclude each other")
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.one_scaling_point:
        return one_scaling_point(*args.one_scaling_point, args.betas, args.repeats)
    if args.one_truncated_point:
        return one_truncated_point(*args.one_truncated_point, args)
    if args.one_peak_memory:
        chi, steps, program = args.one_peak_memory
        return one_peak_memory(int(chi), int(steps), program)
    if args.truncated:
        return truncated(args)
    if args.scaling:
        return scaling(args)
    return compare(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
