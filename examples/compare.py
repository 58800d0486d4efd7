"""Compare outputs of examples/ising_trg.py: against Onsager, SPEC's table, and each other.

Usage:
    python examples/compare.py RUN            errors of one run against Onsager and the reference table
    python examples/compare.py RUN_A RUN_B    the same for each, then A against B, bit for bit

RUN is a file holding the program's output, or - for standard input. The exit
status is 1 when a β of the reference table is outside its tolerance
(lnZ/N 1e-13, u 1e-10, c 1e-7, c_ad 1e-8 against the table's jvp-of-grad
column), so ``python examples/ising_trg.py | python examples/compare.py -``
checks the whole table. Values missing from a run (c or c_ad, by --c) are skipped.
"""

from __future__ import annotations

import argparse
import re
import struct
import sys
from typing import Sequence, TextIO

from tenferro_py.models.cli import ArgumentParser
from tenferro_py.models.reference import NAMES, Values, is_reference_setting, report

_HEADER = re.compile(r"chi=(\d+) steps=(\d+) width=\d+ h=(\S+)")
_PAIR = re.compile(r"([\w/]+)=(\S+)")


def _from_hex(text: str) -> float:
    return struct.unpack(">d", bytes.fromhex(text))[0]


def parse(stream: TextIO) -> tuple[dict[float, Values], bool]:
    """(β → (lnZ/N, u, c, c_ad), whether the header is SPEC's table setting); exact from the hex lines."""
    runs: dict[float, Values] = {}
    beta = None
    reference = False
    for line in stream:
        if m := _HEADER.search(line):
            reference = is_reference_setting(int(m.group(1)), int(m.group(2)), float(m.group(3)))
        elif line.startswith("beta="):
            fields = dict(_PAIR.findall(line.split("|")[0]))
            beta = float(fields["beta"])
            runs[beta] = tuple(float(fields[n]) if n in fields else None for n in NAMES)
        elif line.startswith(" hex ") and beta is not None:
            bits = {k: _from_hex(v) for k, v in _PAIR.findall(line)}
            runs[beta] = (bits["lnZ/N"], -bits["grad"], bits.get("c"), bits.get("c_ad"))
    return runs, reference


def compare(a: dict, b: dict) -> None:
    """Max differences between two runs over their common βs, and how many values agree bit for bit."""
    common = sorted(set(a) & set(b))
    if not common:
        print("the two runs have no β in common")
        return
    pairs = [(i, x, y) for beta in common for i, (x, y) in enumerate(zip(a[beta], b[beta])) if x is not None and y is not None]
    same = sum(x == y for _, x, y in pairs)
    diffs = {NAMES[i]: max(abs(x - y) for j, x, y in pairs if j == i) for i in sorted({i for i, _, _ in pairs})}
    print(f"A vs B over {len(common)} βs: " + " ".join(f"max|d{n}|={d:.1e}" for n, d in diffs.items())
          + f"; bit-for-bit equal {same} of {len(pairs)}")


def _open(path: str) -> TextIO:
    return sys.stdin if path == "-" else open(path)


def main(argv: Sequence[str]) -> int:
    cli = ArgumentParser(prog="compare.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("run", nargs="+", metavar="RUN", help="a file holding ising_trg.py's output, or - for stdin")
    paths = cli.parse_args(argv).run
    if len(paths) > 2:
        cli.error(f"at most two runs to compare, got {len(paths)}")
    parsed = []
    for path in paths:
        try:
            with _open(path) as stream:
                parsed.append(parse(stream))
        except OSError as err:
            cli.exit(2, f"compare.py: cannot read {path!r}: {err.strerror}\n")
        except UnicodeDecodeError as err:
            cli.exit(2, f"compare.py: {path!r} is not a run's output (bytes that are not UTF-8 at offset "
                        f"{err.start})\n")
        if not parsed[-1][0]:
            cli.exit(2, f"compare.py: no 'beta=...' lines in {path!r}\n")
    ok = True
    for name, (run, reference) in zip("AB", parsed):
        lines, good = report(name, run, reference)
        print("\n".join(lines))
        ok &= good
    if len(parsed) == 2:
        compare(parsed[0][0], parsed[1][0])
    return 0 if ok else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
