"""How right are gradients through quimb's decompositions at repeated or zero singular values?

Each case is a real loss L(x) of some arrays x, written once against autoray and run by quimb on
tnp arrays (``tnp.value_and_grad``: our gradient g, ∂L/∂Re z + i ∂L/∂Im z for complex z), on JAX
arrays (``jax.grad``, conjugated to our convention) and on NumPy arrays (the reference). Along 3
random unit directions d (Hermitian ones where the input must stay Hermitian), the directional
derivative Re<g, d> is compared with a Richardson-extrapolated central difference of the NumPy
loss, fd = (4 D(h/2) - D(h)) / 3 with D(h) = (L(x+hd) - L(x-hd)) / 2h and h = 1e-3 |x|:

    rel err = max over d of |Re<g, d> - fd| / max(|fd|, 1e-300)

Column ``fd?`` is the difference spread of fd at h and h/2 (its own error estimate): where it is
not small the loss is not smooth at x and neither gradient can be judged. Cases:

    split    Tensor.split (svd, svd:eig, eigh; absorb both/left/right), loss sum((l @ r).data * W),
             spectra (2,2,1,.5,.5) and (3,2,1,0,0) built as U diag(s) V^H ('rot') or np.diag
             ('diag'); (3,3,2,1,1) with max_bond 3, 2 (at a gap) and 1, 4 ('cut inside multiplet')
    ghz      GHZ MPS (L=8, D=2; 'pad4': bonds zero-padded to 4): compress / canonize / left_canonize
             / gauge_all_simple, then the transverse-field Ising energy <psi|H|psi>/<psi|psi>
    peps     3x3 GHZ PEPS and a zero-padded product PEPS: norm by contract_boundary(max_bond=chi)
    z2       a Z2-symmetric MPS (phi + X phi, phi pinned to s_1 = s_L = 0: exact Schmidt pairs)
             compressed at a gap (max_bond=4) and inside a pair (max_bond=3)

Run: ``python bench/degenerate_probe.py`` (all cases, < 2 minutes) or ``--quick`` (a subset).
Wrong (rel err > 1e-8) cases are listed at the end; 'inside multiplet' cases are listed apart
(their loss has no derivative at x).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
warnings.simplefilter("ignore")

import autoray as ar  # noqa: E402
import numpy as np  # noqa: E402
import quimb.tensor as qtn  # noqa: E402

import tenferro_py.numpy as tnp  # noqa: E402

try:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
except ImportError:
    jax = None

TOL = 1e-8
RNG = np.random.default_rng(1234)
ROWS: list[tuple] = []


def err_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:90]}"


def rdot(gs, ds) -> float:
    return float(sum(np.real(np.vdot(g, d)) for g, d in zip(gs, ds)))


def randn(shape, dtype):
    z = RNG.normal(size=shape)
    return z + 1j * RNG.normal(size=shape) if np.dtype(dtype).kind == "c" else z


def fd_pair(loss, xs, ds, h) -> tuple[float, float]:
    """Richardson central differences at (h, h/2) and (h/2, h/4)."""
    def d(step):
        plus = loss([x + step * v for x, v in zip(xs, ds)])
        minus = loss([x - step * v for x, v in zip(xs, ds)])
        return (float(plus) - float(minus)) / (2 * step)
    d1, d2, d3 = d(h), d(h / 2), d(h / 4)
    return (4 * d2 - d1) / 3, (4 * d3 - d2) / 3


def probe(name, dtype, loss, xs, hermitian=False, inside=False) -> None:
    """One line: our max rel err, JAX's, fd's own spread; ``loss(list of arrays) -> real scalar``."""
    xs = [np.asarray(x, dtype=dtype) for x in xs]
    t0 = time.perf_counter()
    dirs = []
    for _ in range(3):
        ds = [randn(x.shape, dtype) for x in xs]
        if hermitian:
            ds = [(v + v.conj().T) / 2 for v in ds]
        nrm = np.sqrt(sum(np.vdot(v, v).real for v in ds))
        dirs.append([v / nrm for v in ds])
    h = 1e-3 * np.sqrt(sum(np.vdot(x, x).real for x in xs))
    fds, spread = [], 0.0
    for ds in dirs:
        r1, r2 = fd_pair(loss, xs, ds, h)
        fds.append(r1)
        spread = max(spread, abs(r1 - r2) / max(abs(r1), 1e-300))

    def errors(gs):
        return max(abs(rdot(gs, ds) - f) / max(abs(f), 1e-300) for ds, f in zip(dirs, fds))

    nums = tuple(range(len(xs)))
    t1 = time.perf_counter()
    try:
        _, gs = tnp.value_and_grad(lambda *a: loss(list(a)), nums)(*xs)
        ours = errors([np.asarray(g) for g in gs])
        ours_s = f"{ours:9.1e}" + ("  NaN!" if not np.isfinite(ours) else "")
    except Exception as e:  # noqa: BLE001 (a failed route is a result)
        ours, ours_s = np.nan, err_text(e)
    t2 = time.perf_counter()
    if jax is None:
        jax_s, jerr = "absent", np.nan
    else:
        try:
            gj = jax.grad(lambda *a: loss(list(a)), nums)(*[jnp.asarray(x) for x in xs])
            gj = [np.conj(np.asarray(g)) for g in gj]
            finite = all(np.all(np.isfinite(g)) for g in gj)
            jerr = errors(gj)
            jax_s = f"{'finite' if finite else 'NaN':6s} {jerr:9.1e}"
        except Exception as e:  # noqa: BLE001
            jerr, jax_s = np.nan, "error " + err_text(e)
    t3 = time.perf_counter()
    tag = "  [cut inside multiplet]" if inside else ""
    tag += f" t={t1-t0:.1f}/{t2-t1:.1f}/{t3-t2:.1f}"
    print(f"{name:44s} {np.dtype(dtype).name:10s} {ours_s:>9s}  {jax_s:24s} {spread:8.0e}{tag}", flush=True)
    ROWS.append((name, np.dtype(dtype).name, ours, jerr, spread, inside, ours_s))


# --- cases -------------------------------------------------------------------------------------


def real_scalar(x):
    return ar.do("real", x)


def unitary(n, dtype):
    q, r = np.linalg.qr(randn((n, n), dtype))
    return q * (np.diag(r) / np.abs(np.diag(r)))


def split_cases(quick: bool) -> None:
    methods = ["svd", "svd:eig", "eigh"]
    absorbs = ["both"] if quick else ["both", "left", "right"]
    spectra = {"(2,2,1,.5,.5)": [2, 2, 1, .5, .5], "(3,2,1,0,0)": [3, 2, 1, 0, 0]}
    dtypes = ["float64", "complex128"]
    for dtype in dtypes:
        w = randn((5, 5), dtype)
        for method in methods:
            def loss(xs, method=method, absorb="both", max_bond=None):
                l, r = qtn.Tensor(xs[0], inds=("i", "j")).split(
                    left_inds=["i"], method=method, cutoff=0.0, absorb=absorb, max_bond=max_bond, get="tensors")
                return real_scalar(ar.do("sum", (l @ r).transpose("i", "j").data * w))

            def build(s, how):
                u = unitary(5, dtype)
                v = u if method == "eigh" else unitary(5, dtype)
                return np.diag(np.asarray(s, dtype=dtype)) if how == "diag" else (u * s) @ v.conj().T

            herm = method == "eigh"
            for sname, s in spectra.items():
                for how in (["rot"] if quick else ["rot", "diag"]):
                    a = build(s, how)
                    for ab in absorbs:
                        probe(f"split {method} {ab} {sname} {how}", dtype,
                              lambda xs, ab=ab: loss(xs, absorb=ab), [a], hermitian=herm)
            a = build([3, 3, 2, 1, 1], "rot")
            for chi in ([2, 1] if quick else [3, 2, 1, 4]):
                probe(f"split {method} both (3,3,2,1,1) max_bond={chi}", dtype,
                      lambda xs, chi=chi: loss(xs, max_bond=chi), [a], hermitian=herm, inside=chi in (1, 4))


def mps_with(template, xs):
    p = template.copy()
    for t, x in zip(p, xs):
        t.modify(data=x)
    return p


def energy(p, ham):
    h = ham.copy(deep=True) if ar.infer_backend(p[0].data) == "jax" else ham
    if h is not ham:
        h.apply_to_arrays(jnp.asarray)
    return real_scalar(p.H @ h.apply(p)) / real_scalar(p.H @ p)


def ghz_mps(L, dtype, pad=None):
    arrays = []
    for k in range(L):
        a = np.zeros((2, 2) if k in (0, L - 1) else (2, 2, 2), dtype=dtype)
        for v in (0, 1):
            a[(v,) * a.ndim] = 1.0
        arrays.append(a)
    arrays[0] = arrays[0] / np.sqrt(2)
    if np.dtype(dtype).kind == "c":
        arrays[0][1, 1] *= np.exp(0.7j)
    if pad:
        arrays = [np.pad(a, [(0, pad - 2)] * (a.ndim - 1) + [(0, 0)]) for a in arrays]
    return qtn.MatrixProductState(arrays)


def z2_mps(L, D, dtype):
    """phi + X phi, phi an MPS of bond D with s_1 = s_L = 0: tensors diag(B^s, B^{1-s}), spectra in pairs."""
    arrays = []
    for k in range(L):
        if k in (0, L - 1):
            vec = randn(D, dtype)
            a = np.zeros((2 * D, 2), dtype=dtype)
            a[:D, 0], a[D:, 1] = vec, vec
        else:
            b = [randn((D, D), dtype) for _ in (0, 1)]
            a = np.zeros((2 * D, 2 * D, 2), dtype=dtype)
            for s in (0, 1):
                a[:D, :D, s], a[D:, D:, s] = b[s], b[1 - s]
        arrays.append(a / np.linalg.norm(a))
    return qtn.MatrixProductState(arrays)


def mps_cases(quick: bool) -> None:
    L = 8
    ham = qtn.MPO_ham_ising(L, j=1.0, bx=0.7)

    def inplace(method, **kw):
        return lambda p: (getattr(p, method)(**kw), p)[1]

    ops = {
        "compress(max_bond=2)": inplace("compress", max_bond=2, cutoff=0.0),
        "compress(max_bond=4)": inplace("compress", max_bond=4, cutoff=0.0),
        "canonize(3)": inplace("canonize", where=3),
        "left_canonize()": inplace("left_canonize"),
        "gauge_all_simple()": lambda p: p.gauge_all_simple(),
    }
    for dtype in ["float64", "complex128"]:
        for state, template in [("ghz", ghz_mps(L, dtype)), ("ghz pad4", ghz_mps(L, dtype, pad=4))]:
            for oname, op in ops.items():
                if quick and oname not in ("compress(max_bond=2)", "gauge_all_simple()"):
                    continue
                if oname == "compress(max_bond=4)" and state == "ghz":
                    continue
                probe(f"{state} L={L} {oname} energy", dtype,
                      lambda xs, t=template, op=op: energy(op(mps_with(t, xs)), ham), [t.data for t in template])
        z2 = z2_mps(L, 3, dtype)
        for chi in [4, 3]:
            probe(f"z2 L={L} D=2x3 compress(max_bond={chi}) energy", dtype,
                  lambda xs, chi=chi: energy(inplace("compress", max_bond=chi, cutoff=0.0)(mps_with(z2, xs)), ham),
                  [t.data for t in z2], inside=chi == 3)


def peps_cases(quick: bool) -> None:
    for dtype in ["float64", "complex128"]:
        template = qtn.PEPS.rand(3, 3, bond_dim=2, phys_dim=2, seed=7, dtype=dtype)
        ghz, prod = [], []
        for t in template:
            a = np.zeros(t.shape, dtype=dtype)
            for v in (0, 1):
                a[(v,) * a.ndim] = 1.0
            ghz.append(a)
            b = np.zeros(t.shape, dtype=dtype)
            b[(0,) * (b.ndim - 1)] = randn(2, dtype)
            prod.append(b)

        def norm(xs, chi):
            p = mps_with(template, xs)
            return real_scalar(p.make_norm().contract_boundary(max_bond=chi, cutoff=0.0))

        for state, xs in [("peps ghz 3x3", ghz), ("peps product pad2 3x3", prod)]:
            for chi in ([2] if quick else [2, 4]):
                probe(f"{state} norm contract_boundary(max_bond={chi})", dtype,
                      lambda ys, chi=chi: norm(ys, chi), xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cases")
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"# degenerate_probe: numpy {np.__version__}, quimb {qtn.__name__ and __import__('quimb').__version__}, "
          f"jax {jax.__version__ if jax else 'absent'}; rel err over 3 directions; TOL {TOL:g}")
    print(f"{'case':44s} {'dtype':10s} {'ours':>9s}  {'JAX (grad, err)':24s} {'fd?':>8s}")
    split_cases(args.quick)
    mps_cases(args.quick)
    peps_cases(args.quick)
    judged = [r for r in ROWS if not r[5]]
    wrong = [r for r in judged if not r[2] <= TOL]
    print(f"\n# summary: {len(ROWS)} cases in {time.perf_counter() - start:.0f} s; {len(judged)} judged (not "
          f"cutting inside a multiplet); ours wrong (rel err > {TOL:g} or failed): {len(wrong)}; "
          f"JAX wrong or NaN: {sum(not r[3] <= TOL for r in judged)}")
    for r in wrong:
        print(f"#   WRONG {r[0]} {r[1]}: {r[6]} (fd spread {r[4]:.0e})")
    for r in ROWS:
        if r[5]:
            print(f"#   inside multiplet (no derivative): {r[0]} {r[1]}: ours {r[6]}, JAX err {r[3]:.1e}")
    sys.exit(0)


if __name__ == "__main__":
    main()
