"""User-defined primitives: forward, JVP and VJP registered together and passed in through the AdContext."""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py.rules import RuleSet, vjp_from_linear_jvp
from tenferro_py.testing import check_grads


def _cube_rules():
    rules = RuleSet()

    def jvp(s, tangents, primals, outputs):
        (t,), (x,) = tangents, primals
        return (s.mul(s.scale_real(s.mul(x, x), 3.0), t),)

    cube = rules.define("cube", lambda x: (x,), lambda x: (x**3,), jvp, vjp_from_linear_jvp(jvp))
    return rules, cube


def test_user_primitive_with_a_transposed_jvp_passes_check_grads_to_second_order(rng):
    rules, cube = _cube_rules()
    ctx = tf.AdContext.builder().with_semantic_extension_rules(rules).build()
    for x in (rng.standard_normal((3, 2)), rng.standard_normal(4) + 1j * rng.standard_normal(4)):
        check_grads(lambda s, a: s.bind(cube, a)[0], [x], order=2, context=ctx)


def test_user_rules_merge_with_the_library_families(rng):
    rules, cube = _cube_rules()
    all_rules = tf.linalg.semantic_ad_rules().merge(tf.einsum.semantic_ad_rules()).merge(rules)
    ctx = tf.AdContext.builder().with_semantic_extension_rules(all_rules).build()
    check_grads(lambda s, a: s.bind(cube, s.svd(a)[1])[0], [rng.standard_normal((4, 3))], context=ctx)


def test_a_missing_rule_says_unsupported_with_the_op_name(eng):
    _, cube = _cube_rules()
    rt = tf.EagerRuntime()  # the default context does not know 'cube'
    x = rt.variable_from(tf.Tensor(np.ones(3)))
    y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.bind(cube, x)[0]))
    assert y.item() == 3.0  # the forward runs without a rule
    for transform in (lambda: rt.grad(eng, y, x), lambda: rt.jvp(eng, y, x, tf.Tensor(np.ones(3))), y.backward):
        with pytest.raises(tf.Unsupported, match="'cube'") as info:
            transform()
        assert isinstance(info.value, NotImplementedError)


def test_a_jvp_that_is_not_the_vjps_transpose_fails_check_grads(rng):
    rules = RuleSet()
    wrong = rules.define(
        "twice",
        lambda x: (x,),
        lambda x: (2 * x,),
        jvp=lambda s, t, p, o: (s.scale_real(t[0], 2.0),),
        vjp=lambda s, c, p, o, needs: (s.scale_real(c[0], 3.0),),
    )
    ctx = tf.AdContext.builder().with_semantic_extension_rules(rules).build()
    with pytest.raises(AssertionError, match="differs by"):
        check_grads(lambda s, a: s.bind(wrong, a)[0], [rng.standard_normal(3)], order=1, context=ctx)


def test_transposed_jvp_works_under_no_grad_backward_and_vjp_jvp(eng):
    """The transposed JVP records its placeholder graph even where nothing else is recorded:
    no_grad vjps, backward() (which sweeps under no_grad) and vjp_jvp give 3x², not zeros."""
    rules, cube = _cube_rules()
    rt = tf.EagerRuntime(tf.AdContext.builder().with_semantic_extension_rules(rules).build())
    xv = np.array([1.0, -2.0, 0.5])
    x = rt.variable_from(tf.Tensor(xv))
    y = rt.with_eager_session(eng, lambda s: s.bind(cube, x)[0])
    ones, dx = tf.Tensor(np.ones(3)), np.array([0.3, 1.0, -2.0])
    with rt.no_grad():
        np.testing.assert_allclose(rt.vjp(eng, y, x, ones).value().to_numpy(), 3 * xv**2, rtol=1e-15)
        g, g_dot = rt.vjp_jvp(eng, y, x, ones, tf.Tensor(dx), None)
    np.testing.assert_allclose(g.value().to_numpy(), 3 * xv**2, rtol=1e-15)
    np.testing.assert_allclose(g_dot.value().to_numpy(), 6 * xv * dx, rtol=1e-15)
    y.backward_with(ones, eng)
    np.testing.assert_allclose(x.grad().to_numpy(), 3 * xv**2, rtol=1e-15)


def test_vjp_jvp_through_a_rule_that_runs_its_own_transform(eng, rng):
    """A VJP rule that runs a transform of its own (a fresh leaf of its primal, a session and an
    rt.vjp of its own): the forward trace of vjp_jvp follows every session of the runtime, and
    the fresh leaf holds the primal's value and so its tangent. The jvp of the pullback is exact."""
    rules = RuleSet()

    def jvp(s, tangents, primals, outputs):
        (t,), (x,) = tangents, primals
        return (s.mul(s.scale_real(s.mul(x, x), 3.0), t),)

    def vjp(s, cotangents, primals, outputs, needs):
        rt = s.runtime
        leaf = rt.variable_from(primals[0])
        with rt.enable_grad():
            y = rt.with_eager_session(s.engine, lambda inner: inner.mul(inner.mul(leaf, leaf), leaf))
        return (rt.vjp(s.engine, y, leaf, cotangents[0]),)

    cube = rules.define("cube", lambda x: (x,), lambda x: (x**3,), jvp, vjp)
    rt = tf.EagerRuntime(tf.AdContext.builder().with_semantic_extension_rules(rules).build())
    xv, ct, dx, dct = (rng.standard_normal(3) for _ in range(4))
    x = rt.variable_from(tf.Tensor(xv))
    y = rt.with_eager_session(eng, lambda s: s.bind(cube, x)[0])
    with rt.no_grad():
        g, g_dot = rt.vjp_jvp(eng, y, x, tf.Tensor(ct), tf.Tensor(dx), tf.Tensor(dct))
    np.testing.assert_allclose(g.value().to_numpy(), 3 * xv**2 * ct, rtol=1e-14)
    np.testing.assert_allclose(g_dot.value().to_numpy(), 6 * xv * dx * ct + 3 * xv**2 * dct, rtol=1e-14)
    assert not rt._traces  # nothing left active
