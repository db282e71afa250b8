"""Catalogs read: a catalog file (toolpath's format, :mod:`toolpath.registry.catalog_format`, or the
JSON agora-workbench serves, :mod:`toolpath.registry.agora_workbench`) validated into a
:class:`Catalog` of states and tool definitions, its tools' server and module resolved; and several
catalogs cross-checked and combined into one :class:`ToolRegistry` (:func:`load_catalogs`).

Loading is atomic: a file (or a set of files) with any error registers nothing, and
:class:`toolpath.registry.catalog_problems.CatalogError` lists every problem with its file, line,
column, field path and rule code. Reading is bounded (:mod:`toolpath.registry.catalog_files`) and
parsing safe (:mod:`toolpath.registry.catalog_documents`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from toolpath.registry.agora_workbench import from_agora_workbench, is_agora_workbench
from toolpath.registry.catalog_documents import SourceLocator, as_list, as_mapping, garbage_collection_paused, parse_document
from toolpath.registry.catalog_files import read_text, size_limit
from toolpath.registry.catalog_format import CatalogFile, WorkflowSkill
from toolpath.registry.catalog_packages import CatalogRequirements, SkippedCatalog, importable, without_missing_modules
from toolpath.registry.catalog_problems import (
    DUPLICATE_STATE,
    DUPLICATE_TOOL,
    INVALID_FIELD,
    NO_MODULE,
    SHARED_FUNCTION,
    UNKNOWN_HTTP_API,
    UNKNOWN_MCP_SERVER,
    UNREADABLE,
    CatalogError,
    CatalogProblem,
    boolean_word_advice,
    did_you_mean,
    short_repr,
)
from toolpath.registry.http_apis import HttpApiConfig, HttpAuth, HttpOperation
from toolpath.registry.mcp_servers import MCPServerConfig
from toolpath.registry.names import function_names
from toolpath.registry.states import State, StateTransition
from toolpath.registry.tool_registry import ToolRegistry
from toolpath.registry.tools import ReturnSpec, ToolDefinition, ToolParameter

if TYPE_CHECKING:
    from toolpath.registry.overlays import Overlay


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
    mcp_servers: dict[str, MCPServerConfig] = field(default_factory=dict)
    http_apis: dict[str, HttpApiConfig] = field(default_factory=dict)
    #: Index in the file's ``states``/``tools`` list of each item kept (items that failed validation
    #: are left out of a partial catalog); empty when every item was kept.
    state_indexes: tuple[int, ...] = ()
    tool_indexes: tuple[int, ...] = ()
    #: What items left out for a problem of their own would have declared or produced (as far as it
    #: can be read), so the linter does not report their absence as further problems.
    dropped_states: frozenset[str] = frozenset()
    dropped_produces: frozenset[str] = frozenset()
    skills: tuple[WorkflowSkill, ...] = ()
    requirements: CatalogRequirements | None = None
    package_data: tuple[str, ...] = ()
    #: ``closed``: a request's words outside every loaded catalog's texts are not this catalog's work (``CatalogFile.vocabulary``).
    vocabulary: str = "open"
    #: :meth:`top_modules` and :meth:`has_host_tools` when known without reading the tools (a
    #: catalog read from its snapshot).
    known_top_modules: frozenset[str] | None = field(default=None, repr=False, compare=False)
    known_host_tools: bool | None = field(default=None, repr=False, compare=False)

    def top_modules(self) -> frozenset[str]:
        """The top-level packages of its ``package`` and of the modules its tools import."""
        if self.known_top_modules is not None:
            return self.known_top_modules
        modules = [self.package, *(tool.module_override or tool.module for tool in self.tools)]
        return frozenset(module.split(".")[0] for module in modules if module)

    def has_host_tools(self) -> bool:
        """Whether any of its tools runs in the host process (``binding: host``)."""
        if self.known_host_tools is not None:
            return self.known_host_tools
        return any(tool.binding == "host" for tool in self.tools)

    def missing_modules(self) -> list[str]:
        """The :attr:`requirements` modules this environment cannot import (found without importing them)."""
        if self.requirements is None:
            return []
        return [name for name in self.requirements.modules if not importable(name.split(".")[0])]

    def file_location(self, location: Sequence[str | int]) -> list[str | int]:
        """``location`` in the file: ``["tools", i, ...]`` and ``["states", i, ...]`` count this
        catalog's kept items (``self.tools[i]``); the file's list may hold others before them."""
        location = list(location)
        indexes = {"tools": self.tool_indexes, "states": self.state_indexes}.get(location[0]) if location else None
        if indexes and len(location) > 1 and isinstance(location[1], int):
            location[1] = indexes[location[1]]
        return location

    def problem(self, location: Sequence[str | int], message: str, code: str = INVALID_FIELD) -> CatalogProblem:
        """A problem at :meth:`file_location` of ``location``."""
        return self.locator.problem(self.file_location(location), message, code)


@dataclass(frozen=True)
class LoadedCatalogs:
    """Several catalogs loaded together: one registry holding every tool, and every state by token;
    ``skipped`` lists the catalogs left out because modules they need are missing; ``overlays``
    the overlays loaded with them (:mod:`toolpath.registry.overlays`), whose prerequisites the
    registry's tools already require.

    Each catalog's ``tools`` are the registry's definitions (with their ids), which share their
    parameters with the definitions read from the file: read-only, like every loaded definition.
    A tool an overlay gave prerequisites stays in its catalog as its file says."""

    catalogs: tuple[Catalog, ...]
    registry: ToolRegistry
    states: dict[str, State]
    skipped: tuple[SkippedCatalog, ...] = ()
    overlays: tuple[Overlay, ...] = ()


def _resolved(tool: ToolDefinition, **update: Any) -> ToolDefinition:
    """``tool.model_copy(update=update)`` without the copy, for a definition this module has just
    validated and nothing else holds: set as its constructor would set them (a copy of each of
    100,000 definitions took about a second and left its garbage among what is kept)."""
    for name, value in update.items():
        object.__setattr__(tool, name, value)
    tool.model_fields_set.update(update)
    return tool


def _dropped_tokens(items: Any, kept: set[int], tokens_of: Callable[[dict], list]) -> frozenset[str]:
    """The string tokens ``tokens_of`` reads from the raw ``items`` (a file's list) not ``kept``."""
    return frozenset(
        token
        for index, item in enumerate(as_list(items))
        if index not in kept and isinstance(item, dict)
        for token in tokens_of(item)
        if isinstance(token, str)
    )


def _field_names_at(location: Sequence[str | int]) -> list[str]:
    """The fields allowed where the unknown field at ``location`` (its last key) was written."""
    keys = [key for key in location[:-1] if isinstance(key, str)]
    if "mcp_servers" in keys or "mcp_server" in keys:
        model: type[BaseModel] = MCPServerConfig
    elif "auth" in keys:
        model = HttpAuth
    elif "http_apis" in keys or "api" in keys:
        model = HttpApiConfig
    elif "http" in keys:
        model = HttpOperation
    else:
        models = {
            "states": State,
            "tools": ToolDefinition,
            "required_parameters": ToolParameter,
            "optional_parameters": ToolParameter,
            "return_spec": ReturnSpec,
            "state_transition": StateTransition,
        }
        model = models.get(keys[-1], CatalogFile) if keys else CatalogFile
    return list(model.model_fields)


#: A step pydantic adds to an error's location for a validator (``function-after[_check(), str]``).
_VALIDATOR_STEP = re.compile(r"[a-z-]+\[.*\]")


def _validation_problems(locator: SourceLocator, error: ValidationError, prefix: Sequence[str | int] = ()) -> list[CatalogProblem]:
    problems = []
    for detail in error.errors(include_url=False):
        # Pydantic appends the validator's kind ("function-after[...]") to some locations; drop it.
        location = [*prefix, *(key for key in detail["loc"] if not (isinstance(key, str) and _VALIDATOR_STEP.fullmatch(key)))]
        message = detail["msg"]
        if detail["type"] == "extra_forbidden":
            suggestion = did_you_mean(str(location[-1]), _field_names_at(location)) if location else ""
            message = f"unknown field;{suggestion} check its spelling (the catalog format is in docs/catalogs.md of toolpath's source, the schema in `toolpath schema`)"
        elif detail["type"] != "missing" and "input" in detail:
            message += f" (found {short_repr(detail['input'])})"
            message += "".join(f"; {boolean_word_advice(*word)}" for word in locator.boolean_words_at(location))
        problems.append(locator.problem(location, message))
    return problems


@garbage_collection_paused()
def read_catalog(path: str | Path, *, max_bytes: int | None = None) -> Catalog:
    """Read and validate one catalog file (toolpath or agora-workbench format).

    Args:
        path: a ``.yaml``/``.yml`` or ``.json`` file; it must be a regular file (not a pipe, a
            device or a directory).
        max_bytes: the largest file accepted, in bytes; ``None`` takes the environment variable
            ``TOOLPATH_MAX_CATALOG_BYTES``, else :data:`toolpath.registry.catalog_files.DEFAULT_MAX_CATALOG_BYTES` (16 MiB).

    Returns:
        The :class:`Catalog`; each tool's ``server_name`` defaults to the domain and its ``module``
        is resolved (``module_override`` > ``module`` > ``{package}.{name}``).

    Raises:
        CatalogError: listing every problem with file, line, column, field path and code. No other
            exception escapes for any file content. A file too large, not regular, or not UTF-8 is
            TP100, found without reading more than ``max_bytes + 1`` bytes or waiting on a pipe.
        ValueError: ``max_bytes`` is not a positive integer.
    """
    path = Path(path)
    document, locator = _read_document(path, max_bytes)
    if is_overlay_document(document):
        raise CatalogError(
            [
                locator.problem(
                    ["overlay"],
                    "this is a catalog overlay (written by `toolpath learn`), not a catalog: load it with its catalogs (load_catalogs, --add-catalog)",
                )
            ]
        )
    return _catalog_from_document(path, document, locator)


def read_source(path: str | Path, *, max_bytes: int | None = None) -> Catalog | Overlay:
    """Read a catalog file, or an overlay (a document with a top-level ``overlay:`` key, checked by
    :func:`toolpath.registry.overlays.read_overlay`); bounds and errors as :func:`read_catalog`'s."""
    path = Path(path)
    document, locator = _read_document(path, max_bytes)
    if is_overlay_document(document):
        from toolpath.registry.overlays import read_overlay  # numpy loads only when an overlay is given

        return read_overlay(path, document, locator)
    return _catalog_from_document(path, document, locator)


def is_overlay_document(document: Any) -> bool:
    """Whether a parsed file is an overlay (a mapping with a top-level ``overlay`` key)."""
    return isinstance(document, dict) and "overlay" in document


def _read_document(path: Path, max_bytes: int | None) -> tuple[Any, SourceLocator]:
    text = read_text(path, size_limit(path, max_bytes))
    return parse_document(path, text)


def _catalog_from_document(path: Path, document: Any, locator: SourceLocator) -> Catalog:
    if not isinstance(document, dict):
        found = "an empty file" if document is None else f"a {type(document).__name__}"
        raise CatalogError([locator.problem([], f"a catalog is a mapping with keys domain, package, states, tools; found {found}", UNREADABLE)])
    if is_agora_workbench(document):
        document = from_agora_workbench(document)
        locator.aliases = {"domain": "server_name"}
    try:
        header, states, tools, servers, apis, problems = _validate_items(document, locator)
    except RecursionError:
        raise CatalogError([locator.problem([], "the document is nested too deeply to validate", UNREADABLE)]) from None

    seen_tokens: set[str] = set()
    for index, state in states:
        if state.token in seen_tokens:
            problems.append(locator.problem(["states", index, "token"], f"state {state.token!r} is declared twice", DUPLICATE_STATE))
        seen_tokens.add(state.token)

    resolved: list[tuple[int, ToolDefinition]] = []
    if header is not None:
        resolver = ToolRegistry(package=header.package)
        seen_tools: set[tuple[str | None, str]] = set()
        for index, tool in tools:
            server_name = tool.server_name or header.domain
            if (server_name, tool.name) in seen_tools:
                problems.append(locator.problem(["tools", index, "name"], f"server {server_name!r} already has a tool named {tool.name!r}", DUPLICATE_TOOL))
            seen_tools.add((server_name, tool.name))
            if isinstance(tool.mcp_server, str):
                server = servers.get(tool.mcp_server)
                if server is None:
                    if not servers.has_problem(tool.mcp_server):  # else that entry's own problem says enough
                        declared = ", ".join(sorted(servers)) or "none"
                        problems.append(
                            locator.problem(
                                ["tools", index, "mcp_server"],
                                f"tool {tool.name!r} names MCP server {tool.mcp_server!r}, which this catalog does not declare under `mcp_servers` (declared: {declared})",
                                UNKNOWN_MCP_SERVER,
                            )
                        )
                    continue
                resolved.append((index, _resolved(tool, server_name=server_name, mcp_server=server)))
                continue
            if tool.http is not None:
                api = apis.get(tool.http.api) if isinstance(tool.http.api, str) else tool.http.api
                if api is None:
                    if not apis.has_problem(tool.http.api):  # else that entry's own problem says enough
                        declared = ", ".join(sorted(apis)) or "none"
                        problems.append(
                            locator.problem(
                                ["tools", index, "http", "api"],
                                f"tool {tool.name!r} names HTTP API {tool.http.api!r}, which this catalog does not declare under `http_apis` (declared: {declared})",
                                UNKNOWN_HTTP_API,
                            )
                        )
                    continue
                operation = tool.http.model_copy(update={"api": api})
                resolved.append((index, _resolved(tool, server_name=server_name, http=operation)))
                continue
            if tool.mcp_server is not None:  # a server written inline
                resolved.append((index, _resolved(tool, server_name=server_name)))
                continue
            try:
                module = resolver.resolve_module(tool)
            except ValueError as error:
                problems.append(locator.problem(["tools", index], str(error).replace("ToolRegistry(package=...)", "a top-level `package:`"), NO_MODULE))
                continue
            resolved.append((index, _resolved(tool, server_name=server_name, module=module)))
    catalog = None
    if header is not None:
        resolved_indexes = {index for index, _ in resolved}
        catalog = Catalog(
            path,
            header.domain,
            header.package,
            tuple(state for _, state in states),
            tuple(tool for _, tool in resolved),
            locator,
            dict(servers),
            dict(apis),
            state_indexes=tuple(index for index, _ in states),
            tool_indexes=tuple(index for index, _ in resolved),
            dropped_states=_dropped_tokens(document.get("states"), {index for index, _ in states}, lambda item: [item.get("token")]),
            # Items that validated were taken out of the document (see _validate_items): those of
            # them left out here say what they produce themselves.
            dropped_produces=_dropped_tokens(
                document.get("tools"), resolved_indexes, lambda item: as_list(as_mapping(item.get("state_transition")).get("produces"))
            ).union(*(tool.state_transition.produces for index, tool in tools if index not in resolved_indexes)),
            skills=tuple(header.skills),
            requirements=header.requirements,
            package_data=tuple(header.package_data),
            vocabulary=header.vocabulary,
        )
    if problems:
        raise CatalogError(problems, partial=catalog)
    assert catalog is not None
    return catalog


class _Servers(dict[str, Any]):
    """The valid ``mcp_servers`` (or ``http_apis``) entries by name. ``invalid`` names those that had
    problems, and ``unusable`` is set when the section itself was malformed: a tool naming one of
    those gets no second problem."""

    def __init__(self) -> None:
        super().__init__()
        self.invalid: set[str] = set()
        self.unusable = False

    def has_problem(self, name: str) -> bool:
        return self.unusable or name in self.invalid


def _validate_servers(value: Any, locator: SourceLocator, directory: Path) -> tuple[_Servers, list[CatalogProblem]]:
    """Each ``mcp_servers`` entry on its own, named from its key; a relative ``cwd`` is taken from
    the catalog's ``directory``."""
    servers, problems = _Servers(), []
    if not isinstance(value, dict):
        servers.unusable = True
        problems.append(
            locator.problem(["mcp_servers"], f"expected a mapping of server names to {{command, args}} or {{url, headers}}, found {short_repr(value)}")
        )
        return servers, problems
    for name, entry in value.items():
        try:
            if not isinstance(name, str) or not name:
                raise ValueError(f"server names are non-empty strings, not {short_repr(name)}")
            if isinstance(entry, dict) and entry.get("name", name) != name:
                raise ValueError(f"`name` {short_repr(entry['name'])} differs from the key {name!r}; the key names the server, so remove `name`")
            server = MCPServerConfig.model_validate(entry)
            cwd = server.cwd if server.cwd is None or os.path.isabs(server.cwd) else str(directory / server.cwd)
            servers[name] = server.model_copy(update={"name": name, "cwd": cwd})
        except ValidationError as error:
            servers.invalid.add(name)
            problems.extend(_validation_problems(locator, error, prefix=["mcp_servers", name]))
        except ValueError as error:
            servers.invalid.add(str(name))
            problems.append(locator.problem(["mcp_servers", str(name)], str(error)))
    return servers, problems


def _validate_apis(value: Any, locator: SourceLocator) -> tuple[_Servers, list[CatalogProblem]]:
    """Each ``http_apis`` entry on its own, named from its key."""
    apis, problems = _Servers(), []
    if not isinstance(value, dict):
        apis.unusable = True
        problems.append(locator.problem(["http_apis"], f"expected a mapping of API names to {{base_url, auth, ...}}, found {short_repr(value)}"))
        return apis, problems
    for name, entry in value.items():
        try:
            if not isinstance(name, str) or not name:
                raise ValueError(f"API names are non-empty strings, not {short_repr(name)}")
            if isinstance(entry, dict) and entry.get("name", name) != name:
                raise ValueError(f"`name` {short_repr(entry['name'])} differs from the key {name!r}; the key names the API, so remove `name`")
            apis[name] = HttpApiConfig.model_validate(entry).model_copy(update={"name": name})
        except ValidationError as error:
            apis.invalid.add(name)
            problems.extend(_validation_problems(locator, error, prefix=["http_apis", name]))
        except ValueError as error:
            apis.invalid.add(str(name))
            problems.append(locator.problem(["http_apis", str(name)], str(error)))
    return apis, problems


def _validate_items(
    document: dict, locator: SourceLocator
) -> tuple[CatalogFile | None, list[tuple[int, State]], list[tuple[int, ToolDefinition]], _Servers, _Servers, list[CatalogProblem]]:
    """Validate the header, then each state, tool, MCP server and HTTP API on its own, so one bad
    item does not hide the problems of the others; returns what is valid, with its index, and every problem."""
    problems: list[CatalogProblem] = []
    items: dict[str, list] = {"states": [], "tools": []}
    header_fields = dict(document)
    declared = header_fields.pop("mcp_servers", None)
    servers, server_problems = _validate_servers({} if declared is None else declared, locator, Path(locator.path).resolve().parent)
    problems.extend(server_problems)
    declared_apis = header_fields.pop("http_apis", None)
    apis, api_problems = _validate_apis({} if declared_apis is None else declared_apis, locator)
    problems.extend(api_problems)
    for key, model in (("states", State), ("tools", ToolDefinition)):
        value = header_fields.pop(key, None)
        if value is None:
            continue
        if not isinstance(value, list):
            problems.append(locator.problem([key], f"expected a list, found {short_repr(value)}"))
            continue
        for index, entry in enumerate(value):
            # State's own __init__ takes the fields as keywords, so a key that is not text would
            # raise TypeError from inside pydantic rather than a validation error.
            names = [name for name in entry if not isinstance(name, str)] if isinstance(entry, dict) else []
            if names:
                problems.extend(locator.problem([key, index], f"field names are text, not {short_repr(name)}; quote it") for name in names)
                continue
            try:
                items[key].append((index, model.model_validate(entry)))
                # The model holds what it needs of the item: dropping the item now lets the next
                # models reuse its memory (at 100,000 tools, the document is about 250 MB).
                value[index] = None
            except ValidationError as error:
                problems.extend(_validation_problems(locator, error, prefix=[key, index]))
    header = None
    try:
        header = CatalogFile.model_validate(header_fields)
    except ValidationError as error:
        problems[:0] = _validation_problems(locator, error)
    return header, items["states"], items["tools"], servers, apis, problems


@garbage_collection_paused()
def load_catalogs(paths: Iterable[str | Path], *, max_bytes: int | None = None) -> LoadedCatalogs:
    """Load several catalog files into one :class:`ToolRegistry` and one state table.

    All files are read and cross-checked before anything is registered: a state token declared
    differently in two files, or a (server, tool name) pair in two files, is an error.
    ``max_bytes`` limits the size of each file, as in :func:`read_catalog`. The catalogs' texts are
    not kept (:func:`forget_texts`). A catalog whose
    ``requirements`` modules cannot be imported here is left out, with a
    :class:`toolpath.registry.catalog_packages.CatalogSkippedWarning`, and listed in :attr:`LoadedCatalogs.skipped`.

    Raises:
        CatalogError: with every problem found, in file order. Nothing is registered.
        ValueError: ``max_bytes`` is not a positive integer.
    """
    catalogs: list[Catalog] = []
    overlays: list[Overlay] = []
    problems: list[CatalogProblem] = []
    # The same file named twice (`--catalog a.yaml --catalog ./a.yaml`) is loaded once.
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(Path(path).resolve(), Path(path))
    for path in unique.values():
        try:
            source = read_source(path, max_bytes=max_bytes)
        except CatalogError as error:
            problems.extend(error.problems)
            continue
        (catalogs if isinstance(source, Catalog) else overlays).append(source)
    if problems:
        raise CatalogError(problems)
    catalogs, skipped = without_missing_modules(catalogs)
    loaded = combine_catalogs(catalogs, overlays, skipped)
    forget_texts(loaded)
    return loaded


def forget_texts(loaded: LoadedCatalogs) -> None:
    """Let the loaded catalogs' locators drop their files' texts (:meth:`SourceLocator.forget_text`):
    once loaded, a catalog's positions are rarely asked for again, and its text is its own size."""
    for catalog in loaded.catalogs:
        catalog.locator.forget_text()


def _shared_functions(catalogs: Sequence[Catalog]) -> list[CatalogProblem]:
    """Two differently named tools that one module would implement with the same function.

    ``get-forecast`` is implemented by ``get_forecast`` when its module has no function of its own
    name; if a tool ``get_forecast`` lives in the same module, both would call one function. Tools
    served by MCP servers have no module and are called by their own names.
    """
    names_by_module: dict[str, set[str]] = {}
    for catalog in catalogs:
        for tool in catalog.tools:
            if tool.module:
                names_by_module.setdefault(tool.module, set()).add(tool.name)
    problems = []
    for catalog in catalogs:
        for index, tool in enumerate(catalog.tools):
            fallback = function_names(tool.name)[1:]
            if fallback and tool.module and fallback[0] in names_by_module.get(tool.module, set()):
                message = (
                    f"tools {tool.name!r} and {fallback[0]!r} would both be implemented by function {fallback[0]!r} of module "
                    f"{tool.module!r}; give {tool.name!r} its own module (`module:`) or a distinct name"
                )
                problems.append(catalog.problem(["tools", index, "name"], message, SHARED_FUNCTION))
    return problems


@garbage_collection_paused()
def combine_catalogs(catalogs: Sequence[Catalog], overlays: Sequence[Overlay] = (), skipped: Sequence[SkippedCatalog] = ()) -> LoadedCatalogs:
    """Cross-check catalogs already read, then register all their tools into one registry, each
    with the prerequisites ``overlays`` give it added to its ``requires``
    (:func:`toolpath.registry.overlays.apply_overlays`; what they say of the ``skipped`` catalogs'
    domains is passed over). The registry's definitions share their parameters and lists with
    those of ``catalogs`` (``register_tool(detach=False)``): neither is to be changed.

    Raises:
        CatalogError: a state token declared differently in two files, a (server, tool name)
            pair defined in two files, or an overlay naming a tool or state no catalog has or
            giving a prerequisite that makes a cycle. Nothing is registered.
    """
    problems: list[CatalogProblem] = []
    states: dict[str, State] = {}
    state_origin: dict[str, Path] = {}
    tool_origin: dict[tuple[str | None, str], Path] = {}
    for catalog in catalogs:
        for index, state in enumerate(catalog.states):
            known = states.get(state.token)
            if known is not None and known.model_dump() != state.model_dump():
                problems.append(
                    catalog.problem(
                        ["states", index, "token"], f"state {state.token!r} is also declared, differently, in {state_origin[state.token]}", DUPLICATE_STATE
                    )
                )
            states.setdefault(state.token, state)
            state_origin.setdefault(state.token, catalog.path)
        for index, tool in enumerate(catalog.tools):
            key = (tool.server_name, tool.name)
            if key in tool_origin:
                problems.append(
                    catalog.problem(
                        ["tools", index, "name"], f"tool {tool.name!r} of server {tool.server_name!r} is also defined in {tool_origin[key]}", DUPLICATE_TOOL
                    )
                )
            tool_origin.setdefault(key, catalog.path)
    problems.extend(_shared_functions(catalogs))
    tools = [tool for catalog in catalogs for tool in catalog.tools]
    if overlays:
        from toolpath.registry.overlays import apply_overlays

        tools, overlay_problems = apply_overlays(overlays, tools, states, {entry.domain for entry in skipped})
        problems.extend(overlay_problems)
    if problems:
        raise CatalogError(problems)

    registry = ToolRegistry()
    registered = {id(tool): registry.get_tool_by_id(registry.register_tool(tool, detach=False)) for tool in tools}
    # The catalogs returned hold the registry's definitions, so that a loaded catalog's tools are
    # kept once, not twice (a tool an overlay changed stays as its file says).
    catalogs = [dataclasses.replace(catalog, tools=tuple(registered.get(id(tool), tool) for tool in catalog.tools)) for catalog in catalogs]
    return LoadedCatalogs(tuple(catalogs), registry, states, tuple(skipped), tuple(overlays))
