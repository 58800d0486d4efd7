"""bind_batched on primitives that are not linalg's: stacks are a core mechanism, whose stack and
unstack ops (each other's transpose) are in the core rules, so a context without linalg's
rules differentiates through them."""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py.batching import bind_batched
from tenferro_py.ops import elementwise, structural
from tenferro_py.testing import check_grads

CORE_ONLY = tf.AdContext.builder().build()


def test_the_stack_ops_are_core_rules_not_linalgs():
    assert {"batch_stack", "batch_unstack"} <= set(CORE_ONLY.rules.names())
    assert not {"batch_stack", "batch_unstack"} & set(tf.linalg.semantic_ad_rules().names())


def batched_transpose(s, x):
    return bind_batched(s, "transpose", structural.transpose, [x], [2], perm=(1, 0))[0]


def batched_product(s, x, y):
    """x[i] * y for each matrix x[i] of a stack: y, without a batch axis, is shared."""
    return bind_batched(s, "mul", elementwise.mul, [x, y], [2, 2])[0]


def test_a_batched_core_primitive_is_numpys(rng):
    a, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((4, 5))
    rt, eng = tf.EagerRuntime(CORE_ONLY), tf.CpuEngine.serial()
    x, y = rt.variable_from(tf.Tensor(a)), rt.variable_from(tf.Tensor(b))
    t, p = rt.with_eager_session(eng, lambda s: (batched_transpose(s, x), batched_product(s, x, y)))
    np.testing.assert_array_equal(t.value().to_numpy(), np.swapaxes(a, -1, -2))
    np.testing.assert_array_equal(p.value().to_numpy(), a * b)
    loss = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.mul(batched_product(s, x, y), x)))
    gx, gy = (g.value().to_numpy() for g in rt.grad(eng, loss, [x, y]))
    np.testing.assert_allclose(gx, 2 * a * b, rtol=1e-14)
    np.testing.assert_allclose(gy, (a * a).sum(axis=(0, 1)), rtol=1e-14)


@pytest.mark.parametrize("complex_", [False, True])
def test_batched_core_primitive_grads_without_linalg_rules(rng, complex_):
    a, b = rng.standard_normal((3, 2, 4)), rng.standard_normal((2, 4))
    if complex_:
        a, b = a + 1j * rng.standard_normal(a.shape), b + 1j * rng.standard_normal(b.shape)
    check_grads(lambda s, x, y: batched_transpose(s, batched_product(s, x, y)), [a, b], context=CORE_ONLY)


def test_an_empty_stack_of_a_core_primitive(run):
    out = run(lambda s: batched_transpose(s, tf.Tensor(np.zeros((0, 2, 3)))))
    assert out.shape == (0, 3, 2)


def test_unequal_batches_are_a_shape_mismatch(run):
    with pytest.raises(tf.ShapeMismatch, match=r"^mul: expected operands with equal leading \(batch\) axes"):
        run(lambda s: batched_product(s, tf.Tensor(np.ones((2, 3, 3))), tf.Tensor(np.ones((4, 3, 3)))))
