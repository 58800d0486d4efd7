"""A float32 path stays float32 end to end: values, gradients, tangents, second order; no silent upcast."""

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.models import trg


def pipeline(s, a):
    """An SVD, a truncation, a contraction and elementwise ops: the shape of a TRG step."""
    u, sv, vt = s.svd(a)
    k = 2
    root = s.sqrt(s.slice(sv, SliceConfig([0], [k])))
    if a.dtype.kind == "c":
        root = s.complex(root, s.zeros(root.shape, root.dtype))
    left = s.mul(s.slice(u, SliceConfig([0, 0], [a.shape[0], k])), s.broadcast_in_dim(root, (a.shape[0], k), (1,)))
    t = s.einsum([left, left, a], "ai,bi,bc->ac")
    norm2 = s.reduce_sum(s.mul(s.conj(t), t))
    norm2 = s.real(norm2) if norm2.dtype.kind == "c" else norm2
    return s.log(s.div(s.sqrt(norm2), s.constant_from(tf.Tensor(np.array(2.0, norm2.dtype)))))


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-4), (np.complex64, 2e-4)])
def test_single_precision_stays_single_and_matches_double(rng, dtype, rtol):
    data = rng.standard_normal((5, 4))
    if dtype == np.complex64:
        data = data + 1j * rng.standard_normal((5, 4))
    results = {}
    for dt in (dtype, np.result_type(dtype, np.float64)):
        rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
        a = rt.variable_from(tf.Tensor(data.astype(dt)))

        def loss(s):
            y = pipeline(s, a)
            return y

        y = rt.with_eager_session(eng, loss)
        g = rt.grad(eng, y, a)
        v = tf.Tensor(np.ones(data.shape, dt))
        hv = rt.jvp(eng, g, a, v)
        jv = rt.jvp(eng, y, a, v)
        assert y.dtype == np.empty(0, dt).real.dtype  # a real loss of the same precision
        assert g.dtype == np.dtype(dt) and hv.dtype == np.dtype(dt) and jv.dtype == y.dtype
        results[np.dtype(dt).itemsize] = [x.value().to_numpy() for x in (y, g, hv)]
    single, double = results[np.dtype(dtype).itemsize], results[max(results)]
    for lo, hi in zip(single, double):
        np.testing.assert_allclose(lo, hi, rtol=rtol, atol=rtol * np.max(np.abs(hi)))


def test_float32_trg_step_stays_float32():
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    t = rt.variable_from(tf.Tensor(rt.with_eager_session(eng, lambda s: trg.initial(
        s, s.constant_from(tf.Tensor.scalar(0.4)))).value().to_numpy().astype(np.float32)))
    t_next, ln_norm = rt.with_eager_session(eng, lambda s: trg.step(s, t, 2))
    ct = rt.vjp(eng, t_next, t, tf.Tensor(np.ones(t_next.shape, np.float32)))
    assert t_next.dtype == ln_norm.dtype == ct.dtype == np.float32
