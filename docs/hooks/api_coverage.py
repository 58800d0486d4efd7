"""An mkdocs hook: the build warns (and ``mkdocs build --strict`` fails) when a public name of
the library is missing from the API reference (docs/api/).

A name is covered when a page of docs/api/ has its mkdocstrings anchor (under the public module
or the module that defines it) or, for names documented in a list (NumPy's re-exported
constants, tnp's functions made by one factory), names it in code.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import re
import sys
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.api_coverage")

MODELS = ("onsager", "trg", "hotrg", "reference", "ctmrg", "lattice", "plaquette", "ipeps", "ipeps_state", "ctmrg_cell",
          "cell_networks", "ipeps_cell", "sweep",
          "correlations", "sweep_csv", "sweep_pool", "cli")
PUBLIC_MODULES = (
    "tenferro_py", "tenferro_py.einsum", "tenferro_py.linalg", "tenferro_py.staged", "tenferro_py.traced",
    "tenferro_py.replay", "tenferro_py.fixed_point",
    "tenferro_py.testing", "tenferro_py.rules", "tenferro_py.composite", "tenferro_py.errors",
    "tenferro_py.numpy", "tenferro_py.numpy.linalg", "tenferro_py.numpy.scipy.linalg", "tenferro_py.numpy.quimb_handler",
    *(f"tenferro_py.models.{m}" for m in MODELS),
)
OPTIONAL = {"quimb", "autoray", "cotengra", "matplotlib", "dask", "distributed"}


def public_names(module) -> list[str]:
    """``__all__``, or the functions and classes the module defines under names without an underscore."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [n for n, v in vars(module).items()
            if not n.startswith("_") and (inspect.isfunction(v) or inspect.isclass(v)) and v.__module__ == module.__name__]


def missing_names(api_html: str) -> list[str]:
    """The public names api_html (the API pages' HTML) documents nowhere."""
    anchors = set(re.findall(r'id="(tenferro_py[\w.]*)"', api_html))
    listed = set(re.findall(r"<code>(\w+)</code>", api_html))
    missing = []
    for module_name in PUBLIC_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if (err.name or "").split(".")[0] in OPTIONAL:
                continue
            raise
        for name in public_names(module):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue
            defined = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
            if {f"{module_name}.{name}", defined} & anchors or name in listed:
                continue
            missing.append(f"{module_name}.{name}")
    return missing


def on_post_build(config) -> None:
    root = str(Path(config["config_file_path"]).resolve().parent)
    if importlib.util.find_spec("tenferro_py") is None:  # not installed: the source tree
        sys.path.insert(0, root)
    html = "".join(p.read_text(encoding="utf-8") for p in Path(config["site_dir"], "api").rglob("*.html"))
    for name in missing_names(html):
        log.warning(f"API reference: {name} is public and not documented in docs/api/")
