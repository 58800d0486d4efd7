"""split: the factors of a rank-k truncation for networks that contract them again. Its values
against NumPy's SVD; its derivatives by check_grads where the spectrum is separated (to second
order) and, for losses of l·r, at repeated and zero values (real and complex, exact spectra from
np.diag and from random bases, truncated at a gap); and the DegenerateDerivativeWarning where
no derivative exists or the cotangents lack it. The SVD's and eigh's own warnings are here too."""

import warnings

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import DegenerateDerivativeWarning, SliceConfig
from tenferro_py.errors import InvalidArgument, ShapeMismatch
from tenferro_py.testing import check_grads

ABSORB = ("left", "both", "right")
POWER = {"left": 1.0, "both": 0.5, "right": 0.0}


def basis(rng, n, complex_=False):
    z = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if complex_ else 0)
    return np.linalg.qr(z)[0]


def with_spectrum(rng, m, n, values, complex_=False):
    """U diag(values) Vᴴ with random unitary bases: its zero values come back from LAPACK as
    rounding (~1e-16), its repeated ones as equal to rounding."""
    k = len(values)
    return basis(rng, m, complex_)[:, :k] @ np.diag(values) @ basis(rng, n, complex_)[:, :k].conj().T


def contracted(weights, k=None, absorb="both"):
    """⟨W, l·r⟩ + ‖l·r‖² / 4: a loss of the product only (invariant under any gauge on the bond)."""
    def loss(s, x):
        left, right = s.split(x, k=k, absorb=absorb)
        product = s.einsum([left, right], "ai,ib->ab")
        linear = s.reduce_sum(s.mul(product, s.constant_from(tf.Tensor(weights.astype(x.dtype)))))
        quadratic = s.reduce_sum(s.mul(s.conj(product), product))
        total = s.add(linear, s.scale_real(quadratic, 0.25))
        return s.real(total) if x.dtype.kind == "c" else total
    return loss


@pytest.fixture
def no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateDerivativeWarning)
        yield


@pytest.mark.parametrize("absorb", ABSORB)
@pytest.mark.parametrize("shape,k", [((5, 5), None), ((6, 4), 3), ((4, 6), 2), ((5, 3), None)])
def test_the_factors_are_those_of_the_truncated_svd(rng, absorb, shape, k):
    a = rng.standard_normal(shape)
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    left, right = rt.with_eager_session(eng, lambda s: s.split(rt.constant_from(tf.Tensor(a)), k=k, absorb=absorb))
    u, sv, vt = np.linalg.svd(a, full_matrices=False)
    kk = k or sv.size
    p = POWER[absorb]
    np.testing.assert_allclose(left.value().to_numpy(), u[:, :kk] * sv[:kk] ** p, atol=1e-14)
    np.testing.assert_allclose(right.value().to_numpy(), (sv[:kk] ** (1 - p))[:, None] * vt[:kk], atol=1e-14)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("absorb", ABSORB)
@pytest.mark.parametrize("shape,k", [((4, 4), None), ((5, 3), 2), ((3, 5), 2), ((4, 4), 3)])
def test_derivatives_where_the_spectrum_is_separated(rng, complex_, absorb, shape, k, no_warning):
    """To second order, for a loss of l·r and for one of l and r apart (no gauge invariance)."""
    a = with_spectrum(rng, *shape, [3.0, 2.1, 1.3, 0.6][:min(shape)], complex_)
    check_grads(contracted(rng.standard_normal(shape), k, absorb), [a], order=2)

    def apart(s, x):  # ‖l‖⁴ + Σ |r_ij|⁴: depends on the bond's gauge (not on the vectors' phases)
        left, right = s.split(x, k=k, absorb=absorb)
        norm = s.real(s.reduce_sum(s.mul(s.conj(left), left)))
        squares = s.real(s.mul(s.conj(right), right))
        return s.add(s.mul(norm, norm), s.reduce_sum(s.mul(squares, squares)))

    check_grads(apart, [a], order=2)


SPECTRA = [(2.0, 2.0, 1.0, 0.5, 0.5), (3.0, 2.0, 1.0, 0.0, 0.0), (2.0, 2.0, 0.0, 0.0, 0.0), (1.5, 1.5, 1.5, 1.5, 1.5)]


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("absorb", ABSORB)
@pytest.mark.parametrize("values", SPECTRA, ids=["pairs", "zeros", "pair-and-zeros", "one-multiplet"])
@pytest.mark.parametrize("shape", [(5, 5), (7, 5), (5, 6)])
def test_exact_at_repeated_and_zero_values(rng, complex_, absorb, values, shape, no_warning):
    """Both modes against central differences, along random directions, at exactly repeated values
    and at zero ones (rounding from LAPACK), untruncated: l·r is the matrix itself."""
    a = with_spectrum(rng, *shape, values, complex_)
    check_grads(contracted(rng.standard_normal(shape), None, absorb), [a], order=1, rtol=1e-8)


@pytest.mark.parametrize("absorb", ABSORB)
@pytest.mark.parametrize("shape,k", [((5, 5), 3), ((5, 7), 3), ((7, 5), 2), ((6, 6), 5)])
def test_exact_when_truncated_at_a_gap(rng, absorb, shape, k, no_warning):
    """Repeated values on both sides of the cut (3, 3, 2 | 1, 1) and zeros discarded (…, 1 | 0)."""
    values = [3.0, 3.0, 2.0, 1.0, 1.0] if k < 5 else [2.0, 2.0, 1.0, 1.0, 1.0, 0.0]
    a = with_spectrum(rng, *shape, values[:min(shape)])
    check_grads(contracted(rng.standard_normal(shape), k, absorb), [a], order=1, rtol=1e-8)


@pytest.mark.parametrize("absorb", ABSORB)
@pytest.mark.parametrize("shape", [(5, 5), (6, 5), (5, 6)])
def test_exact_at_exact_zeros_and_repeats_from_np_diag(rng, absorb, shape, no_warning):
    """np.diag gives LAPACK exact zeros and exact repeats. Under absorb="both" the zeros' vectors go
    onto the factor that a tall (r) or wide (l) matrix needs them on, the other factor holding zero
    there, so that no direction is lost (square: r)."""
    a = np.zeros(shape)
    a[:5, :5][np.diag_indices(5)] = [2.0, 2.0, 1.0, 0.0, 0.0]
    if absorb == "right" and shape[0] > shape[1] or absorb == "left" and shape[1] > shape[0]:
        pytest.skip("the zeros' directions outside the factors' spans: test_lost_directions_are_reported")
    check_grads(contracted(rng.standard_normal(shape), None, absorb), [a], order=1, rtol=1e-8)


def test_exact_zeros_under_both_hold_a_vector_on_one_side():
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    a = np.diag([4.0, 1.0, 0.0])
    factors = rt.with_eager_session(eng, lambda s: s.split(rt.constant_from(tf.Tensor(a))))
    left, right = (t.value().to_numpy() for t in factors)
    np.testing.assert_allclose(left @ right, a, atol=1e-15)
    np.testing.assert_allclose(np.abs(left[:, 2]), 0.0)
    np.testing.assert_allclose(np.linalg.norm(right[2]), 1.0)


@pytest.mark.parametrize("absorb,shape", [("right", (4, 3)), ("left", (3, 4))])
def test_lost_directions_are_reported(rng, absorb, shape):
    """An isometry on the side of a tall (or wide) matrix's complement, and exact zeros kept: the
    directions that move those zeros out of the factors' spans are on neither factor. The
    gradient's part along them is not in the cotangents: a warning, not a silent guess."""
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    a = np.zeros(shape)
    a[np.diag_indices(3)] = [2.0, 1.0, 0.0]
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: contracted(rng.standard_normal(shape), None, absorb)(s, x))
    with pytest.warns(DegenerateDerivativeWarning, match="split: factors that vanish"):
        rt.grad(eng, y, x)


def test_a_cut_inside_a_multiplet_is_reported(rng):
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(with_spectrum(rng, 5, 5, [2.0, 1.0, 1.0, 0.5, 0.2])))
    y = rt.with_eager_session(eng, lambda s: contracted(rng.standard_normal((5, 5)), 2)(s, x))
    with pytest.warns(DegenerateDerivativeWarning, match="inside a multiplet"):
        rt.grad(eng, y, x)


@pytest.mark.parametrize("absorb", ABSORB)
def test_a_loss_of_the_basis_at_repeated_values_is_reported(rng, absorb):
    """Σ l⁴ entrywise depends on the basis chosen inside a repeated value, not only on l·r or on a
    unitary gauge of the bond: it has no derivative along the directions that split the value. The
    warning names it; along a direction that keeps the value repeated the result is the derivative."""
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    q1, q2 = basis(rng, 4), basis(rng, 4)
    a = q1 @ np.diag([2.0, 2.0, 1.0, 0.5]) @ q2.T
    x = rt.variable_from(tf.Tensor(a))

    def loss(s, x):
        squares = s.square(s.split(x, absorb=absorb)[0])
        return s.reduce_sum(s.mul(squares, squares))

    y = rt.with_eager_session(eng, lambda s: loss(s, x))
    with pytest.warns(DegenerateDerivativeWarning, match=r"not invariant under a gauge on the bond.*\b2\b"):
        g = rt.grad(eng, y, x).value().to_numpy()
    keeping = q1 @ np.diag([0.3, 0.3, -0.2, 0.1]) @ q2.T  # moves the values, keeps 2 repeated
    f = lambda m: rt.with_eager_session(eng, lambda s: loss(s, rt.constant_from(tf.Tensor(m)))).item()  # noqa: E731
    h = 1e-6
    assert abs(np.sum(g * keeping) - (f(a + h * keeping) - f(a - h * keeping)) / (2 * h)) < 1e-7


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("absorb", ABSORB)
def test_a_loss_invariant_under_unitary_gauges_is_exact_at_repeated_values(rng, complex_, absorb, no_warning):
    """‖l‖⁴ + ‖r‖² sees the bond's unitary gauges only (not l·r alone), as a truncating sweep does
    downstream of a split: at repeated nonzero values its derivative exists, and the repair, which
    splits each entry between l and r as the SVD's own tangent does, gives it."""
    def loss(s, x):
        left, right = s.split(x, absorb=absorb)
        norm = s.real(s.reduce_sum(s.mul(s.conj(left), left)))
        return s.add(s.mul(norm, norm), s.real(s.reduce_sum(s.mul(s.conj(right), right))))

    check_grads(loss, [with_spectrum(rng, 5, 5, [2.0, 2.0, 1.0, 0.5, 0.5], complex_)], order=1, rtol=1e-8)


def test_bad_input_names_split(rng):
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.constant_from(tf.Tensor(rng.standard_normal((3, 4))))
    for call, error in [(lambda s: s.split(x, absorb="middle"), InvalidArgument),
                        (lambda s: s.split(x, k=4), InvalidArgument),
                        (lambda s: s.split(x, k=lambda values: 1.5), InvalidArgument),
                        (lambda s: s.split(s.reshape(x, (12,))), ShapeMismatch)]:
        with pytest.raises(error, match="split"):
            rt.with_eager_session(eng, call)


def test_values_come_with_the_factors(rng):
    a = rng.standard_normal((4, 3))
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    left, right, values = rt.with_eager_session(
        eng, lambda s: s.split(rt.constant_from(tf.Tensor(a)), k=lambda sv: int(np.sum(sv > 0.5)), values=True))
    np.testing.assert_allclose(values.value().to_numpy(), np.linalg.svd(a, compute_uv=False), rtol=1e-14)
    assert left.shape[1] == right.shape[0] == int(np.sum(values.value().to_numpy() > 0.5))


# --- the SVD's and eigh's own warnings ----------------------------------------------------------


def test_svd_reports_a_cut_inside_a_multiplet_by_slicing(rng):
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(with_spectrum(rng, 4, 4, [2.0, 1.0, 1.0, 0.5])))

    def loss(s):
        u = s.svd(x)[0]
        kept = s.slice(u, SliceConfig([0, 0], [4, 2]))  # one vector of the pair (1, 1)
        return s.reduce_sum(s.mul(s.einsum([kept, kept], "ai,bi->ab"), s.constant_from(tf.Tensor(np.eye(4) + 1))))

    y = rt.with_eager_session(eng, loss)
    with pytest.warns(DegenerateDerivativeWarning, match=r"svd: the loss depends on the basis.*\b1\b"):
        rt.grad(eng, y, x)


def test_svd_reports_a_direction_that_splits_repeated_values(no_warning):
    """The counterexample of docs/spectral.md: A = I₂ along G = [[0, 1], [1, 0]]. Along a direction
    that keeps the values repeated, nothing is said."""
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(np.eye(2)))
    y = rt.with_eager_session(eng, lambda s: s.einsum(list(s.svd(x)), "ai,i,ib->ab"))
    rt.jvp(eng, y, x, tf.Tensor(np.diag([0.3, 0.3])))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with pytest.warns(DegenerateDerivativeWarning, match="svd: the direction splits repeated values"):
            rt.jvp(eng, y, x, tf.Tensor(np.array([[0.0, 1.0], [1.0, 0.0]])))


def test_eigh_reports_a_cut_and_a_splitting_direction(rng):
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    q = basis(rng, 4)
    x = rt.variable_from(tf.Tensor(q @ np.diag([0.5, 1.0, 1.0, 2.0]) @ q.T))

    def one_of_a_pair(s):
        v = s.slice(s.eigh(x)[1], SliceConfig([0, 0], [4, 2]))  # w = 0.5 and one vector of the pair
        return s.reduce_sum(s.mul(s.einsum([v, v], "ai,bi->ab"), s.constant_from(tf.Tensor(np.eye(4) + 1))))

    y = rt.with_eager_session(eng, one_of_a_pair)
    with pytest.warns(DegenerateDerivativeWarning, match="eigh: the loss depends on the basis"):
        rt.grad(eng, y, x)
    z = rt.with_eager_session(eng, lambda s: s.eigh(x)[0])
    splitting = q @ np.array([[0, 0, 0, 0], [0, 0, 1.0, 0], [0, 1.0, 0, 0], [0, 0, 0, 0]]) @ q.T
    with pytest.warns(DegenerateDerivativeWarning, match="eigh: the direction splits"):
        rt.jvp(eng, z, x, tf.Tensor(splitting))


def test_qr_reports_a_zero_pivot(rng):
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    a = rng.standard_normal((5, 3))
    a[:, 1] = a[:, 0]  # dependent columns: R_11 = 0
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.qr(x)[0]))
    with pytest.warns(DegenerateDerivativeWarning, match="qr: R has a zero pivot at column 1"):
        rt.grad(eng, y, x)
