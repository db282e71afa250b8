"""Lazy façades: a package exports names from its modules without importing any until one is used.

``toolpath``, ``toolpath.kernel`` and ``toolpath.planner`` export this way so that ``toolpath plan``
pays for no skill search or kernel machinery, and a kernel's first cell for none of the host side.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, homes: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` (PEP 562): imports name ``N`` from module ``homes[N]``
    on first use and keeps it in ``namespace`` (the package's ``globals()``), so later uses are plain lookups.

    Raises (from the returned function):
        AttributeError: a name ``homes`` does not list, worded as Python words it.
    """

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(homes[name]), name)
        return value

    return __getattr__
