"""Every public module, function, class, method and property of tenferro_py has a docstring
(issue 22: the API reference is generated from them)."""

import importlib
import inspect
import pkgutil

import tenferro_py


def public_modules():
    for info in pkgutil.walk_packages(tenferro_py.__path__, "tenferro_py."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield importlib.import_module(info.name)


def public_objects(module):
    """``__all__``, or the functions and classes the module defines under names without an underscore."""
    if hasattr(module, "__all__"):
        names = module.__all__
    else:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]
    return [getattr(module, n) for n in names if inspect.isfunction(getattr(module, n)) or inspect.isclass(getattr(module, n))]


def undocumented():
    missing, seen = [], set()
    for module in [tenferro_py, *public_modules()]:
        if not module.__doc__:
            missing.append(module.__name__)
        for obj in public_objects(module):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            where = f"{obj.__module__}.{obj.__qualname__}"
            if not obj.__doc__:
                missing.append(where)
            if inspect.isclass(obj):
                for name, member in vars(obj).items():
                    function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                    if not name.startswith("_") and inspect.isfunction(function) and not function.__doc__:
                        missing.append(f"{where}.{name}")
    return missing


def test_every_public_name_has_a_docstring():
    assert undocumented() == []
