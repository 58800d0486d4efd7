"""How right are gradients through quimb's decompositions at repeated or zero singular values?

Each case is a real loss L(x) of some arrays x, written once against autoray and run by quimb on
tnp arrays (``tnp.value_and_grad``: our gradient g, ∂L/∂Re z + i ∂L/∂Im z for complex z), on JAX
arrays (``jax.grad``, jitted where it traces, conjugated to our convention) and on NumPy arrays
(the reference). Along 3 random unit directions d (Hermitian where the input must stay so) the
directional derivative Re<g, d> is compared with a Richardson-extrapolated central difference of
the NumPy loss, fd = (4 D(h/2) - D(h)) / 3, D(h) = (L(x+hd) - L(x-hd)) / 2h, h = 1e-3 |x|:

    err = max over d of |Re<g, d> - fd| / max(|fd|, 1e-300)

Column ``fd?`` is fd's own spread (the same extrapolation at h/2): an error is 'wrong' above 1e-8
and above 10 fd?. Where fd? is above 1e-6 the loss is not smooth at x (or NaN nearby) and the
case is not judged. 'NaN' marks a gradient with a NaN or inf, 'VALUE' a loss value that is not
the NumPy one.

    control  non-degenerate inputs of the same routes (they check the convention and the harness)
    split    Tensor.split (svd, svd:eig, eigh, eigh with positive=True; absorb both/left/right, and
             none: U, s, VH apart), loss Re sum((l @ r).data * W) (or of (U*s) @ VH): spectra
             (2,2,1,.5,.5), (3,2,1,0,0) built as U diag(s) V^H ('rot') or by np.diag ('diag');
             (3,3,2,1,1) with max_bond 3, 2 (at a gap), 1 and 4 (cut inside a multiplet: no
             derivative, listed apart); and split(method='qr') of a 4x6 matrix with R[2, 2] = 0
    ghz      GHZ MPS (L=8, D=2; 'pad4': bonds zero-padded to 4): compress / canonize / left_canonize
             / gauge_all_simple, then the transverse-field Ising energy <psi|H|psi>/<psi|psi>
    z2       phi + X phi, phi a random MPS with s_1 = s_L = 0 (Z2 blocks diag(B^s, B^(1-s)): exact
             Schmidt pairs), compressed without truncation (max_bond=6), at a gap (max_bond=4) and
             inside a pair (max_bond=3), left_canonize alone, compress(form='flat') (no QR); the
             control breaks the pairs by 1e-6 noise
    peps     3x3 GHZ PEPS and a zero-padded product PEPS: norm by contract_boundary(max_bond=chi)

Run: ``python bench/degenerate_probe.py [--quick] [--jax none|some|all]``. JAX compiles each case
afresh (seconds per network), so by default ('some') it runs on the split cases with absorb='both'
(not eigh+pos, not max_bond=4) and on the float64 MPS compressions only: the full run takes under
2 minutes; --quick has fewer cases and JAX on split cases only; '--jax all' runs JAX everywhere.
Needs quimb and autoray (JAX optional). The 'ours warned' column counts the library's
DegenerateDerivativeWarnings (and RuntimeWarnings) during our gradient.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
warnings.simplefilter("ignore")

import autoray as ar  # noqa: E402
import numpy as np  # noqa: E402
import quimb  # noqa: E402
import quimb.tensor as qtn  # noqa: E402

import trg  # noqa: E402  (bench/trg.py: the harnesses' source_state)

import tenferro_py.numpy as tnp  # noqa: E402

try:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
except ImportError:
    jax = None

TOL, FD_TOL = 1e-8, 1e-6
RNG = np.random.default_rng(1234)
ROWS: list[dict] = []
JAX_MODE = "some"


def rdot(gs, ds) -> float:
    return float(sum(np.real(np.vdot(g, d)) for g, d in zip(gs, ds)))


def randn(shape, dtype):
    z = RNG.normal(size=shape)
    return z + 1j * RNG.normal(size=shape) if np.dtype(dtype).kind == "c" else z


def richardson(loss, xs, ds, h) -> tuple[float, float]:
    """Richardson central differences from (h, h/2) and from (h/2, h/4)."""
    def central(step):
        plus, minus = (float(loss([x + sign * step * v for x, v in zip(xs, ds)])) for sign in (1, -1))
        return (plus - minus) / (2 * step)
    d1, d2, d3 = central(h), central(h / 2), central(h / 4)
    return (4 * d2 - d1) / 3, (4 * d3 - d2) / 3


def gradient_error(grad_fn, value, dirs, fds) -> tuple[float, str, str]:
    """(max rel err over the directions, its text, the warnings raised) of grad_fn() -> (value,
    gradient in our convention), or the failure; ' VALUE' if its value is not the NumPy one."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            v, gs = grad_fn()
            gs = [np.asarray(g) for g in gs]
        except Exception as e:  # noqa: BLE001 (a failed route is a result)
            gs, failure = None, f"{type(e).__name__}: {' '.join(str(e).split())[:80]}"
    names = sorted({type(w.message).__name__ for w in caught} & {"DegenerateDerivativeWarning", "RuntimeWarning"})
    warned = ",".join(f"{n.replace('DerivativeWarning', '')}x{sum(type(w.message).__name__ == n for w in caught)}"
                      for n in names)
    if gs is None:
        return np.nan, failure, warned
    err = max(abs(rdot(gs, ds) - f) / max(abs(f), 1e-300) for ds, f in zip(dirs, fds))
    finite, same = all(np.all(np.isfinite(g)) for g in gs), abs(float(v) - value) <= 1e-10 * max(1, abs(value))
    return (err if same else np.inf), f"{err:8.1e}" + ("" if finite else " NaN") + ("" if same else " VALUE"), warned


def jax_grad(loss, xs):
    nums = tuple(range(len(xs)))
    f = jax.value_and_grad(lambda *a: loss(list(a)), nums)
    args = [jnp.asarray(x) for x in xs]
    try:
        v, gs = jax.jit(f)(*args)
    except Exception:  # noqa: BLE001 (quimb branches on values: no trace, run eagerly)
        v, gs = f(*args)
    return float(v), [np.conj(np.asarray(g)) for g in gs]


def probe(name, dtype, loss, xs, hermitian=False, inside=False, with_jax=True) -> None:
    """One line for ``loss(list of arrays) -> real scalar`` at xs."""
    xs = [np.asarray(x, dtype=dtype) for x in xs]
    dirs = []
    for _ in range(3):
        ds = [randn(x.shape, dtype) for x in xs]
        ds = [(v + v.conj().T) / 2 for v in ds] if hermitian else ds
        nrm = np.sqrt(sum(np.vdot(v, v).real for v in ds))
        dirs.append([v / nrm for v in ds])
    h = 1e-3 * np.sqrt(sum(np.vdot(x, x).real for x in xs))
    pairs = [richardson(loss, xs, ds, h) for ds in dirs]
    fds = [p[0] for p in pairs]
    spread = max(abs(a - b) / max(abs(a), 1e-300) for a, b in pairs)
    nums = tuple(range(len(xs)))
    value = float(loss(xs))
    ours, ours_s, warned = gradient_error(lambda: tnp.value_and_grad(lambda *a: loss(list(a)), nums)(*xs),
                                          value, dirs, fds)
    if jax is None or JAX_MODE == "none" or (JAX_MODE == "some" and not with_jax):
        jerr, jax_s = np.nan, "-"
    else:
        jerr, jax_s, _ = gradient_error(lambda: jax_grad(loss, xs), value, dirs, fds)
    tag = "  [cut inside multiplet]" if inside else ""
    print(f"{name:50s} {np.dtype(dtype).name[:7]:7s} {ours_s:>12s} {warned:>13s}  {jax_s:>12s}  {spread:7.0e}{tag}",
          flush=True)
    ROWS.append(dict(name=name, dtype=np.dtype(dtype).name, ours=ours, ours_s=ours_s, warned=warned, jax=jerr,
                     jax_s=jax_s, spread=spread, inside=inside))


# --- cases -------------------------------------------------------------------------------------


def unitary(n, dtype):
    q, r = np.linalg.qr(randn((n, n), dtype))
    return q * (np.diag(r) / np.abs(np.diag(r)))


def split_cases(quick: bool) -> None:
    methods = ["svd", "svd:eig", "eigh", "eigh+pos"]
    absorbs = ["both", "none"] if quick else ["both", "left", "right", "none"]
    spectra = {"(2,2,1,.5,.5)": [2, 2, 1, .5, .5], "(3,2,1,0,0)": [3, 2, 1, 0, 0]}
    for dtype in ["float64", "complex128"]:
        w = randn((5, 5), dtype)
        for method in methods:
            herm, opts = method.startswith("eigh"), {"positive": True} if method == "eigh+pos" else {}
            jax_here = method != "eigh+pos"  # (under --jax some: eigh+pos is the same JAX route as eigh)

            def loss(xs, absorb="both", max_bond=None, method=method.split("+")[0], opts=opts):
                t, kw = qtn.Tensor(xs[0], inds=("i", "j")), dict(method=method, cutoff=0.0, max_bond=max_bond, **opts)
                if absorb == "none":  # U, s, VH apart (as gauge_all_simple's tensor_compress_bond takes them)
                    u, s, vh = t.split(left_inds=["i"], absorb=None, get="arrays", **kw)
                    m = (u * s) @ vh
                else:
                    l, r = t.split(left_inds=["i"], absorb=absorb, get="tensors", **kw)
                    m = (l @ r).transpose("i", "j").data
                return ar.do("real", ar.do("sum", m * w))

            def build(s, how):
                u = unitary(5, dtype)
                v = u if herm else unitary(5, dtype)
                return np.diag(np.asarray(s, dtype=dtype)) if how == "diag" else (u * s) @ v.conj().T

            a = build([5, 4, 3, 2, 1], "rot")
            for ab in ["both", "none"]:
                probe(f"control split {method} {ab} (5,4,3,2,1) rot", dtype, lambda xs, ab=ab: loss(xs, absorb=ab),
                      [a], hermitian=herm, with_jax=jax_here and ab == "both")
            for sname, s in spectra.items():
                for how in ["rot"] if quick else ["rot", "diag"]:
                    a = build(s, how)
                    for ab in absorbs if jax_here else ["both"]:  # (positive=True: only 'both' differs)
                        probe(f"split {method} {ab} {sname} {how}", dtype,
                              lambda xs, ab=ab: loss(xs, absorb=ab), [a], hermitian=herm,
                              with_jax=jax_here and ab == "both")
            a = build([3, 3, 2, 1, 1], "rot")
            for chi in [2, 1] if quick else [3, 2, 1, 4]:
                probe(f"split {method} both (3,3,2,1,1) max_bond={chi}", dtype,
                      lambda xs, chi=chi: loss(xs, max_bond=chi), [a], hermitian=herm, inside=chi in (1, 4),
                      with_jax=jax_here and chi != 4)
        a, w46 = randn((4, 6), dtype), randn((4, 6), dtype)
        a[:, 2] = 0.0  # R[2, 2] = 0, where quimb's stabilized QR takes sgn(x) = (x + 1) / (|x| + 1): no derivative

        def qr_loss(xs, stabilized):
            q, r = qtn.Tensor(xs[0], inds=("i", "j")).split(left_inds=["i"], method="qr", stabilized=stabilized,
                                                             get="tensors")
            return ar.do("real", ar.do("sum", (q @ r).transpose("i", "j").data * w46))

        for st in (True, False):
            probe(f"{'' if st else 'control '}split qr 4x6, column 2 zero, stabilized={st}", dtype,
                  lambda xs, st=st: qr_loss(xs, st), [a], with_jax=st)


def with_arrays(template, xs):
    p = template.copy()
    for t, x in zip(p, xs):
        t.modify(data=x)
    return p


def energy(p, ham):
    if ar.infer_backend(p[0].data) == "jax":
        ham = ham.copy()
        ham.apply_to_arrays(jnp.asarray)
    return ar.do("real", p.H @ ham.apply(p)) / ar.do("real", p.H @ p)


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
    """phi + X phi, phi of bond D with s_1 = s_L = 0: the two branches are orthogonal on both sides
    of every cut, so every Schmidt value comes twice."""
    arrays = []
    for k in range(L):
        if k in (0, L - 1):
            vec, a = randn(D, dtype), np.zeros((2 * D, 2), dtype=dtype)
            a[:D, 0], a[D:, 1] = vec, vec
        else:
            b, a = [randn((D, D), dtype) for _ in (0, 1)], np.zeros((2 * D, 2 * D, 2), dtype=dtype)
            for s in (0, 1):
                a[:D, :D, s], a[D:, D:, s] = b[s], b[1 - s]
        arrays.append(a / np.linalg.norm(a))
    return qtn.MatrixProductState(arrays)


def mps_cases(quick: bool) -> None:
    L = 8
    ham = qtn.MPO_ham_ising(L, j=1.0, bx=0.7)

    def inplace(method, **kw):
        return lambda p: (getattr(p, method)(**kw), p)[1]

    compress2, compress4 = inplace("compress", max_bond=2, cutoff=0.0), inplace("compress", max_bond=4, cutoff=0.0)
    ops = {"compress(max_bond=2)": compress2, "compress(max_bond=4)": compress4,
           "canonize(3)": inplace("canonize", where=3), "left_canonize()": inplace("left_canonize"),
           "gauge_all_simple()": lambda p: p.gauge_all_simple()}
    for dtype in ["float64", "complex128"]:
        jax_mps = dtype == "float64" and not quick  # (the networks JAX runs under --jax some)

        def run(name, template, op, **kw):
            probe(f"{name} energy", dtype, lambda xs: energy(op(with_arrays(template, xs)), ham),
                  [t.data for t in template], **kw)

        rand = qtn.MPS_rand_state(L, 4, dtype=dtype, seed=3)
        run("control rand L=8 D=4 compress(max_bond=2)", rand, compress2, with_jax=jax_mps)
        run("control rand L=8 D=4 gauge_all_simple()", rand, ops["gauge_all_simple()"], with_jax=False)
        for state, template in [("ghz", ghz_mps(L, dtype)), ("ghz pad4", ghz_mps(L, dtype, pad=4))]:
            for oname, op in ops.items():
                if (quick and oname not in ("compress(max_bond=2)", "gauge_all_simple()")
                        or oname == "compress(max_bond=4)" and state == "ghz"):
                    continue
                run(f"{state} L={L} {oname}", template, op, with_jax=jax_mps and oname.startswith("compress"))
        z2 = z2_mps(L, 3, dtype)
        noisy = with_arrays(z2, [t.data + 1e-6 * randn(t.shape, dtype) for t in z2])
        run(f"control z2+1e-6 noise L={L} compress(max_bond=4)", noisy, compress4, with_jax=jax_mps)
        for chi in [6, 4, 3]:
            run(f"z2 L={L} D=2x3 compress(max_bond={chi})", z2, inplace("compress", max_bond=chi, cutoff=0.0),
                inside=chi == 3, with_jax=jax_mps and chi == 4)
        run(f"z2 L={L} D=2x3 left_canonize() (QR only)", z2, ops["left_canonize()"], with_jax=False)
        run(f"z2 L={L} D=2x3 compress(max_bond=4, form=flat) (no QR)", z2,
            inplace("compress", max_bond=4, cutoff=0.0, form="flat"), with_jax=False)


def peps_cases(quick: bool) -> None:
    for dtype in ["float64", "complex128"]:
        template = qtn.PEPS.rand(3, 3, bond_dim=2, phys_dim=2, seed=7, dtype=dtype)
        ghz, prod = [], []
        for t in template:
            a, b = np.zeros(t.shape, dtype=dtype), np.zeros(t.shape, dtype=dtype)
            for v in (0, 1):
                a[(v,) * a.ndim] = 1.0
            b[(0,) * (b.ndim - 1)] = randn(2, dtype)
            ghz.append(a)
            prod.append(b)

        def norm(xs, chi):
            return ar.do("real", with_arrays(template, xs).make_norm().contract_boundary(max_bond=chi, cutoff=0.0))

        for state, xs in [("peps ghz 3x3", ghz), ("peps product pad2 3x3", prod)]:
            for chi in [2] if quick else [2, 4]:
                probe(f"{state} norm contract_boundary(max_bond={chi})", dtype,
                      lambda ys, chi=chi: norm(ys, chi), xs, with_jax=False)


def summary(seconds: float) -> None:
    judged = [r for r in ROWS if not r["inside"] and r["spread"] <= FD_TOL]  # (a NaN spread: not judged)
    def bad(err, r):  # above TOL and above what fd itself resolves (10x its spread)
        return not err <= max(TOL, 10 * r["spread"])

    wrong = [r for r in judged if bad(r["ours"], r)]
    ran_jax = [r for r in judged if r["jax_s"] != "-"]
    print(f"\n# summary: {len(ROWS)} cases in {seconds:.0f} s; {len(judged)} judged (smooth, not cut inside a "
          f"multiplet); ours wrong (err > {TOL:g} and > 10 fd?, NaN or failed): {len(wrong)}; JAX wrong: "
          f"{sum(bad(r['jax'], r) for r in ran_jax)} of the {len(ran_jax)} it ran")
    for r in wrong:
        print(f"#   WRONG {r['name']} {r['dtype']}: ours {r['ours_s'].strip()} {r['warned']}; JAX {r['jax_s'].strip()}")
    for r in ROWS:
        if r not in judged:
            why = "cut inside multiplet" if r["inside"] else f"fd spread {r['spread']:.0e}"
            print(f"#   not judged ({why}): {r['name']} {r['dtype']}: ours {r['ours_s'].strip()}; "
                  f"JAX {r['jax_s'].strip()}")


def main() -> None:
    global JAX_MODE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cases")
    parser.add_argument("--jax", choices=["none", "some", "all"], default="some", help="where to run JAX")
    args = parser.parse_args()
    JAX_MODE = args.jax
    start = time.perf_counter()
    print(f"# bench/degenerate_probe.py: numpy {np.__version__}, quimb {quimb.__version__}, "
          f"jax {jax.__version__ if jax else 'absent'} (--jax {JAX_MODE}); max rel err of Re<g,d> over 3 directions")
    print(f"# source: {trg.source_state('tenferro_py')}")
    print(f"{'case':50s} {'dtype':7s} {'ours':>12s} {'ours warned':>13s}  {'JAX':>12s}  {'fd?':>7s}")
    split_cases(args.quick)
    mps_cases(args.quick)
    peps_cases(args.quick)
    summary(time.perf_counter() - start)


if __name__ == "__main__":
    main()
