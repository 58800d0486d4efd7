"""Ports of JAX's spectral tests: svd, qr, eig (tests/linalg_test.py), eigh (tests/eigh_test.py) and
the SVD's edge cases (tests/svd_test.py): JAX's shapes (zero-size included), dtypes and checks
(reconstruction, unitarity, values against NumPy/SciPy), its gradient checks of gauge-fixed
functions (``_normalizing_svd``, ``_normalizing_eigh``) by check_grads to order 2 with the JVP
against JAX's, and at rank-deficient inputs the derivative along directions that keep the rank.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.linalg

import tenferro_py.numpy as tnp

from .harness import Case, WrongValue, along, close, draw, grads, hermitian, ours, rng_for, value_tol
from .jax_support import check, is_64, product_cases

ALL = [np.float32, np.float64, np.complex64, np.complex128]
C64 = [np.float64, np.complex128]
P = itertools.product


def T(x):
    return np.swapaxes(x, -1, -2)


def eps(dtype):
    return np.finfo(dtype).eps


def normalizing_svd(xp, a, full_matrices=False):
    """JAX's _normalizing_svd: phases fixed by U's first row."""
    u, s, vt = xp.linalg.svd(a, full_matrices=full_matrices)
    top = u[..., 0:1, :]
    if np.iscomplexobj(a) or str(a.dtype).startswith("complex"):
        angle = -xp.angle(top)
        u_phase = xp.cos(angle) + 1j * xp.sin(angle)
        v_phase = xp.cos(-angle) + 1j * xp.sin(-angle)
    else:
        u_phase = v_phase = xp.sign(top)
    return u * u_phase, s, vt * xp.swapaxes(v_phase, -1, -2)


def normalizing_eigh(xp, a, uplo="L"):
    """JAX's _normalizing_eigh: phases fixed by V's first row."""
    w, v = xp.linalg.eigh(a, UPLO=uplo)
    top = v[..., 0:1, :]
    if str(a.dtype).startswith("complex"):
        angle = -xp.angle(top)
        phase = xp.cos(angle) + 1j * xp.sin(angle)
    else:
        phase = xp.sign(top)
    return w, v * phase


def reconstruction(xp, a):
    u, s, vt = xp.linalg.svd(a, full_matrices=False)
    return (u * s[..., None, :]) @ vt


def _identity_jvp(name, f, a, tol):
    """JAX's check that the JVP of a factorisation's product (U S Vᴴ, Q R) along d is d."""
    d = draw(rng_for(name + "/d"), a.shape, a.dtype)
    got = np.asarray(tnp.jvp(f, (a,), (d,))[1])
    close("jvp of the reconstruction along d against d", got, d, tol)


def _svd(name, b, m, n, dtype, full_matrices, compute_uv, hermitian_):
    a = draw(rng_for(name), b + (m, n), dtype)
    if hermitian_:
        a = a + np.conj(T(a))
    kwargs = dict(full_matrices=full_matrices, compute_uv=compute_uv)
    if hermitian_:
        kwargs["hermitian"] = True
    out = ours(lambda x: tnp.linalg.svd(x, **kwargs), a)
    tol = 100 * eps(dtype)
    if compute_uv:
        u, s, vt = out
        k = min(m, n)
        if m and n:
            rec = np.matmul(s[..., None, :].astype(u.dtype) * u[..., :, :k], vt[..., :k, :])
            error = np.max(np.linalg.norm(a - rec, axis=(-2, -1)) / np.linalg.norm(a, axis=(-2, -1)))
            if not error < 2 * tol:
                raise WrongValue(f"backward error {error:.2e} >= {2 * tol:.1e}")
        close("UᴴU", np.real(np.conj(T(u)) @ u), np.broadcast_to(np.eye(u.shape[-1]), b + (u.shape[-1],) * 2), 3 * tol)
        vv = np.real(np.conj(T(vt)) @ vt) if m >= n else np.real(vt @ np.conj(T(vt)))
        close("V unitary", vv, np.broadcast_to(np.eye(vv.shape[-1]), vv.shape), 3 * tol)
    else:
        close("s", out, np.linalg.svd(a, compute_uv=False), value_tol(dtype, 100))
    if not is_64(dtype) or hermitian_:
        return
    if not compute_uv and a.size < 100000:
        grads(lambda x: tnp.linalg.svd(x, compute_uv=False), [a], order=2)
    if compute_uv and not full_matrices:
        _identity_jvp(name, lambda x: reconstruction(tnp, x), a, 2e-13 * max(1, np.sqrt(m * n)))


def _svd_grad(name, shape, dtype, full_matrices, compute_uv):
    a = draw(rng_for(name), shape, dtype)
    if full_matrices and shape[-1] != shape[-2]:  # JAX skips it; here the refusal is documented
        complement = 0 if shape[-2] > shape[-1] else 2  # the factor the complete SVD extends
        grads(lambda x: tnp.linalg.svd(x, full_matrices=True)[complement], [a], order=1)
    elif not compute_uv:
        check(name, lambda xp, x: xp.linalg.svd(x, full_matrices=False, compute_uv=False), [a])
    else:
        check(name, lambda xp, x: normalizing_svd(xp, x, full_matrices), [a])


def _qr(name, shape, dtype, full_matrices):
    a = draw(rng_for(name), shape, dtype)
    m, n = shape[-2:]
    mode = "complete" if full_matrices else "reduced"
    k = m if full_matrices else min(m, n)
    q, r = ours(lambda x: tnp.linalg.qr(x, mode=mode), a)
    scale = max(1, max(m, n)) * eps(dtype)
    if a.size:
        error = np.max(np.linalg.norm(a - q @ r, axis=(-2, -1))) / scale
        if not error < 60 * max(1.0, float(np.max(np.linalg.norm(a, axis=(-2, -1))))):
            raise WrongValue(f"|a - qr| = {error:.1f} ulps")
        nq = np.linalg.qr(a)[0]
        thin = q[..., :min(m, n)]  # the complete Q's extra columns are any basis of the complement
        ratio = np.divide(np.where(nq == 0, 0, thin), np.where(nq == 0, 1, nq)).sum(axis=-2, keepdims=True)
        phases = ratio / np.abs(ratio)
        close("Q against NumPy's up to column phases", thin * np.conj(phases), nq, 200 * scale)
    close("QᴴQ", np.conj(T(q)) @ q, np.broadcast_to(np.eye(k), shape[:-2] + (k, k)), 10 * scale)
    if is_64(dtype):
        thin = "reduced" if m > n else mode  # the complete Q's extra columns have no derivative (refused)
        _identity_jvp(name, lambda x: tnp.matmul(*tnp.linalg.qr(x, mode=thin)), a, 1e-12 * max(1, np.sqrt(m * n)))
        if a.size <= 1000:  # complete Q of a tall matrix: R only (Q's extra columns have no derivative, refused)
            part = (lambda x: tnp.linalg.qr(x, mode=mode)[1]) if full_matrices and m > n else (
                lambda x: tnp.linalg.qr(x, mode=mode))
            check(name, lambda xp, x: part(x), [a], peer=False)


def _numpy_qr_modes(name, shape, dtype, mode):
    a = draw(rng_for(name), shape, dtype)
    got = ours(lambda x: tnp.linalg.qr(x, mode=mode), a)
    want = np.linalg.qr(a, mode=mode)
    if mode == "r":
        close("R up to row signs", np.abs(got), np.abs(want), 1e-5)
        return
    q, r = got
    close("QR", q @ r, a, 1e-5)
    close("R up to row signs", np.abs(r), np.abs(want[1]), 1e-5)


def _eigh(name, n, dtype, lower):
    a = hermitian(draw(rng_for(name), (n, n), dtype))
    w, v = ours(lambda x: tnp.linalg.eigh(x, UPLO="L" if lower else "U"), a)
    _eigh_checks(a, w, v, dtype, 100)


def _eigh_checks(a, w, v, dtype, residual_ulps):
    n = a.shape[-1]
    close("VᴴV", np.conj(T(v)) @ v, np.broadcast_to(np.eye(n), a.shape), max(2 * n, 10) * eps(dtype))
    norm_a = max(float(np.linalg.norm(a)), np.finfo(dtype).tiny)
    residual = float(np.linalg.norm(a @ v - w[..., None, :] * v))
    if not residual <= residual_ulps * eps(dtype) * norm_a:
        raise WrongValue(f"|a v - w v| = {residual:.2e} > {residual_ulps} eps |a|")
    wanted = np.linalg.eigvalsh(a.astype(np.complex128 if np.iscomplexobj(a) else np.float64))
    close("w against NumPy's (double precision)", w, wanted, 8 * eps(dtype) * max(1.0, norm_a))


def _eigh_triangle(name, n, dtype, lower):
    """eigh given one triangle and UPLO, as JAX's testEigh (and NumPy) call it."""
    a = hermitian(draw(rng_for(name), (n, n), dtype))
    tri = np.tril(a) if lower else np.triu(a)
    w, v = ours(lambda x: tnp.linalg.eigh(x, UPLO="L" if lower else "U"), tri)
    close("w of the triangle's Hermitian matrix, as NumPy's eigh reads UPLO's triangle", w,
          np.linalg.eigvalsh(tri, UPLO="L" if lower else "U"), 1e-10)


def _eigh_identity(name, n, dtype, lower):
    a = np.eye(n, dtype=dtype)
    w, v = ours(lambda x: tnp.linalg.eigh(x, UPLO="L" if lower else "U"), a)
    _eigh_checks(a, w, v, dtype, 1)


def _eigvalsh(name, shape, dtype):
    a = hermitian(draw(rng_for(name), shape, dtype))
    # JAX's eigvalsh symmetrizes its input, NumPy's (and ours) reads one triangle: the two JVPs
    # agree along Hermitian tangents only.
    check(name, lambda xp, x: xp.linalg.eigvalsh(x), [a], np.linalg.eigvalsh, tol=2e-5 if not is_64(dtype) else 1e-12,
          tangent=hermitian)


def _eigh_grad(name, shape, dtype, lower):
    a = hermitian(draw(rng_for(name), shape, dtype))
    a = a * (np.tril(np.ones(shape[-2:])) if lower else np.triu(np.ones(shape[-2:])))
    # JAX's test calls eigh(x, UPLO, symmetrize_input=True): in NumPy's terms, eigh of (x + xᴴ)/2.
    check(name, lambda xp, x: normalizing_eigh(xp, (x + xp.conj(xp.swapaxes(x, -1, -2))) / 2, "L" if lower else "U"),
          [a])


def _eigh_special(name, a, residual_ulps):
    w, v = ours(tnp.linalg.eigh, a)
    _eigh_checks(a, w, v, a.dtype, residual_ulps)


def _issue669(name):
    got = tnp.grad(lambda x: tnp.real(tnp.sum(tnp.linalg.eigh(x)[0])))(np.eye(3, dtype=np.complex128))
    close("grad of Re Σ eigenvalues at eye(3)", got, np.eye(3), 1e-12)


def _issue1383(name):
    tmp = rng_for(name).rand(2, 2)
    a = tmp @ tmp.T
    d = hermitian(draw(rng_for(name + "/d"), (2, 2), np.float64))
    along(lambda x: (lambda w, v: v @ x @ v.T)(*tnp.linalg.eigh(x)), a, d, order=3, h=1e-4, rtol=1e-5)


def _eig(name, shape, dtype, left):
    a = draw(rng_for(name), shape, dtype)
    if left:  # scipy.linalg.eig's left eigenvectors, vlᴴ a = w vlᴴ
        w, vl, v = ours(lambda x: tnp.scipy.linalg.eig(x, left=True), a)
    else:
        w, v = ours(tnp.linalg.eig, a)
    n = shape[-1]
    scale = (n + 1) * eps(dtype)
    bound = 100 * max(1.0, float(np.max(np.linalg.norm(a, axis=(-2, -1))))) if a.size else 1.0
    norm = np.linalg.norm(a @ v - w[..., None, :] * v, axis=(-2, -1)) / scale
    if a.size and not np.all(norm < bound):
        raise WrongValue(f"|a v - w v| = {np.max(norm):.1f} (n+1) eps")
    if left:
        norm = np.linalg.norm(np.conj(T(a)) @ vl - np.conj(w[..., None, :]) * vl, axis=(-2, -1)) / scale
        if a.size and not np.all(norm < bound):
            raise WrongValue(f"|aᴴ vl - conj(w) vl| = {np.max(norm):.1f} (n+1) eps")
    close("eigvals", ours(tnp.linalg.eigvals, a), w, 2e-14 if is_64(dtype) else 1e-5)


def _eigvals_grad(name, shape, dtype):
    a = draw(rng_for(name), shape, dtype)
    check(name, lambda xp, x: xp.linalg.eigvals(x), [a], order=1, rtol=1e-4, atol=1e-4, peer=False)


def _eig_grad(name, shape, dtype, left_right):
    left, right = left_right
    a = draw(rng_for(name), shape, dtype)

    def f(x):
        w, *vectors = tnp.scipy.linalg.eig(x, left=left, right=right)
        return (w,) + tuple(vectors if np.iscomplexobj(a) else [v * v for v in vectors])
    grads(f, [a], order=2, rtol=1e-3, atol=1e-3)


def _eig_nonfinite(name, shape, dtype):
    ours(tnp.linalg.eig, np.full(shape, np.nan, dtype))
    raise WrongValue("eig of NaN input returned a value (JAX returns NaN; the library documents a LinalgError)")


def _svd_rectangular(name, m, n, log_cond, full_matrices, compute_uv=True):
    rng = rng_for(name)
    a = rng.uniform(0.3, 0.9, (m, n))
    u, s, v = scipy.linalg.svd(a, full_matrices=False)
    a = ((u * np.linspace(10 ** log_cond, 1, min(m, n))) @ v).astype(complex) * (1 + 1j)
    got = ours(lambda x: tnp.linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv), a)
    s_got = got[1] if compute_uv else got
    close("s against SciPy's", s_got, scipy.linalg.svd(a, compute_uv=False), 1e-13)
    if compute_uv:
        _identity_jvp(name, lambda x: reconstruction(tnp, x), a, 1e-13 * 10 ** log_cond)
    elif np.any(np.diff(s_got) > 0):
        raise WrongValue("singular values not in non-increasing order")


def _svd_rank_deficient(name, m, r, log_cond):
    u, _, v = np.linalg.svd(np.triu(np.ones((m, m))))
    s = np.linspace(10 ** log_cond, 1, m)
    s[r:] = 0
    a = (u * s) @ v
    rec = ours(lambda x: reconstruction(tnp, x), a)
    close("U S Vᴴ", rec, a, 1e-13)
    x = draw(rng_for(name), (r, r), np.float64)
    keeps_rank = u[:, :r] @ x @ v[:r, :]
    along(lambda y: reconstruction(tnp, y), a, keeps_rank, order=2, h=1e-4, rtol=1e-7)
    along(lambda y: tnp.linalg.pinv(y), a, keeps_rank, order=2, h=1e-4, rtol=1e-6)


def _svd_all_zero(name, m, n, full_matrices, compute_uv, dtype):
    a = np.zeros((m, n), dtype)
    got = ours(lambda x: tnp.linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv), a)
    want = scipy.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    close("s", got[1] if compute_uv else got, want[1] if compute_uv else want, 0.0)
    if is_64(dtype):  # finite derivatives at the zero matrix (README, "Spectral rules")
        d = draw(rng_for(name), a.shape, dtype)
        f = (lambda x: reconstruction(tnp, x)) if compute_uv else (lambda x: tnp.linalg.svd(x, compute_uv=False))
        if not np.all(np.isfinite(np.asarray(tnp.jvp(f, (a,), (d,))[1]))):
            raise WrongValue("jvp at the zero matrix is not finite")


def _svd_tiny(name, m, n, r, c, dtype):
    a = np.zeros((m, n), dtype)
    a[r, c] = np.finfo(dtype).tiny
    s = ours(lambda x: tnp.linalg.svd(x, compute_uv=False), a)
    want = np.zeros(min(m, n), dtype)
    want[0] = np.finfo(dtype).tiny
    close("s", s, want, 0.0)
    if is_64(dtype):
        d = np.zeros((m, n))
        d[r, c] = np.finfo(dtype).tiny
        tiny = np.finfo(dtype).tiny  # s₁ in units of tiny: exact derivatives 1 and 0 along d
        along(lambda x: tnp.linalg.svd(x, compute_uv=False)[:1] / tiny, a, d, order=2, h=0.5, rtol=1e-12)


def cases() -> list[Case]:
    out: list[Case] = []
    sizes = [(m, n) for m, n in P([0, 2, 7, 29], repeat=2)] + [(53, 32), (32, 53)]
    params = [dict(b=b, m=m, n=n, dtype=d, full_matrices=f, compute_uv=uv, hermitian_=h)
              for (m, n), f in P(sizes, [False, True]) for h in ([False, True] if m == n else [False])
              for b, d, uv in P([(), (3,), (2, 3)], ALL, [False, True])]
    params += [dict(b=(), m=m, n=n, dtype=np.float64, full_matrices=False, compute_uv=True, hermitian_=False)
               for m, n in [(400000, 2), (2, 400000)]]
    out += product_cases("testSVD", params, _svd)
    out += product_cases("testSVDGrad", [dict(shape=s, dtype=d, full_matrices=f, compute_uv=uv) for s, d, f, uv in
                                         P([(1, 1), (4, 4), (2, 5), (5, 2), (5, 5), (2, 5, 5)], C64, [True, False],
                                           [True, False])], _svd_grad)
    qr_shapes = [(0, 0), (2, 0), (0, 2), (3, 3), (3, 4), (2, 10, 5), (2, 200, 100), (64, 16, 5), (33, 7, 3),
                 (137, 9, 5), (20000, 2, 2)]
    out += product_cases("testQr", [dict(shape=s, dtype=d, full_matrices=f) for s, d, f in
                                    P(qr_shapes, ALL, [False, True])], _qr)
    out += product_cases("testNumpyQrModes", [dict(shape=s, dtype=np.float32, mode=m) for s, m in
                                              P([(0, 2), (2, 0), (3, 4), (3, 3), (4, 3)],
                                                ["reduced", "r", "full", "complete", "raw"])], _numpy_qr_modes)
    out += product_cases("eigh_test.testEigh", [dict(n=n, dtype=d, lower=lo) for n, d, lo in
                                                P([0, 4, 5, 50, 512], ALL, [True, False])], _eigh)
    out += product_cases("eigh_test.testEigh(triangle input)", [dict(n=n, dtype=d, lower=lo) for n, d, lo in
                                                                P([4, 5], C64, [True, False])], _eigh_triangle)
    out += product_cases("eigh_test.testEighIdentity", [dict(n=n, dtype=d, lower=lo) for n, d, lo in
                                                        P([0, 4, 5, 50, 512], ALL, [True, False])], _eigh_identity)
    out += product_cases("eigh_test.testEigvalsh", [dict(shape=s, dtype=d) for s, d in
                                                    P([(4, 4), (5, 5), (50, 50)], ALL)], _eigvalsh)
    out += product_cases("eigh_test.testEighGrad", [dict(shape=s, dtype=d, lower=lo) for s, d, lo in
                                                    P([(1, 1), (4, 4), (5, 5), (25, 25), (2, 10, 10)], C64,
                                                      [True, False])], _eigh_grad)
    zero_diagonal = np.array([[0., -1., -1., 1.], [-1., 0., 1., -1.], [-1., 1., 0., -1.], [1., -1., -1., 0.]],
                             dtype=np.float32)
    tiny = draw(rng_for("tiny"), (300, 300), np.float32)
    deficient = {r: draw(rng_for(f"rank{r}"), (300, r), np.float32) for r in (1, 3, 299)}
    out += [Case("jax", "eigh_test.testEighZeroDiagonal", lambda: _eigh_special("", zero_diagonal, 2.5)),
            Case("jax", "eigh_test.testEighTinyNorm",
                 lambda: _eigh_special("", np.finfo(np.float32).eps * (tiny + tiny.T), 80))]
    out += [Case("jax", f"eigh_test.testEighRankDeficient[rank={r}]",
                 lambda x=x: _eigh_special("", x @ x.T, 85)) for r, x in deficient.items()]
    out += product_cases("eigh_test.testEighBatching", [dict(shape=s, dtype=d) for s, d in
                                                        P([(1, 1), (4, 4), (5, 5), (300, 300)], ALL)],
                         lambda name, shape, dtype: _eigh_special(
                             name, hermitian(draw(rng_for(name), (10,) + shape, dtype)), 100))
    out += [Case("jax", "testIssue669", lambda: _issue669("testIssue669")),
            Case("jax", "testIssue1383", lambda: _issue1383("testIssue1383"))]
    out += product_cases("testEig", [dict(shape=s, dtype=d, left=lf) for s, d, lf in
                                     P([(0, 0), (4, 4), (5, 5), (50, 50), (2, 6, 6)], ALL, [False, True])], _eig)
    out += product_cases("testEigvalsGrad", [dict(shape=s, dtype=d) for s, d in
                                             P([(4, 4), (5, 5), (8, 8), (7, 6, 6)], C64)], _eigvals_grad)
    out += product_cases("testEigGradComplexInputs", [dict(shape=s, dtype=np.complex128, left_right=lr) for s, lr in
                                                      P([(4, 4), (5, 5)], [(False, True), (True, False), (True, True)])],
                         _eig_grad)
    out += product_cases("testEigGradRealInputs", [dict(shape=s, dtype=np.float64, left_right=lr) for s, lr in
                                                   P([(4, 4), (5, 5)], [(False, True), (True, False), (True, True)])],
                         _eig_grad)
    out += product_cases("testEigHandlesNanInputs", [dict(shape=s, dtype=d) for s, d in
                                                     P([(4, 4), (5, 5), (50, 50), (2, 6, 6)], ALL)], _eig_nonfinite)
    out += product_cases("testEigBatching", [dict(shape=(10,) + s, dtype=d, left=False) for s, d in
                                             P([(1, 1), (4, 4), (5, 5)], ALL)], _eig)
    out += product_cases("svd_test.testSvdvals", [dict(shape=s, dtype=d) for s, d in
                                                  P([(4, 5), (3, 4, 5), (2, 3, 4, 5)], ALL)],
                         lambda name, shape, dtype: check(name, lambda xp, x: xp.linalg.svdvals(x),
                                                          [draw(rng_for(name), shape, dtype)], np.linalg.svdvals,
                                                          tol=value_tol(dtype, 100)))
    conds = list(np.linspace(1, 9, 4))
    out += product_cases("svd_test.testSvdWithRectangularInput",
                         [dict(m=m, n=n, log_cond=c, full_matrices=f) for (m, n), c, f in
                          P(zip([2, 8, 10, 20], [4, 6, 10, 18]), conds, [True, False])], _svd_rectangular)
    out += product_cases("svd_test.testSingularValues",
                         [dict(m=m, n=n, log_cond=c, full_matrices=f, compute_uv=False) for (m, n), c, f in
                          P(zip([2, 8, 10, 20], [4, 6, 10, 18]), conds, [True, False])], _svd_rectangular)
    out += product_cases("svd_test.testSvdWithOnRankDeficientInput",
                         [dict(m=m, r=r, log_cond=c) for (m, r), c in P(zip([8, 8, 8, 10], [3, 5, 7, 9]), [1, 2, 3])],
                         _svd_rank_deficient)
    out += product_cases("svd_test.testSvdAllZero", [dict(m=m, n=n, full_matrices=f, compute_uv=uv, dtype=d)
                                                     for (m, n), f, uv, d in
                                                     P(zip([2, 4, 8], [4, 4, 6]), [True, False], [True, False], ALL)],
                         _svd_all_zero)
    out += product_cases("svd_test.testSvdOnTinyElement", [dict(m=m, n=n, r=r, c=c, dtype=d) for (m, n, r, c), d in
                                                           P(zip([2, 4, 8], [4, 4, 6], [1, 0, 1], [1, 0, 1]),
                                                             [np.float32, np.float64])], _svd_tiny)
    return out
