"""Per-op overhead of an eager session: a chain of tiny ops, timed side by side.

A chain z ← add(z, y), z ← mul(z, y), … of ``--ops`` ops on tensors of ``--shape``
(1 element by default), in one eager session:
  (i)   tracked: z starts as a variable, every op is recorded on the tape;
  (ii)  constant: z starts as a constant, nothing is recorded;
  (iii) no_grad: z a variable, but inside ``rt.no_grad()``, nothing is recorded;
  (np)  the same chain as a plain NumPy loop (np.add / np.multiply), the reference.
Rounds are interleaved after one warm-up each; µs per op are medians.

Beside it, the machine's speed at large calls: a 1024³ float64 GEMM on one BLAS thread, in GF/s,
with the kernel OpenBLAS runs and the widest vector instructions the CPU has. A kernel narrower
than the CPU (``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 CPU, as on this workplace's machines)
halves every contraction's speed while XLA's stays: contraction-bound ratios against JAX are only
comparable across machines beside this line.

Usage: python bench/dispatch.py [--ops 10000] [--shape 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable, Sequence

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import tenferro_py as tf
from tenferro_py import AdContext, CpuEngine, EagerRuntime, EagerSession, Tensor


def _operands(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """z₀ and y: y near 1 so the chain neither overflows nor vanishes."""
    return np.full(shape, 0.5), np.full(shape, 1.0 + 1e-9)


def numpy_chain(n_ops: int, shape: tuple[int, ...]) -> Callable[[], np.ndarray]:
    """(np): the chain as a NumPy loop."""
    z0, y = _operands(shape)

    def run() -> np.ndarray:
        z = z0
        for i in range(n_ops):
            z = np.add(z, y) if i % 2 == 0 else np.multiply(z, y)
        return z

    return run


def session_chain(n_ops: int, shape: tuple[int, ...], mode: str) -> Callable[[], np.ndarray]:
    """The chain in an eager session; mode is 'tracked', 'constant' or 'no_grad'."""
    z0, y0 = _operands(shape)
    engine = CpuEngine.serial()

    def chain(s: EagerSession, z, y):
        for i in range(n_ops):
            z = s.add(z, y) if i % 2 == 0 else s.mul(z, y)
        return z

    def run() -> np.ndarray:
        rt = EagerRuntime.with_ad_context(AdContext.builder().build())
        z = rt.constant_from(Tensor(z0)) if mode == "constant" else rt.variable_from(Tensor(z0))
        y = rt.constant_from(Tensor(y0))
        if mode == "no_grad":
            with rt.no_grad():
                out = rt.with_eager_session(engine, lambda s: chain(s, z, y))
        else:
            out = rt.with_eager_session(engine, lambda s: chain(s, z, y))
        if out.is_tracked != (mode == "tracked"):
            raise AssertionError(f"dispatch: {mode} chain gave is_tracked={out.is_tracked}")
        return out.value().to_numpy()

    return run


def seconds(run: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``run`` (the harnesses' one plain timer)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gemm_rate(n: int = 1024, repeats: int = 5) -> float:
    """GF/s of an n × n × n float64 matrix product on one BLAS thread, the median of ``repeats``."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    with threadpool_limits(1, user_api="blas"):
        a @ b
        return 2 * n**3 / seconds(lambda: a @ b, repeats) / 1e9


def blas_kernel() -> str:
    """The kernel NumPy's BLAS runs, and the widest vector instructions the CPU has (Linux's flags)."""
    kernels = sorted({str(lib.get("architecture")) for lib in threadpool_info() if lib["user_api"] == "blas"})
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    widest = next((isa for isa in ("avx512f", "avx2", "avx", "sse2", "asimd") if isa in flags), "unknown")
    return f"BLAS kernel {'/'.join(kernels) or 'unknown'}; the CPU has {widest}"


def numpy_call_cost(repeats: int = 5) -> float:
    """µs per call of chain (iii), 10000 NumPy adds and multiplies on one element, the median of
    ``repeats`` rounds: the machine's speed at small calls, to compare runs across machines."""
    chain = numpy_chain(10000, (1,))
    chain()
    return seconds(chain, repeats) / 10000 * 1e6


def machine_line() -> str:
    """One line for a benchmark's header: the machine's speed at small calls and at large ones."""
    return (f"NumPy call cost {numpy_call_cost():.2f} us/op (bench/dispatch.py (iii)); GEMM 1024^3 on one BLAS "
            f"thread {gemm_rate():.0f} GF/s ({blas_kernel()}; (iv))")


def parse_shape(text: str) -> tuple[int, ...]:
    """'1' → (1,), '2x2' → (2, 2)."""
    try:
        shape = tuple(int(p) for p in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shape such as 1 or 2x2 expected, got {text!r}") from None
    if not all(n >= 1 for n in shape):
        raise argparse.ArgumentTypeError(f"a shape such as 1 or 2x2 expected, got {text!r}")
    return shape


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer >= 1 expected, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"an integer >= 1 expected, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: Sequence[str]) -> int:
    p = _Parser(prog="bench/dispatch.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=positive_int, default=10000, help="ops in the chain (default 10000)")
    p.add_argument("--shape", type=parse_shape, default=(1,), help="tensor shape, e.g. 1 or 2x2 (default 1)")
    p.add_argument("--repeats", type=positive_int, default=5, help="timed rounds (default 5)")
    args = p.parse_args(argv)

    runners = {"np": numpy_chain(args.ops, args.shape)}
    runners.update((mode, session_chain(args.ops, args.shape, mode)) for mode in ("tracked", "constant", "no_grad"))
    reference = runners["np"]()
    for name, run in runners.items():  # warm-up, and the same numbers everywhere
        if not np.allclose(run(), reference, rtol=1e-12, atol=0):
            print(f"dispatch.py: {name} chain disagrees with NumPy", file=sys.stderr)
            return 1
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    us = {name: statistics.median(ts) / args.ops * 1e6 for name, ts in times.items()}

    print(f"# bench/dispatch.py tenferro_py {tf.__version__} numpy {np.__version__}: chain of {args.ops} add/mul "
          f"on shape {list(args.shape)}, medians of {args.repeats} interleaved rounds")
    labels = {"tracked": "(i) tracked (recorded)", "constant": "(ii) constants (not recorded)",
              "no_grad": "(ii) no_grad (not recorded)", "np": "(iii) NumPy loop"}
    for name in ("tracked", "constant", "no_grad", "np"):
        print(f"{labels[name]:<32} {us[name]:8.2f} us/op  x{us[name] / us['np']:6.1f} NumPy")
    print(f"summary: tracked/np={us['tracked'] / us['np']:.1f} constant/np={us['constant'] / us['np']:.1f} "
          f"no_grad/np={us['no_grad'] / us['np']:.1f} tracked/constant={us['tracked'] / us['constant']:.2f}")
    print(f"(iv) GEMM 1024^3 on one BLAS thread {gemm_rate():.0f} GF/s ({blas_kernel()})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
