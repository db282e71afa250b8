"""Domain catalogs shipped with toolpath.

Each sub-package holds a ``catalog.yaml`` and one module per tool; tool ``X`` of
``toolpath.catalogs.chemistry`` is ``from toolpath.catalogs.chemistry.X import X``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: Environment variable listing catalog files (separated by ``os.pathsep``) to load with the shipped ones.
CATALOGS_VARIABLE = "TOOLPATH_CATALOGS"


def default_catalog_paths() -> list[Path]:
    """The ``catalog.yaml`` of every shipped catalog, sorted by domain directory name."""
    root = Path(str(resources.files(__name__)))
    return sorted(root.glob("*/catalog.yaml"))
