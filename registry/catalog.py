"""Catalog files: the serialised form of a domain's states and tools, in YAML or JSON.

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

A tool's ``server_name`` defaults to the catalog's ``domain``. Loading is atomic: a file (or a set of
files) with any error registers nothing, and :class:`CatalogError` lists every problem with its file,
line, column and field path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from registry.states import State
from registry.tool_registry import ToolRegistry
from registry.tools import ToolDefinition


@dataclass(frozen=True)
class CatalogProblem:
    """One thing wrong with a catalog file; ``line`` and ``column`` are 1-based, or ``None`` if unknown."""

    path: str
    field: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}:{self.column or 1}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class CatalogError(ValueError):
    """A catalog could not be loaded; ``problems`` says where and why. Nothing was registered."""

    def __init__(self, problems: Sequence[CatalogProblem]):
        self.problems = list(problems)
        count = len(self.problems)
        header = f"{count} problem{'s' if count != 1 else ''} in catalog"
        super().__init__(header + ":\n" + "\n".join(f"  {problem}" for problem in self.problems))


class CatalogFile(BaseModel):
    """The schema of one catalog file."""

    model_config = ConfigDict(extra="forbid")

    domain: str = Field(min_length=1, description="The domain, used as the server of tools that name none.")
    package: str | None = Field(default=None, description="Package whose module `{package}.{name}` implements tool `name`.")
    states: list[State] = Field(default_factory=list)
    tools: list[ToolDefinition] = Field(default_factory=list)


@dataclass(frozen=True)
class Catalog:
    """A validated catalog file: its states and its tools (server and module already resolved)."""

    path: Path
    domain: str
    package: str | None
    states: tuple[State, ...]
    tools: tuple[ToolDefinition, ...]


@dataclass(frozen=True)
class LoadedCatalogs:
    """Several catalogs loaded together: one registry holding every tool, and every state by token."""

    catalogs: tuple[Catalog, ...]
    registry: ToolRegistry
    states: dict[str, State]


def _node_at(root: yaml.Node | None, location: Sequence[str | int]) -> yaml.Node | None:
    """The deepest YAML node along ``location`` (a pydantic error location), for line numbers."""
    node = root
    for key in location:
        if isinstance(node, yaml.MappingNode):
            child = next((value for name, value in node.value if getattr(name, "value", None) == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            child = node.value[key]
        else:
            child = None
        if child is None:
            break
        node = child
    return node


def _field_path(location: Sequence[str | int]) -> str:
    path = ""
    for key in location:
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else str(key))
    return path


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Locator:
    """Maps field paths of one file to line/column, using YAML's node marks (JSON is valid YAML)."""

    def __init__(self, path: Path, text: str):
        self.path = str(path)
        try:
            self.root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            self.root = None

    def problem(self, location: Sequence[str | int], message: str) -> CatalogProblem:
        node = _node_at(self.root, location)
        line = column = None
        if node is not None:
            line, column = node.start_mark.line + 1, node.start_mark.column + 1
        return CatalogProblem(self.path, _field_path(location), message, line, column)


def _parse_document(path: Path, text: str) -> Any:
    """Parse JSON (``.json``) or YAML (anything else); raise :class:`CatalogError` with the position."""
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise CatalogError([CatalogProblem(str(path), "", f"invalid JSON: {error.msg}", error.lineno, error.colno)]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        reason = getattr(error, "problem", None) or str(error)
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise CatalogError([CatalogProblem(str(path), "", f"invalid YAML: {reason}", line, column)]) from None


def _validation_problems(locator: _Locator, error: ValidationError) -> list[CatalogProblem]:
    problems = []
    for detail in error.errors(include_url=False):
        # Pydantic appends the validator's kind ("function-after" ...) to some locations; drop it.
        location = [key for key in detail["loc"] if not (isinstance(key, str) and "[" in key)]
        message = detail["msg"]
        if detail["type"] not in ("missing", "extra_forbidden") and "input" in detail:
            message += f" (found {_short_repr(detail['input'])})"
        if detail["type"] == "extra_forbidden":
            message = "unknown field; check its spelling (the catalog format is in README.md)"
        problems.append(locator.problem(location, message))
    return problems


def read_catalog(path: str | Path) -> Catalog:
    """Read and validate one catalog file.

    Args:
        path: a ``.yaml``/``.yml`` or ``.json`` file.

    Returns:
        The :class:`Catalog`; each tool's ``server_name`` defaults to the domain and its ``module``
        is resolved (``module_override`` > ``module`` > ``{package}.{name}``).

    Raises:
        CatalogError: listing every problem with file, line, column and field path.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CatalogError([CatalogProblem(str(path), "", f"cannot read catalog file: {error}")]) from None
    document = _parse_document(path, text)
    locator = _Locator(path, text)
    if not isinstance(document, dict):
        raise CatalogError([locator.problem([], f"a catalog is a mapping with keys domain, package, states, tools; found {type(document).__name__}")])
    try:
        catalog_file = CatalogFile.model_validate(document)
    except ValidationError as error:
        raise CatalogError(_validation_problems(locator, error)) from None

    problems: list[CatalogProblem] = []
    seen_tokens: set[str] = set()
    for index, state in enumerate(catalog_file.states):
        if state.token in seen_tokens:
            problems.append(locator.problem(["states", index, "token"], f"state {state.token!r} is declared twice"))
        seen_tokens.add(state.token)

    resolver = ToolRegistry(package=catalog_file.package)
    tools: list[ToolDefinition] = []
    seen_tools: set[tuple[str | None, str]] = set()
    for index, tool in enumerate(catalog_file.tools):
        server_name = tool.server_name or catalog_file.domain
        if (server_name, tool.name) in seen_tools:
            problems.append(locator.problem(["tools", index, "name"], f"server {server_name!r} already has a tool named {tool.name!r}"))
        seen_tools.add((server_name, tool.name))
        try:
            module = resolver.resolve_module(tool)
        except ValueError as error:
            problems.append(locator.problem(["tools", index], str(error).replace("ToolRegistry(package=...)", "a top-level `package:`")))
            continue
        tools.append(tool.model_copy(update={"server_name": server_name, "module": module}))
    if problems:
        raise CatalogError(problems)
    return Catalog(path, catalog_file.domain, catalog_file.package, tuple(catalog_file.states), tuple(tools))


def load_catalogs(paths: Iterable[str | Path]) -> LoadedCatalogs:
    """Load several catalog files into one :class:`ToolRegistry` and one state table.

    All files are read and cross-checked before anything is registered: a state token declared
    differently in two files, or a (server, tool name) pair in two files, is an error.

    Raises:
        CatalogError: with every problem found, in file order. Nothing is registered.
    """
    catalogs: list[Catalog] = []
    problems: list[CatalogProblem] = []
    for path in paths:
        try:
            catalogs.append(read_catalog(path))
        except CatalogError as error:
            problems.extend(error.problems)
    if problems:
        raise CatalogError(problems)

    states: dict[str, State] = {}
    state_origin: dict[str, Path] = {}
    tool_origin: dict[tuple[str | None, str], Path] = {}
    for catalog in catalogs:
        for state in catalog.states:
            known = states.get(state.token)
            if known is not None and known.model_dump() != state.model_dump():
                problems.append(CatalogProblem(str(catalog.path), "states", f"state {state.token!r} is also declared, differently, in {state_origin[state.token]}"))
            states.setdefault(state.token, state)
            state_origin.setdefault(state.token, catalog.path)
        for tool in catalog.tools:
            key = (tool.server_name, tool.name)
            if key in tool_origin:
                problems.append(CatalogProblem(str(catalog.path), "tools", f"tool {tool.name!r} of server {tool.server_name!r} is also defined in {tool_origin[key]}"))
            tool_origin.setdefault(key, catalog.path)
    if problems:
        raise CatalogError(problems)

    registry = ToolRegistry()
    for catalog in catalogs:
        for tool in catalog.tools:
            registry.register_tool(tool)
    return LoadedCatalogs(tuple(catalogs), registry, states)
