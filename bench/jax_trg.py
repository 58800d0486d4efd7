"""The staged-TRG benchmark's JAX twin: ``jax.jit(jax.value_and_grad(lnZ/N))`` in float64.

Same algorithm as examples/ising_trg.py (SPEC §4): same schedule, normalisation,
accumulation, column-major reshapes and einsum, with the broadened SVD rule of
SPEC §3 as a ``jax.custom_jvp`` on the thin SVD (reverse mode transposes it).
JAX is never a dependency of tenferro_py: bench/trg.py imports this module only
when ``jax`` is importable. XLA runs single-threaded unless XLA_FLAGS says otherwise.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

# One XLA thread, like tenferro_py at width 1 (an XLA_FLAGS set by the caller wins).
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402  (after enabling float64)

EPS = 1e-12


@jax.custom_jvp
def svd(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Thin SVD (U, s, Vᵀ) with the broadened derivative rule."""
    return jnp.linalg.svd(a, full_matrices=False)


@svd.defjvp
def _svd_jvp(primals, tangents):
    """SPEC §3: dP = Uᵀ dA V, dS = diag dP, F_ij = d/(d² + ε²), d = s_j² − s_i², F_ii = 0."""
    (a,), (da,) = primals, tangents
    u, s, vt = svd(a)
    v = vt.T
    m, n = a.shape
    dp = u.T @ da @ v
    s2 = s * s
    d = s2[None, :] - s2[:, None]
    f = jnp.where(jnp.eye(s.shape[0], dtype=bool), 0.0, d / (d * d + EPS * EPS))
    du = u @ (f * (dp * s[None, :] + s[:, None] * dp.T))
    dv = v @ (f * (s[:, None] * dp + dp.T * s[None, :]))
    s_inv = s / (s2 + EPS * EPS)  # broadened 1/s of the rectangular terms
    if m > n:
        dav = da @ v
        du = du + (dav - u @ (u.T @ dav)) * s_inv[None, :]
    if n > m:
        datu = da.T @ u
        dv = dv + (datu - v @ (v.T @ datu)) * s_inv[None, :]
    return (u, s, vt), (du, jnp.diagonal(dp), dv.T)


def _half(m: jax.Array, d: int, k: int) -> tuple[jax.Array, jax.Array]:
    """(U_k √s_k, V_k √s_k) of m, each reshaped column-major to (D, D, k)."""
    u, s, vt = svd(m)
    root = jnp.sqrt(s[:k])
    left = u[:, :k] * root[None, :]
    right = vt[:k, :].T * root[None, :]
    return jnp.reshape(left, (d, d, k), order="F"), jnp.reshape(right, (d, d, k), order="F")


def ln_z_per_site(beta: jax.Array, ks: Sequence[int]) -> jax.Array:
    """lnZ/N of the Ising model by TRG on a torus of 2^len(ks) sites (SPEC §4)."""
    n = len(ks)
    c = jnp.sqrt(0.5 * (jnp.exp(beta) + jnp.exp(-beta)))
    sh = jnp.sqrt(0.5 * (jnp.exp(beta) - jnp.exp(-beta)))
    q = jnp.stack([jnp.stack([c, sh]), jnp.stack([c, -sh])])
    t = jnp.einsum("su,sl,sd,sr->uldr", q, q, q, q, optimize="auto")
    acc = 0.0
    for i, k in enumerate(ks):
        d = t.shape[0]
        norm = jnp.sqrt(jnp.sum(t * t))
        t = t / norm
        acc = acc + 2.0 ** (n - i) * jnp.log(norm)
        ma = jnp.reshape(jnp.transpose(t, (2, 1, 0, 3)), (d * d, d * d), order="F")
        mb = jnp.reshape(jnp.transpose(t, (3, 2, 1, 0)), (d * d, d * d), order="F")
        s1, s3 = _half(ma, d, k)
        s2, s4 = _half(mb, d, k)
        t = jnp.einsum("war,abu,bgl,gwd->ruld", s1, s2, s3, s4, optimize="auto")
    return (acc + jnp.log(jnp.einsum("xyxy->", t))) / 2.0**n


def make_value_and_grad(ks: Sequence[int]) -> Callable[[float], tuple[float, float]]:
    """beta ↦ (lnZ/N, d(lnZ/N)/dβ) by ``jax.jit(jax.value_and_grad(...))``, compiled once for ks."""
    ks = tuple(ks)
    fn = jax.jit(jax.value_and_grad(lambda beta: ln_z_per_site(beta, ks)))

    def value_and_grad(beta: float) -> tuple[float, float]:
        value, grad = fn(jnp.float64(beta))
        return float(value), float(grad)

    return value_and_grad


def describe() -> str:
    """One line: JAX version, backend, devices and XLA_FLAGS."""
    return (f"jax {jax.__version__} backend={jax.default_backend()} devices={len(jax.devices())} "
            f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
