"""SPEC §4's TRG value and gradient written by hand in NumPy: the floor of any AD engine over NumPy.

The forward is the plain NumPy forward of ``bench/trg.py`` (the same gesdd calls, the same
contraction through opt_einsum's path), keeping what the reverse needs. The reverse is
written out per step with the fewest kernels I could find: the two 256³ cotangent
contractions, the four contractions back to S1…S4, and the truncated SVD's VJP of SPEC §3
(broadened F, square matrices, cotangents zero beyond column k) as four thin products and
one product of (m × 2k)(2k × n). No tape, no dispatch, no checks: what an AD engine adds on
top of this is its own overhead.

``value_and_grad(beta, ks)`` returns (lnZ/N, d(lnZ/N)/dβ); BLAS threads are the caller's to pin.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import opt_einsum

EPS = 1e-12


def _svd_vjp(u, s, vt, k, ub, sb, vb):
    """Ā for cotangents Ū (m × k), S̄ (k), V̄ (n × k) of the k leading triplets; square A (m = n = K)."""
    big = s.shape[0]
    p = u.T @ ub  # K × k
    q = vt @ vb  # K × k
    d = s[:k][None, :] ** 2 - s[:, None] ** 2
    f = d / (d * d + EPS * EPS)
    f[np.arange(k), np.arange(k)] = 0.0

    def antisym(x):
        head = np.zeros_like(x)
        head[:k] = x[:k].T
        return f * (x - head)

    j, l = antisym(p), antisym(q)
    m_left = j * s[:k][None, :] + s[:, None] * l  # M[:, :k]
    m_top = (j * s[:, None] + l * s[:k][None, :]).T  # M[:k, :]
    m_top[:, :k] += np.diag(sb)
    left = np.empty((u.shape[0], 2 * k))
    left[:, :k] = u[:, :k]
    left[:, k:] = u[:, k:] @ m_left[k:]
    right = np.empty((2 * k, vt.shape[1]))
    right[:k] = m_top @ vt
    right[k:] = vt[:k]
    if big == k:
        return left[:, :k] @ right[:k]
    return left @ right


def value_and_grad(beta: float, ks: Sequence[int]) -> tuple[float, float]:
    n = len(ks)
    eb, emb = math.exp(beta), math.exp(-beta)
    c, sh = math.sqrt(0.5 * (eb + emb)), math.sqrt(0.5 * (eb - emb))
    dc, dsh = 0.25 * (eb - emb) / c, 0.25 * (eb + emb) / sh
    q = np.array([[c, sh], [c, -sh]])
    dq = np.array([[dc, dsh], [dc, -dsh]])
    t = opt_einsum.contract("su,sl,sd,sr->uldr", q, q, q, q)
    steps, acc = [], 0.0
    for i, k in enumerate(ks):
        d = t.shape[0]
        norm = math.sqrt(np.sum(t * t))
        tn = t / norm
        acc += 2.0 ** (n - i) * math.log(norm)
        ma = tn.transpose(2, 1, 0, 3).reshape((d * d, d * d), order="F")
        mb = tn.transpose(3, 2, 1, 0).reshape((d * d, d * d), order="F")
        ua, sa, vta = np.linalg.svd(ma, full_matrices=False)
        ub, sb, vtb = np.linalg.svd(mb, full_matrices=False)
        ra, rb = np.sqrt(sa[:k]), np.sqrt(sb[:k])
        s1 = (ua[:, :k] * ra).reshape((d, d, k), order="F")
        s3 = (vta[:k].T * ra).reshape((d, d, k), order="F")
        s2 = (ub[:, :k] * rb).reshape((d, d, k), order="F")
        s4 = (vtb[:k].T * rb).reshape((d, d, k), order="F")
        a = np.tensordot(s1, s2, axes=([1], [0])).transpose(0, 1, 2, 3)  # w r b u
        b = np.tensordot(s3, s4, axes=([1], [0])).transpose(2, 0, 1, 3)  # w b l d
        t_next = np.tensordot(a, b, axes=([0, 2], [0, 1]))  # r u l d
        steps.append((t, tn, norm, (ua, sa, vta, ra), (ub, sb, vtb, rb), s1, s2, s3, s4, a, b))
        t = t_next
    lnz = (acc + math.log(np.einsum("xyxy->", t))) / 2.0**n
    d = t.shape[0]
    ct = np.eye(d)[:, :, None, None] * np.eye(d)[None, None, :, :] / np.einsum("xyxy->", t) * 2.0**-n
    ct = ct.transpose(0, 2, 1, 3).copy()  # d tr(T[x,y,x,y]) / dT
    for i in reversed(range(n)):
        t_raw, tn, norm, (ua, sa, vta, ra), (ub, sb, vtb, rb), s1, s2, s3, s4, a, b = steps[i]
        k, dd = ra.shape[0], t_raw.shape[0]
        ct_a = np.tensordot(b, ct, axes=([2, 3], [2, 3]))  # w b r u
        ct_b = np.tensordot(a, ct, axes=([1, 3], [0, 1]))  # w b l d
        ct_s1 = np.tensordot(ct_a, s2, axes=([1, 3], [1, 2])).transpose(0, 2, 1)  # w r a -> w a r
        ct_s2 = np.tensordot(s1, ct_a, axes=([0, 2], [0, 2]))  # a b u
        ct_s3 = np.tensordot(ct_b, s4, axes=([0, 3], [1, 2])).transpose(0, 2, 1)  # b l g -> b g l
        ct_s4 = np.tensordot(s3, ct_b, axes=([0, 2], [1, 2]))  # g w d
        grads = []
        for (u, s, vt, r), cl, cr in (((ua, sa, vta, ra), ct_s1, ct_s3), ((ub, sb, vtb, rb), ct_s2, ct_s4)):
            cl, cr = cl.reshape((dd * dd, k), order="F"), cr.reshape((dd * dd, k), order="F")
            ct_u, ct_v = cl * r, cr * r
            ct_r = (u[:, :k] * cl).sum(0) + (vt[:k].T * cr).sum(0)
            grads.append(_svd_vjp(u, s, vt, k, ct_u, ct_r / (2 * r), ct_v))
        ct_tn = (grads[0].reshape((dd,) * 4, order="F").transpose(2, 1, 0, 3)
                 + grads[1].reshape((dd,) * 4, order="F").transpose(3, 2, 1, 0))
        coef = 2.0 ** (n - i) * 2.0**-n  # of ln‖T_i‖
        ct = ct_tn / norm + (coef - np.sum(ct_tn * tn)) / norm * tn
    grad = sum(np.einsum("su,sl,sd,sr,uldr->", *(dq if j == slot else q for j in range(4)), ct) for slot in range(4))
    return lnz, float(grad)
