"""The interop packages (quimb, autoray, cotengra: the ``interop`` extra) are optional: the core
imports and runs without them, and importing the core alone imports none of them."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_core_needs_none_of_the_interop_packages():
    code = """
import sys
for name in ("autoray", "quimb", "cotengra", "jax", "torch", "autograd"):
    sys.modules[name] = None  # as if not installed: importing it fails
import numpy as np
import tenferro_py, tenferro_py.numpy as tnp
ops = [np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 2))]
value, grad = tnp.value_and_grad(lambda a: tnp.einsum("ij,jk,ki->", a, *ops[1:], optimize="greedy"))(ops[0])
assert value == 24.0 and grad.shape == (2, 3)
print(sorted(m for m in ("autoray", "quimb", "cotengra") if sys.modules.get(m) is not None))
"""
    assert _python(code).strip() == "[]"


def test_importing_the_core_alone_imports_no_autoray_and_tnp_no_quimb_nor_cotengra():
    assert _python("import sys, tenferro_py; print('autoray' in sys.modules)").strip() == "False"
    code = "import sys, tenferro_py.numpy; print([m for m in ('quimb', 'cotengra') if m in sys.modules])"
    assert _python(code).strip() == "[]"
