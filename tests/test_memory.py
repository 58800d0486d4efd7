"""Staged evaluation does not leak.

1000 staged steps, each: a fresh variable from the previous step's result
(``variable_from`` cuts the trace), a small step (svd, slice to k, einsum), and
a vjp. Traced memory (tracemalloc) must not grow between step 100 and step
1000 beyond a small fixed slack, and the first step's tape node must be freed
by reference counting alone: the cycle collector is disabled during the loop
and gc.collect() is never called.
"""

import contextlib
import gc
import time
import tracemalloc
import weakref

import numpy as np

import tenferro_py as tf
from tenferro_py import SliceConfig
from tenferro_py.tape import Leaf, Node

STEPS = 1000
MEASURE_FROM = 100
MIDPOINT = 550
# Fixed slacks, independent of the number of steps. CPython's free lists and
# allocator caches keep up to ~100 KiB of small objects (tuples, strings) traced
# as "current" while they fill, within the first few hundred steps, and then stay
# flat; a tape node leaked per step (node, params, input tuple, output arrays:
# well over 300 bytes) would exceed SLACK over 900 steps, and any leak of more
# than ~150 bytes per step would exceed SLACK_SECOND_HALF over the last 450.
SLACK = 256 * 1024
SLACK_SECOND_HALF = 64 * 1024


def _step(rt, eng, t, w):
    """T (3×3) → fresh leaf x → U_k (k = 2) → T' = U_k U_kᵀ x, normalized; and the vjp of T' to x."""
    x = rt.variable_from(t)

    def f(s):
        u, sv, vt = s.svd(x)
        uk = s.slice(u, SliceConfig([0, 0], [3, 2]))
        z = s.einsum([uk, uk, x], "ai,bi,bc->ac")
        return s.scale_real(z, 1.0 / np.linalg.norm(z.value().to_numpy()))

    y = rt.with_eager_session(eng, f)
    ct = rt.vjp(eng, y, x, w)
    return y, ct


def _leaf_of(y):
    """The variable (Leaf) a step's output was computed from."""
    todo, seen = [y], set()
    while todo:
        x = todo.pop()
        node = x._node
        if isinstance(node, Leaf):
            return node
        if node is not None and id(node) not in seen:
            seen.add(id(node))
            todo.extend(node.inputs)
    raise AssertionError("no leaf found")


@contextlib.contextmanager
def cycle_collector_off():
    """Python's cycle collector disabled meanwhile (restored after): only reference counting frees."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def test_staged_loop_does_not_leak():
    rt = tf.EagerRuntime()
    eng = tf.CpuEngine.serial()
    rng = np.random.default_rng(0)
    w = tf.Tensor(rng.standard_normal((3, 3)))
    t = rt.constant_from(tf.Tensor(rng.standard_normal((3, 3)) + 3 * np.eye(3)))

    start = time.perf_counter()
    with cycle_collector_off(), contextlib.ExitStack() as cleanup:
        cleanup.callback(tracemalloc.stop)
        nodes = []  # a weakref to the output node of each step before tracing starts
        for i in range(STEPS):
            y, ct = _step(rt, eng, t, w)
            if i < MEASURE_FROM:
                nodes.append(weakref.ref(y._node))
            if i == 0:
                assert isinstance(y._node, Node)
                first_node = weakref.ref(y._node)
                first_leaf = weakref.ref(_leaf_of(y))
                assert first_node() is not None and first_leaf() is not None
            assert np.all(np.isfinite(ct.value().to_numpy()))
            t = y  # the next step makes a fresh variable from this result
            del y, ct
            if i + 1 == MEASURE_FROM:
                # Blocks allocated before this point and still alive stay untraced (constant);
                # what is traced from here on and still alive at the end is growth.
                tracemalloc.start()
                at_100 = tracemalloc.get_traced_memory()[0]
            if i + 1 == MIDPOINT:
                at_mid = tracemalloc.get_traced_memory()[0]
        at_1000 = tracemalloc.get_traced_memory()[0]
        alive = sum(r() is not None for r in nodes)
        # Checked inside the loop's scope with the collector still off: only
        # reference counting can have freed them.
        first_node_alive = first_node() is not None
        first_leaf_alive = first_leaf() is not None
    elapsed = time.perf_counter() - start
    assert not first_node_alive, "the first step's tape node outlived the loop"
    assert not first_leaf_alive, "the first step's variable outlived the loop"
    assert alive == 0, f"{alive} of the first {MEASURE_FROM} steps' tape nodes are still alive"
    assert at_1000 - at_100 <= SLACK, f"traced memory grew by {at_1000 - at_100} bytes over {STEPS - MEASURE_FROM} steps"
    assert at_1000 - at_mid <= SLACK_SECOND_HALF, f"traced memory grew by {at_1000 - at_mid} bytes over the last {STEPS - MIDPOINT} steps"
    assert np.all(np.isfinite(t.value().to_numpy()))
    print(f"{STEPS} staged steps in {elapsed:.2f} s, growth {at_1000 - at_100} / {at_1000 - at_mid} bytes")


def test_tape_freed_when_output_dropped():
    """One graph, no loop: dropping the output frees its nodes at once (no cycles)."""
    rt = tf.EagerRuntime()
    eng = tf.CpuEngine.serial()
    with cycle_collector_off():
        x = rt.variable_from(tf.Tensor(np.eye(3) + 0.1))
        y = rt.with_eager_session(eng, lambda s: s.reduce_sum(s.svd(x)[1]))
        g = rt.grad(eng, y, x)  # differentiable, so it holds a tape of its own
        y.backward()
        node, gnode = weakref.ref(y._node), weakref.ref(g._node)
        del y
        assert node() is None
        del g
        assert gnode() is None
        assert x.grad() is not None  # the slot survives the tape


def test_runtime_leaf_registry_does_not_grow():
    """The runtime tracks its variables weakly: dropped variables leave it."""
    rt = tf.EagerRuntime()
    eng = tf.CpuEngine.serial()
    with cycle_collector_off():
        for _ in range(200):
            x = rt.variable_from(tf.Tensor(np.ones(3)))
            rt.with_eager_session(eng, lambda s, x=x: s.reduce_sum(s.exp(x))).backward()
        del x
        assert len(rt._leaves) == 0
