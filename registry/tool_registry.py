"""ToolRegistry: the tools of one or more catalogs, indexed by id, by name and by (server, name).

Semantics follow the original tool registry: a copy is stored on registration (the caller's object
is never touched), ids are sequential from 0 and never reused, and the module of a tool resolves as
``module_override``, then ``module``, then ``{package}.{name}``. Unlike the original, two servers may
expose the same tool name and every index stays consistent after removals: a lookup by bare name that
matches tools on several servers raises instead of returning whichever was registered last.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from toolpath.errors import Refusal
from toolpath.registry.names import module_basename
from toolpath.registry.states import StateTransition
from toolpath.registry.tools import ToolDefinition

#: Values a parameter default can share with the caller's definition: nothing can change them.
_IMMUTABLE_DEFAULTS = (str, int, float, bool, bytes, type(None))


def _detached_copy(tool: ToolDefinition, update: dict[str, Any]) -> ToolDefinition:
    """``tool.model_copy(deep=True, update=update)``, several times faster for a ``ToolDefinition``.

    Its strings, numbers and frozen state transition cannot change, so they are shared; the lists,
    parameters and return spec are copied, and a parameter's default deeply only when it is mutable.
    A subclass, whose extra fields are unknown here, gets the full deep copy.
    """
    if type(tool) is not ToolDefinition:
        return tool.model_copy(deep=True, update=update)
    copied = tool.model_copy(update=update)
    detached = {
        "required_parameters": [parameter.model_copy(deep=not isinstance(parameter.default, _IMMUTABLE_DEFAULTS)) for parameter in tool.required_parameters],
        "optional_parameters": [parameter.model_copy(deep=not isinstance(parameter.default, _IMMUTABLE_DEFAULTS)) for parameter in tool.optional_parameters],
        "return_spec": tool.return_spec.model_copy() if tool.return_spec is not None else None,
        "affordances": list(tool.affordances),
    }
    for name, value in detached.items():
        # Past `frozen`, as a constructor would: no one holds this copy yet, so nothing changes
        # under anyone's feet, and model_fields_set stays what the deep copy gives.
        object.__setattr__(copied, name, value)
    return copied


#: The set of explicitly set field names that stored frozen models with the same names share.
_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


def share_fields_set(model: BaseModel) -> None:
    """Give a frozen ``model`` the one set of its explicitly set field names (``model_fields_set``)
    that every stored model with the same names holds: pydantic gives each model a set of its own,
    728 bytes for a tool's nine names and 216 for its transition's, about 95 MB over 100,000 tools.

    Only for frozen models: pydantic adds to the set when a field is assigned, which a frozen model
    refuses, and copies it before it adds a copy's updated fields (``model_copy(update=...)``).
    """
    names = model.model_fields_set
    shared = _FIELDS_SETS.setdefault(frozenset(names), names)
    if shared is not names:
        object.__setattr__(model, "__pydantic_fields_set__", shared)


@dataclass(frozen=True)
class TransitionTable:
    """Every tool's state transition as integers, in id order: what planning needs of a catalog
    without its definitions (a registry read from a catalog snapshot builds none of them for it).

    Attributes:
        ids: each tool's id.
        tokens: every state token any tool requires or produces, numbered in order of first
            mention (tool by tool in id order, each tool's sorted requires, then its sorted produces).
        requires, produces: per tool, the numbers of its tokens, ascending by token.
        cost: per tool, its cost.
        servers, names: per tool, its server (``None``: none) and name.
    """

    ids: Sequence[int]
    tokens: Sequence[str]
    requires: Sequence[Sequence[int]]
    produces: Sequence[Sequence[int]]
    cost: Sequence[float]
    servers: Sequence[str | None]
    names: Sequence[str]

    @classmethod
    def of(cls, tools: Iterator[ToolDefinition] | Sequence[ToolDefinition]) -> TransitionTable:
        """The table of ``tools``, in their order."""
        numbers: dict[str, int] = {}
        ids, requires, produces, cost, servers, names = [], [], [], [], [], []
        for tool in tools:
            ids.append(tool.id)
            cost.append(tool.cost)
            servers.append(tool.server_name)
            names.append(tool.name)
            requires.append(tuple(numbers.setdefault(token, len(numbers)) for token in sorted(tool.state_transition.requires)))
            produces.append(tuple(numbers.setdefault(token, len(numbers)) for token in sorted(tool.state_transition.produces)))
        return cls(ids, list(numbers), requires, produces, cost, servers, names)


class ToolsById(Sequence[ToolDefinition]):
    """The tools of ``registry`` whose ids are ``ids``, in that order, each looked up when asked for:
    the planner indexes only its plans' steps, and a registry read from a catalog snapshot reads a
    definition only then (:mod:`toolpath.registry.catalog_snapshot`). Indexing follows ``ids``'s
    (negative positions, ``IndexError`` past the end, slices)."""

    def __init__(self, registry: ToolRegistry, ids: Sequence[int]):
        self._registry, self._ids = registry, ids

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, index):  # type: ignore[no-untyped-def]  # Sequence's int and slice overloads
        if isinstance(index, slice):
            return [self._registry.get_tool_by_id(tool_id) for tool_id in self._ids[index]]
        return self._registry.get_tool_by_id(self._ids[index])


class ToolNotFoundError(Refusal, ValueError):
    """A lookup (by id, name, or server and name) matched no tool."""


class AmbiguousToolNameError(Refusal, ValueError):
    """A bare tool name is exposed by several servers; ``servers`` lists them."""

    def __init__(self, name: str, servers: list[str]):
        self.name = name
        self.servers = servers
        super().__init__(f"tool name {name!r} is ambiguous: servers {', '.join(servers)} expose it; look it up by server and name")


class ToolRegistry:
    """A mutable collection of :class:`ToolDefinition` with O(1) lookups.

    Args:
        package: dotted package used to resolve the module of a tool that names none:
            ``{package}.{name}`` (``ToolRegistry(package="toolpath.catalogs.chemistry")`` imports tool ``X``
            from ``toolpath.catalogs.chemistry.X``).

    Every lookup that finds nothing raises :class:`ToolNotFoundError` (a ``ValueError``) naming what
    was looked up; a bare name that several servers expose raises :class:`AmbiguousToolNameError`.
    """

    def __init__(self, package: str | None = None):
        self.package = package
        self._by_id: dict[int, ToolDefinition] = {}
        self._by_server_and_name: dict[tuple[str | None, str], int] = {}
        self._ids_by_name: dict[str, dict[int, None]] = {}  # dict as an insertion-ordered set
        self._next_id = 0
        #: SHA-256 (hex) of the catalog files this registry's tools were loaded from, exactly, and of
        #: toolpath's version (:func:`toolpath.registry.catalog_snapshot.content_key`): what a stored
        #: skill index is keyed by without reading a text. ``None`` for a registry filled otherwise,
        #: and from the first tool registered or removed.
        self.content_key: str | None = None

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[ToolDefinition]:
        """Registered tools in id order."""
        return iter(self._by_id.values())

    def transitions(self) -> TransitionTable:
        """The registered tools' :class:`TransitionTable`, in id order."""
        return TransitionTable.of(iter(self))

    def _tool(self, tool_id: int) -> ToolDefinition:
        """The tool of a known id (``KeyError`` for an unknown one): every lookup reads tools here."""
        return self._by_id[tool_id]

    def resolve_module(self, tool: ToolDefinition) -> str:
        """The module that implements ``tool``: ``module_override`` > ``module`` > ``{package}.{name}``
        (a name Python cannot import, like ``get-forecast``, becomes ``get_forecast`` there).

        Raises:
            ValueError: when none applies, saying how to fix it.
        """
        if tool.module_override:
            return tool.module_override
        if tool.module:
            return tool.module
        if self.package:
            return f"{self.package}.{module_basename(tool.name)}"
        raise ValueError(
            f"tool {tool.name!r} names no module: set `module` or `module_override` on the tool, "
            f"or create the registry with ToolRegistry(package=...) so it resolves as '{{package}}.{tool.name}'"
        )

    def register_tool(self, tool: ToolDefinition, *, detach: bool = True) -> int:
        """Store a copy of ``tool`` with its id and resolved module (none for a tool served by an MCP
        server or called over HTTP); return the new id.

        ``detach=False`` makes the copy share ``tool``'s parameters, return and lists instead of
        copying them, for a caller handing over a definition that nothing will change (the catalog
        loader: a second copy of every parameter is about 1.4 KB a tool, 140 MB at 100,000 tools).

        Raises:
            ValueError: when the server already has a tool of that name, or the module cannot be
                resolved. Nothing is stored in either case.
        """
        self.content_key = None
        key = (tool.server_name, tool.name)
        if key in self._by_server_and_name:
            where = f"server {tool.server_name!r}" if tool.server_name else "the registry (no server)"
            raise ValueError(f"{where} already has a tool named {tool.name!r}; remove it first or give the new tool another name")
        module = None if tool.mcp_server is not None or tool.http is not None else self.resolve_module(tool)  # served over MCP or HTTP: nothing to import
        tool_id = self._next_id
        update = {"id": tool_id, "module": module}
        stored = _detached_copy(tool, update) if detach else tool.model_copy(update=update)
        # Both frozen (a subclass may not be).
        if type(stored) is ToolDefinition:
            share_fields_set(stored)
        if type(stored.state_transition) is StateTransition:
            share_fields_set(stored.state_transition)
        self._next_id += 1
        self._by_id[tool_id] = stored
        self._by_server_and_name[key] = tool_id
        self._ids_by_name.setdefault(tool.name, {})[tool_id] = None
        return tool_id

    def get_tool_by_id(self, tool_id: int) -> ToolDefinition:
        try:
            return self._tool(tool_id)
        except KeyError:
            raise ToolNotFoundError(f"no tool with id {tool_id!r}") from None

    def get_tool_by_server_and_name(self, server_name: str | None, name: str) -> ToolDefinition:
        tool_id = self._by_server_and_name.get((server_name, name))
        if tool_id is None:
            raise ToolNotFoundError(f"no tool named {name!r} on server {server_name!r}")
        return self._tool(tool_id)

    def get_id_by_name(self, name: str) -> int:
        """The id of the only tool called ``name``.

        Raises:
            ToolNotFoundError: when no tool has that name.
            AmbiguousToolNameError: when several servers expose it (use
                :meth:`get_tool_by_server_and_name`).
        """
        ids = self._ids_by_name.get(name)
        if not ids:
            raise ToolNotFoundError(f"no tool named {name!r}")
        if len(ids) > 1:
            raise AmbiguousToolNameError(name, sorted(str(self._tool(tool_id).server_name) for tool_id in ids))
        return next(iter(ids))

    def get_tool_by_name(self, name: str) -> ToolDefinition:
        return self._tool(self.get_id_by_name(name))

    def get_name_by_id(self, tool_id: int) -> str:
        return self.get_tool_by_id(tool_id).name

    def remove_tool_by_id(self, tool_id: int) -> ToolDefinition:
        """Remove and return the tool; its id is never handed out again."""
        tool = self.get_tool_by_id(tool_id)
        self.content_key = None
        del self._by_id[tool_id]
        del self._by_server_and_name[(tool.server_name, tool.name)]
        ids = self._ids_by_name[tool.name]
        del ids[tool_id]
        if not ids:
            del self._ids_by_name[tool.name]
        return tool

    def remove_tool_by_name(self, name: str) -> ToolDefinition:
        """Remove the only tool called ``name``; ambiguous or unknown names raise ``ValueError``."""
        return self.remove_tool_by_id(self.get_id_by_name(name))
