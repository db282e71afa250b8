"""toolpath's data model and catalogs: states, tool definitions, the tool registry, catalog files.

This layer imports nothing from ``kernel`` or ``planner``.
"""

from toolpath.registry.catalog import (
    Catalog,
    CatalogError,
    CatalogFile,
    CatalogProblem,
    CatalogRequirements,
    CatalogSkippedWarning,
    LoadedCatalogs,
    SkippedCatalog,
    catalog_json_schema,
    combine_catalogs,
    import_roots,
    load_catalogs,
    read_catalog,
)
from toolpath.registry.lint import RULES, Finding, lint_catalogs, load_checked
from toolpath.registry.names import handle_name, python_identifier
from toolpath.registry.states import State, StateTransition
from toolpath.registry.tool_registry import AmbiguousToolNameError, ToolNotFoundError, ToolRegistry
from toolpath.registry.tools import ReturnSpec, ToolDefinition, ToolParameter, reachable_states

__all__ = [
    "AmbiguousToolNameError",
    "Catalog",
    "catalog_json_schema",
    "CatalogError",
    "CatalogFile",
    "CatalogProblem",
    "CatalogRequirements",
    "CatalogSkippedWarning",
    "combine_catalogs",
    "Finding",
    "handle_name",
    "import_roots",
    "lint_catalogs",
    "load_catalogs",
    "load_checked",
    "LoadedCatalogs",
    "python_identifier",
    "reachable_states",
    "read_catalog",
    "ReturnSpec",
    "SkippedCatalog",
    "RULES",
    "State",
    "StateTransition",
    "ToolDefinition",
    "ToolNotFoundError",
    "ToolParameter",
    "ToolRegistry",
]
