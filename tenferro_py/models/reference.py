"""What a TRG run is checked against: Onsager's exact values, and SPEC §4's public reference table.

The table holds lnZ/N, u and c of Levin–Nave TRG at χ = 16, 20 steps, h = 1e-5 (c by central
difference of the gradient, and c_ad by forward over reverse), from two independent
implementations (JAX with the same SVD rule, and tenferro-rs eager). Errors against Onsager at
χ = 16 are physical (truncation); errors against the table are not, within its tolerance.
"""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

from .onsager import energy, ln_z, specific_heat

__all__ = ["NAMES", "REFERENCE", "TOLERANCE", "Values", "is_reference_setting", "report"]

REFERENCE = {
    0.3: (0.790559063800966, -0.704498679529762, 0.286288378175, 0.286288379149),
    0.4: (0.879363060306852, -1.106045407611296, 0.861447342402, 0.861447343854),
    0.5: (1.025792858455948, -1.745583468150080, 0.724737280960, 0.724737277976),
    0.6: (1.210133028164416, -1.909086939792358, 0.313435729623, 0.313435729647),
}
"""SPEC §4, χ = 16, 20 steps, h = 1e-5: β → (lnZ/N, u, c by difference, c by jvp of grad)."""
TOLERANCE = (1e-13, 1e-10, 1e-7, 1e-8)
"""How far a run may be from the table: lnZ/N, u, c, c_ad."""
NAMES = ("lnZ/N", "u", "c", "c_ad")

Values = Tuple[float, float, Optional[float], Optional[float]]
"""(lnZ/N, u, c or None, c_ad or None) of one β."""


def is_reference_setting(chi: int, steps: int, h: float) -> bool:
    """True for the setting of SPEC's table: χ = 16, 20 steps, h = 1e-5."""
    return (chi, steps, h) == (16, 20, 1e-5)


def report(name: str, run: Mapping[float, Values], reference: bool) -> tuple[list[str], bool]:
    """(lines, ok): per β the errors against Onsager and, when ``reference``, against the table;
    ok is False when a β of the table is outside its tolerance. None values are skipped."""
    ok = True
    title = f"{name}: error against Onsager (truncation at this χ)"
    lines = [title + (" and against SPEC's table" if reference else "")]
    for beta, values in run.items():
        c_exact = specific_heat(beta)
        exact = (ln_z(beta), energy(beta), c_exact, c_exact)
        line = f"  beta={beta:.4f} onsager " + " ".join(
            f"d{n}={v - e:+.3e}" for n, v, e in zip(NAMES, values, exact) if v is not None
        )
        if reference and beta in REFERENCE:
            diffs = [(n, abs(v - r), t) for n, v, r, t in zip(NAMES, values, REFERENCE[beta], TOLERANCE)
                     if v is not None]
            good = all(d <= t for _, d, t in diffs)
            ok &= good
            line += " | table " + " ".join(f"|d{n}|={d:.1e}" for n, d, _ in diffs)
            line += " ok" if good else " OUTSIDE TOLERANCE"
        lines.append(line)
    return lines, ok
