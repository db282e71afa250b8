"""toolpath's data model and catalogs: states, tool definitions, the tool registry, catalog files.

This layer imports nothing from ``kernel`` or ``planner``.
"""

from registry.catalog import Catalog, CatalogError, CatalogFile, CatalogProblem, LoadedCatalogs, catalog_json_schema, combine_catalogs, import_roots, load_catalogs, read_catalog
from registry.lint import RULES, Finding, lint_catalogs, load_checked
from registry.names import handle_name, python_identifier
from registry.states import State, StateTransition
from registry.tool_registry import AmbiguousToolNameError, ToolNotFoundError, ToolRegistry
from registry.tools import ReturnSpec, ToolDefinition, ToolParameter, reachable_states

__all__ = [
    "RULES",
    "Finding",
    "catalog_json_schema",
    "combine_catalogs",
    "import_roots",
    "lint_catalogs",
    "load_checked",
    "AmbiguousToolNameError",
    "ToolNotFoundError",
    "Catalog",
    "CatalogError",
    "CatalogFile",
    "CatalogProblem",
    "LoadedCatalogs",
    "ReturnSpec",
    "State",
    "StateTransition",
    "ToolDefinition",
    "ToolParameter",
    "ToolRegistry",
    "handle_name",
    "load_catalogs",
    "python_identifier",
    "reachable_states",
    "read_catalog",
]
