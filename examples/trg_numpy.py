"""The 2D Ising model by TRG, written as a NumPy user writes it: ``import tenferro_py.numpy as tnp``.

The same algorithm as examples/ising_trg.py (Levin–Nave TRG, SPEC §4), in NumPy's spelling:
operators, ``.transpose(...).reshape(...)`` in NumPy's row-major order, ``tnp.linalg.svd`` and
slicing; ``tnp.value_and_grad`` gives lnZ/N and its β-derivative, ``tnp.hvp`` the second one.
No staging here: the whole chain is one tape (ising_trg.py cuts it per step).

Usage: python examples/trg_numpy.py [chi=16] [steps=20] [beta ...]
"""

from __future__ import annotations

import sys

import tenferro_py.numpy as tnp
from tenferro_py.models import trg
from tenferro_py.models.cli import ArgumentParser, number


def initial(beta):
    """T₀[u,l,d,r] = Σ_σ q[σ,u] q[σ,l] q[σ,d] q[σ,r], q = [[c, s], [c, −s]], c = √cosh β, s = √sinh β."""
    c, s = tnp.sqrt(tnp.cosh(beta)), tnp.sqrt(tnp.sinh(beta))
    q = tnp.array([[c, s], [c, -s]])
    return tnp.einsum("su,sl,sd,sr->uldr", q, q, q, q)


def step(t, k):
    """One TRG step: (T', ln‖T‖), T' of bond dimension k built from T / ‖T‖."""
    d = t.shape[0]
    norm = tnp.sqrt(tnp.sum(t * t))
    t = t / norm
    ua, sa, va = tnp.linalg.svd(t.transpose(2, 1, 0, 3).reshape(d * d, d * d), full_matrices=False)
    ub, sb, vb = tnp.linalg.svd(t.transpose(3, 2, 1, 0).reshape(d * d, d * d), full_matrices=False)
    s1 = (ua[:, :k] * tnp.sqrt(sa[:k])).reshape(d, d, k)
    s3 = (va[:k].T * tnp.sqrt(sa[:k])).reshape(d, d, k)
    s2 = (ub[:, :k] * tnp.sqrt(sb[:k])).reshape(d, d, k)
    s4 = (vb[:k].T * tnp.sqrt(sb[:k])).reshape(d, d, k)
    return tnp.einsum("war,abu,bgl,gwd->ruld", s1, s2, s3, s4), tnp.log(norm)


def lnz_per_site(beta, ks):
    """lnZ/N on a torus of N = 2^len(ks) sites."""
    n = len(ks)
    t, total = initial(beta), 0.0
    for i, k in enumerate(ks):
        t, ln_norm = step(t, k)
        total = total + 2.0 ** (n - i) * ln_norm
    return (total + tnp.log(tnp.einsum("xyxy->", t))) / 2.0**n


def main(argv) -> int:
    cli = ArgumentParser(prog="trg_numpy.py", description=__doc__.splitlines()[0])
    positive = number(int, "an integer >= 1", lambda v: v >= 1)
    cli.add_argument("chi", nargs="?", type=positive, default=16, help="bond dimension (default 16)")
    cli.add_argument("steps", nargs="?", type=positive, default=20, help="TRG steps, N = 2^steps (default 20)")
    cli.add_argument("beta", nargs="*", type=number(float, "a number in [1e-14, 8]", trg.in_beta_range),
                     help="inverse temperatures (default 0.3 0.4 0.44 0.5 0.6)")
    args = cli.parse_args(argv)
    ks = trg.schedule(args.chi, args.steps)
    for beta in args.beta or trg.DEFAULT_BETAS:
        lnz, grad = tnp.value_and_grad(lnz_per_site)(beta, ks)
        curvature = tnp.hvp(lambda b: lnz_per_site(b, ks), beta, 1.0)
        print(f"beta={beta:.4f} lnZ/N={float(lnz):.15f} u={-float(grad):.15f} c={beta * beta * float(curvature):.12f}")
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
