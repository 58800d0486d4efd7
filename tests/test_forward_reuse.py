"""Forward mode's economies: the SVD's factored tangents (dU = U·J kept as a Product
through slice, transpose, conj and einsum), TangentMemo (a step's tangents lent to the
jvp of its pullback) and vjp_jvp (a pullback and its jvp in one pass, nothing
recorded). Each must give what plain forward mode, or the jvp of a recorded vjp,
gives; a memo must refuse seeds it was not filled along.
"""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig, TangentMemo
from tenferro_py.rules import RuleSet
from tenferro_py.testing import check_grads

from test_svd import well_separated


def cols(s, x, start, stop):
    return s.slice(x, SliceConfig([0, start], [x.shape[0], stop]))


def full_factor_reads(s, a):
    """Gauge-invariant reads of the whole U and Vᴴ: U W Vᴴ by a 3-operand einsum, the
    projector on U's last columns (slice, conj, einsum), and the one on V's last columns
    through a transpose and an elementwise product (which multiplies the tangent out)."""
    u, sv, vt = s.svd(a)
    k = sv.shape[0]
    rebuilt = s.einsum([u, s.complex(sv, s.mul(sv, sv)) if a.dtype.kind == "c" else sv, vt], "ai,i,ib->ab")
    u_rest = cols(s, u, 1, k)
    proj_u = s.einsum([u_rest, s.conj(u_rest)], "ai,bi->ab")
    v_rest = cols(s, s.transpose(vt, (1, 0)), 1, k)
    ones = s.constant_from(tf.Tensor(np.ones(v_rest.shape, v_rest.dtype)))
    proj_v = s.einsum([s.mul(v_rest, ones), s.conj(v_rest)], "ai,bi->ab")
    return s.add(s.add(rebuilt, proj_u), proj_v)


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_factored_svd_tangents_match_differences(rng, n, dtype):
    a = well_separated(rng, (n, n))
    if dtype is np.complex128:
        a = a + 1j * well_separated(rng, (n, n))
    check_grads(full_factor_reads, [a], modes=("fwd", "rev"), order=2)


def test_factored_tangent_through_slice_rows_and_strides(rt, eng, rng):
    """A Product sliced on both axes, with a stride, equals the slice of the dense tangent."""
    a = well_separated(rng, (6, 6))
    x = rt.variable_from(tf.Tensor(a))
    cfg = SliceConfig([1, 0], [6, 5], [2, 2])

    def sliced(s, x):
        return s.slice(s.svd(x)[0], cfg)

    def dense(s, x):  # an elementwise op first: the Product is multiplied out, then sliced
        u = s.svd(x)[0]
        return s.slice(s.mul(u, s.constant_from(tf.Tensor(np.ones(u.shape)))), cfg)

    da = tf.Tensor(rng.standard_normal(a.shape))
    got = rt.jvp(eng, rt.with_eager_session(eng, lambda s: sliced(s, x)), x, da).value().to_numpy()
    want = rt.jvp(eng, rt.with_eager_session(eng, lambda s: dense(s, x)), x, da).value().to_numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)


# --- TangentMemo ----------------------------------------------------------------------


def step(s, t):
    """A TRG-like step on an n×n matrix: SVD, the factors kept to 2 and weighted, contracted back."""
    n = t.shape[0]
    u, sv, vt = s.svd(t)
    root = s.broadcast_in_dim(s.sqrt(s.slice(sv, SliceConfig([0], [2]))), (n, 2), (1,))
    left = s.mul(cols(s, u, 0, 2), root)
    right = s.mul(s.transpose(s.slice(vt, SliceConfig([0, 0], [2, n])), (1, 0)), root)
    return s.einsum([left, right, left], "ai,bi,bj->aj")


def forward_over_reverse(rt, eng, t, t_dot, ct, ct_dot, memo):
    """The jvp of step's recorded pullback along (ṫ, ċt), with the step's own jvp first."""
    leaf = rt.variable_from(t)
    out = rt.with_eager_session(eng, lambda s: step(s, leaf))
    with rt.no_grad():
        out_dot = rt.jvp(eng, out, leaf, t_dot, memo=memo)
    ct_in = rt.variable_from(ct)
    pulled = rt.vjp(eng, out, leaf, ct_in)
    with rt.no_grad():
        pulled_dot = rt.jvp(eng, pulled, [leaf, ct_in], [t_dot, ct_dot], memo=memo)
    return out_dot.value().to_numpy(), pulled_dot.value().to_numpy()


def test_memo_gives_what_recomputing_gives(rt, eng, rng):
    t = tf.Tensor(well_separated(rng, (4, 4)))
    t_dot, ct, ct_dot = (rt.constant_from(tf.Tensor(rng.standard_normal(shape))) for shape in ((4, 4), (4, 2), (4, 2)))
    with_memo = forward_over_reverse(rt, eng, t, t_dot, ct, ct_dot, TangentMemo())
    without = forward_over_reverse(rt, eng, t, t_dot, ct, ct_dot, None)
    for got, want in zip(with_memo, without):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def counting_context():
    """Every rule of the library plus "double" (y = 2x), whose JVP counts its calls."""
    calls = []
    rules = RuleSet()

    def jvp(s, tangents, primals, outputs):
        calls.append(1)
        return (s.scale_real(tangents[0], 2.0),)

    double = rules.define("double", lambda x: (x,), lambda x: (2.0 * x,), jvp,
                          lambda s, cts, primals, outputs, needs: (s.scale_real(cts[0], 2.0),))
    return tf.AdContext(tf.AdContext().rules.merge(rules)), double, calls


def test_memo_is_used_and_new_seeds_are_respected(eng, rng):
    """The pullback's jvp takes the forward's tangents from the memo, except where a seed newer
    than the memo (an intermediate seeded too) could change them."""
    ctx, double, calls = counting_context()
    rt = tf.EagerRuntime(ctx)
    x = rt.variable_from(tf.Tensor(rng.standard_normal(3)))
    mid = rt.with_eager_session(eng, lambda s: s.log(s.bind(double, s.exp(x))[0]))
    out = rt.with_eager_session(eng, lambda s: s.mul(s.bind(double, mid)[0], mid))
    dx = rt.constant_from(tf.Tensor(rng.standard_normal(3)))
    memo = TangentMemo()
    with rt.no_grad():
        rt.jvp(eng, out, x, dx, memo=memo)
    assert len(calls) == 2
    ct_in = rt.variable_from(tf.Tensor(rng.standard_normal(3)))
    pulled = rt.vjp(eng, out, x, ct_in)
    d_ct = tf.Tensor(rng.standard_normal(3))
    with rt.no_grad():
        got = rt.jvp(eng, pulled, [x, ct_in], [dx, d_ct], memo=memo)
        assert len(calls) == 2  # both "double" nodes lent by the memo
        want = rt.jvp(eng, pulled, [x, ct_in], [dx, d_ct])
    np.testing.assert_allclose(got.value().to_numpy(), want.value().to_numpy(), rtol=1e-14)
    d_mid = tf.Tensor(rng.standard_normal(3))  # mid's own seed adds to what flows into it
    del calls[:]
    with rt.no_grad():
        got = rt.jvp(eng, out, [x, mid], [dx, d_mid], memo=memo)
        assert len(calls) == 1  # the "double" after mid is recomputed, the one before it lent
        want = rt.jvp(eng, out, [x, mid], [dx, d_mid])
    np.testing.assert_allclose(got.value().to_numpy(), want.value().to_numpy(), rtol=1e-14)


def test_memo_refuses_other_seeds(rt, eng, rng):
    x = rt.variable_from(tf.Tensor(rng.standard_normal(3)))
    y = rt.variable_from(tf.Tensor(rng.standard_normal(3)))
    out = rt.with_eager_session(eng, lambda s: s.mul(s.exp(x), y))
    dx = rt.constant_from(tf.Tensor(rng.standard_normal(3)))
    memo = TangentMemo()
    with rt.no_grad():
        rt.jvp(eng, out, x, dx, memo=memo)
        other = tf.Tensor(rng.standard_normal(3))
        with pytest.raises(tf.InvalidArgument, match="jvp: expected a memo filled along seeds"):
            rt.jvp(eng, out, x, other, memo=memo)  # another tangent of x
        with pytest.raises(tf.InvalidArgument, match="jvp_optional: expected a memo filled along seeds"):
            rt.jvp_optional(eng, out, y, other, memo=memo)  # x's seed missing
        with pytest.raises(tf.InvalidArgument, match="jvp: expected memo: a TangentMemo, got dict"):
            rt.jvp(eng, out, x, dx, memo={})


# --- vjp_jvp: a pullback and its jvp in one pass ---------------------------------------------


def random(rng, shape, dtype):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c" else x


def recorded(rt, eng, f, x, x_dot, ct, ct_dot):
    """jvp of a recorded vjp: the composition vjp_jvp must reproduce."""
    y = rt.with_eager_session(eng, lambda s: f(s, x))
    ct_in = rt.variable_from(ct)
    pulled = rt.vjp(eng, y, x, ct_in)
    with rt.no_grad():
        return pulled.value().to_numpy(), rt.jvp(eng, pulled, [x, ct_in], [x_dot, ct_dot]).value().to_numpy()


@pytest.mark.parametrize("use_memo", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_vjp_jvp_is_the_jvp_of_the_recorded_vjp(rt, eng, rng, use_memo, dtype):
    a = well_separated(rng, (4, 4))
    f = step if dtype is np.float64 else full_factor_reads
    if dtype is np.complex128:
        a = a + 1j * well_separated(rng, (4, 4))
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: f(s, x))
    x_dot, ct, ct_dot = (tf.Tensor(random(rng, shape, dtype)) for shape in (a.shape, y.shape, y.shape))
    memo = TangentMemo() if use_memo else None
    with rt.no_grad():
        if memo is not None:
            rt.jvp(eng, y, x, x_dot, memo=memo)
        got, got_dot = rt.vjp_jvp(eng, y, x, ct, x_dot, ct_dot, memo=memo)
    want, want_dot = recorded(rt, eng, f, x, x_dot, ct, ct_dot)
    np.testing.assert_allclose(got.value().to_numpy(), want, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got_dot.value().to_numpy(), want_dot, rtol=1e-12, atol=1e-13)


def test_vjp_jvp_matches_central_differences_of_the_vjp(rt, eng, rng):
    a = well_separated(rng, (5, 5))
    x_dot, ct, ct_dot = rng.standard_normal((5, 5)), rng.standard_normal((5, 2)), rng.standard_normal((5, 2))

    def pullback(point, cot):
        xv = rt.variable_from(tf.Tensor(point))
        y = rt.with_eager_session(eng, lambda s: step(s, xv))
        return rt.vjp(eng, y, xv, tf.Tensor(cot)).value().to_numpy()

    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: step(s, x))
    _, got = rt.vjp_jvp(eng, y, x, tf.Tensor(ct), tf.Tensor(x_dot), tf.Tensor(ct_dot))
    h = 1e-6
    fd = (pullback(a + h * x_dot, ct + h * ct_dot) - pullback(a - h * x_dot, ct - h * ct_dot)) / (2 * h)
    np.testing.assert_allclose(got.value().to_numpy(), fd, rtol=1e-6, atol=1e-7)


def test_vjp_jvp_of_several_inputs_and_a_zero_cotangent_tangent(rt, eng, rng):
    x = rt.variable_from(tf.Tensor(rng.standard_normal(3)))
    w = rt.variable_from(tf.Tensor(rng.standard_normal(3)))
    y = rt.with_eager_session(eng, lambda s: s.mul(s.exp(x), w))
    dxv, dwv, c = (rng.standard_normal(3) for _ in range(3))
    (gx, gw), (gx_dot, gw_dot) = rt.vjp_jvp(eng, y, [x, w], tf.Tensor(c), [tf.Tensor(dxv), tf.Tensor(dwv)], None)
    e, wv = np.exp(x.value().to_numpy()), w.value().to_numpy()
    np.testing.assert_allclose(gx.value().to_numpy(), c * e * wv, rtol=1e-14)
    np.testing.assert_allclose(gw.value().to_numpy(), c * e, rtol=1e-14)
    np.testing.assert_allclose(gx_dot.value().to_numpy(), c * e * (dxv * wv + dwv), rtol=1e-14)
    np.testing.assert_allclose(gw_dot.value().to_numpy(), c * e * dxv, rtol=1e-14)


def test_vjp_jvp_refuses_bad_arguments(rt, eng, rng):
    x = rt.variable_from(tf.Tensor(rng.standard_normal(3)))
    y = rt.with_eager_session(eng, lambda s: s.exp(x))
    t3 = tf.Tensor(rng.standard_normal(3))
    with pytest.raises(tf.InvalidArgument, match="vjp_jvp: expected 1 tangents"):
        rt.vjp_jvp(eng, y, [x], t3, [t3, t3], None)
    with pytest.raises(tf.ShapeMismatch, match="vjp_jvp: expected a tangent of shape"):
        rt.vjp_jvp(eng, y, x, t3, tf.Tensor(np.ones(2)), None)
    with pytest.raises(tf.ShapeMismatch, match="vjp_jvp: expected a cotangent's tangent of shape"):
        rt.vjp_jvp(eng, y, x, t3, t3, tf.Tensor(np.ones(4)))
    with pytest.raises(tf.InvalidArgument, match="vjp_jvp: expected memo: a TangentMemo"):
        rt.vjp_jvp(eng, y, x, t3, t3, None, memo=[])
    memo = TangentMemo()
    with rt.no_grad():
        rt.jvp(eng, y, x, t3, memo=memo)
    with pytest.raises(tf.InvalidArgument, match="vjp_jvp: expected a memo filled along seeds"):
        rt.vjp_jvp(eng, y, x, t3, tf.Tensor(np.ones(3)), None, memo=memo)
    other = rt.variable_from(t3)
    with pytest.raises(tf.NotReachable, match="vjp_jvp"):
        rt.vjp_jvp(eng, y, other, t3, t3, None)
