"""Composites (tenferro_py/composite.py): a primitive whose kernel is a reference of session ops
run on arrays in a kernel session, which opset hands over at its import."""

import numpy as np

import tenferro_py as tf
from tenferro_py.composite import composite
from tenferro_py.kernel_sessions import KERNEL_SESSION
from tenferro_py.rules import RuleSet
from tenferro_py.tensor import Aval
from tenferro_py.testing import check_grads


def negated_square(s, x):
    return (s.neg(s.mul(x, x)),)


def test_a_composite_runs_its_reference_as_one_kernel_and_differentiates_it():
    rules = RuleSet()
    prim = rules.define("negated_square", lambda x: (x,), **composite(negated_square, lambda *args: 1.0))
    a = np.array([0.5, -2.0, 3.0])
    np.testing.assert_array_equal(prim.impl(a)[0], -a * a)
    context = tf.AdContext.builder().with_semantic_extension_rules(rules).build()
    check_grads(lambda s, x: s.bind(prim, x)[0], [a], context=context)


def test_a_traced_composite_runs_its_reference_once_for_values_and_tangents():
    """Where one forward trace carries a composite and nothing records it (forward over reverse's
    pass), its values and tangents come from one run of the reference, equal to the two runs'."""
    runs = []

    def counted(s, x):
        runs.append(type(s).__name__)
        return negated_square(s, x)

    rules = RuleSet()
    prim = rules.define("counted_square", lambda x: (x,), **composite(counted, lambda *args: 1.0))
    rt = tf.EagerRuntime(tf.AdContext.builder().with_semantic_extension_rules(rules).build())
    a, da = np.array([0.5, -2.0, 3.0]), np.array([1.0, 0.25, -1.0])
    with rt.no_grad(), rt.session(tf.CpuEngine.serial()) as s:
        x, dx = s.constant_from(tf.Tensor(a)), s.constant_from(tf.Tensor(da))
        outs = []
        (dy,) = s.jvp_of(lambda xs: outs.extend(s.bind(prim, xs[0])) or outs, [x], [dx])
        assert runs == ["TangentKernelSession"]
        np.testing.assert_array_equal(outs[0].value().array, -a * a)
        np.testing.assert_array_equal(dy.value().array, -2 * a * da)
    with rt.session(tf.CpuEngine.serial()) as s:  # recording: it declines; the kernel, then the reference
        runs.clear()  # differentiated op by op, so that its tangent differentiates again
        x = s.constant_from(tf.Tensor(a))
        (dy,) = s.jvp_of(lambda xs: s.bind(prim, xs[0]), [x], [s.constant_from(tf.Tensor(da))])
        assert runs == ["KernelSession", "EagerSession"]
        np.testing.assert_array_equal(dy.value().array, -2 * a * da)


def spectra(s, x):
    """x's singular values, the eigenvalues of x xᵀ, and q r from x's QR: svd, eigh and qr in a reference."""
    sv = s.svd(x)[1]
    w = s.eigh(s.einsum([x, x], "ij,kj->ik"))[0]
    q, r = s.qr(x)
    return sv, w, s.einsum([q, r], "ij,jk->ik")


def spectra_abstract(x):
    m, n = x.shape
    return Aval((min(m, n),), x.dtype), Aval((m,), x.dtype), x


def test_a_kernel_session_has_svd_eigh_and_qr(rng):
    a = rng.standard_normal((4, 3))
    rules = RuleSet()
    prim = rules.define("spectra", spectra_abstract, **composite(spectra, lambda *args: 1.0))
    sv, w, product = prim.impl(a)  # the reference run as one kernel, in the kernel session
    np.testing.assert_allclose(sv, np.linalg.svd(a, compute_uv=False), rtol=1e-13)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a @ a.T), rtol=1e-12, atol=1e-13 * np.abs(w).max())
    np.testing.assert_allclose(product, a, rtol=1e-13, atol=1e-14)
    context = tf.AdContext.builder().with_semantic_extension_rules(
        tf.linalg.semantic_ad_rules().merge(tf.einsum.semantic_ad_rules()).merge(rules)).build()
    check_grads(lambda s, x: s.reduce_sum(s.bind(prim, x)[0]), [a], context=context)


def test_the_kernel_session_has_every_linalg_op_on_stacks(rng):
    a = rng.standard_normal((2, 3, 3))
    u, sv, vt = KERNEL_SESSION.svd(a)
    w, v = KERNEL_SESSION.eigh(a)
    q, r = KERNEL_SESSION.qr(a)
    np.testing.assert_allclose(sv, np.linalg.svd(a, compute_uv=False), rtol=1e-13)
    np.testing.assert_allclose(w, np.linalg.eigvalsh((a + np.swapaxes(a, 1, 2)) / 2), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(q @ r, a, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(KERNEL_SESSION.solve(a, a[:, :, :1]), np.linalg.solve(a, a[:, :, :1]),
                               rtol=1e-12, atol=1e-14)


def test_a_shape_determined_composite_replays_its_ops_with_the_references_bits(rng):
    """The SVD's pullback and tangent, recorded on their first run for some shapes, replay their ops on
    new values of those shapes: bit for bit what running the reference gives, real and complex,
    tall and wide, at a degenerate and at a zero spectrum; the reference's Python runs once."""
    from tenferro_py.linalg.svd import _svd_pullback, _svd_tangent, svd_pullback_p, svd_tangent_p

    def inputs(shape, dtype, spectrum=None):
        a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dtype == complex else 0)
        u, sv, vt = np.linalg.svd(a, full_matrices=False)
        if spectrum is not None:
            sv = np.asarray(spectrum, float)
        return u, sv, vt, rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dtype == complex else 0)

    for shape in [(5, 3), (3, 5), (4, 4)]:
        for dtype in (float, complex):
            k = min(shape)
            for spectrum in (None, [2.0] * k, [0.0] * k):
                u, sv, vt, da = inputs(shape, dtype, spectrum)
                kk = max(1, k - 1)
                ub, sb, vb = (np.ascontiguousarray(x) for x in (da[:, :kk], sv[:kk] + 1.0, da[:kk, :]))
                for prim, reference, args, params in [
                    (svd_tangent_p, _svd_tangent, (u, sv, vt, da), dict(eps=1e-12)),
                    (svd_pullback_p, _svd_pullback, (u, sv, vt, ub, sb, vb), dict(eps=1e-12, parts=(True,) * 3)),
                ]:
                    for _ in range(2):  # the first run records, the second replays
                        got = prim.impl(*args, **params)
                    want = reference(KERNEL_SESSION, *args, **params)
                    assert all(np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want))


def test_a_reference_that_makes_arrays_outside_ops_is_not_replayed():
    """An array that no op and no constant made may come from values: that run is not replayed, and
    the next values of the same shapes get their own result."""

    def array_from_values(s, x):
        return (s.mul(x, np.abs(x)),)  # an array made outside the session's ops

    def scalar_from_values(s, x):
        return (s.mul(x, x.max()),)  # a NumPy scalar made outside them

    rules = RuleSet()
    for name, reference, expected in [("array_from_values", array_from_values, lambda a: a * np.abs(a)),
                                      ("scalar_from_values", scalar_from_values, lambda a: a * a.max())]:
        prim = rules.define(name, lambda x: (x,), **composite(reference, lambda *a: 1.0, shape_determined=True))
        for a in (np.array([1.0, -2.0]), np.array([-3.0, 0.5]), np.array([4.0, 2.0])):
            np.testing.assert_array_equal(prim.impl(a)[0], expected(a))


def test_a_replay_lets_each_value_go_after_its_last_read(rng):
    """The replay holds no more memory at its peak than the reference's own run (tracemalloc, which
    counts NumPy's buffers, deterministic)."""
    import tracemalloc

    from tenferro_py.linalg.svd import _svd_tangent, svd_tangent_p

    a = rng.standard_normal((120, 100))
    u, sv, vt = np.linalg.svd(a, full_matrices=False)
    args = (u, sv, vt, rng.standard_normal(a.shape))

    def peak(run):
        tracemalloc.start()
        run()
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    svd_tangent_p.impl(*args, eps=1e-12)  # recorded for these shapes (or earlier)
    assert peak(lambda: svd_tangent_p.impl(*args, eps=1e-12)) <= peak(lambda: _svd_tangent(KERNEL_SESSION, *args,
                                                                                             eps=1e-12))


def test_a_replay_runs_without_the_references_python():
    runs = []

    def counted(s, x):
        runs.append(1)
        return negated_square(s, x)

    rules = RuleSet()
    prim = rules.define("counted_replay", lambda x: (x,), **composite(counted, lambda *a: 1.0, shape_determined=True))
    for a in (np.array([0.5, -2.0]), np.array([3.0, 1.0]), np.array([1.0, 2.0, 3.0])):
        np.testing.assert_array_equal(prim.impl(a)[0], -a * a)
    assert len(runs) == 2  # once per shape


def test_a_shape_determined_composite_with_an_unhashable_param_runs_its_reference():
    def scaled(s, x, *, factors):
        return (s.scale_real(x, factors[0]),)

    rules = RuleSet()
    prim = rules.define("scaled", lambda x, factors: (x,), **composite(scaled, lambda *a, **k: 1.0,
                                                                         shape_determined=True))
    for factor in (2.0, 3.0):
        np.testing.assert_array_equal(prim.impl(np.array([1.0, -2.0]), factors=[factor])[0], [factor, -2 * factor])
