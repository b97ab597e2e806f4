"""A package's public names, imported on first use (PEP 562).

The engine's packages import each other's modules (``metrics.listener`` reads constants of
``stream.plan``; ``stream.judges`` calls ``metrics.listener``). Python runs a package's
``__init__`` before any of its modules, so a package that imported its modules eagerly made
the order of first imports matter: importing ``adapters.spark.metrics.latency`` first failed
with a partially initialized module. With ``lazy``, a package names its public names without
importing anything until one is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy(package: str, module_of: dict[str, str]) -> Callable[[str], object]:
    """The package's ``__getattr__``: ``module_of`` maps each public name to its module in ``package``."""

    def __getattr__(name: str) -> object:
        if name in module_of:
            return getattr(importlib.import_module(f"{package}.{module_of[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
