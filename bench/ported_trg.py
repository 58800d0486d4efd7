"""The staged Ising TRG of SPEC §4 written the way a line-by-line port of a tenferro (Rust) program reads.

`examples/ising_trg.py` is written knowing the library. This file is the same algorithm
written by someone who translated their Rust eager bin and knows nothing of what is fast here.
It differs from the example in many details, on purpose:

* the rule sets are merged in place (``rules.merge(other)``, as Rust's ``merge`` does);
* T₀ comes from q built by ``from_vec_col_major`` of the two weights, through an explicit
  outer product ``einsum`` of four copies;
* ‖T‖ is ``sqrt(einsum("uldr,uldr->"))``, and T is scaled by the reciprocal of the norm;
* each SVD's outputs are read right after that SVD (the second SVD is written after the
  first's outputs are used), as a program without a scheduler in mind reads;
* V's columns are taken as ``slice(transpose(vt))`` (transpose first, as V = (Vᵀ)ᵀ in Rust),
  and the √s scaling is an ``einsum("ai,i->ai")`` for U and a broadcast ``mul`` for V;
* every step's output is copied to the host (``to_tensor``) and made a fresh leaf;
  ln‖T‖ is read with ``to_tensor(...).as_slice()[0]``;
* the reverse sweep runs *without* ``no_grad``: every vjp is recorded, and each cotangent is
  copied to the host and passed back as a ``Tensor``.

``value_and_grad(beta, ks, engine)`` returns (lnZ/N, d(lnZ/N)/dβ); it must agree with the example.
"""

from __future__ import annotations

import math
from typing import Sequence

import tenferro_py as tf
from tenferro_py import AdContext, CpuEngine, EagerRuntime, SliceConfig, Tensor


def ad_context() -> AdContext:
    rules = tf.linalg.semantic_ad_rules()
    rules.merge(tf.einsum.semantic_ad_rules())
    return AdContext.builder().with_semantic_extension_rules(rules).build()


def initial_tensor(s, beta):
    cosh = s.scale_real(s.add(s.exp(beta), s.exp(s.neg(beta))), 0.5)
    sinh = s.scale_real(s.sub(s.exp(beta), s.exp(s.neg(beta))), 0.5)
    c, sh = s.sqrt(cosh), s.sqrt(sinh)
    # q[σ, a] column-major: q = [[c, s], [c, -s]]
    pick_c = s.constant_from(Tensor.from_vec_col_major([2, 2], [1.0, 1.0, 0.0, 0.0]))
    pick_s = s.constant_from(Tensor.from_vec_col_major([2, 2], [0.0, 0.0, 1.0, -1.0]))
    q = s.add(s.mul(pick_c, s.broadcast_in_dim(c, [2, 2], [])), s.mul(pick_s, s.broadcast_in_dim(sh, [2, 2], [])))
    return s.einsum([q, q, q, q], "iu,il,id,ir->uldr")


def trg_step(s, t, k):
    d = t.shape[0]
    n2 = d * d
    norm = s.sqrt(s.einsum([t, t], "uldr,uldr->"))
    inv = s.div(s.constant_from(Tensor.scalar(1.0)), norm)
    t = s.mul(t, s.broadcast_in_dim(inv, list(t.shape), []))

    ma = s.reshape(s.transpose(t, [2, 1, 0, 3]), [n2, n2])
    ua, sa, vta = s.svd(ma)
    ra = s.sqrt(s.slice(sa, SliceConfig([0], [k])))
    s1 = s.einsum([s.slice(ua, SliceConfig([0, 0], [n2, k])), ra], "ai,i->ai")
    va = s.slice(s.transpose(vta, [1, 0]), SliceConfig([0, 0], [n2, k]))
    s3 = s.mul(va, s.broadcast_in_dim(ra, [n2, k], [1]))
    s1 = s.reshape(s1, [d, d, k])
    s3 = s.reshape(s3, [d, d, k])

    mb = s.reshape(s.transpose(t, [3, 2, 1, 0]), [n2, n2])
    ub, sb, vtb = s.svd(mb)
    rb = s.sqrt(s.slice(sb, SliceConfig([0], [k])))
    s2 = s.einsum([s.slice(ub, SliceConfig([0, 0], [n2, k])), rb], "ai,i->ai")
    vb = s.slice(s.transpose(vtb, [1, 0]), SliceConfig([0, 0], [n2, k]))
    s4 = s.mul(vb, s.broadcast_in_dim(rb, [n2, k], [1]))
    s2 = s.reshape(s2, [d, d, k])
    s4 = s.reshape(s4, [d, d, k])

    t_next = s.einsum([s1, s2, s3, s4], "war,abu,bgl,gwd->ruld")
    return t_next, s.log(norm)


def value_and_grad(beta: float, ks: Sequence[int], engine: CpuEngine | None = None,
                   runtime: EagerRuntime | None = None) -> tuple[float, float]:
    eng = engine if engine is not None else CpuEngine.serial()
    rt = runtime if runtime is not None else EagerRuntime.with_ad_context(ad_context())
    n = len(ks)
    b = rt.variable_from(Tensor.scalar(beta))
    t0 = rt.with_eager_session(eng, lambda s: initial_tensor(s, b))
    steps = []
    acc = 0.0
    t = t0.to_tensor(eng)
    for i, k in enumerate(ks):
        leaf = rt.variable_from(t)
        t_next, ln_norm = rt.with_eager_session(eng, lambda s: trg_step(s, leaf, k))
        steps.append((leaf, t_next, ln_norm))
        acc += math.ldexp(ln_norm.to_tensor(eng).as_slice()[0], n - i)
        t = t_next.to_tensor(eng)
    last = rt.variable_from(t)
    ln_tr = rt.with_eager_session(eng, lambda s: s.log(s.einsum([last], "xyxy->")))
    lnz = (acc + ln_tr.to_tensor(eng).as_slice()[0]) / 2.0**n

    ct = rt.vjp(eng, ln_tr, last, Tensor.scalar(2.0**-n)).to_tensor(eng)
    for i in reversed(range(n)):
        leaf, t_next, ln_norm = steps[i]
        through_t = rt.vjp(eng, t_next, leaf, ct)
        through_norm = rt.vjp(eng, ln_norm, leaf, Tensor.scalar(2.0 ** (n - i) * 2.0**-n))
        ct = rt.with_eager_session(eng, lambda s: s.add(through_t, through_norm)).to_tensor(eng)
    grad = rt.vjp(eng, t0, b, ct).to_tensor(eng).as_slice()[0]
    return lnz, grad
