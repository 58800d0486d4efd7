"""Spin-½ Heisenberg antiferromagnet on the square lattice by variational C4v iPEPS, the energy's gradient
by implicit differentiation of the CTMRG fixed point (tenferro_py.models.ipeps), minimised by L-BFGS.

Prints one line per iteration (iteration, energy per site, |dE/dθ|, seconds), then the stop reason,
the final state's spin-spin correlations ⟨S₀·S_r⟩ along a row, its staggered magnetisation and
correlation length, and energy=E with 10 decimals.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

import numpy as np

import tenferro_py as tf
from tenferro_py.fixed_point import FixedPointError
from tenferro_py.models import correlations, ctmrg, ipeps
from tenferro_py.models.cli import ArgumentParser, number

DEFAULTS = {"D": 2, "chi": 16, "seed": 0, "maxiter": 100}
EPILOG = """\
The start is the Neel state plus noise of size 0.1 in its D > 1 entries. --save FILE writes, after
each iteration, theta with D, chi, seed, the iteration count and the energy to FILE (JSON, replaced
atomically); --load FILE goes on from such a file (its D and seed; --D and --seed, if given, must
agree; --chi may differ). The published D = 2 energy is -0.6602310935."""


def file_name(path: str) -> str:
    """An argparse ``type=`` for --load: a file name, not empty."""
    if not path:
        raise argparse.ArgumentTypeError("needs a file name")
    return path


def writable(path: str) -> str:
    """An argparse ``type=`` for --save: a file name that ``ipeps.save_state`` can write."""
    try:
        ipeps.check_writable(file_name(path))
    except ipeps.StateFileError:
        raise argparse.ArgumentTypeError(f"cannot write a file there: {path!r}") from None
    return path


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="ipeps_heisenberg.py", description=" ".join(__doc__.split("\n\n")[0].split()),
                       epilog=EPILOG)
    for name, least, what in (("D", 1, "bond dimension"), ("chi", 1, "the environment's bond dimension"),
                              ("seed", 0, "the random start"), ("maxiter", 1, "L-BFGS iterations")):
        p.add_argument(f"--{name}", type=number(int, f"an integer >= {least}", lambda v, least=least: v >= least),
                       help=f"{what} (default {DEFAULTS[name]})")
    p.add_argument("--correlations", metavar="R", default=10,
                   type=number(int, "an integer >= 0", lambda v: v >= 0),
                   help="print <S_0.S_r> for r = 1 ... R (default 10; 0: none)")
    p.add_argument("--eigh", choices=ctmrg.EIGH_METHODS, default="auto",
                   help="the CTMRG corner's eigh: auto (by the measured crossover), full or krylov (default auto)")
    p.add_argument("--save", metavar="FILE", type=writable, help="save the state after each iteration")
    p.add_argument("--load", metavar="FILE", type=file_name, help="resume from FILE (written by --save)")
    return p


def main(argv: Sequence[str]) -> int:
    p = parser()
    args = p.parse_args(argv)
    settings = {key: DEFAULTS[key] if getattr(args, key) is None else getattr(args, key) for key in DEFAULTS}
    if args.load is not None:
        try:
            state = ipeps.load_state(args.load)
        except ipeps.StateFileError as err:
            p.error(f"--load: {err}")
        for key in ("D", "seed"):
            if getattr(args, key) is not None and getattr(args, key) != state[key]:
                p.error(f"--load {args.load!r}: saved with {key}={state[key]}, but --{key} {getattr(args, key)} "
                        f"was given")
            settings[key] = state[key]
        theta, done = np.array(state["theta"]), state["iterations"]
        start = f"{args.load} (iteration {done})"
    else:
        theta, done, start = ipeps.initial_parameters(settings["D"], settings["seed"]), 0, "Néel + noise"
    bond, chi = settings["D"], settings["chi"]
    print(f"tenferro_py {tf.__version__} iPEPS Heisenberg D={bond} chi={chi} seed={settings['seed']} "
          f"parameters={theta.size} start={start}")
    print("iter energy |grad| seconds", flush=True)
    model = ipeps.VariationalEnergy(bond, chi, method=args.eigh)
    iterations, clock = done, time.perf_counter()

    def on_iteration(x: np.ndarray, energy: float, gradient: np.ndarray) -> None:
        nonlocal iterations, clock
        iterations, now = iterations + 1, time.perf_counter()
        print(f"{iterations:4d} {energy:.10f} {np.linalg.norm(gradient):.1e} {now - clock:.2f}", flush=True)
        clock = now
        if args.save is not None:
            ipeps.save_state(args.save, {"format": ipeps.SAVE_FORMAT, "D": bond, "chi": chi, "seed": settings["seed"],
                                         "iterations": iterations, "energy": energy, "theta": x.tolist()})

    try:
        result = ipeps.optimise(model, theta, settings["maxiter"], on_iteration)
        final = model.observables(result.x)
        spins = correlations.spin_correlations(model, result.x, args.correlations) if args.correlations else None
    except FixedPointError as err:
        print(f"ipeps_heisenberg.py: stopped after iteration {iterations}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        saved = f", saved in {args.save}" if args.save is not None and iterations > done else ""
        print(f"ipeps_heisenberg.py: interrupted after iteration {iterations}{saved}", file=sys.stderr)
        return 130
    print(f"stop: {result.message}")
    if spins is not None:
        print(f"spin_correlations r=1..{args.correlations}: " + " ".join(f"{v:.8f}" for v in spins))
    print(f"staggered_magnetisation={final.staggered_magnetisation:.8f} "
          f"correlation_length={final.correlation_length:.6f} (transfer matrix at chi={chi})")
    print(f"energy={result.fun:.10f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
