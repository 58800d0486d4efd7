"""Shared fixtures of the core test suite: a runtime, an engine, a seeded rng; and the one place
that says which tenferro_py subprocesses import.

The suite tests the tenferro_py it imports: the installed package when run as the README and
.ci/run say (``pytest`` from a venv with the project installed), the source tree when run with
it on the path. The examples, Dask's workers and every other subprocess import the same one:
its location goes first on PYTHONPATH for the session.
"""

import os
from pathlib import Path

import numpy as np
import pytest

import tenferro_py as tf

UNDER_TEST = str(Path(tf.__file__).resolve().parents[1])
"""The folder holding the tenferro_py under test (site-packages, or the repository)."""


def random(rng, shape, dtype=np.float64):
    """A normal random array of ``dtype`` (complex: both parts random)."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def derivatives(loss, a, w, d):
    """[the JVP along d, the VJP of w, the JVP of that VJP along d] of ``loss(s, x)`` at x = a, in a
    fresh runtime: what a truncated method's derivatives are compared on against the full one's."""
    rt, eng = tf.EagerRuntime(), tf.CpuEngine.serial()
    x = rt.variable_from(tf.Tensor(a))
    y = rt.with_eager_session(eng, lambda s: loss(s, x))
    g = rt.vjp(eng, y, x, rt.variable_from(tf.Tensor(w.astype(a.dtype))))
    tangent = tf.Tensor(d.astype(a.dtype))
    return [rt.jvp(eng, y, x, tangent).value().to_numpy(), g.value().to_numpy(),
            rt.jvp(eng, g, x, tangent).value().to_numpy()]


_OUTER_PYTHONPATH = os.environ.get("PYTHONPATH")


def pytest_configure(config):
    os.environ["PYTHONPATH"] = os.pathsep.join([UNDER_TEST, *filter(None, [_OUTER_PYTHONPATH])])


def pytest_unconfigure(config):
    if _OUTER_PYTHONPATH is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = _OUTER_PYTHONPATH


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
