"""A β sweep of the 2D Ising model by TRG, into a CSV and a plot against Onsager.

The command line over tenferro_py.models.sweep: per β, lnZ/N, u and c (by AD, or by a central
difference of the AD gradient with --c difference), each finished β appended to OUT.csv at
once with Onsager's exact values and the errors; OUT.png then plots u and c against the exact
curves and |error| on a log scale (it needs matplotlib: pip install -e '.[plot]'). The CSV's
format, its checks and its repair: tenferro_py.models.sweep_csv.
"""

from __future__ import annotations

import math
import signal
import sys
from argparse import ArgumentTypeError
from typing import NoReturn

from tenferro_py.engine import available_parallelism
from tenferro_py.models import sweep
from tenferro_py.models.cli import ArgumentParser, number
from tenferro_py.models.sweep_csv import check_writable, cannot_write
from tenferro_py.models.trg import SVD_METHODS, difference_in_range

RANGE = sweep.beta_range_text()
EPILOG = (
    f"Every beta (and with --c difference every beta - h and beta + h) must lie in {RANGE}: outside, "
    "double precision no longer resolves the first TRG step's singular values and u and c come out NaN (see "
    "ising_trg.py --help), and nothing is lost there: below 1e-14, lnZ/N = ln 2 and u = -2 beta to every digit, "
    "above 8, u = -2 and c = 0. A beta whose result is not finite all the same gets no row, one line on stderr, "
    "and exit status 2. Each finished beta is saved at once: the same command "
    "resumes an interrupted sweep; rows that do not parse are named and computed again. A second run into the "
    "same --out waits for the first (OUT.csv.lock). Exit status: 0 done; 2 a bad argument, an --out that cannot be "
    "written, a CSV of other settings, no cluster at --scheduler, a failed task, or a beta without a finite "
    "result; 130 Ctrl-C; 143 SIGTERM."
)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that it stops the sweep as Ctrl-C does."""


def betas_argument(text: str) -> list[float]:
    """--betas: sweep.parse_betas, its ValueError a usage error."""
    try:
        return sweep.parse_betas(text)
    except ValueError as err:
        raise ArgumentTypeError(str(err)) from None


def parser() -> ArgumentParser:
    """The command line: every argument validated, a bad one is one line and exit status 2."""
    count = number(int, "an integer >= 1", lambda v: v >= 1)
    p = ArgumentParser(prog="ising_sweep.py", description=__doc__.split("\n\n")[0], epilog=EPILOG, allow_abbrev=False)
    p.add_argument("--chi", type=count, default=16, help="bond dimension χ (default 16)")
    p.add_argument("--steps", type=count, default=20, help="TRG steps: N = 2^steps sites (default 20)")
    p.add_argument("--c", choices=("ad", "difference"), default="ad",
                   help="c by AD (default) or by the central difference of the AD gradient")
    p.add_argument("--h", type=number(float, "a finite number > 0", lambda v: math.isfinite(v) and v > 0),
                   default=1e-5, help="step of c's central difference, with --c difference (default 1e-5)")
    p.add_argument("--svd", choices=SVD_METHODS, default="full",
                   help="each step's k leading singular triplets from the full SVD (default) or a block Krylov "
                        "method with exact derivatives, faster at large chi (README, 'Truncated SVD')")
    p.add_argument("--betas", type=betas_argument, default="0.40:0.48:0.005",
                   help="START:STOP:STEP (STOP included when on the grid) or a list '0.4,0.44 0.5', each beta in "
                        f"{RANGE} (default 0.40:0.48:0.005)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=count, default=None,
                       help=f"worker processes (default: the cores, {available_parallelism()} here); 1: in this "
                            "process")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run the betas on the Dask cluster of this scheduler, e.g. tcp://127.0.0.1:8786 (needs "
                            "pip install -e '.[distributed]'; the workers need tenferro_py; not with --jobs); this "
                            "process writes the CSV")
    p.add_argument("--out", default="runs/sweep",
                   help="writes OUT.csv (locked through OUT.csv.lock) and OUT.png (default runs/sweep)")
    return p


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    """SIGTERM: stop the sweep as Ctrl-C does; a second SIGTERM does not cut the cleanup short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def say(line: str) -> None:
    """A line for the user, on stderr, named by this program."""
    print(f"ising_sweep.py: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    h = args.h if args.c == "difference" else None
    if h is not None:
        for beta in (min(args.betas), max(args.betas)):
            if not difference_in_range(beta, h):
                cli.error(f"argument --h: must keep beta - h and beta + h in {RANGE}, got {h!r} for beta={beta!r}")
    csv_path, png_path = sweep.output_paths(args.out)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        check_writable(png_path)
        done = sweep.run_sweep(args.betas, args.chi, args.steps, h, args.out, jobs=args.jobs, scheduler=args.scheduler,
                               svd=args.svd, notify=say)
    except sweep.SweepError as err:
        say(f"error: {err}")
        return 2
    except (KeyboardInterrupt, Terminated) as stop:
        saved = {float(r["beta"]) for r in sweep.read_sweep(csv_path)} if csv_path.is_file() else set()
        have = sum(b in saved for b in args.betas)
        how, status = ("interrupted", 130) if isinstance(stop, KeyboardInterrupt) else ("terminated", 143)
        say(f"{how}; {have} of {len(args.betas)} betas are saved in {csv_path}, the same command resumes")
        return status
    finally:
        signal.signal(signal.SIGTERM, previous)
    failed = f", {len(done.failed)} without a finite result (no row; see above)" if done.failed else ""
    print(f"{csv_path}: {len(done.computed)} betas computed, {len(done.skipped)} already there{failed}")
    status = 2 if done.failed else 0
    rows = sweep.read_sweep(csv_path)
    if not rows:
        print(f"no plot: {csv_path} has no row")
        return status
    try:
        sweep.plot_rows(rows, png_path)
    except ImportError:
        print(f"no plot: matplotlib is not installed; pip install -e '.[plot]' (or pip install matplotlib) "
              f"and run again to draw {png_path}")
    except OSError as err:
        say(f"error: {cannot_write(png_path, err)}")
        return 2
    else:
        print(f"{png_path}: u and c against Onsager, and the errors")
    return status


if __name__ == "__main__":
    sys.exit(main())
