"""Peak memory of the staged TRG's sweeps with and without checkpointing (tenferro_py.staged).

Per mode (``checkpoint=None``, ``"sqrt"``, ``"stage"``) two fresh subprocesses run one
sweep of tenferro_py.models.trg's TRG as a ``staged.Program`` and report:
  * the tracemalloc peak (NumPy registers its buffers with tracemalloc, so this is the
    arrays and Python objects the sweep holds at its worst moment), and
  * the peak RSS (``ru_maxrss``) of a run without tracemalloc, and its rise over the
    RSS reached before the sweep (interpreter, libraries: the same in every mode),
with the sweep's wall time. The results of all modes must agree to the last bit (exit 1
otherwise).

Usage: python bench/checkpoint.py [--chi 32] [--steps 10] [--beta 0.44] [--sweep grad|curvature]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import struct
import subprocess
import sys
import time
import tracemalloc

from tenferro_py.models.trg import program, schedule


MODES = {"none": None, "sqrt": "sqrt", "stage": "stage"}
MIB = 2.0**20


def run_one(mode: str, measure: str, chi: int, steps: int, beta: float, sweep: str) -> dict:
    """One sweep in this process; its peak memory, time and result bits."""
    trg = program(schedule(chi, steps))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if measure == "tracemalloc":
        tracemalloc.start()
    start = time.perf_counter()
    if sweep == "grad":
        result = trg.value_and_grad(beta, checkpoint=MODES[mode])
        numbers = [result.value, result.grad.item()]
    else:
        result = trg.value_grad_and_curvature(beta, checkpoint=MODES[mode])
        numbers = [result.value, result.grad.item(), result.curvature.item()]
    seconds = time.perf_counter() - start
    out = {"seconds": seconds, "bits": [struct.pack(">d", x).hex() for x in numbers]}
    if measure == "tracemalloc":
        out["traced_peak"] = tracemalloc.get_traced_memory()[1]
    else:
        out["rss_peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        out["rss_before"] = rss_before
    return out


def measure(mode: str, how: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--one", mode, how, "--chi", str(args.chi), "--steps", str(args.steps),
           "--beta", repr(args.beta), "--sweep", args.sweep]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chi", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--beta", type=float, default=0.44)
    parser.add_argument("--sweep", choices=("grad", "curvature"), default="grad")
    parser.add_argument("--one", nargs=2, metavar=("MODE", "MEASURE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(*args.one, args.chi, args.steps, args.beta, args.sweep)))
        return 0
    ks = schedule(args.chi, args.steps)
    print(f"TRG {args.sweep} chi={args.chi} steps={args.steps} beta={args.beta} ks={ks} "
          f"(sqrt: segments of {math.isqrt(args.steps - 1) + 1} stages)")
    print(f"{'checkpoint':>10} {'traced peak MiB':>16} {'RSS peak MiB':>13} {'RSS rise MiB':>13} {'seconds':>8}")
    bits = {}
    for mode in MODES:
        traced, rss = measure(mode, "tracemalloc", args), measure(mode, "rss", args)
        bits[mode] = (traced["bits"], rss["bits"])
        print(f"{mode:>10} {traced['traced_peak'] / MIB:16.1f} {rss['rss_peak'] / MIB:13.1f} "
              f"{(rss['rss_peak'] - rss['rss_before']) / MIB:13.1f} {rss['seconds']:8.2f}", flush=True)
    same = len({b for pair in bits.values() for b in map(tuple, pair)}) == 1
    print(f"results bit for bit equal in every mode: {'yes' if same else 'NO'} {bits['none'][0]}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
