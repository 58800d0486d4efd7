"""The AD contract (SPEC §2): stateful backward and grad slots, functional
transforms that compose, no_grad, trace cutting, engines, rule sets.
"""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.testing import check_grads


def T(a):
    return tf.Tensor(np.array(a, dtype=np.float64))


def arr(x):
    return x.value().to_numpy()


def xexp(s, x):
    """y = Σ exp(x)·x: gradient exp(x)(1 + x), Hessian diag(exp(x)(2 + x))."""
    return s.reduce_sum(s.mul(s.exp(x), x))


# --- stateful: backward / backward_with / slots --------------------------------


def test_backward_fills_slots_and_accumulates(rt, eng, rng):
    a, b = rng.standard_normal(3), rng.standard_normal(3)
    x, y = rt.variable_from(T(a)), rt.variable_from(T(b))
    assert x.grad() is None and y.grad() is None
    out = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(s.exp(x), y)))
    out.backward()
    np.testing.assert_allclose(x.grad().to_numpy(), np.exp(a) * b, rtol=1e-15)
    np.testing.assert_allclose(y.grad().to_numpy(), np.exp(a), rtol=1e-15)
    out.backward()  # slot = existing + incoming
    np.testing.assert_allclose(x.grad().to_numpy(), 2 * np.exp(a) * b, rtol=1e-15)
    np.testing.assert_allclose(y.grad().to_numpy(), 2 * np.exp(a), rtol=1e-15)
    assert isinstance(x.grad(), tf.Tensor)


def test_backward_with_seed_accumulates(rt, eng, rng):
    a = rng.standard_normal((2, 3))
    w = rng.standard_normal((2, 3))
    x = rt.variable_from(T(a))
    out = rt.with_eager_session(eng, lambda s: s.mul(x, x))
    out.backward_with(T(w))
    np.testing.assert_allclose(x.grad().to_numpy(), 2 * a * w, rtol=1e-15)
    out.backward_with(rt.constant_from(T(w)))  # an EagerTensor seed too
    np.testing.assert_allclose(x.grad().to_numpy(), 4 * a * w, rtol=1e-15)


def test_backward_accumulates_across_outputs(rt, eng, rng):
    a = rng.standard_normal(4)
    x = rt.variable_from(T(a))
    y1 = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(x, x)))
    y2 = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.scale_real(x, 3.0)))
    y1.backward()
    y2.backward(eng)
    np.testing.assert_allclose(x.grad().to_numpy(), 2 * a + 3, rtol=1e-15)


def test_unreached_slots_stay_none(rt, eng, rng):
    x, unused = rt.variable_from(T(rng.standard_normal(3))), rt.variable_from(T(rng.standard_normal(3)))
    out = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.exp(x)))
    out.backward()
    assert x.grad() is not None
    assert unused.grad() is None


def test_slot_of_variable_reached_with_zero_derivative_is_filled(rt, eng):
    """Reachable but with a zero derivative (y = x − x): the slot holds zeros."""
    x = rt.variable_from(T([1.0, 2.0]))
    out = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.sub(x, x)))
    out.backward()
    np.testing.assert_array_equal(x.grad().to_numpy(), [0.0, 0.0])


def test_clear_grad_and_clear_grads(rt, eng, rng):
    x, y = rt.variable_from(T(rng.standard_normal(3))), rt.variable_from(T(rng.standard_normal(3)))
    out = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(x, y)))
    out.backward()
    x.clear_grad()
    assert x.grad() is None and y.grad() is not None
    out.backward()
    np.testing.assert_allclose(x.grad().to_numpy(), arr(y), rtol=1e-15)  # restarted from empty
    np.testing.assert_allclose(y.grad().to_numpy(), 2 * arr(x), rtol=1e-15)
    rt.clear_grads()
    assert x.grad() is None and y.grad() is None


def test_clear_grads_is_per_runtime(eng):
    rt1, rt2 = tf.EagerRuntime(), tf.EagerRuntime()
    x1, x2 = rt1.variable_from(T([1.0])), rt2.variable_from(T([2.0]))
    for rt, x in ((rt1, x1), (rt2, x2)):
        rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(x, x))).backward()
    rt1.clear_grads()
    assert x1.grad() is None
    np.testing.assert_array_equal(x2.grad().to_numpy(), [4.0])


def test_backward_through_svd_and_einsum(rt, eng, rng):
    a = rng.standard_normal((4, 3))
    x = rt.variable_from(T(a))
    out = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.svd(x)[1]))
    out.backward()
    U, _, Vt = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(x.grad().to_numpy(), U @ Vt, atol=1e-14)


# --- functional transforms: no slots, composable ---------------------------------


def test_functional_transforms_never_touch_slots(rt, eng, rng):
    a = rng.standard_normal(3)
    x = rt.variable_from(T(a))
    out = rt.with_eager_session(eng, lambda s: xexp(s, x))
    rt.grad(eng, out, x)
    rt.vjp(eng, out, x, T(1.0))
    rt.jvp(eng, out, x, T(np.ones(3)))
    rt.grad_optional(eng, out, x)
    rt.vjp_optional(eng, out, [x], T(1.0))
    rt.jvp_optional(eng, out, x, T(np.ones(3)))
    assert x.grad() is None
    out.backward()
    before = x.grad().to_numpy()
    rt.grad(eng, out, x)
    rt.vjp(eng, out, x, T(2.0))
    rt.jvp(eng, out, x, T(np.ones(3)))
    np.testing.assert_array_equal(x.grad().to_numpy(), before)


def test_grad_vjp_jvp_values(rt, eng, rng):
    a = rng.standard_normal(4)
    x = rt.variable_from(T(a))
    y = rt.with_eager_session(eng, lambda s: xexp(s, x))
    want = np.exp(a) * (1 + a)
    g = rt.grad(eng, y, x)
    assert isinstance(g, tf.EagerTensor)
    np.testing.assert_allclose(arr(g), want, rtol=1e-15)
    np.testing.assert_allclose(arr(rt.vjp(eng, y, x, T(2.0))), 2 * want, rtol=1e-15)
    v = rng.standard_normal(4)
    np.testing.assert_allclose(rt.jvp(eng, y, x, T(v)).item(), want @ v, rtol=1e-14)


def test_jvp_of_grad_is_hessian_vector_product(rt, eng, rng):
    a, v = rng.standard_normal(5), rng.standard_normal(5)
    x = rt.variable_from(T(a))
    y = rt.with_eager_session(eng, lambda s: xexp(s, x))
    g = rt.grad(eng, y, x)
    assert g.is_tracked  # differentiable
    hv = rt.jvp(eng, g, x, T(v))
    np.testing.assert_allclose(arr(hv), np.exp(a) * (2 + a) * v, rtol=1e-14)
    # Reverse over reverse gives the same Hessian-vector product.
    hv2 = rt.vjp(eng, g, x, T(v))
    np.testing.assert_allclose(arr(hv2), np.exp(a) * (2 + a) * v, rtol=1e-14)
    assert x.grad() is None


def test_hessian_vector_product_nondiagonal(rt, eng, rng):
    """y = ½ xᵀ M x + Σ x³: H = (M + Mᵀ)/2·... checked against an analytic Hessian."""
    n = 4
    M = rng.standard_normal((n, n))
    a, v = rng.standard_normal(n), rng.standard_normal(n)
    x = rt.variable_from(T(a))
    y = rt.with_eager_session(
        eng,
        lambda s: s.add(
            s.scale_real(s.einsum([x, s.constant_from(T(M)), x], "i,ij,j->"), 0.5),
            s.reduce_sum(s.mul(s.mul(x, x), x)),
        ),
    )
    H = 0.5 * (M + M.T) + np.diag(6 * a)
    np.testing.assert_allclose(arr(rt.jvp(eng, rt.grad(eng, y, x), x, T(v))), H @ v, rtol=1e-13)


def test_jvp_of_vjp_is_second_derivative(rt, eng, rng):
    a, w, v = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    x = rt.variable_from(T(a))
    y = rt.with_eager_session(eng, lambda s: s.mul(s.exp(x), x))  # elementwise
    ct = rt.vjp(eng, y, x, T(w))
    np.testing.assert_allclose(arr(ct), w * np.exp(a) * (1 + a), rtol=1e-15)
    np.testing.assert_allclose(arr(rt.jvp(eng, ct, x, T(v))), w * np.exp(a) * (2 + a) * v, rtol=1e-14)


def test_vjp_of_jvp(rt, eng, rng):
    a, v = rng.standard_normal(3), rng.standard_normal(3)
    x = rt.variable_from(T(a))
    y = rt.with_eager_session(eng, lambda s: xexp(s, x))
    t = rt.jvp(eng, y, x, T(v))
    np.testing.assert_allclose(arr(rt.grad(eng, t, x)), np.exp(a) * (2 + a) * v, rtol=1e-14)


def test_third_order(rt, eng, rng):
    """grad of (jvp of grad): y = Σ exp(x)·x, third derivative diag(exp(x)(3 + x))."""
    a, v = rng.standard_normal(3), rng.standard_normal(3)
    x = rt.variable_from(T(a))
    y = rt.with_eager_session(eng, lambda s: xexp(s, x))
    hv = rt.jvp(eng, rt.grad(eng, y, x), x, T(v))
    hvv = rt.with_eager_session(eng, lambda s: s.reduce_sum(hv))
    np.testing.assert_allclose(arr(rt.grad(eng, hvv, x)), np.exp(a) * (3 + a) * v, rtol=1e-14)


def test_second_order_through_svd(rt, eng, rng):
    """jvp of grad through an SVD-based loss, against a difference of gradients."""
    a = rng.standard_normal((4, 3))
    v = rng.standard_normal((4, 3))

    def grad_at(p):
        r = tf.EagerRuntime()
        xx = r.variable_from(T(p))
        return arr(r.grad(eng, r.with_eager_session(eng, lambda s: s.reduce_sum(s.svd(xx)[1])), xx))

    x = rt.variable_from(T(a))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.svd(x)[1]))
    hv = arr(rt.jvp(eng, rt.grad(eng, y, x), x, T(v)))
    h = 1e-5
    fd = (grad_at(a + h * v) - grad_at(a - h * v)) / (2 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-8)


def test_optional_forms_return_none_for_unreached(rt, eng, rng):
    x, unused = rt.variable_from(T(rng.standard_normal(3))), rt.variable_from(T(rng.standard_normal(3)))
    c = rt.constant_from(T(np.ones(3)))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.exp(x)))
    gx, gu, gc = rt.vjp_optional(eng, y, [x, unused, c], T(1.0))
    np.testing.assert_allclose(arr(gx), np.exp(arr(x)), rtol=1e-15)
    assert gu is None and gc is None
    assert rt.grad_optional(eng, y, unused) is None
    assert rt.grad_optional(eng, y, c) is None
    assert rt.vjp_optional(eng, y, unused, T(1.0)) is None
    assert rt.jvp_optional(eng, y, unused, T(np.ones(3))) is None
    assert rt.jvp_optional(eng, y, c, T(np.ones(3))) is None
    np.testing.assert_allclose(arr(rt.grad_optional(eng, y, [x, unused])[0]), np.exp(arr(x)), rtol=1e-15)
    # jvp with one reaching and one unreached wrt: the unreached one contributes nothing.
    v = rng.standard_normal(3)
    t = rt.jvp_optional(eng, y, [x, unused], [T(v), T(np.ones(3))])
    np.testing.assert_allclose(t.item(), np.exp(arr(x)) @ v, rtol=1e-14)


def test_optional_constant_wrt_with_constants_in_graph(rt, eng, rng):
    """A constant in wrt gives None even when the graph has constant operands of other shapes."""
    a = rng.standard_normal(3)
    x = rt.variable_from(T(a))
    c1 = rt.constant_from(T(np.full(3, 2.0)))
    c2 = rt.constant_from(T(np.full((2, 3), 3.0)))
    c_wrt = rt.constant_from(T(np.ones(4)))
    y = rt.with_eager_session(eng, lambda s: s.einsum([c2, s.mul(x, c1)], "ij,j->"))
    gx, gc = rt.vjp_optional(eng, y, [x, c_wrt], T(1.0))
    np.testing.assert_allclose(arr(gx), np.full(3, 12.0), rtol=1e-15)
    assert gc is None
    gx, gc = rt.grad_optional(eng, y, [x, c1])
    np.testing.assert_allclose(arr(gx), np.full(3, 12.0), rtol=1e-15)
    assert gc is None


def test_wrt_list_returns_list(rt, eng, rng):
    a, b = rng.standard_normal(2), rng.standard_normal(2)
    x, y = rt.variable_from(T(a)), rt.variable_from(T(b))
    out = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(x, y)))
    for wrt in ([x, y], (x, y)):
        g = rt.grad(eng, out, wrt)
        assert isinstance(g, list) and len(g) == 2
        np.testing.assert_allclose(arr(g[0]), b, rtol=1e-15)
        np.testing.assert_allclose(arr(g[1]), a, rtol=1e-15)
        g = rt.vjp(eng, out, wrt, T(3.0))
        assert isinstance(g, list) and len(g) == 2
    single = rt.grad(eng, out, [x])
    assert isinstance(single, list) and len(single) == 1
    assert isinstance(rt.grad(eng, out, x), tf.EagerTensor)
    # jvp over a list of wrt: the tangents sum.
    v, w = rng.standard_normal(2), rng.standard_normal(2)
    np.testing.assert_allclose(rt.jvp(eng, out, [x, y], [T(v), T(w)]).item(), v @ b + a @ w, rtol=1e-14)


def _exp_of_square(rt, eng, rng):
    """(a, x, z, y): a variable x = a, the recorded intermediate z = x·x, and y = Σ exp(z)."""
    a = rng.standard_normal(3)
    x = rt.variable_from(T(a))
    state = {}

    def f(s):
        state["z"] = s.mul(x, x)
        return s.reduce_sum(s.exp(state["z"]))

    y = rt.with_eager_session(eng, f)
    return a, x, state["z"], y


def test_vjp_wrt_intermediate(rt, eng, rng):
    a, x, z, y = _exp_of_square(rt, eng, rng)
    assert z.is_tracked and not z.is_leaf
    np.testing.assert_allclose(arr(rt.vjp(eng, y, z, T(1.0))), np.exp(a * a), rtol=1e-15)
    v = rng.standard_normal(3)
    np.testing.assert_allclose(rt.jvp(eng, y, z, T(v)).item(), np.exp(a * a) @ v, rtol=1e-14)
    assert z.grad() is None  # a non-leaf has no slot
    y.backward()
    assert z.grad() is None
    np.testing.assert_allclose(x.grad().to_numpy(), 2 * a * np.exp(a * a), rtol=1e-15)


def test_vjp_wrt_intermediate_and_its_ancestor(rt, eng, rng):
    """wrt = [z, x] with z = x·x: x still reaches y (through z); each gets its full cotangent."""
    a, x, z, y = _exp_of_square(rt, eng, rng)
    gz, gx = rt.grad(eng, y, [z, x])
    np.testing.assert_allclose(arr(gz), np.exp(a * a), rtol=1e-15)
    np.testing.assert_allclose(arr(gx), 2 * a * np.exp(a * a), rtol=1e-15)


def test_jvp_wrt_intermediate_and_its_ancestor_is_the_transpose(rt, eng, rng):
    """jvp with seeds on z = x·x and on x: ⟨vjp(w), (tz, tx)⟩ = w · jvp((tz, tx))."""
    a, x, z, y = _exp_of_square(rt, eng, rng)
    tz, tx = rng.standard_normal(3), rng.standard_normal(3)
    gz, gx = rt.grad(eng, y, [z, x])
    jv = rt.jvp(eng, y, [z, x], [T(tz), T(tx)])
    np.testing.assert_allclose(jv.item(), arr(gz) @ tz + arr(gx) @ tx, rtol=1e-14)


def test_jvp_with_one_tensor_twice_in_wrt_adds_the_tangents(rt, eng, rng):
    a, t1, t2 = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    x = rt.variable_from(T(a))
    y = rt.with_eager_session(eng, lambda s: s.mul(x, x))
    np.testing.assert_allclose(arr(rt.jvp(eng, y, [x, x], [T(t1), T(t2)])), 2 * a * (t1 + t2), rtol=1e-15)
    g1, g2 = rt.vjp(eng, y, [x, x], T(t1))
    np.testing.assert_array_equal(arr(g1), arr(g2))


def test_vjp_wrt_svd_output(rt, eng, rng):
    """wrt an intermediate with several siblings (u, s, vt of one SVD)."""
    a = rng.standard_normal((4, 3))
    x = rt.variable_from(T(a))
    state = {}

    def f(s):
        u, sv, vt = s.svd(x)
        state["sv"] = sv
        return s.reduce_sum(s.mul(sv, sv))

    y = rt.with_eager_session(eng, f)
    np.testing.assert_allclose(arr(rt.grad(eng, y, state["sv"])), 2 * arr(state["sv"]), rtol=1e-15)


def test_no_grad_gives_untracked(rt, eng, rng):
    x = rt.variable_from(T(rng.standard_normal(3)))
    with rt.no_grad():
        assert not rt.recording
        y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.exp(x)))
    assert rt.recording
    assert not y.is_tracked
    np.testing.assert_allclose(y.item(), np.exp(arr(x)).sum(), rtol=1e-15)
    assert rt.vjp_optional(eng, y, x, T(1.0)) is None
    with pytest.raises(tf.NotReachable):
        rt.vjp(eng, y, x, T(1.0))
    # Nested no_grad, and recording resumes after.
    with rt.no_grad():
        with rt.no_grad():
            pass
        assert not rt.recording
    z = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.exp(x)))
    assert z.is_tracked


def test_no_grad_restored_after_exception(rt):
    with pytest.raises(RuntimeError):
        with rt.no_grad():
            raise RuntimeError("boom")
    assert rt.recording


def test_constant_has_no_slot(rt, eng):
    c = rt.constant_from(T([1.0, 2.0]))
    assert not c.is_tracked and not c.is_leaf
    assert c.grad() is None
    c.clear_grad()  # harmless
    assert c.grad() is None
    x = rt.variable_from(T([3.0, 4.0]))
    rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(c, x))).backward()
    assert c.grad() is None
    np.testing.assert_array_equal(x.grad().to_numpy(), [1.0, 2.0])


def test_to_tensor_and_value(rt, eng):
    data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    t = tf.Tensor.from_vec_col_major([2, 3], data)
    x = rt.variable_from(t)
    y = rt.with_eager_session(eng, lambda s: s.scale_real(x, 2.0))
    host = y.to_tensor(eng)
    assert isinstance(host, tf.Tensor) and isinstance(y.value(), tf.Tensor)
    assert host.shape == (2, 3) and y.shape == (2, 3) and y.dtype == np.float64
    np.testing.assert_array_equal(host.as_slice(), 2 * np.array(data))
    np.testing.assert_array_equal(y.value().as_slice(), 2 * np.array(data))
    np.testing.assert_array_equal(x.value().as_slice(), data)
    np.testing.assert_array_equal(host.to_numpy(), [[2.0, 6.0, 10.0], [4.0, 8.0, 12.0]])


def test_variable_from_eager_tensor_cuts_the_trace(rt, eng, rng):
    a = rng.standard_normal(3)
    x = rt.variable_from(T(a))
    z = rt.with_eager_session(eng, lambda s: s.exp(x))
    x2 = rt.variable_from(z)
    assert x2.is_leaf
    np.testing.assert_array_equal(arr(x2), arr(z))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(x2, x2)))
    y.backward()
    np.testing.assert_allclose(x2.grad().to_numpy(), 2 * np.exp(a), rtol=1e-15)
    assert x.grad() is None  # nothing flowed back through the cut
    assert rt.grad_optional(eng, y, x) is None
    with pytest.raises(tf.NotReachable):
        rt.grad(eng, y, x)
    # The staged chain rule, done by hand: d y/d x = vjp(z, x, d y/d x2).
    ct = rt.grad(eng, y, x2)
    np.testing.assert_allclose(arr(rt.vjp(eng, z, x, ct)), 2 * np.exp(2 * a), rtol=1e-15)


def test_constant_from_tracked_is_untracked(rt, eng):
    x = rt.variable_from(T([1.0]))
    c = rt.constant_from(rt.with_eager_session(eng, lambda s: s.exp(x)))
    assert not c.is_tracked


# --- engines ------------------------------------------------------------------------


def _pipeline(eng, a, w):
    rt = tf.EagerRuntime()
    x = rt.variable_from(T(a))

    def f(s):
        u, sv, vt = s.svd(x)
        uk = s.slice(u, SliceConfig([0, 0], [a.shape[0], 3]))
        vk = s.slice(vt, SliceConfig([0, 0], [3, a.shape[1]]))
        sk = s.sqrt(s.slice(sv, SliceConfig([0], [3])))
        t = s.einsum([uk, sk, vk, s.constant_from(T(w))], "ai,i,ib,bc->ac")
        return s.reduce_sum(s.mul(t, t))

    y = rt.with_eager_session(eng, f)
    g = rt.grad(eng, y, x)
    hv = rt.jvp(eng, g, x, T(np.ones_like(a)))
    return y.value().as_slice(), g.value().as_slice(), hv.value().as_slice()


def test_serial_and_pool_engines_bitwise_identical(rng):
    a = rng.standard_normal((8, 6))
    w = rng.standard_normal((6, 5))
    serial = _pipeline(tf.CpuEngine.serial(), a, w)
    pooled = _pipeline(tf.CpuEngine(tf.Pool.builder().threads(2).build()), a, w)
    for p, q in zip(serial, pooled):
        assert p.tobytes() == q.tobytes()
    # And repeatable on one engine.
    again = _pipeline(tf.CpuEngine.serial(), a, w)
    for p, q in zip(serial, again):
        assert p.tobytes() == q.tobytes()


def test_one_runtime_two_engines(rng):
    rt = tf.EagerRuntime()
    e1, e2 = tf.CpuEngine.serial(), tf.CpuEngine(tf.Pool.builder().threads(2).build())
    x = rt.variable_from(T(rng.standard_normal(3)))
    y = rt.with_eager_session(e1, lambda s: xexp(s, x))
    g1, g2 = rt.grad(e1, y, x), rt.grad(e2, y, x)
    assert arr(g1).tobytes() == arr(g2).tobytes()


# --- contexts and rule sets ----------------------------------------------------------


def test_core_only_context_raises_unsupported_for_svd(eng, rng):
    rt = tf.EagerRuntime.with_ad_context(tf.AdContext.builder().build())
    x = rt.variable_from(T(rng.standard_normal((3, 2))))
    u, sv, vt = rt.with_eager_session(eng, lambda s: s.svd(x))  # the forward needs no rule
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(sv))
    with pytest.raises(tf.Unsupported) as info:
        rt.vjp(eng, y, x, T(1.0))
    assert "svd" in str(info.value)
    assert isinstance(info.value, NotImplementedError)
    with pytest.raises(tf.Unsupported, match="svd"):
        rt.jvp(eng, y, x, T(np.ones((3, 2))))
    with pytest.raises(tf.Unsupported, match="svd"):
        y.backward()
    assert x.grad() is None
    # Core ops still differentiate in that context.
    z = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.exp(x)))
    np.testing.assert_allclose(arr(rt.grad(eng, z, x)), np.exp(arr(x)), rtol=1e-15)


def test_core_only_context_raises_unsupported_for_einsum(eng, rng):
    rt = tf.EagerRuntime(tf.AdContext.builder().build())
    x = rt.variable_from(T(rng.standard_normal((3, 3))))
    y = rt.with_eager_session(eng, lambda s: s.einsum([x], "ii->"))
    with pytest.raises(tf.Unsupported, match="einsum"):
        rt.grad(eng, y, x)


def test_linalg_rules_without_einsum_rules(eng, rng):
    """svd's rule is written with einsum: first order works, second order needs einsum's rules."""
    ctx = tf.AdContext.builder().with_semantic_extension_rules(tf.linalg.semantic_ad_rules()).build()
    rt = tf.EagerRuntime(ctx)
    a = rng.standard_normal((3, 3))
    x = rt.variable_from(T(a))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.svd(x)[1]))
    g = rt.grad(eng, y, x)
    U, _, Vt = np.linalg.svd(a)
    np.testing.assert_allclose(arr(g), U @ Vt, atol=1e-14)


def test_default_context_has_all_rules():
    ctx = tf.AdContext()
    for name in ("add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "scale_real", "broadcast_in_dim",
                 "reduce_sum", "transpose", "reshape", "slice", "pad", "einsum", "svd"):
        assert name in ctx.rules, name
    assert tf.EagerRuntime().ad_context.rules.names() == ctx.rules.names()
    core = tf.AdContext.builder().build().rules
    assert "svd" not in core and "einsum" not in core and "add" in core
    full = (
        tf.AdContext.builder()
        .with_semantic_extension_rules(tf.linalg.semantic_ad_rules())
        .with_semantic_extension_rules(tf.einsum.semantic_ad_rules())
        .build()
    )
    assert full.rules.names() == ctx.rules.names()


def test_default_context_differentiates_svd_and_einsum(eng, rng):
    rt = tf.EagerRuntime(tf.AdContext())
    x = rt.variable_from(T(rng.standard_normal((3, 3))))
    y = rt.with_eager_session(eng, lambda s: s.einsum([s.svd(x)[0]], "ii->"))
    assert np.all(np.isfinite(arr(rt.grad(eng, y, x))))


def _dummy_rules(name):
    r = tf.RuleSet()
    r.define(name, lambda x: (x,), lambda x: (x,), lambda s, t, p, o: (t[0],), lambda s, c, p, o, n: (c[0],))
    return r


def test_ruleset_merge_adds_in_place_as_in_rust():
    a, b = _dummy_rules("ident_a"), _dummy_rules("ident_b")
    merged = a.merge(b)
    assert merged is a  # `rules = a.merge(b)` and a bare `a.merge(b)` both work
    assert "ident_a" in a and "ident_b" in a and len(a) == 2
    assert len(b) == 1  # the argument is unchanged
    # Merging a set with itself (the same rule objects) is fine.
    lin = tf.linalg.semantic_ad_rules()
    assert len(lin.merge(lin)) == len(lin)
    both = tf.einsum.semantic_ad_rules().merge(lin)
    assert "svd" in both and "einsum" in both


def test_merging_into_a_family_set_changes_neither_the_library_nor_built_contexts(eng, rng):
    """The Rust spelling: take linalg's set and merge einsum's into it, in place."""
    rules = tf.linalg.semantic_ad_rules()
    rules.merge(tf.einsum.semantic_ad_rules())
    ctx = tf.AdContext.builder().with_semantic_extension_rules(rules).build()
    assert "einsum" in ctx.rules and "svd" in ctx.rules
    assert "einsum" not in tf.linalg.semantic_ad_rules()  # each call gives a fresh set
    rules.merge(_dummy_rules("ident_late"))
    assert "ident_late" not in ctx.rules  # a built context keeps its own copy
    ctx.rules.merge(_dummy_rules("ident_later"))
    assert "ident_later" not in ctx.rules  # and hands out copies
    rt = tf.EagerRuntime.with_ad_context(ctx)
    x = rt.variable_from(T(rng.standard_normal((3, 3))))
    y = rt.with_eager_session(eng, lambda s: s.einsum([s.svd(x)[1]], "i->"))
    assert np.all(np.isfinite(arr(rt.grad(eng, y, x))))


def test_a_failed_merge_adds_nothing():
    a = _dummy_rules("ident_a")
    a.merge(_dummy_rules("ident_b"))
    with pytest.raises(tf.InvalidArgument, match="ident_a"):
        a.merge(_dummy_rules("ident_c").merge(_dummy_rules("ident_a")))
    assert sorted(a.names()) == ["ident_a", "ident_b"]


def test_ruleset_conflicting_merge_raises():
    with pytest.raises(tf.InvalidArgument) as info:
        _dummy_rules("svd").merge(tf.linalg.semantic_ad_rules())
    assert isinstance(info.value, ValueError)
    assert "RuleSet.merge" in str(info.value) and "svd" in str(info.value)
    with pytest.raises(tf.InvalidArgument, match="ident"):
        _dummy_rules("ident").merge(_dummy_rules("ident"))
    with pytest.raises(tf.InvalidArgument, match="svd"):
        tf.AdContext.builder().with_semantic_extension_rules(_dummy_rules("svd")).with_semantic_extension_rules(
            tf.linalg.semantic_ad_rules()
        )
    with pytest.raises(tf.InvalidArgument, match="RuleSet"):
        tf.RuleSet().merge({"x": 1})


def test_ruleset_define_twice_raises():
    r = _dummy_rules("twice")
    with pytest.raises(tf.InvalidArgument, match="twice"):
        r.define("twice", lambda x: (x,), lambda x: (x,), None, None)


def test_user_rule_set_in_context(eng, rng):
    """A user's primitive with its rules, added by the builder, differentiates."""
    r = tf.RuleSet()
    cube = r.define(
        "cube",
        lambda x: (x,),
        lambda x: (x**3,),
        lambda s, t, p, o: (s.mul(t[0], s.scale_real(s.mul(p[0], p[0]), 3.0)),),
        lambda s, c, p, o, n: (s.mul(c[0], s.scale_real(s.mul(p[0], p[0]), 3.0)),),
    )
    ctx = tf.AdContext.builder().with_semantic_extension_rules(r).build()
    check_grads(lambda s, x: s.bind(cube, x)[0], [rng.standard_normal((2, 3))], context=ctx)


def test_check_grads_catches_a_wrong_rule(rng):
    """The helper the suite relies on does fail on a wrong derivative."""
    r = tf.RuleSet()
    bad = r.define(
        "bad_square",
        lambda x: (x,),
        lambda x: (x * x,),
        lambda s, t, p, o: (s.mul(t[0], p[0]),),  # misses the factor 2
        lambda s, c, p, o, n: (s.mul(c[0], p[0]),),
    )
    ctx = tf.AdContext.builder().with_semantic_extension_rules(r).build()
    with pytest.raises(AssertionError, match="check_grads"):
        check_grads(lambda s, x: s.bind(bad, x)[0], [rng.standard_normal(3)], context=ctx)
    # A VJP that is not the transpose of the JVP fails in reverse mode alone.
    r2 = tf.RuleSet()
    skew = r2.define(
        "skew_square",
        lambda x: (x,),
        lambda x: (x * x,),
        lambda s, t, p, o: (s.scale_real(s.mul(t[0], p[0]), 2.0),),
        lambda s, c, p, o, n: (s.mul(c[0], p[0]),),
    )
    ctx2 = tf.AdContext.builder().with_semantic_extension_rules(r2).build()
    check_grads(lambda s, x: s.bind(skew, x)[0], [rng.standard_normal(3)], modes=("fwd",), order=1, context=ctx2)
    with pytest.raises(AssertionError):
        check_grads(lambda s, x: s.bind(skew, x)[0], [rng.standard_normal(3)], modes=("rev",), order=1, context=ctx2)


def test_no_grad_is_a_guard_as_in_rust(rt, eng):
    """`let _guard = rt.no_grad();` holds until the guard is dropped; `with rt.no_grad():` for a block."""
    x = rt.variable_from(T(np.ones(2)))

    def tracked():
        return rt.with_eager_session(eng, lambda s: s.mul(x, x)).is_tracked

    guard = rt.no_grad()
    assert not tracked() and not rt.recording
    inner = rt.enable_grad()
    assert tracked()
    guard.close()  # guards may end out of order: the newest open one decides
    assert tracked()
    del inner
    assert tracked() and rt.recording
    rt.no_grad()  # not bound: dropped at once, as `let _ = rt.no_grad();` in Rust
    assert tracked()
    with rt.no_grad():
        assert not tracked()
        with rt.enable_grad():
            assert tracked()
        assert not tracked()
    assert tracked()


def test_to_tensor_is_an_immutable_host_value(rt, eng):
    x = rt.variable_from(T(np.arange(4.0)))
    y = rt.with_eager_session(eng, lambda s: s.scale_real(x, 2.0))
    t = y.to_tensor(eng)
    assert isinstance(t, tf.Tensor) and t.as_slice().tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(ValueError):
        t.as_slice()[0] = 1.0  # read-only, like the tensor it came from
    assert y.value().as_slice().tolist() == [0.0, 2.0, 4.0, 6.0]
