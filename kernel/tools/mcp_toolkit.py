"""MCP servers' tools as host tools: a whole server as a toolkit, or catalog tools one by one.

- :class:`MCPToolkit` binds every tool a server lists (every page of ``tools/list``) behind one
  handle. CodeMode connects it when a run starts (its ``connect`` is async, so on the run's first
  cell, on the caller's loop) and closes it when the run ends; one opened by hand
  (``async with MCPToolkit(...)``) is left alone. Signatures come from the tools' input schemas,
  retry policies from their annotations (:func:`listed_retry`: the read-only default for a tool the
  server says is read-only, one try for any other).
  A tool that cannot be bound (:func:`unbindable_reason`: an empty name, say) is skipped with a
  warning naming it and why, and listed in :attr:`MCPToolkit.skipped`; the others are bound.
- :func:`catalog_tool` turns a registry :class:`ToolDefinition` whose ``mcp_server`` is set into a
  host :class:`Tool` that calls that server, connected on first use through :class:`MCPConnections`.

Names: a tool keeps its real name over the wire (``get-forecast``, ``gmail.search``); its handle
attribute comes from :mod:`toolpath.registry.names` as for every tool. Parameters are keyword-only and keep
their names unless Python cannot take them as keywords (``from`` → ``from_``,
:func:`toolpath.registry.names.parameter_name`); the real names are sent. Arguments left out are not sent,
so the server applies its own defaults.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types

from toolpath.kernel.inside.approval_policy import ApprovalPolicy, policy_of
from toolpath.kernel.inside.tool_calls import ShownText
from toolpath.kernel.option_checks import check_count
from toolpath.kernel.tools.approvals import approval_spec
from toolpath.kernel.tools.mcp_connection import MCPConnection, MCPConnectionError
from toolpath.kernel.tools.mcp_stdio import DEFAULT_MAX_MESSAGE_BYTES
from toolpath.kernel.tools.toolkit import Tool, Toolkit, catalog_signature
from toolpath.registry import ToolDefinition
from toolpath.registry.mcp_servers import MCPServerConfig
from toolpath.registry.names import NameMap, parameter_name, require_printable
from toolpath.registry.retry_policy import DEFAULT_READ_ONLY_RETRY, RetryPolicy, effective_retry
from toolpath.registry.type_strings import type_from_json_schema

#: The longest tool name bound: MCP's own limit ("Tool names SHOULD be between 1 and 128 characters",
#: specification 2025-11-25, SEP-986). A longer one would fill every instruction line and cell that names it.
MAX_TOOL_NAME_CHARS = 128
#: Characters of a skipped tool's name quoted in a warning.
SHOWN_NAME_CHARS = 60


class MCPToolkit(Toolkit):
    """The tools of one MCP server, bound in a kernel as one handle.

    Give either ``command`` (with ``args``, ``env``, ``cwd``: a server started over stdio) or ``url``
    (with ``headers``: Streamable HTTP); ``${NAME}`` in those values reads an environment variable
    at connect time.

    Args:
        name: the toolkit's (and server's) name; the handle is made from it (``time`` → ``time``).
        include: names of the tools to bind (default: every listed tool).
        connect_timeout: seconds to start or reach the server, list its tools and bind them.
        call_timeout: seconds one call may take (default: no limit of its own; the cell's applies).
        max_message_bytes: the longest answer read from a stdio server, in bytes (default 16 MiB);
            a call whose answer is longer raises ``MCPToolError`` as soon as that much is read.
        hooks / pre_hook / post_hook / cache_results / cache_ttl / max_cache_entries /
            max_listed_tools: as for :class:`toolpath.kernel.tools.toolkit.Toolkit`.

    Raises:
        ValueError: neither or both of ``command`` and ``url``, a URL that is not http(s), or a
            value of the wrong type.
        TypeError: ``args`` given as one string, or a ``max_message_bytes`` that is not a whole number.

    Example::

        time = MCPToolkit("time", command="uvx", args=["mcp-server-time"])
        code_mode = CodeMode(tools=[time])
        code_mode.run("await time.get_current_time(timezone='Europe/Paris')", "s1")
    """

    def __init__(
        self,
        name: str,
        *,
        command: str | None = None,
        args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        include: Iterable[str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        **options: Any,
    ):
        super().__init__(name, requires_connect=True, **options)
        if isinstance(args, str):
            raise TypeError(f"args is a list of arguments, e.g. args=[{args!r}], not one string")
        try:
            config = MCPServerConfig.checked(
                name=name,
                command=command,
                args=tuple(args),
                env=dict(env or {}),
                cwd=cwd,
                url=url,
                headers=dict(headers or {}),
                connect_timeout=connect_timeout,
                call_timeout=call_timeout,
            )
        except ValueError as error:
            raise ValueError(f"MCP server {name!r}: {error}") from None
        check_count("max_message_bytes", max_message_bytes, minimum=1)
        self.connection = MCPConnection(config, max_message_bytes)
        self.include = None if include is None else frozenset(include)
        #: ``{tool name: why it was not bound}`` for the tools the last connect skipped.
        self.skipped: dict[str, str] = {}

    async def connect(self) -> None:
        """Connect, list every tool (all pages) and register those included, replacing earlier ones.

        A tool that cannot be bound (see :func:`unbindable_reason`) is skipped: it is named, with
        why, in a ``RuntimeWarning`` and in :attr:`skipped`.

        Raises:
            kernel.tools.mcp_connection.MCPConnectionError: the server could not be started, reached or
                listed, or its tools not bound, within ``connect_timeout`` seconds.
            ValueError: ``include`` names a tool the server does not list.
        """
        timeout = self.connection.config.connect_timeout
        deadline = asyncio.get_running_loop().time() + timeout
        await self.connection.connect()
        try:
            listed = self.connection.tools
            names = {tool.name for tool in listed}
            missing = sorted(self.include - names) if self.include is not None else []
            if missing:
                raise ValueError(f"MCP server {self.name!r} lists no tool {', '.join(map(repr, missing))}; it lists {', '.join(sorted(names)) or 'none'}")
            included = [tool for tool in listed if self.include is None or tool.name in self.include]
            try:
                async with asyncio.timeout_at(deadline):
                    # In a thread: a server may list thousands of tools, and this loop runs other sessions' cells.
                    tools, skipped = await asyncio.to_thread(_bound_tools, self.connection, included)
            except TimeoutError:
                raise MCPConnectionError(
                    f"MCP server {self.name!r}: binding its {len(included)} tools did not finish within {timeout:g} s (connect_timeout); raise connect_timeout, or bind fewer with include=[...]"
                ) from None
        except BaseException:
            await self.connection.aclose()  # not bound: the server must not outlive this failure
            raise
        self._tools = {}
        for tool in tools:
            self.register(tool)
        self.skipped = skipped
        if skipped:
            listing = "; ".join(f"{shown_name(name)} ({reason})" for name, reason in skipped.items())
            warnings.warn(
                f"MCP server {self.name!r}: skipped {len(skipped)} tool{'s' if len(skipped) != 1 else ''} that cannot be bound: {listing}. Its other tools are bound; ask the server's maintainers to fix these.",
                RuntimeWarning,
                stacklevel=2,
            )
        self.is_connected = True

    async def close(self) -> None:
        """Close the connection (a stdio server process exits)."""
        await self.connection.aclose()
        self.is_connected = False

    async def __aenter__(self) -> MCPToolkit:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


class MCPConnections:
    """The connections of catalog tools served by MCP servers, one per server configuration, each
    opened on first use (on the caller's loop) and kept until :meth:`aclose`."""

    def __init__(self) -> None:
        self._connections: dict[str, MCPConnection] = {}

    def get(self, config: MCPServerConfig) -> MCPConnection:
        return self._connections.setdefault(config.key(), MCPConnection(config))

    @property
    def loops(self) -> set[asyncio.AbstractEventLoop]:
        """The loops of the open connections."""
        return {connection.loop for connection in self._connections.values() if connection.is_connected and connection.loop is not None}

    async def aclose(self) -> list[str]:
        """Close every connection (they reconnect on their next call); returns what failed, as text."""
        results = await asyncio.gather(*(connection.aclose() for connection in self._connections.values()), return_exceptions=True)
        return [
            f"MCP server {connection.config.label!r}: {type(result).__name__}: {result}"
            for connection, result in zip(self._connections.values(), results)
            if isinstance(result, Exception)
        ]


def catalog_tool(definition: ToolDefinition, connections: MCPConnections) -> Tool:
    """The host :class:`Tool` of a registry tool served by an MCP server (``mcp_server`` set): a call
    of the tool by its name on that server.

    The tool's signature is the catalog's: required parameters first, then optional ones with their
    catalog defaults (shown, not sent).

    Raises:
        ValueError: ``definition`` names no MCP server.
    """
    server = definition.mcp_server
    if server is None:
        raise ValueError(f"tool {definition.name!r} is not served by an MCP server; use Tool.from_definition")
    if isinstance(server, str):
        error = f"its MCP server {server!r} is only a name: load the tool from a catalog that declares it under `mcp_servers`, or give an MCPServerConfig"
        return Tool(None, name=definition.name, description=definition.description, load_error=error)
    tool = _calling_tool(
        connections.get(server),
        definition.name,
        definition.description,
        catalog_signature(definition),
        {parameter.python_name: parameter.name for parameter in definition.parameters},
        # The catalog's approval holds for a tool served over MCP as for one imported: a call waits.
        policy_of(approval_spec(definition)),
    )
    # As for a tool imported: the catalog's retry policy, or the default for its effects.
    tool.retry = effective_retry(definition)
    return tool


def unbindable_reason(name: str, input_schema: Any) -> str:
    """Why a tool a server lists cannot be bound as a host tool or drafted into a catalog; empty
    when it can be.

    A tool cannot when its name is empty, holds a control character (names end up in generated
    code) or is longer than :data:`MAX_TOOL_NAME_CHARS`, or when its input schema is not a JSON
    object, or its ``properties`` not an object, or its ``required`` not a list of names. Names that
    are merely not Python identifiers (``!!!``, ``class``, ``get-time`` beside ``get_time``) are fine:
    :mod:`toolpath.registry.names` gives them attributes.

    Examples:
        >>> unbindable_reason("get-time", {"type": "object"}), unbindable_reason("", {})
        ('', 'its name is empty')
    """
    if not name:
        return "its name is empty"
    if len(name) > MAX_TOOL_NAME_CHARS:
        return f"its name is {len(name)} characters long; MCP allows {MAX_TOOL_NAME_CHARS}"
    try:
        require_printable(name, "its name")
    except ValueError as error:
        return str(error)
    if not isinstance(input_schema, dict):
        return f"its input schema is a JSON {type(input_schema).__name__}, not an object"
    if not isinstance(input_schema.get("properties") or {}, dict):
        return "its input schema's `properties` is not a JSON object"
    required = input_schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(property_name, str) for property_name in required):
        return "its input schema's `required` is not a list of property names"
    return ""


def listed_retry(annotations: mcp_types.ToolAnnotations | None) -> RetryPolicy | None:
    """The retry policy of a tool a server lists, by the rule catalog tools follow
    (:func:`toolpath.registry.retry_policy.effective_retry`): :data:`DEFAULT_READ_ONLY_RETRY` for a
    read-only tool, one try (``None``) for any other.

    The evidence is the tool's annotations (``ToolAnnotations`` of the MCP schema, since
    specification 2025-03-26): a tool is read-only when ``readOnlyHint`` is true and
    ``destructiveHint`` is not also true (the schema reads ``destructiveHint`` only when
    ``readOnlyHint`` is false; a server giving both says two things, and the cautious one is
    believed). Where the server says nothing, the schema's defaults hold: ``readOnlyHint`` false, so
    the tool may have effects and is tried once, since a call that failed may still have written or
    sent. Annotations are the server's word, not checked: a server that calls a tool with effects
    read-only gets it retried.

    Examples:
        >>> listed_retry(mcp_types.ToolAnnotations(read_only_hint=True)).attempts, listed_retry(None)
        (3, None)
    """
    read_only = annotations is not None and annotations.read_only_hint is True and annotations.destructive_hint is not True
    return DEFAULT_READ_ONLY_RETRY if read_only else None


def server_tool(
    connection: MCPConnection, name: str, description: str, input_schema: Mapping[str, Any], annotations: mcp_types.ToolAnnotations | None = None
) -> Tool:
    """A host :class:`Tool` calling tool ``name`` of ``connection``'s server, its signature made
    from the tool's JSON Schema ``input_schema`` (required properties first; a schema whose
    ``additionalProperties`` allows more adds ``**arguments``), its retry policy from its
    ``annotations`` (:func:`listed_retry`)."""
    properties = input_schema.get("properties") or {}
    properties = properties if isinstance(properties, dict) else {}
    required = [name for name in input_schema.get("required") or () if name in properties]
    names = NameMap(properties, base=parameter_name)
    order = [*required, *(name for name in properties if name not in required)]
    parameters = []
    for wire_name in order:
        schema = properties[wire_name]
        default = inspect.Parameter.empty if wire_name in required else (schema.get("default") if isinstance(schema, dict) else None)
        parameters.append(
            inspect.Parameter(names.python(wire_name), inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ShownText(type_from_json_schema(schema)))
        )
    if input_schema.get("additionalProperties") not in (None, False):
        taken, rest = {parameter.name for parameter in parameters}, "arguments"
        while rest in taken:
            rest += "_"
        parameters.append(inspect.Parameter(rest, inspect.Parameter.VAR_KEYWORD, annotation=ShownText("Any")))
    tool = _calling_tool(connection, name, description, inspect.Signature(parameters), {names.python(wire_name): wire_name for wire_name in properties})
    tool.retry = listed_retry(annotations)
    return tool


def _bound_tools(connection: MCPConnection, listed: Iterable[mcp_types.Tool]) -> tuple[list[Tool], dict[str, str]]:
    """``(tools, skipped)``: a host tool for each listed tool that can be bound, and ``{name: why
    not}`` for the others."""
    tools, skipped = [], {}
    for tool in listed:
        reason = unbindable_reason(tool.name, tool.input_schema)
        if reason:
            skipped[tool.name] = reason
        else:
            tools.append(server_tool(connection, tool.name, tool.description or "", tool.input_schema, tool.annotations))
    return tools, skipped


def shown_name(name: str) -> str:
    """A server's tool name quoted for a message on one line (control characters escaped), only its
    start when it is long."""
    if len(name) <= SHOWN_NAME_CHARS:
        return repr(name)
    return f"{name[:SHOWN_NAME_CHARS]!r}… ({len(name)} characters)"


def _calling_tool(
    connection: MCPConnection,
    name: str,
    description: str,
    signature: inspect.Signature,
    wire_names: dict[str, str],
    requires_approval: bool | ApprovalPolicy = False,
) -> Tool:
    async def call(**arguments: Any) -> Any:
        # Keyword-only parameters arrive as keywords; further ones (``**arguments``) keep their names.
        return await connection.call(name, {wire_names.get(key, key): value for key, value in arguments.items()})

    call.__signature__ = signature  # type: ignore[attr-defined]
    call.__name__ = call.__qualname__ = name
    return Tool(call, name=name, description=description, requires_approval=requires_approval)
