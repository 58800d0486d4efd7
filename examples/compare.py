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

import re
import struct
import sys
from typing import Sequence, TextIO

from tenferro_py.models.onsager import energy, ln_z, specific_heat

#: SPEC §4, χ = 16, 20 steps, h = 1e-5: β → (lnZ/N, u, c by difference, c by jvp of grad).
REFERENCE = {
    0.3: (0.790559063800966, -0.704498679529762, 0.286288378175, 0.286288379149),
    0.4: (0.879363060306852, -1.106045407611296, 0.861447342402, 0.861447343854),
    0.5: (1.025792858455948, -1.745583468150080, 0.724737280960, 0.724737277976),
    0.6: (1.210133028164416, -1.909086939792358, 0.313435729623, 0.313435729647),
}
TOLERANCE = (1e-13, 1e-10, 1e-7, 1e-8)
NAMES = ("lnZ/N", "u", "c", "c_ad")

_HEADER = re.compile(r"chi=(\d+) steps=(\d+) width=\d+ h=(\S+)")
_PAIR = re.compile(r"([\w/]+)=(\S+)")


def _from_hex(text: str) -> float:
    return struct.unpack(">d", bytes.fromhex(text))[0]


def is_reference_setting(chi: int, steps: int, h: float) -> bool:
    """True for the setting of SPEC's table: χ = 16, 20 steps, h = 1e-5."""
    return (chi, steps, h) == (16, 20, 1e-5)


Values = tuple  # (lnZ/N, u, c or None, c_ad or None)


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


def report(name: str, run: dict, reference: bool) -> bool:
    """Print errors against Onsager (and SPEC's table when ``reference``); True when the table holds."""
    ok = True
    print(f"{name}: error against Onsager (truncation at this χ)" + (" and against SPEC's table" if reference else ""))
    for beta, values in run.items():
        c_exact = specific_heat(beta)
        exact = (ln_z(beta), energy(beta), c_exact, c_exact)
        line = f"  beta={beta:.4f} onsager " + " ".join(
            f"d{n}={v - e:+.3e}" for n, v, e in zip(NAMES, values, exact) if v is not None
        )
        if reference and beta in REFERENCE:
            diffs = [(n, abs(v - r), t) for n, v, r, t in zip(NAMES, values, REFERENCE[beta], TOLERANCE) if v is not None]
            good = all(d <= t for _, d, t in diffs)
            ok &= good
            line += " | table " + " ".join(f"|d{n}|={d:.1e}" for n, d, _ in diffs)
            line += " ok" if good else " OUTSIDE TOLERANCE"
        print(line)
    return ok


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
    if not 1 <= len(argv) <= 2 or any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0 if argv else 2
    parsed = []
    for path in argv:
        try:
            with _open(path) as stream:
                parsed.append(parse(stream))
        except OSError as err:
            print(f"compare.py: cannot read {path!r}: {err.strerror}", file=sys.stderr)
            return 2
        except UnicodeDecodeError as err:
            print(f"compare.py: {path!r} is not a run's output (bytes that are not UTF-8 at offset {err.start})",
                  file=sys.stderr)
            return 2
        if not parsed[-1][0]:
            print(f"compare.py: no 'beta=...' lines in {path!r}", file=sys.stderr)
            return 2
    ok = all([report(name, run, reference) for name, (run, reference) in zip("AB", parsed)])
    if len(parsed) == 2:
        compare(parsed[0][0], parsed[1][0])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
