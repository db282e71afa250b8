"""The catalog file format: the serialised form of a domain's states and tools, in YAML or JSON.

A catalog file has the top-level keys ``domain``, optional ``package``, ``states`` and ``tools``::

    domain: chemistry
    package: catalogs.chemistry          # tool X is imported as catalogs.chemistry.X.X
    states:
      - token: chemistry.molecule_parsed
        description: A SMILES string has been parsed into a validated molecule.
        affordances: [inspect a molecule's formula and weight]
    tools:
      - name: parse_molecule
        required_parameters: [{name: smiles, type: str}]
        return_spec: {name: molecule, type: dict, state: chemistry.molecule_parsed}
        state_transition: {requires: [], produces: [chemistry.molecule_parsed]}

A tool's ``server_name`` defaults to the catalog's ``domain``. Tools implemented by an MCP server name
it with ``mcp_server``, and the catalog declares it under ``mcp_servers`` (see
:mod:`toolpath.registry.mcp_servers`); tools that call an HTTP API name it in their ``http`` block,
and the catalog declares it under ``http_apis`` (see :mod:`toolpath.registry.http_apis`). The JSON Schema of this format is
:func:`catalog_json_schema` (``toolpath schema``).

The models here say what a file may hold; :func:`toolpath.registry.catalog.read_catalog` reads one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from toolpath.registry.catalog_packages import CatalogRequirements
from toolpath.registry.http_apis import HttpApiConfig
from toolpath.registry.mcp_servers import MCPServerConfig
from toolpath.registry.names import require_printable
from toolpath.registry.states import State
from toolpath.registry.tools import ToolDefinition


class WorkflowSkill(BaseModel):
    """A workflow skill, as agora-workbench serves them: a named kind of task and the states it
    works with (not a state itself)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The skill's name, e.g. `chemistry-rdkit`.")
    description: str = Field(default="", description="What kinds of task the skill serves.")
    domain: str | None = Field(default=None, description="The domain it belongs to.")
    states: list[str] = Field(default_factory=list, description="Tokens of the states the skill works with.")


class CatalogFile(BaseModel):
    """A toolpath catalog file: a domain's states and tools."""

    model_config = ConfigDict(extra="forbid", title="toolpath catalog")

    domain: str = Field(min_length=1, description="The domain, used as the server of tools that name none.")
    package: str | None = Field(default=None, description="Package whose module `{package}.{name}` implements tool `name`.")
    states: list[State] = Field(default_factory=list, description="The states tools require and produce.")
    tools: list[ToolDefinition] = Field(default_factory=list, description="The tools of the domain.")
    mcp_servers: dict[str, MCPServerConfig] = Field(
        default_factory=dict, description="MCP servers that implement tools (a tool names one with `mcp_server`), by name."
    )
    http_apis: dict[str, HttpApiConfig] = Field(
        default_factory=dict, description="HTTP APIs whose operations implement tools (a tool names one in its `http` block), by name."
    )
    skills: list[WorkflowSkill] = Field(
        default_factory=list, description="Workflow skills (agora-workbench): named kinds of task and the states they work with."
    )
    requirements: CatalogRequirements | None = Field(
        default=None, description="Python modules the tools need that may be missing; without them the catalog is skipped, with this advice."
    )
    vocabulary: Literal["open", "closed"] = Field(
        default="open",
        description=(
            "`closed`: the catalog's texts (descriptions, affordances, parameter names, descriptions and choice words) use every word its users "
            'ask for its work with, so a weakly matched request whose action or object is a word no loaded catalog uses ("draw a map", '
            '"make a pie chart") asks for something it does not offer and is not understood. `open` (default): requests may use words its texts '
            "never use (a catalog written from an API's names)."
        ),
    )
    package_data: list[str] = Field(
        default_factory=list,
        description="Files in the tools' package directory that the tools read (globs relative to it, like `data/*.csv`): a sandboxed kernel sees the tools' Python modules and these, nothing else of that directory.",
    )

    @field_validator("package_data")
    @classmethod
    def _inside_the_package(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            parts = pattern.replace("\\", "/").split("/")
            if not pattern or pattern.startswith("/") or ".." in parts:
                raise ValueError(f"{pattern!r} is not a file pattern inside the package directory: give a relative glob like data/*.csv, without '..'")
        return patterns

    @field_validator("domain", "package")
    @classmethod
    def _printable(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The domain becomes a server name and the package a module path: both reach generated code.
        return value if value is None else require_printable(value, info.field_name)


def catalog_json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of catalog files, for editors and validators."""
    schema = CatalogFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
