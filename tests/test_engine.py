"""The wide engine's scheduler: independent costly kernels overlap whatever the program's order,
reads and session ends wait for what they need, errors surface where they should, and every
width gives the same bits."""

import runpy
import threading
from pathlib import Path

import numpy as np
import pytest

import tenferro_py as tf
from tenferro_py.engine import Pending, available_parallelism, resolve
from tenferro_py.models import trg
from tenferro_py.rules import RuleSet
from tenferro_py.tensor import Aval

ROOT = Path(__file__).resolve().parents[1]


def wide(n=2):
    return tf.CpuEngine(tf.Pool.builder().threads(n).build())


def rendezvous_context(parties=2, timeout=60.0):
    """A context with "meet": a costly kernel that returns x only once ``parties`` of its calls are
    running at the same time (else it raises after ``timeout``), and "double", a cheap one."""
    barrier = threading.Barrier(parties, timeout=timeout)
    rules = RuleSet()

    def meet(x):
        barrier.wait()
        return (x.copy(),)

    linear = dict(jvp=lambda s, t, p, o: (t[0],), vjp=lambda s, c, p, o, needs: (c[0],))
    meet_p = rules.define("meet", lambda x: (x,), meet, cost=lambda *_: 1e12, **linear)
    double_p = rules.define("double", lambda x: (x,), lambda x: (2.0 * x,), cost=lambda *_: 1.0,
                            jvp=lambda s, t, p, o: (s.scale_real(t[0], 2.0),),
                            vjp=lambda s, c, p, o, needs: (s.scale_real(c[0], 2.0),))
    return tf.AdContext.builder().with_semantic_extension_rules(rules).build(), meet_p, double_p


def test_costly_kernels_overlap_though_the_program_reads_the_first_before_writing_the_second():
    """A then a cheap op reading A then B: the cheap op is deferred, so B starts while A runs
    (the two meet at the barrier; run one after the other, A would time out waiting for B)."""
    ctx, meet, double = rendezvous_context()
    rt = tf.EagerRuntime(ctx)

    def program(s):
        a = s.bind(meet, s.constant_from(tf.Tensor(np.ones(3))))[0]
        a2 = s.bind(double, a)[0]  # reads A's output right away
        b = s.bind(meet, s.constant_from(tf.Tensor(np.full(3, 5.0))))[0]
        return s.add(a2, b)

    out = rt.with_eager_session(wide(), program)
    np.testing.assert_array_equal(out.value().to_numpy(), np.full(3, 7.0))


def test_a_costly_kernel_waits_for_deferred_inputs_and_reads_wait_for_their_value():
    ctx, meet, double = rendezvous_context(parties=1)
    rt = tf.EagerRuntime(ctx)
    eng = wide()

    def program(s):
        a = s.bind(meet, s.constant_from(tf.Tensor(np.arange(4.0))))[0]
        b = s.bind(double, a)[0]  # deferred: a is still running
        c = s.bind(meet, b)[0]  # costly with a deferred input: queued behind it
        assert isinstance(c.payload, Pending)
        return c.item() if c.shape == () else c.value().to_numpy()  # a read drives the chain

    np.testing.assert_array_equal(rt.with_eager_session(eng, program), 2.0 * np.arange(4.0))


def test_shape_errors_raise_at_the_op_and_kernel_errors_at_the_read_or_the_session_end():
    rules = RuleSet()

    def boom(x):
        raise FloatingPointError("kernel failed")

    linear = dict(jvp=lambda s, t, p, o: (t[0],), vjp=lambda s, c, p, o, needs: (c[0],))
    failing = rules.define("boom", lambda x: (x,), boom, cost=lambda *_: 1e12, **linear)
    rt = tf.EagerRuntime(tf.AdContext.builder().with_semantic_extension_rules(rules).build())
    eng = wide()
    x = rt.constant_from(tf.Tensor(np.ones(3)))

    def shape_error(s):
        y = s.bind(failing, x)[0]
        s.add(y, s.constant_from(tf.Tensor(np.ones(4))))  # raised here, before any kernel result

    with pytest.raises(tf.ShapeMismatch, match="add: expected operands of one shape") as info:
        rt.with_eager_session(eng, shape_error)
    assert isinstance(info.value.__context__, FloatingPointError)  # the queued kernel's error, chained

    def read(s):
        y = s.scale_real(s.bind(failing, x)[0], 2.0)
        with pytest.raises(FloatingPointError, match="kernel failed"):
            y.value()
        return y

    with pytest.raises(FloatingPointError, match="kernel failed"):  # and again when the session ends
        rt.with_eager_session(eng, read)
    assert rt.with_eager_session(eng, lambda s: s.add(x, x)).value().to_numpy().tolist() == [2.0] * 3


def test_the_sessions_own_exception_wins_over_a_queued_kernels_error():
    """A body that raises while a failing kernel is queued: the body's exception surfaces, the
    kernel's (here svd's LinalgError on NaN) chained to it as its __context__."""
    rt, eng = tf.EagerRuntime(), wide()
    bad = rt.variable_from(tf.Tensor(np.full((128, 128), np.nan)))

    def body(s):
        s.svd(s.scale_real(bad, 2.0))  # costly: queued on a worker
        raise KeyError("the user's own")

    with pytest.raises(KeyError, match="the user's own") as info:
        rt.with_eager_session(eng, body)
    assert isinstance(info.value.__context__, tf.LinalgError)
    assert str(info.value.__context__).startswith("svd: expected a matrix of finite entries")
    assert rt.with_eager_session(eng, lambda s: s.add(bad, bad)).shape == (128, 128)  # the engine goes on


def test_engine_runs_kernels_at_once_at_width_1_and_schedules_them_at_width_2():
    from tenferro_py.rules import Primitive

    scalar = (Aval((), np.dtype(np.float64)),)
    add = Primitive("add", None, lambda a, b: (np.add(a, b),))
    costly_add = Primitive("add", None, lambda a, b: (np.add(a, b),), cost=lambda *_: 1e12)
    serial = tf.CpuEngine.serial()
    assert serial.run(costly_add, [2.0, 3.0], {}, scalar * 2, scalar)[0] == 5.0
    eng = wide()
    with eng.active():
        (cheap,) = eng.run(add, [2.0, 3.0], {}, scalar * 2, scalar)  # ready and cheap: run in place
        assert not isinstance(cheap, Pending)
        (first,) = eng.run(costly_add, [2.0, 3.0], {}, scalar * 2, scalar)  # costly: to a worker
        (second,) = eng.run(add, [first, 1.0], {}, scalar * 2, scalar)  # cheap on a pending input: deferred
        assert isinstance(first, Pending)
    assert resolve(second) == 6.0


def test_pool_width_defaults_to_the_available_parallelism_as_in_tenferro():
    assert tf.Pool.builder().build().threads == available_parallelism() >= 1
    assert tf.CpuEngine.serial().width == 1
    with pytest.raises(tf.InvalidArgument, match="Pool.threads"):
        tf.Pool.builder().threads(0).build()


def test_the_ported_trg_gives_the_same_bits_at_widths_1_and_2():
    """The program of bench/ported_trg.py (reads each SVD before writing the next): same bits."""
    ported = runpy.run_path(str(ROOT / "bench" / "ported_trg.py"))["value_and_grad"]
    ks = trg.schedule(8, 6)
    one = ported(0.44, ks, tf.CpuEngine.serial())
    two = ported(0.44, ks, wide())
    assert one == two
    example = trg.value_and_grad(0.44, ks)
    assert abs(one[0] - example[0]) <= 1e-14 and abs(one[1] - example[1]) <= 1e-12
