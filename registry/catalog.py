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

A tool's ``server_name`` defaults to the catalog's ``domain``. The JSON Schema of this format is
:func:`catalog_json_schema` (``toolpath schema``).

The catalog JSON that agora-workbench serves — ``{server_name, tools: [...], skills: [...]}`` with
types written ``"builtins.str"`` — is read too (see :func:`from_agora_workbench`).

Loading is atomic: a file (or a set of files) with any error registers nothing, and
:class:`CatalogError` lists every problem with its file, line, column, field path and rule code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from registry.names import function_names
from registry.states import State
from registry.tool_registry import ToolRegistry
from registry.tools import ToolDefinition

#: Rule codes of problems that stop a catalog from loading (the linter adds its own, TP0xx).
UNREADABLE = "TP100"
INVALID_FIELD = "TP101"
DUPLICATE_STATE = "TP102"
DUPLICATE_TOOL = "TP103"
NO_MODULE = "TP104"
SHARED_FUNCTION = "TP105"


@dataclass(frozen=True)
class CatalogProblem:
    """One thing wrong with a catalog file; ``line`` and ``column`` are 1-based, or ``None`` if unknown."""

    path: str
    field: str
    message: str
    line: int | None = None
    column: int | None = None
    code: str = INVALID_FIELD

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}:{self.column or 1}"
        field_path = f" {self.field}:" if self.field else ""
        return f"{where}: {self.code}{field_path} {self.message}"

    def to_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "column": self.column, "code": self.code, "severity": "error", "field": self.field, "message": self.message}


class CatalogError(ValueError):
    """A catalog could not be loaded; ``problems`` says where and why. Nothing was registered.

    ``partial`` is the part of a single file that did validate (for the linter's further checks),
    or ``None``.
    """

    def __init__(self, problems: Sequence[CatalogProblem], partial: Catalog | None = None):
        self.problems = list(problems)
        self.partial = partial
        count = len(self.problems)
        header = f"{count} problem{'s' if count != 1 else ''} in catalog"
        super().__init__(header + ":\n" + "\n".join(f"  {problem}" for problem in self.problems))


class CatalogFile(BaseModel):
    """A toolpath catalog file: a domain's states and tools."""

    model_config = ConfigDict(extra="forbid", title="toolpath catalog")

    domain: str = Field(min_length=1, description="The domain, used as the server of tools that name none.")
    package: str | None = Field(default=None, description="Package whose module `{package}.{name}` implements tool `name`.")
    states: list[State] = Field(default_factory=list, description="The states tools require and produce.")
    tools: list[ToolDefinition] = Field(default_factory=list, description="The tools of the domain.")


def catalog_json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of catalog files, for editors and validators."""
    schema = CatalogFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


class SourceLocator:
    """Maps field paths of one file to line/column, using YAML's node marks (JSON is valid YAML).

    ``aliases`` renames top-level keys of a translated format back to the file's own
    (agora-workbench's ``skills`` are this format's ``states``).
    """

    def __init__(self, path: Path, root: yaml.Node | None):
        self.path = str(path)
        self.root = root
        self.aliases: dict[str, str] = {}

    @classmethod
    def of_json(cls, path: Path, text: str) -> SourceLocator:
        """Compose JSON text with YAML just for positions. Raw tabs can only be whitespace in valid
        JSON, and YAML refuses them as indentation, so they become spaces (columns do not move)."""
        try:
            return cls(path, yaml.compose(text.replace("\t", " "), Loader=yaml.SafeLoader))
        except (yaml.YAMLError, RecursionError):
            return cls(path, None)

    def first_duplicate_key(self) -> tuple[int | None, int | None]:
        """Position of the first key that repeats within one mapping (for JSON, which has no marks)."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode):
                        if key.value in seen:
                            return key.start_mark.line + 1, key.start_mark.column + 1
                        seen.add(key.value)
                    stack.append(value)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
        return None, None

    def _aliased(self, location: Sequence[str | int]) -> list[str | int]:
        if location and isinstance(location[0], str):
            return [self.aliases.get(location[0], location[0]), *location[1:]]
        return list(location)

    def _walk(self, location: Sequence[str | int]) -> tuple[yaml.Node | None, bool]:
        """The deepest node along ``location`` and whether the whole location was found."""
        node = self.root
        for key in self._aliased(location):
            if isinstance(node, yaml.MappingNode):
                child = next((value for name, value in node.value if getattr(name, "value", None) == key), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
                child = node.value[key]
            else:
                child = None
            if child is None:
                return node, False
            node = child
        return node, True

    def position(self, location: Sequence[str | int]) -> tuple[int | None, int | None]:
        """1-based (line, column) of the deepest node along ``location`` that exists."""
        node, _ = self._walk(location)
        if node is None:
            return None, None
        return node.start_mark.line + 1, node.start_mark.column + 1

    def item_index(self, location: Sequence[str | int], value: str) -> int | None:
        """Index of the scalar ``value`` in the list at ``location``, to point at one list item."""
        node, found = self._walk(location)
        if found and isinstance(node, yaml.SequenceNode):
            return next((index for index, child in enumerate(node.value) if isinstance(child, yaml.ScalarNode) and child.value == value), None)
        return None

    def problem(self, location: Sequence[str | int], message: str, code: str = INVALID_FIELD) -> CatalogProblem:
        location = self._aliased(location)
        line, column = self.position(location)
        return CatalogProblem(self.path, field_path(location), message, line, column, code)


@dataclass(frozen=True)
class Catalog:
    """A validated catalog file: its states and its tools (server and module already resolved).

    ``locator`` gives the line of any field (``catalog.locator.position(["tools", 0, "name"])``).
    """

    path: Path
    domain: str
    package: str | None
    states: tuple[State, ...]
    tools: tuple[ToolDefinition, ...]
    locator: SourceLocator = field(repr=False, compare=False)


@dataclass(frozen=True)
class LoadedCatalogs:
    """Several catalogs loaded together: one registry holding every tool, and every state by token."""

    catalogs: tuple[Catalog, ...]
    registry: ToolRegistry
    states: dict[str, State]


def field_path(location: Sequence[str | int]) -> str:
    """``["tools", 0, "name"]`` → ``"tools[0].name"``."""
    path = ""
    for key in location:
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else str(key))
    return path


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Aliases let a few bytes of YAML expand into billions of nodes; no real catalog comes near this.
MAX_EXPANDED_NODES = 1_000_000


class _CatalogLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a mapping that repeats a key is an error instead of last-one-wins."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key_node.value!r}", key_node.start_mark)
                seen.add(key_node.value)
        return super().construct_mapping(node, deep)


def _expanded_size(root: yaml.Node) -> int:
    """Number of nodes once aliases are expanded; raises ``ValueError`` on a recursive alias."""
    sizes: dict[int, int] = {}
    expanding: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            expanding.discard(id(node))
            continue
        if id(node) in sizes:
            continue
        if id(node) in expanding:
            raise ValueError("an alias refers to a node that contains it")
        expanding.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _load_yaml(path: Path, text: str) -> tuple[Any, yaml.Node | None]:
    loader = _CatalogLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        try:
            size = _expanded_size(root)
        except ValueError as error:
            raise CatalogError([CatalogProblem(str(path), "", f"invalid YAML: {error}", root.start_mark.line + 1, root.start_mark.column + 1, UNREADABLE)]) from None
        if size > MAX_EXPANDED_NODES:
            raise CatalogError([CatalogProblem(str(path), "", f"the document expands to {size:,} nodes through aliases (limit {MAX_EXPANDED_NODES:,}); write it out without anchors", code=UNREADABLE)])
        return loader.construct_document(root), root
    finally:
        loader.dispose()


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def parse_document(path: Path, text: str) -> tuple[Any, SourceLocator]:
    """Parse JSON (``.json``) or YAML (anything else) into data and a locator for its positions.

    Raises:
        CatalogError: with the position of a syntax error, a duplicate key, or an alias bomb.
    """
    try:
        if path.suffix.lower() == ".json":
            try:
                document = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
            except json.JSONDecodeError as error:
                raise CatalogError([CatalogProblem(str(path), "", f"invalid JSON: {error.msg}", error.lineno, error.colno, UNREADABLE)]) from None
            except ValueError as error:
                line, column = SourceLocator.of_json(path, text).first_duplicate_key()
                raise CatalogError([CatalogProblem(str(path), "", f"invalid JSON: {error}", line, column, UNREADABLE)]) from None
            return document, SourceLocator.of_json(path, text)
        try:
            document, root = _load_yaml(path, text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            reason = getattr(error, "problem", None) or str(error)
            line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
            raise CatalogError([CatalogProblem(str(path), "", f"invalid YAML: {reason}", line, column, UNREADABLE)]) from None
        return document, SourceLocator(path, root)
    except RecursionError:
        raise CatalogError([CatalogProblem(str(path), "", "the document is nested too deeply to read", code=UNREADABLE)]) from None


_BUILTINS_PREFIX = re.compile(r"\bbuiltins\.")


def _plain_type(value: Any) -> Any:
    """``"builtins.list[builtins.str]"`` → ``"list[str]"``; anything else unchanged (validation reports it)."""
    return _BUILTINS_PREFIX.sub("", value) if isinstance(value, str) else value


def from_agora_workbench(document: dict) -> dict:
    """Translate agora-workbench's served catalog JSON into this module's catalog format.

    agora-workbench serves ``{"server_name", "tools": [...], "skills": [...]}``: tools carry the
    same fields as :class:`ToolDefinition`, with types written as qualified names
    (``"builtins.str"``), and ``skills`` are the states (``token`` or ``name``, ``description``,
    ``affordances``). The server name becomes the domain. Nothing from agora-workbench is imported;
    fields this format does not know are kept so validation reports them.
    """
    translated: dict[str, Any] = {key: value for key, value in document.items() if key not in ("server_name", "skills")}
    translated["domain"] = document.get("server_name")
    skills = document.get("skills") or []
    if isinstance(skills, list):
        translated["states"] = [
            ({"token": skill.get("token", skill.get("name")), **{key: value for key, value in skill.items() if key not in ("token", "name")}} if isinstance(skill, dict) else skill)
            for skill in skills
        ]
    else:
        translated["states"] = skills
    tools = document.get("tools")
    if isinstance(tools, list):
        translated["tools"] = [_agora_tool(tool, document.get("server_name")) for tool in tools]
    return translated


def _agora_tool(tool: Any, server_name: Any) -> Any:
    if not isinstance(tool, dict):
        return tool
    tool = dict(tool)
    tool.setdefault("server_name", server_name)
    for key in ("required_parameters", "optional_parameters"):
        if isinstance(tool.get(key), list):
            tool[key] = [{**parameter, "type": _plain_type(parameter.get("type"))} if isinstance(parameter, dict) else parameter for parameter in tool[key]]
    if isinstance(tool.get("return_spec"), dict):
        tool["return_spec"] = {**tool["return_spec"], "type": _plain_type(tool["return_spec"].get("type"))}
    return tool


def _is_agora_workbench(document: dict) -> bool:
    return "server_name" in document and "domain" not in document


def _validation_problems(locator: SourceLocator, error: ValidationError, prefix: Sequence[str | int] = ()) -> list[CatalogProblem]:
    problems = []
    for detail in error.errors(include_url=False):
        # Pydantic appends the validator's kind ("function-after[...]") to some locations; drop it.
        location = [*prefix, *(key for key in detail["loc"] if not (isinstance(key, str) and "[" in key))]
        message = detail["msg"]
        if detail["type"] == "extra_forbidden":
            message = "unknown field; check its spelling (the catalog format is in README.md, the schema in `toolpath schema`)"
        elif detail["type"] != "missing" and "input" in detail:
            message += f" (found {_short_repr(detail['input'])})"
        problems.append(locator.problem(location, message))
    return problems


def read_catalog(path: str | Path) -> Catalog:
    """Read and validate one catalog file (toolpath or agora-workbench format).

    Args:
        path: a ``.yaml``/``.yml`` or ``.json`` file.

    Returns:
        The :class:`Catalog`; each tool's ``server_name`` defaults to the domain and its ``module``
        is resolved (``module_override`` > ``module`` > ``{package}.{name}``).

    Raises:
        CatalogError: listing every problem with file, line, column, field path and code. No other
            exception escapes for any file content.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not content
    except (OSError, UnicodeDecodeError) as error:
        raise CatalogError([CatalogProblem(str(path), "", f"cannot read catalog file: {error}", code=UNREADABLE)]) from None
    document, locator = parse_document(path, text)
    if not isinstance(document, dict):
        found = "an empty file" if document is None else f"a {type(document).__name__}"
        raise CatalogError([locator.problem([], f"a catalog is a mapping with keys domain, package, states, tools; found {found}", UNREADABLE)])
    if _is_agora_workbench(document):
        document = from_agora_workbench(document)
        locator.aliases = {"states": "skills", "domain": "server_name"}
    try:
        header, states, tools, problems = _validate_items(document, locator)
    except RecursionError:
        raise CatalogError([locator.problem([], "the document is nested too deeply to validate", UNREADABLE)]) from None

    seen_tokens: set[str] = set()
    for index, state in states:
        if state.token in seen_tokens:
            problems.append(locator.problem(["states", index, "token"], f"state {state.token!r} is declared twice", DUPLICATE_STATE))
        seen_tokens.add(state.token)

    resolved: list[ToolDefinition] = []
    if header is not None:
        resolver = ToolRegistry(package=header.package)
        seen_tools: set[tuple[str | None, str]] = set()
        for index, tool in tools:
            server_name = tool.server_name or header.domain
            if (server_name, tool.name) in seen_tools:
                problems.append(locator.problem(["tools", index, "name"], f"server {server_name!r} already has a tool named {tool.name!r}", DUPLICATE_TOOL))
            seen_tools.add((server_name, tool.name))
            try:
                module = resolver.resolve_module(tool)
            except ValueError as error:
                problems.append(locator.problem(["tools", index], str(error).replace("ToolRegistry(package=...)", "a top-level `package:`"), NO_MODULE))
                continue
            resolved.append(tool.model_copy(update={"server_name": server_name, "module": module}))
    catalog = None
    if header is not None:
        catalog = Catalog(path, header.domain, header.package, tuple(state for _, state in states), tuple(resolved), locator)
    if problems:
        raise CatalogError(problems, partial=catalog)
    assert catalog is not None
    return catalog


def _validate_items(document: dict, locator: SourceLocator) -> tuple[CatalogFile | None, list[tuple[int, State]], list[tuple[int, ToolDefinition]], list[CatalogProblem]]:
    """Validate the header, then each state and tool on its own, so one bad item does not hide
    the problems of the others; returns what is valid, with its index, and every problem."""
    problems: list[CatalogProblem] = []
    items: dict[str, list] = {"states": [], "tools": []}
    header_fields = dict(document)
    for key, model in (("states", State), ("tools", ToolDefinition)):
        value = header_fields.pop(key, None)
        if value is None:
            continue
        if not isinstance(value, list):
            problems.append(locator.problem([key], f"expected a list, found {_short_repr(value)}"))
            continue
        for index, entry in enumerate(value):
            try:
                items[key].append((index, model.model_validate(entry)))
            except ValidationError as error:
                problems.extend(_validation_problems(locator, error, prefix=[key, index]))
    header = None
    try:
        header = CatalogFile.model_validate(header_fields)
    except ValidationError as error:
        problems[:0] = _validation_problems(locator, error)
    return header, items["states"], items["tools"], problems


def load_catalogs(paths: Iterable[str | Path]) -> LoadedCatalogs:
    """Load several catalog files into one :class:`ToolRegistry` and one state table.

    All files are read and cross-checked before anything is registered: a state token declared
    differently in two files, or a (server, tool name) pair in two files, is an error.

    Raises:
        CatalogError: with every problem found, in file order. Nothing is registered.
    """
    catalogs: list[Catalog] = []
    problems: list[CatalogProblem] = []
    # The same file named twice (`--catalog a.yaml --catalog ./a.yaml`) is loaded once.
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(Path(path).resolve(), Path(path))
    for path in unique.values():
        try:
            catalogs.append(read_catalog(path))
        except CatalogError as error:
            problems.extend(error.problems)
    if problems:
        raise CatalogError(problems)
    return combine_catalogs(catalogs)


def _shared_functions(catalogs: Sequence[Catalog]) -> list[CatalogProblem]:
    """Two differently named tools that one module would implement with the same function.

    ``get-forecast`` is implemented by ``get_forecast`` when its module has no function of its own
    name; if a tool ``get_forecast`` lives in the same module, both would call one function.
    """
    names_by_module: dict[str, set[str]] = {}
    for catalog in catalogs:
        for tool in catalog.tools:
            names_by_module.setdefault(tool.module or "", set()).add(tool.name)
    problems = []
    for catalog in catalogs:
        for index, tool in enumerate(catalog.tools):
            fallback = function_names(tool.name)[1:]
            if fallback and fallback[0] in names_by_module.get(tool.module or "", set()):
                message = (
                    f"tools {tool.name!r} and {fallback[0]!r} would both be implemented by function {fallback[0]!r} of module "
                    f"{tool.module!r}; give {tool.name!r} its own module (`module:`) or a distinct name"
                )
                problems.append(catalog.locator.problem(["tools", index, "name"], message, SHARED_FUNCTION))
    return problems


def import_roots(catalogs: Iterable[Catalog]) -> list[str]:
    """Directories to put on an import path so each catalog's ``package`` imports.

    A catalog at ``root/a/b/catalog.yaml`` with ``package: a.b`` needs ``root`` on the path.
    """
    roots: list[str] = []
    for catalog in catalogs:
        if not catalog.package:
            continue
        parts = catalog.package.split(".")
        directory = catalog.path.resolve().parent
        if directory.parts[-len(parts) :] == tuple(parts):
            root = str(directory.parents[len(parts) - 1])
            if root not in roots:
                roots.append(root)
    return roots


def combine_catalogs(catalogs: Sequence[Catalog]) -> LoadedCatalogs:
    """Cross-check catalogs already read, then register all their tools into one registry.

    Raises:
        CatalogError: a state token declared differently in two files, or a (server, tool name)
            pair defined in two files. Nothing is registered.
    """
    problems: list[CatalogProblem] = []
    states: dict[str, State] = {}
    state_origin: dict[str, Path] = {}
    tool_origin: dict[tuple[str | None, str], Path] = {}
    for catalog in catalogs:
        for index, state in enumerate(catalog.states):
            known = states.get(state.token)
            if known is not None and known.model_dump() != state.model_dump():
                problems.append(catalog.locator.problem(["states", index, "token"], f"state {state.token!r} is also declared, differently, in {state_origin[state.token]}", DUPLICATE_STATE))
            states.setdefault(state.token, state)
            state_origin.setdefault(state.token, catalog.path)
        for index, tool in enumerate(catalog.tools):
            key = (tool.server_name, tool.name)
            if key in tool_origin:
                problems.append(catalog.locator.problem(["tools", index, "name"], f"tool {tool.name!r} of server {tool.server_name!r} is also defined in {tool_origin[key]}", DUPLICATE_TOOL))
            tool_origin.setdefault(key, catalog.path)
    problems.extend(_shared_functions(catalogs))
    if problems:
        raise CatalogError(problems)

    registry = ToolRegistry()
    for catalog in catalogs:
        for tool in catalog.tools:
            registry.register_tool(tool)
    return LoadedCatalogs(tuple(catalogs), registry, states)
