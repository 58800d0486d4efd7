"""Linear algebra through LAPACK, each op with JVP and VJP rules written in session ops (so they
differentiate again), one module per factorisation:

- :mod:`.common`: the family's rule set, ε of the spectral rules, shared checks and helpers;
- :mod:`.spectral`: the broadened coefficients of the spectral rules, at any scale;
- :mod:`.svd` (the thin SVD), :mod:`.svd_truncated` (the k leading triplets by a Krylov method),
  :mod:`.eigh`, :mod:`.eigh_krylov` (the k pairs of largest |λ| by a Krylov method), :mod:`.qr` (with the unit-triangular solve), :mod:`.solve` (solve, inv),
  :mod:`.norms`, and :mod:`.cholesky`, :mod:`.determinants`, :mod:`.least_squares`, :mod:`.pinv`,
  :mod:`.eig`, :mod:`.expm`, :mod:`.matrix_functions`, :mod:`.eigh_function`, :mod:`.complement`,
  :mod:`.triangular` (triangular solves), :mod:`.lu` (LU with partial pivoting);
- :mod:`.ops`: the session methods of these ops, which every session has (``OpSet`` inherits them).

Each primitive is one matrix's; stacks of matrices (..., m, n) go through the same rules one
matrix at a time (:mod:`tenferro_py.batching`).
"""

from ..batching import bind_batched, stack_p, unstack_p  # noqa: F401
from ..rules import RuleSet
from . import complement  # noqa: F401
from .cholesky import cholesky_p  # noqa: F401
from .common import DEFAULT_DERIVATIVE_EPS, MIN_DERIVATIVE_EPS, RULES, check_derivative_eps  # noqa: F401
from .determinants import det_p, slogdet_p  # noqa: F401
from .eig import eig_p, eigvals_p  # noqa: F401
from .eigh import eigh_p  # noqa: F401
from .eigh_function import check_functions, eigh_function_p  # noqa: F401
from .eigh_krylov import eigh_complement_solve_p, eigh_krylov_p, truncated_eigh  # noqa: F401
from .expm import expm_frechet_p, expm_p  # noqa: F401
from .least_squares import lstsq  # noqa: F401
from .lu import lu_p  # noqa: F401
from .matrix_functions import inv_sqrtm_p, logm_p, sqrtm_p  # noqa: F401
from .norms import MATRIX_ORDS, VECTOR_ORDS, frobenius_p, norm, reciprocal_or_zero_p  # noqa: F401
from .pinv import pinv_p, pinv_rtol  # noqa: F401
from .qr import qr_p, unit_solve_p  # noqa: F401
from .solve import inv_p, solve_p  # noqa: F401
from .spectral import (  # noqa: F401
    exact_unit, gap_coefficients, lorentzian, power_of_two_p, scale_or_one, spectrum_scale, times,
)
from .split import split_p  # noqa: F401
from .svd import svd_p, svd_pullback_p, svd_tangent_p  # noqa: F401
from .svd_truncated import complement_solve_p, deflation_width, svd_krylov_p  # noqa: F401
from .triangular import triangular_solve_p  # noqa: F401


def semantic_ad_rules() -> RuleSet:
    """The linalg family's AD rules, to merge into an AdContext (a new set on each call)."""
    return RULES.copy()
