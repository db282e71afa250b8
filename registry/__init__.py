"""toolpath's data model and catalogs: states, tool definitions, the tool registry, catalog files.

This layer imports nothing from ``kernel`` or ``planner``. The names below load on first use, so a
module that needs one light part (``toolpath.registry.storage``, say) does not pay for pydantic and
the catalog models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolpath.lazy import lazy_exports

if TYPE_CHECKING:
    from toolpath.registry.catalog import Catalog, LoadedCatalogs, combine_catalogs, load_catalogs, read_catalog
    from toolpath.registry.catalog_format import CatalogFile, catalog_json_schema
    from toolpath.registry.catalog_packages import CatalogRequirements, CatalogSkippedWarning, SkippedCatalog, import_roots
    from toolpath.registry.catalog_problems import CatalogError, CatalogProblem
    from toolpath.registry.lint import RULES, Finding, lint_catalogs, load_checked
    from toolpath.registry.names import handle_name, python_identifier
    from toolpath.registry.states import State, StateTransition
    from toolpath.registry.tool_registry import AmbiguousToolNameError, ToolNotFoundError, ToolRegistry, TransitionTable
    from toolpath.registry.tools import ReturnSpec, ToolDefinition, ToolParameter, reachable_states

_HOME = {
    "AmbiguousToolNameError": "toolpath.registry.tool_registry",
    "Catalog": "toolpath.registry.catalog",
    "catalog_json_schema": "toolpath.registry.catalog_format",
    "CatalogError": "toolpath.registry.catalog_problems",
    "CatalogFile": "toolpath.registry.catalog_format",
    "CatalogProblem": "toolpath.registry.catalog_problems",
    "CatalogRequirements": "toolpath.registry.catalog_packages",
    "CatalogSkippedWarning": "toolpath.registry.catalog_packages",
    "combine_catalogs": "toolpath.registry.catalog",
    "Finding": "toolpath.registry.lint",
    "handle_name": "toolpath.registry.names",
    "import_roots": "toolpath.registry.catalog_packages",
    "lint_catalogs": "toolpath.registry.lint",
    "load_catalogs": "toolpath.registry.catalog",
    "load_checked": "toolpath.registry.lint",
    "LoadedCatalogs": "toolpath.registry.catalog",
    "python_identifier": "toolpath.registry.names",
    "reachable_states": "toolpath.registry.tools",
    "read_catalog": "toolpath.registry.catalog",
    "ReturnSpec": "toolpath.registry.tools",
    "RULES": "toolpath.registry.lint",
    "SkippedCatalog": "toolpath.registry.catalog_packages",
    "State": "toolpath.registry.states",
    "StateTransition": "toolpath.registry.states",
    "ToolDefinition": "toolpath.registry.tools",
    "ToolNotFoundError": "toolpath.registry.tool_registry",
    "ToolParameter": "toolpath.registry.tools",
    "ToolRegistry": "toolpath.registry.tool_registry",
    "TransitionTable": "toolpath.registry.tool_registry",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_exports(__name__, _HOME, globals())
