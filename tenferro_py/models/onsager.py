"""Exact solution of the 2D square-lattice Ising model (Onsager 1944).

Coupling J = 1, no field, k_B = 1; all quantities are per site in the
thermodynamic limit.  Serves as the reference that tensor-network results
(TRG, HOTRG, CTMRG) are checked against.

Notation: t = tanh 2β, sech = 1/cosh 2β (so t² + sech² = 1), the elliptic
modulus k = 2 sinh 2β / cosh² 2β = 2 t sech and s = 2t² − 1, which satisfies
s² = 1 − k² exactly and changes sign at β_c.  Using s (computed from β − β_c)
instead of 1 − k² avoids the catastrophic cancellation near β_c, where the
elliptic parameter m = k² → 1: K(m) and K − E are evaluated by the Gauss
(Landen/AGM) descent from k and k' = |s|, which is accurate for all β.
"""

import math
from decimal import Decimal, localcontext

from scipy.integrate import quad

from ..errors import InvalidArgument

__all__ = ["BETA_C", "energy", "ln_z", "spontaneous_magnetisation", "specific_heat"]

BETA_C = math.log(1 + math.sqrt(2)) / 2
"""Critical inverse temperature, sinh 2β_c = 1."""

# β_c − BETA_C (BETA_C's rounding error, ~4e-17), so that β − β_c is exact.
with localcontext() as _ctx:
    _ctx.prec = 40
    _BETA_C_LO = float((1 + Decimal(2).sqrt()).ln() / 2 - Decimal(BETA_C))


def _hyperbolics(name, beta):
    """Validate beta; return (t, sech, k, t − sech, s), overflow-free.

    Near β_c, t − sech = (sinh 2β − 1)/cosh 2β is computed from
    sinh 2β − sinh 2β_c = 2 cosh(β + β_c) sinh(β − β_c), so s keeps full
    relative accuracy.  The float BETA_C itself is taken as the exact
    critical point (s = 0).
    """
    try:
        beta = float(beta)
    except (TypeError, ValueError):
        raise InvalidArgument(name, "a finite beta > 0", repr(beta)) from None
    if not (beta > 0 and math.isfinite(beta)):
        raise InvalidArgument(name, "a finite beta > 0", repr(beta))
    x = math.exp(-2 * beta)
    t = math.tanh(2 * beta)
    sech = 2 * x / (1 + x * x)
    d = beta - BETA_C  # exact for |d| < 0.2 (Sterbenz)
    if d == 0:
        diff = 0.0
    elif abs(d) < 0.2:
        diff = 2 * math.cosh(beta + BETA_C) * math.sinh(d - _BETA_C_LO) * sech
    else:
        diff = t - sech
    return t, sech, 2 * t * sech, diff, diff * (t + sech)


def _elliptic(k, kp):
    """Return (X, S) with X = (2/π) K(m = k²) − 1 and K − E = K (k²/2 + S).

    Gauss/Landen descent from modulus k and complementary modulus
    k' = √(1 − k²) (passed in, as it cannot be accurately recovered from k
    near k = 1): k_{n+1} = k_n²/(1 + k_n')², k'_{n+1} = 2√k_n'/(1 + k_n'),
    K = (π/2) Π (1 + k_n), and with the AGM's c_n = k_n / Π_{j≤n} (1 + k_j),
    S = Σ_{n≥1} 2^{n−1} c_n².  Only sums and products of positive numbers
    occur, so X and S keep full relative accuracy from k → 0 (high and low
    temperature, X ≈ k²/4) to k → 1 (β_c, X ~ ln(1/k')).  Requires k' > 0.
    """
    log_prod, s_sum, weight = 0.0, 0.0, 1.0
    while True:
        k, kp = k * k / (1 + kp) ** 2, 2 * math.sqrt(kp) / (1 + kp)
        if k <= 1e-17 * log_prod:
            return math.expm1(log_prod), s_sum
        log_prod += math.log1p(k)
        c = k * math.exp(-log_prod)
        s_sum += weight * c * c
        weight *= 2


def ln_z(beta):
    """Free energy density lnZ/N.

    Onsager's double integral
        ln 2 + 1/(8π²) ∫∫ ln[cosh²2β − sinh2β (cos θ₁ + cos θ₂)] dθ₁ dθ₂,
    with the θ₂ integral done in closed form
    (∫₀^{2π} ln(a − b cos θ) dθ = 2π ln((a + √(a² − b²))/2)) and φ = θ₁/2,
    becomes
        ln(2 cosh 2β) + (2/π) ∫₀^{π/2} ln[(√(1 − k cos²φ) + √(1 + k sin²φ))/2] dφ.
    The integrand is evaluated as log1p of a cancellation-free argument, with
    1 − k cos²φ = (t − sech)² + k sin²φ.  At β_c it is smooth (√(1 − cos²φ) =
    sin φ), but near β_c it has a kink of width w = |t − sech|/√k at φ = 0;
    the substitution φ = w sinh v smooths it out for quad.
    """
    t, sech, k, diff, _ = _hyperbolics("ln_z", beta)
    if k == 0:  # e^{-2β} underflowed: the corrections are below 1 ulp
        return 2 * beta
    d2 = diff * diff

    def integrand(phi):
        sin2 = math.sin(phi) ** 2
        ra = math.sqrt(d2 + k * sin2)
        rb = math.sqrt(1 + k * sin2)
        return math.log1p(0.5 * k * (sin2 / (1 + rb) - (1 - sin2) / (1 + ra)))

    tol = dict(epsabs=1e-14, epsrel=1e-14, limit=200)
    if diff == 0:
        integral, _ = quad(integrand, 0, math.pi / 2, **tol)
    else:
        w = abs(diff) / math.sqrt(k)
        integral, _ = quad(lambda v: integrand(w * math.sinh(v)) * w * math.cosh(v),
                           0, math.asinh(math.pi / 2 / w), **tol)
    # ln(2 cosh 2β) = 2β + log1p(e^{-4β}), overflow-free.
    return 2 * beta + math.log1p(math.exp(-4 * beta)) + 2 / math.pi * integral


def energy(beta):
    """Internal energy u = −∂(lnZ/N)/∂β.

    Onsager's u = −coth 2β [1 + (2/π) s K(k²)], rewritten with
    X = (2/π)K − 1 as u = −2t − s X / t, free of cancellation at high
    temperature.  At β_c, s = 0 while K diverges only logarithmically, so
    s X → 0 and u(β_c) = −2 tanh 2β_c = −√2.
    """
    t, _, k, _, s = _hyperbolics("energy", beta)
    if s == 0:
        return -2 * t
    return -2 * t - s * _elliptic(k, abs(s))[0] / t


def specific_heat(beta):
    """Specific heat c = β² ∂²(lnZ/N)/∂β².

    Differentiating u gives
        c = (4/π)(β coth 2β)² {K − E − sech²2β [π/2 + s K]}
    (the form (2/π)(β coth 2β)² {2K − 2E − sech²2β [...]}, as often quoted,
    lacks a factor 2 on the sech² term: it gives 3β² instead of 2β² at high
    temperature and disagrees with finite differences of energy()).  With
    K − E = K (k²/2 + S) and s = 2t² − 1 the braces reduce to
    (π/2)[sech² X + (1 + X) S], a sum of positive terms, so c keeps full
    relative accuracy at all temperatures.  Diverges logarithmically at β_c:
    returns inf for beta == BETA_C.
    """
    t, sech, k, _, s = _hyperbolics("specific_heat", beta)
    if s == 0:
        return math.inf
    x, s_sum = _elliptic(k, abs(s))
    bracket = sech**2 * x + (1 + x) * s_sum
    # bracket first: huge beta gives 0 * big, not 0 * inf.
    return 2 * bracket * (beta / t) * (beta / t)


def spontaneous_magnetisation(beta):
    """Yang's m = (1 − sinh(2β)⁻⁴)^(1/8) below T_c (β > β_c), 0 above (C. N. Yang, Phys. Rev. 85, 808 (1952))."""
    _hyperbolics("spontaneous_magnetisation", beta)
    beta = float(beta)
    return (1 - math.sinh(2 * beta) ** -4) ** 0.125 if beta > BETA_C else 0.0
