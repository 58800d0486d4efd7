"""quimb networks of tnp arrays, differentiated: values and gradients as quimb's with autograd to
1e-12, and quimb's TNOptimizer with this library as its autodiff backend."""

import warnings

import numpy as np
import pytest

import tenferro_py as tf
import tenferro_py.numpy as tnp

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # cotengra's, imported by quimb: kahypar not installed
    qtn = pytest.importorskip("quimb.tensor")
autoray = pytest.importorskip("autoray")
autograd = pytest.importorskip("autograd")
from tenferro_py.numpy import quimb_handler, quimb_splits  # noqa: E402 (only with quimb installed)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # cotengra's: kahypar not installed


def with_arrays(tn, arrays):
    """A copy of the network tn holding ``arrays`` (in the order of its tensors)."""
    tn = tn.copy()
    for t, a in zip(tn, arrays):
        t.modify(data=a)
    return tn


def normalised(tn):
    """tn with each tensor scaled to unit norm (values of order one, whatever the size)."""
    return with_arrays(tn, [t.data / np.linalg.norm(t.data) for t in tn])


def assert_same_value_and_gradient(tn, loss, rtol=1e-12):
    """tnp.value_and_grad and autograd's of loss(network holding the arrays) agree to rtol; autograd's
    gradient of a complex array is conjugated, as quimb's own handler does."""
    arrays = [t.data for t in tn]
    argnums = tuple(range(len(arrays)))
    value, grads = tnp.value_and_grad(lambda *xs: loss(with_arrays(tn, xs)), argnums)(*arrays)
    want, want_grads = autograd.value_and_grad(lambda xs: loss(with_arrays(tn, xs)))(arrays)
    assert value == pytest.approx(want, rel=rtol, abs=0)
    scale = max(np.max(np.abs(g)) for g in want_grads)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, np.conj(w), rtol=0, atol=rtol * scale)
    return value


def mps_energy(H):
    return lambda psi: qtn.expec_TN_1D(psi.H, H, psi) / (psi.H @ psi)


def test_mps_energy_with_an_mpo_l12_bond8():
    psi, H = qtn.MPS_rand_state(12, 8, seed=1), qtn.MPO_ham_heis(12)
    value = assert_same_value_and_gradient(psi, mps_energy(H))
    assert -12 * 0.45 < value < 0


def test_complex_mps_energy():
    psi, H = qtn.MPS_rand_state(6, 4, seed=2, dtype="complex128"), qtn.MPO_ham_heis(6)
    assert_same_value_and_gradient(psi, lambda p: autoray.do("real", mps_energy(H)(p)))


@pytest.mark.parametrize("contract", [lambda tn: tn.contract(all, optimize="auto-hq"), lambda tn: tn ^ all],
                         ids=["contract", "xor-all"])
def test_peps_4x4_norm_contracted_exactly(contract):
    peps = normalised(qtn.PEPS.rand(4, 4, 2, seed=3))
    assert_same_value_and_gradient(peps, lambda p: contract(p.make_norm()))


def test_a_boundary_contraction_with_svd_truncation(monkeypatch):
    """The 4×4 bond-3 PEPS norm by boundary MPS, compressed to bond 6 by truncated SVDs (without the
    QR canonisation, which autograd cannot differentiate); the truncation is dynamic (cutoff), which
    reads singular values, and JAX's jit cannot trace."""
    peps = normalised(qtn.PEPS.rand(4, 4, 3, seed=4))
    calls = []
    truncated = quimb_splits._truncated
    monkeypatch.setattr(quimb_splits, "_truncated", lambda op, x, *a: calls.append(x.shape) or truncated(op, x, *a))
    loss = lambda p: p.make_norm().contract_boundary(max_bond=6, cutoff=1e-12, canonize=False)  # noqa: E731
    assert_same_value_and_gradient(peps, loss)
    assert calls and max(min(shape) for shape in calls) > 6  # SVDs that truncated


def test_a_boundary_contraction_with_qr_canonisation_against_central_differences(rng):
    """quimb's default boundary contraction (QR canonisation, then truncated SVDs), which autograd
    cannot differentiate: the gradient along a random direction against central differences."""
    peps = normalised(qtn.PEPS.rand(3, 3, 3, seed=9))
    arrays = [t.data for t in peps]
    loss = lambda *xs: with_arrays(peps, xs).make_norm().contract_boundary(max_bond=4, cutoff=0.0)  # noqa: E731
    value, grads = tnp.value_and_grad(loss, tuple(range(len(arrays))))(*arrays)
    direction = [rng.standard_normal(a.shape) for a in arrays]
    h = 1e-7  # the truncations curve it sharply: central differences at h = 1e-5 are off by 1e-3
    plus = loss(*[a + h * d for a, d in zip(arrays, direction)])
    minus = loss(*[a - h * d for a, d in zip(arrays, direction)])
    along = sum(np.vdot(g, d) for g, d in zip(grads, direction))
    assert along == pytest.approx((plus - minus) / (2 * h), rel=1e-6)
    assert value == pytest.approx(loss(*arrays), rel=1e-13)  # quimb on NumPy (numba's kernels)


def test_network_built_inside_the_function():
    """A network made inside the differentiated function from the arrays (MPS of the arrays)."""
    ket = qtn.MPS_rand_state(5, 3, seed=5)
    arrays = [t.data for t in ket]

    def norm(*xs):
        psi = qtn.MatrixProductState(xs)
        return psi.H @ psi

    value, grads = tnp.value_and_grad(norm, tuple(range(5)))(*arrays)
    want, want_grads = autograd.value_and_grad(lambda xs: norm(*xs))(arrays)
    assert value == pytest.approx(want, rel=1e-13)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


# --- TNOptimizer --------------------------------------------------------------------------------


@pytest.fixture
def handler():
    quimb_handler.register()
    return quimb_handler.TenferroHandler()


def test_the_handler_gives_autograds_value_and_gradient(handler):
    from quimb.tensor.optimize import AutoGradHandler

    psi, H = qtn.MPS_rand_state(6, 4, seed=6, dtype="complex128"), qtn.MPO_ham_heis(6)
    fn = lambda xs: autoray.do("real", mps_energy(H)(with_arrays(psi, xs)))  # noqa: E731
    reference = AutoGradHandler()
    for h in (handler, reference):
        h.setup_fn(fn)
    arrays = [t.data for t in psi]
    value, grads = handler.value_and_grad(arrays)
    want, want_grads = reference.value_and_grad(arrays)
    assert value == pytest.approx(want, rel=1e-13) == handler.value(arrays)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


def test_the_handlers_hessian_vector_product_against_differences_of_the_gradient(handler, rng):
    psi, H = qtn.MPS_rand_state(5, 3, seed=7, dtype="complex128"), qtn.MPO_ham_heis(5)
    handler.setup_fn(lambda xs: autoray.do("real", mps_energy(H)(with_arrays(psi, xs))))
    arrays = [t.data for t in psi]
    direction = [rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape) for a in arrays]
    product = handler.hessp(arrays, direction)
    h = 1e-5
    plus = handler.value_and_grad([a + h * d for a, d in zip(arrays, direction)])[1]
    minus = handler.value_and_grad([a - h * d for a, d in zip(arrays, direction)])[1]
    for p, gp, gm in zip(product, plus, minus):
        np.testing.assert_allclose(p, (gp - gm) / (2 * h), rtol=1e-6, atol=1e-8)


def dmrg_energies(H, bond):
    """(quimb's DMRG energy: two-site sweeps; the optimum of the bond's manifold: one-site sweeps from
    there at the fixed bond, converged, below the first by what the two-site truncation loses)."""
    two = qtn.DMRG2(H, bond_dims=[bond])
    two.solve(tol=1e-13, max_sweeps=40, verbosity=0)
    one = qtn.DMRG1(H, bond_dims=[bond], p0=two.state)
    one.solve(tol=1e-14, max_sweeps=20, verbosity=0)
    return two.energy, one.energy


def test_tn_optimizer_reaches_the_dmrg_energy():
    """A DMRG-like ground state search of the Heisenberg chain by TNOptimizer (L-BFGS-B) on this
    library: L = 8, bond 4 here, where it reaches the bond's optimum, 5e-7 below quimb's DMRG2
    (bench/quimb_interop.py --dmrg runs L = 16, bond 16)."""
    quimb_handler.register()
    L, bond = 8, 4
    H = qtn.MPO_ham_heis(L)
    dmrg, optimum = dmrg_energies(H, bond)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = qtn.TNOptimizer(qtn.MPS_rand_state(L, bond, seed=8), lambda psi, H: mps_energy(H)(psi),
                              loss_constants={"H": H}, autodiff_backend="tenferro_py", progbar=False)
        psi = opt.optimize(600, tol=1e-16)
    assert opt.loss - dmrg < 1e-8 and abs(opt.loss - optimum) < 1e-8
    assert mps_energy(H)(psi) == pytest.approx(opt.loss, abs=1e-12)


def test_the_handler_runs_on_the_host_only():
    with pytest.raises(Exception, match="device 'cpu'"):
        quimb_handler.TenferroHandler(device="cuda")


# --- degenerate spectra: symmetric, GHZ-like and zero-padded states (docs/spectral.md#degenerate) ---------


def _with_spectrum(rng, values, complex_):
    def unitary():
        z = rng.standard_normal((5, 5)) + (1j * rng.standard_normal((5, 5)) if complex_ else 0)
        return np.linalg.qr(z)[0]
    return unitary() @ np.diag(values) @ unitary().conj().T


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("absorb", ["both", "left", "right"])
@pytest.mark.parametrize("method", ["svd", "svd:eig", "eigh"])
@pytest.mark.parametrize("values", [(2.0, 2.0, 1.0, 0.5, 0.5), (3.0, 2.0, 1.0, 0.0, 0.0)], ids=["pairs", "zeros"])
def test_tensor_split_at_repeated_and_zero_values_is_exact(rng, complex_, absorb, method, values):
    """Σ (l·r) ∘ W of an untruncated split is Σ A ∘ W: its gradient is W (conjugated, for complex A,
    in quimb's convention), whatever repeats or vanishes; JAX gives NaN at the pairs."""
    a = _with_spectrum(rng, values, complex_)
    if method == "eigh":
        a = a @ a.conj().T
    w = rng.standard_normal((5, 5))

    def loss(x):
        left, right = qtn.Tensor(x, inds=("i", "j")).split(["i"], method=method, cutoff=0.0, absorb=absorb,
                                                          get="tensors")
        return tnp.real(tnp.sum((left @ right).data * w))

    with warnings.catch_warnings():
        warnings.simplefilter("error", tf.DegenerateDerivativeWarning)  # exact: nothing to tell
        _, g = tnp.value_and_grad(loss)(a)
    np.testing.assert_allclose(g, w, atol=1e-12)


def _ghz(n, complex_, pad=None):
    arrays = []
    for i in range(n):
        a = np.zeros((2, 2) if i in (0, n - 1) else (2, 2, 2), dtype=complex if complex_ else float)
        for v in (0, 1):
            a[(v,) * a.ndim] = 1.0
        arrays.append(a)
    arrays[0] = arrays[0] / np.sqrt(2) * (np.array([1.0, np.exp(0.7j)])[None, :] if complex_ else 1.0)
    if pad:
        arrays = [np.pad(a, [(0, pad - 2)] * (a.ndim - 1) + [(0, 0)]) for a in arrays]
    return qtn.MatrixProductState(arrays)


def _directional_error(rng, mps, transform):
    """The gradient of the transverse-field Ising energy of transform(mps) along two random
    directions, against a Richardson-extrapolated central difference of the NumPy run."""
    n = mps.L
    ham = qtn.MPO_ham_ising(n, j=1.0, bx=0.7)

    def energy(*xs):
        p = transform(with_arrays(mps, xs))
        return autoray.do("real", p.H @ ham.apply(p)) / autoray.do("real", p.H @ p)

    arrays = [t.data for t in mps]
    _, grads = tnp.value_and_grad(energy, argnums=tuple(range(n)))(*arrays)
    worst = 0.0
    for _ in range(2):
        d = [rng.standard_normal(a.shape) + (1j * rng.standard_normal(a.shape) if a.dtype.kind == "c" else 0)
             for a in arrays]
        d = [e * np.linalg.norm(a) / np.linalg.norm(e) for a, e in zip(arrays, d)]  # each tensor's own scale
        at = lambda h: float(energy(*[a + h * e for a, e in zip(arrays, d)]))  # noqa: E731
        central = lambda h: (at(h) - at(-h)) / (2 * h)  # noqa: E731
        want = (4 * central(5e-4) - central(1e-3)) / 3
        got = sum(float(np.real(np.vdot(g, e))) for g, e in zip(grads, d))
        worst = max(worst, abs(got - want) / abs(want))
    return worst


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("pad", [None, 4], ids=["ghz", "ghz-padded"])
def test_compressing_a_ghz_mps_gives_the_exact_gradient(rng, complex_, pad):
    """compress(max_bond=2, cutoff=0) leaves a GHZ state as it is (Schmidt values 1/√2 twice at every
    bond; padded with zeros to bond 4, zeros besides): the gradient of the energy is that of the
    state itself, to central differences (it was 63 % off)."""
    transform = lambda p: (p.compress(max_bond=2, cutoff=0.0), p)[1]  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _directional_error(rng, _ghz(6, complex_, pad), transform) < 1e-8


def test_canonizing_a_padded_ghz_mps_is_exact(rng):
    """Canonisation by QR of a zero-padded state: zero pivots, so split instead of the QR."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _directional_error(rng, _ghz(6, False, pad=4), lambda p: (p.canonize(2), p)[1]) < 1e-8


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_gauging_a_ghz_mps_is_exact_or_told(rng, complex_):
    """gauge_all_simple uses the bonds' singular values on their own (its gauges), not only in the
    product: where that meets the GHZ state's repeated values, the gradient is exact or the
    library says it may not be (it was 47 % off, silently)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        error = _directional_error(rng, _ghz(6, complex_), lambda p: p.gauge_all_simple())
    told = any(issubclass(w.category, tf.DegenerateDerivativeWarning) for w in caught)
    assert error < 1e-8 or told, error


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_compressing_a_z2_symmetric_mps_without_truncation_is_exact(rng, complex_):
    """φ + Xφ with Z2 blocks diag(B⁰, B¹), diag(B¹, B⁰): every Schmidt value comes twice, by symmetry
    (no np.diag); compress(max_bond=6) keeps all, through QRs with zero pivots and SVDs with pairs."""
    d, n = 3, 6
    arrays = []
    for i in range(n):
        draw = lambda *shape: rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)  # noqa: E731
        if i in (0, n - 1):
            vec, a = draw(d), np.zeros((2 * d, 2), dtype=complex if complex_ else float)
            a[:d, 0], a[d:, 1] = vec, vec
        else:
            b, a = [draw(d, d) for _ in (0, 1)], np.zeros((2 * d, 2 * d, 2), dtype=complex if complex_ else float)
            for sigma in (0, 1):
                a[:d, :d, sigma], a[d:, d:, sigma] = b[sigma], b[1 - sigma]
        arrays.append(a / np.linalg.norm(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        error = _directional_error(rng, qtn.MatrixProductState(arrays), lambda p: (p.compress(max_bond=6, cutoff=0.0), p)[1])
    assert error < 1e-8
