"""Shared fixtures of the core test suite: a runtime, an engine, a seeded rng.

Nothing heavy happens here: each fixture is a fresh, cheap object per test.
"""

import numpy as np
import pytest

import tenferro_py as tf


@pytest.fixture
def rt():
    """A fresh runtime with the default AdContext (every rule of the library)."""
    return tf.EagerRuntime()


@pytest.fixture
def eng():
    """A serial CPU engine."""
    return tf.CpuEngine.serial()


@pytest.fixture
def rng():
    """A seeded NumPy generator, so every test sees the same random inputs."""
    return np.random.default_rng(20240601)


@pytest.fixture
def run(rt, eng):
    """run(f) = rt.with_eager_session(eng, f): one eager session on the fixtures."""
    return lambda f: rt.with_eager_session(eng, f)
