"""toolpath's data model and catalogs: states, tool definitions, the tool registry, catalog files.

This layer imports nothing from ``kernel`` or ``planner``.
"""

from registry.catalog import Catalog, CatalogError, CatalogFile, CatalogProblem, LoadedCatalogs, load_catalogs, read_catalog
from registry.names import handle_name, python_identifier
from registry.states import State, StateTransition
from registry.tool_registry import AmbiguousToolNameError, ToolNotFoundError, ToolRegistry
from registry.tools import ReturnSpec, ToolDefinition, ToolParameter

__all__ = [
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
    "read_catalog",
]
