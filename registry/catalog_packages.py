"""The Python packages behind catalogs: the modules a catalog's tools import that an environment may
lack (its ``requirements``; a catalog without them is skipped, with how to install them), and where
its tools' package lies (the directories to import it from, and the files of it a sandboxed kernel
sees).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolpath.registry.catalog_problems import NOTHING_LOADABLE, CatalogError, CatalogProblem

if TYPE_CHECKING:
    from toolpath.registry.catalog import Catalog


def importable(module: str) -> bool:
    """Whether top-level ``module`` is imported or can be found (without importing it)."""
    if sys.modules.get(module) is not None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules, or without a spec
        return False


class CatalogRequirements(BaseModel):
    """Python modules a catalog's tools import that an environment may lack (e.g. ``rdkit``), and
    how to install them. A catalog whose modules are missing is skipped when loaded, with that advice."""

    model_config = ConfigDict(extra="forbid")

    modules: list[str] = Field(min_length=1, description="Top-level modules the tools import, e.g. `rdkit`, `pandas`.")
    install: str = Field(default="", description="How to install them, e.g. `pip install 'toolpath[chemistry]'`.")

    @field_validator("modules")
    @classmethod
    def _module_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(f"{name!r} is not a module name (e.g. `rdkit`, `pandas`)")
        return value


class CatalogSkippedWarning(UserWarning):
    """A catalog was left out because Python modules its tools need are missing (the message says which and how to install them)."""


@dataclass(frozen=True)
class SkippedCatalog:
    """A catalog left out of a load: its file, domain, the modules it lacks, and how to install them."""

    path: Path
    domain: str
    missing: tuple[str, ...]
    install: str

    def reason(self) -> str:
        """Why it was skipped, and how to install what it lacks."""
        advice = f": {self.install}" if self.install else ""
        return f"it needs {', '.join(self.missing)}, which cannot be imported here{advice}"

    def __str__(self) -> str:
        return f"catalog {self.domain!r} ({self.path}) is skipped: {self.reason()}"


def without_missing_modules(catalogs: Iterable[Catalog]) -> tuple[list[Catalog], list[SkippedCatalog]]:
    """``catalogs`` split into those whose ``requirements`` modules can be imported here, and the
    others as :class:`SkippedCatalog` (each also warned of, with a :class:`CatalogSkippedWarning`).

    Raises:
        CatalogError: every catalog would be skipped (TP107, one problem per catalog saying what to
            install): there would be nothing to plan over.
    """
    usable: list[Catalog] = []
    skipped: list[SkippedCatalog] = []
    for catalog in catalogs:
        missing = catalog.missing_modules()
        if not missing:
            usable.append(catalog)
            continue
        skipped.append(SkippedCatalog(catalog.path, catalog.domain, tuple(missing), catalog.requirements.install if catalog.requirements else ""))
    if skipped and not usable:
        raise CatalogError([CatalogProblem(str(entry.path), "requirements.modules", entry.reason(), code=NOTHING_LOADABLE) for entry in skipped])
    for entry in skipped:
        warnings.warn(str(entry), CatalogSkippedWarning, stacklevel=3)
    return usable, skipped


def import_roots(catalogs: Iterable[Catalog]) -> list[str]:
    """Directories to put on an import path so each catalog's tools import, from any working directory.

    Two layouts work: the catalog inside its package (``root/a/b/catalog.yaml`` with ``package: a.b``
    needs ``root``), and the catalog beside it (``dir/catalog.yaml`` next to ``dir/a/`` or
    ``dir/a.py``, for ``package: a`` or a tool's ``module: a.x``, needs ``dir``).
    """
    roots: list[str] = []
    for catalog in catalogs:
        directory = catalog.path.resolve().parent
        if catalog.package:
            parts = catalog.package.split(".")
            if directory.parts[-len(parts) :] == tuple(parts):
                roots.append(str(directory.parents[len(parts) - 1]))
        if any((directory / top).is_dir() or (directory / f"{top}.py").is_file() for top in catalog.top_modules()):
            roots.append(str(directory))
    return list(dict.fromkeys(roots))


def module_paths(catalogs: Iterable[Catalog]) -> list[str]:
    """The files a sandboxed kernel must see of the packages the catalogs' tools import (under
    :func:`import_roots`): for each module a tool names (and the catalog's ``package``), the
    ``__init__.py`` of each package above it, and the ``.py`` files (with their ``__pycache__``
    directories) of the package holding it; and the regular files its catalog's ``package_data``
    globs match there (not the catalog file). Nothing else: a package directory may hold a catalog
    file with an MCP server's credentials, or other data, and a package's root may be a whole
    checkout (``toolpath/catalogs/...`` in a clone named ``toolpath``)."""
    paths: list[str] = []
    for catalog in catalogs:
        roots = import_roots([catalog])
        for module in {catalog.package, *(tool.module_override or tool.module for tool in catalog.tools)} - {None}:
            parts = module.split(".")
            for root in roots:
                for depth in range(1, len(parts)):
                    paths.append(os.path.join(root, *parts[:depth], "__init__.py"))
                module_file = os.path.join(root, *parts) + ".py"
                package = os.path.join(root, *parts) if os.path.isdir(os.path.join(root, *parts)) else os.path.dirname(module_file)
                if package != root:  # a top-level module file has no package of its own to show
                    paths += _python_files(package)
                    paths += _package_data(package, catalog)
                paths.append(module_file)
    return list(dict.fromkeys(path for path in paths if os.path.lexists(path)))


def _python_files(directory: str) -> list[str]:
    """The ``.py`` files and ``__pycache__`` directories in ``directory`` and its subpackages
    (directories with an ``__init__.py``; links not followed)."""
    found = []
    for folder, subfolders, files in os.walk(directory):
        subfolders[:] = [name for name in subfolders if os.path.isfile(os.path.join(folder, name, "__init__.py"))] + (
            ["__pycache__"] if "__pycache__" in subfolders else []
        )
        if "__pycache__" in subfolders:
            subfolders.remove("__pycache__")
            found.append(os.path.join(folder, "__pycache__"))
        found += [os.path.join(folder, name) for name in sorted(files) if name.endswith(".py")]
    return found


def _package_data(package: str, catalog: Catalog) -> list[str]:
    """The regular files (not links, not the catalog file) ``catalog.package_data`` matches in ``package``."""
    itself = str(catalog.path.resolve())
    matches = (match for pattern in catalog.package_data for match in glob.glob(os.path.join(glob.escape(package), pattern), recursive=True))
    return sorted(match for match in matches if os.path.isfile(match) and not os.path.islink(match) and os.path.realpath(match) != itself)
