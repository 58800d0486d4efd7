"""Which step, and which pairs of singular values, move c_ad of the Ising TRG from SPEC's table.

The table was computed with tenferro's SVD rule: F_ij = d/(d² + ε²) with d = s_j² − s_i² and an
absolute ε = 1e-12, on the whole coupling. Wherever the current rule is exact, that is the
current coefficient times g_ij = d²/(d² + ε²), a smooth factor. This script multiplies the
current coefficients by g (in session ops, so that c_ad's second derivative sees it too) on
chosen steps, or on chosen pairs of one step, and prints how far c_ad moves:

    python bench/old_rule_attribution.py 0.3            # every step at once, then one at a time
    python bench/old_rule_attribution.py 0.3 --step 5   # that step's pairs, by decades of s/s₁

With g on every step it gives the table's c_ad back (to 3e-13 at β = 0.3, 0.5, 0.6).

    python bench/old_rule_attribution.py 0.4 --hotrg   # HOTRG's u (χ = 16, 30 steps), eigh's old rule

does the same for tenferro_py.models.hotrg, whose eigh had F_ij = d/(d² + ε²), d = w_j − w_i,
ε = 1e-12 absolute: the old coefficient replaces the new one on one step at a time, then on
pairs of every step grouped by |w_j − w_i|/max|w|.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tenferro_py.linalg.eigh as eigh_rules
import tenferro_py.linalg.spectral as spectral
import tenferro_py.linalg.svd as svd_rules
import tenferro_py.session as session
from tenferro_py import CpuEngine, SliceConfig, Tensor
from tenferro_py.models import hotrg, trg

TABLE_C_AD = {0.3: 0.286288379149, 0.4: 0.861447343854, 0.5: 0.724737277976, 0.6: 0.313435729647}
OLD_EPS = 1e-12
CURRENT = spectral.gap_coefficients


def use_coefficients(coefficients) -> None:
    """Have the SVD's and eigh's rules (the modules that call gap_coefficients) use ``coefficients``."""
    svd_rules.gap_coefficients = eigh_rules.gap_coefficients = coefficients


def numbers(values) -> np.ndarray:
    """A spectrum's numbers, whether the rule runs on arrays (one kernel) or on eager tensors."""
    return np.asarray(values if isinstance(values, np.ndarray) else values.value().to_numpy())


def old_rule_on(step_of: dict, steps: set, pairs=None):
    """gap_coefficients with the old rule's damping g on the given steps (and, if ``pairs`` is given,
    only on the pairs where pairs(values, cols) is 1)."""

    def coefficients(s, values, eps, cols, sums=True):
        minus, plus, inverse = CURRENT(s, values, eps, cols, sums)
        x = numbers(values)
        if step_of.get(x.tobytes()) not in steps:
            return minus, plus, inverse
        k = x.shape[0]
        head = values if cols == k else s.slice(values, SliceConfig([0], [cols]))
        vj, vi = s.broadcast_in_dim(head, (k, cols), (1,)), s.broadcast_in_dim(values, (k, cols), (0,))
        d = s.sub(s.mul(vj, vj), s.mul(vi, vi))
        d2 = s.mul(d, d)
        g = s.div(d2, s.add(d2, s.constant_from(Tensor(np.full((k, cols), OLD_EPS**2)))))
        if pairs is not None:
            chosen = pairs(x, cols)
            g = s.add(s.mul(g, s.constant_from(Tensor(chosen))), s.constant_from(Tensor(1.0 - chosen)))
        return s.mul(minus, g), (None if plus is None else s.mul(plus, g)), inverse

    return coefficients


def c_ad(beta: float, ks, engine, coefficients=CURRENT) -> float:
    use_coefficients(coefficients)
    try:
        return beta * beta * trg.value_grad_and_curvature(beta, ks, engine)[2]
    finally:
        use_coefficients(CURRENT)


def old_eigh_rule_on(step_of: dict, steps: set, pairs=None):
    """gap_coefficients with eigh's old 1/(w_j − w_i), d/(d² + ε²) with absolute ε, on the given
    steps (and pairs)."""

    def coefficients(s, values, eps, cols, sums=True):
        minus, plus, inverse = CURRENT(s, values, eps, cols, sums)
        x = numbers(values)
        if sums or step_of.get(x.tobytes()) not in steps:
            return minus, plus, inverse
        k = x.shape[0]
        d = s.sub(s.broadcast_in_dim(values, (k, cols), (1,)), s.broadcast_in_dim(values, (k, cols), (0,)))
        old = s.div(d, s.add(s.mul(d, d), s.constant_from(Tensor(np.full((k, cols), OLD_EPS**2)))))
        chosen = (1.0 - np.eye(k, cols)) * (1.0 if pairs is None else pairs(x, cols))
        return s.add(s.mul(old, s.constant_from(Tensor(chosen))), s.mul(minus, s.constant_from(Tensor(1.0 - chosen)))), \
            None, None

    return coefficients


def attribute_hotrg(beta: float) -> int:
    """HOTRG's u: which steps' eigh, and which pairs of eigenvalues, moved it."""
    ks = hotrg.schedule(16, 30)
    step_of: dict = {}
    current_step = [0]
    eigh, step = session.EagerSession.eigh, hotrg.step

    def recording_eigh(self, x, derivative_eps=None):
        w, v = eigh(self, x, derivative_eps)
        step_of.setdefault(numbers(w).tobytes(), current_step[0])
        return w, v

    def counting_step(s, t, k):
        current_step[0] += 1
        return step(s, t, k)

    def u(coefficients=CURRENT) -> float:
        current_step[0] = -1
        use_coefficients(coefficients)
        try:
            return -hotrg.program(ks).value_and_grad(beta)[1].item()
        finally:
            use_coefficients(CURRENT)

    session.EagerSession.eigh, hotrg.step = recording_eigh, counting_step
    try:
        base = u()
        every = u(old_eigh_rule_on(step_of, set(range(len(ks)))))
        print(f"HOTRG beta={beta}: u = {base!r}; with eigh's old rule on every step it moves by {every - base:+.3e}")
        for i in range(len(ks)):
            moved = u(old_eigh_rule_on(step_of, {i})) - base
            if abs(moved) > 1e-13:
                print(f"  step {i}: the old rule there moves u by {moved:+.3e}")
        edges = [0.0, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-6, 2.0]
        for lo, hi in zip(edges, edges[1:]):
            def pairs(x, cols, lo=lo, hi=hi):
                gap = np.abs(x[None, :cols] - x[:, None]) / np.abs(x).max()
                return ((gap >= lo) & (gap < hi)).astype(float)

            moved = u(old_eigh_rule_on(step_of, set(range(len(ks))), pairs)) - base
            print(f"  pairs with |w_j − w_i| in [{lo:g}, {hi:g})·max|w|, every step: {moved:+.3e}")
    finally:
        session.EagerSession.eigh, hotrg.step = eigh, step
    return 0


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("beta", type=float, choices=sorted(TABLE_C_AD))
    parser.add_argument("--step", type=int, help="attribute within this step, by decades of s/s₁")
    parser.add_argument("--hotrg", action="store_true", help="HOTRG's u and eigh's old rule instead")
    args = parser.parse_args(argv)
    if args.hotrg:
        return attribute_hotrg(args.beta)
    ks = trg.schedule(16, 20)
    engine = CpuEngine.serial()
    spectra: list = []
    trg.value_and_grad(args.beta, ks, engine, spectra=spectra)
    step_of = {numbers(sv).tobytes(): i // 2 for i, sv in enumerate(spectra)}
    base = c_ad(args.beta, ks, engine)
    every = c_ad(args.beta, ks, engine, old_rule_on(step_of, set(range(len(ks)))))
    print(f"beta={args.beta}: c_ad − table = {base - TABLE_C_AD[args.beta]:+.3e}; with the old rule on every "
          f"step: {every - TABLE_C_AD[args.beta]:+.3e}")
    if args.step is None:
        for i in range(len(ks)):
            moved = c_ad(args.beta, ks, engine, old_rule_on(step_of, {i})) - base
            if abs(moved) > 1e-12:
                print(f"  step {i}: the old rule there moves c_ad by {moved:+.3e}")
        return 0
    kept = ks[args.step]
    s = numbers(spectra[2 * args.step])
    s = s / s[0]
    edges = [1.1, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 0.0]
    bands = [(lo, hi) for hi, lo in zip(edges, edges[1:])]
    found = []
    for a, (lo1, hi1) in enumerate(bands):
        for lo2, hi2 in bands[a:]:
            first = np.where((s >= lo1) & (s < hi1))[0]
            second = np.where((s >= lo2) & (s < hi2))[0]

            def pairs(x, cols, first=first, second=second):
                chosen = np.zeros((x.shape[0], cols))
                chosen[np.ix_(first, second[second < cols])] = 1.0
                chosen[np.ix_(second, first[first < cols])] = 1.0
                return chosen

            if len(first) and len(second):
                moved = c_ad(args.beta, ks, engine, old_rule_on(step_of, {args.step}, pairs)) - base
                found.append((abs(moved), lo1, lo2, moved, len(first[first >= kept]), len(second[second >= kept])))
    for _, lo1, lo2, moved, n1, n2 in sorted(found, reverse=True)[:8]:
        print(f"  s_i/s₁ in [{lo1:g}, ·), s_j/s₁ in [{lo2:g}, ·) ({n1} and {n2} of them discarded): {moved:+.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
