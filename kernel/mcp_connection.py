"""One connection to an MCP server, owned by one task, through the official ``mcp`` SDK's ``Client``.

Why a task owns it: the SDK's ``Client`` is an anyio context manager whose task group and cancel
scopes belong to the task that entered it; leaving it from another task fails. A toolkit is
connected on one task (a run's first cell) and closed on another (whoever ends the run), so
:meth:`MCPConnection.connect` starts an *owner* task that enters the client, waits until it is told
to close, and leaves it. Requests (listing tools, calling one) may come from any task on the owner's
event loop; one from another loop is sent to the owner's loop and awaited there.

Contract:

- ``connect()`` is idempotent, and connects again when the server closed the connection (a server
  process that died is restarted by the next call, which says so if it fails again).
- Failures raise :class:`MCPConnectionError` naming the server, with the last lines the server wrote
  to stderr (stdio servers: their stderr goes to a private temporary file, not to ours).
- A tool result with ``isError`` raises :class:`MCPToolError` with the server's message; otherwise
  the result becomes a Python value (see :func:`result_value`).
- ``aclose()`` ends the owner task (and so the server process of a stdio server) and waits for it.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from registry.mcp_servers import MCPServerConfig

#: Characters of a server's stderr quoted in an error (its last lines).
STDERR_TAIL_CHARS = 2000
#: Seconds an HTTP request may wait for the server's response stream: the MCP SDK's own default,
#: since a Streamable HTTP server may hold a response open while a tool runs.
HTTP_READ_TIMEOUT = 300.0


class MCPConnectionError(RuntimeError):
    """The MCP server could not be started or reached, or it closed the connection."""


class MCPToolError(RuntimeError):
    """The MCP server ran the tool and reported an error (``isError``); the message is the server's."""


class MCPConnection:
    """A connection to the MCP server ``config`` describes (not opened until :meth:`connect`).

    Args:
        config: the server; ``${NAME}`` in its values is read from the environment at each connect.
    """

    def __init__(self, config: MCPServerConfig):
        self.config = config
        self._client: Client | None = None
        self._owner: asyncio.Task | None = None
        self._closing: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stderr: Any = None
        self._lock: asyncio.Lock | None = None

    @property
    def is_connected(self) -> bool:
        return self._client is not None and self._owner is not None and not self._owner.done()

    @property
    def server_name(self) -> str | None:
        """The name the connected server gives itself (``serverInfo.name``), if it gave one."""
        info = self._client.server_info if self._client is not None else None
        return info.name if info is not None else None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the connection lives on (``None`` before the first connect)."""
        return self._loop

    async def connect(self) -> None:
        """Start (or reach) the server and complete the MCP handshake, unless already connected.

        Raises:
            MCPConnectionError: the server could not be started or reached within
                ``config.connect_timeout`` seconds, failed the handshake, or its configuration
                names an environment variable (``${NAME}``) that is not set.
        """
        if self._elsewhere():
            return await self._on_own_loop(self.connect())
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # First connect, or the loop of the last one is closed: its task cannot be awaited any
            # more (a stdio server exits when its stdin closes with that loop).
            self._owner = self._client = None
            self._lock, self._loop = asyncio.Lock(), loop
        assert self._lock is not None
        async with self._lock:
            if self.is_connected:
                return
            await self._stop_owner()
            self._close_stderr()
            try:
                config = self.config.expanded()
            except KeyError as error:
                raise MCPConnectionError(error.args[0]) from None
            ready: asyncio.Future = loop.create_future()
            self._closing = asyncio.Event()
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") if config.command is not None else None
            self._owner = asyncio.create_task(self._own(config, ready, self._closing), name=f"toolpath-mcp-{self.config.label}")
            try:
                await asyncio.wait_for(asyncio.shield(ready), self.config.connect_timeout)
            except asyncio.TimeoutError:
                message = self._describe(f"did not answer within {self.config.connect_timeout:g} s (connect_timeout)")
                await self._stop_owner()
                raise MCPConnectionError(message) from None
            except asyncio.CancelledError:
                await self._stop_owner()
                raise
            except Exception as error:
                await self._stop_owner()  # first, so the server has exited and its stderr is complete
                raise MCPConnectionError(self._describe(f"could not be started or reached ({_reason(error)})")) from None

    async def _own(self, config: MCPServerConfig, ready: asyncio.Future, closing: asyncio.Event) -> None:
        """The owner task: enter the client, report ready, wait for ``closing``, leave the client."""
        try:
            if config.command is not None:
                parameters = StdioServerParameters(command=config.command, args=list(config.args), env=config.env or None, cwd=config.cwd)
                async with Client(stdio_client(parameters, errlog=self._stderr), read_timeout_seconds=config.call_timeout) as client:
                    await self._serve(client, ready, closing)
            else:
                assert config.url is not None
                timeout = httpx2.Timeout(config.connect_timeout, read=HTTP_READ_TIMEOUT)
                async with httpx2.AsyncClient(headers=config.headers, timeout=timeout) as http:
                    async with Client(streamable_http_client(config.url, http_client=http), read_timeout_seconds=config.call_timeout) as client:
                        await self._serve(client, ready, closing)
        except BaseException as error:  # reported to connect() while it waits; else the next call finds the connection gone
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else MCPConnectionError(_reason(error)))
            if not isinstance(error, Exception):
                raise
        finally:
            self._client = None

    async def _serve(self, client: Client, ready: asyncio.Future, closing: asyncio.Event) -> None:
        self._client = client
        ready.set_result(None)
        await closing.wait()

    async def list_tools(self) -> list[mcp_types.Tool]:
        """Every tool the server lists, reading all pages of ``tools/list``.

        Raises:
            MCPConnectionError: as :meth:`connect`, or the listing failed.
        """
        if self._elsewhere():
            return await self._on_own_loop(self.list_tools())
        await self.connect()
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            try:
                page = await self._connected_client().list_tools(cursor=cursor)
            except MCPError as error:
                raise MCPConnectionError(self._describe(f"failed to list its tools ({_reason(error)})")) from None
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
            if cursor in seen:  # a server that hands out a cursor twice would page forever
                raise MCPConnectionError(self._describe(f"returned the tools/list cursor {cursor!r} twice"))
            seen.add(cursor)

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call tool ``name`` (its real name on the server) and return its result as a Python value.

        Connects first when needed, so a server that died since the last call is started again.

        Raises:
            MCPToolError: the tool reported an error.
            MCPConnectionError: the server could not be reached, or closed the connection mid-call.
        """
        if self._elsewhere():
            return await self._on_own_loop(self.call(name, arguments))
        await self.connect()
        try:
            result = await self._connected_client().call_tool(name, arguments)
        except MCPError as error:
            if error.error.code == mcp_types.CONNECTION_CLOSED:
                # Not retried: the call may have run before the server went away. The next call
                # starts the server again.
                message = self._describe(f"closed the connection during tool {name!r}; the next call connects again")
                await self._stop_owner()
                raise MCPConnectionError(message) from None
            # The server refused the request itself (unknown tool, invalid arguments...).
            raise MCPToolError(f"MCP server {self.config.label!r} refused the call of tool {name!r}: {error.error.message}") from None
        if result.is_error:
            raise MCPToolError(f"MCP server {self.config.label!r}, tool {name!r}: {result_text(result) or 'the tool failed without a message'}")
        return result_value(result)

    async def aclose(self) -> None:
        """Close the connection (and stop a stdio server); a no-op when not connected."""
        if self._elsewhere():
            return await self._on_own_loop(self.aclose())
        if self._loop is asyncio.get_running_loop():
            await self._stop_owner()
        self._owner = self._client = None
        self._close_stderr()

    async def _stop_owner(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            assert self._closing is not None
            self._closing.set()
            await asyncio.gather(owner, return_exceptions=True)

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _connected_client(self) -> Client:
        if self._client is None:
            raise MCPConnectionError(self._describe("closed the connection"))
        return self._client

    def _elsewhere(self) -> bool:
        """Whether the connection lives on another loop that is still running (requests go there)."""
        return self._loop is not None and self._loop is not asyncio.get_running_loop() and self._loop.is_running() and self._owner is not None

    async def _on_own_loop(self, coroutine: Any) -> Any:
        assert self._loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self._loop))

    def _describe(self, what: str) -> str:
        """``MCP server 'time' <what>``, with the tail of its stderr when there is any."""
        message = f"MCP server {self.config.label!r} {what}"
        tail = self._stderr_tail()
        return f"{message}; its stderr ends with:\n{tail}" if tail else message

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0, 2)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - STDERR_TAIL_CHARS * 4))
            return self._stderr.read()[-STDERR_TAIL_CHARS:].strip()
        except (OSError, ValueError):  # the file is gone or closed: nothing to quote
            return ""

    def __repr__(self) -> str:
        return f"<MCPConnection {self.config.label!r}: {'connected' if self.is_connected else 'not connected'}>"


def result_text(result: mcp_types.CallToolResult) -> str:
    """The text blocks of a tool result, joined by newlines."""
    return "\n".join(block.text for block in result.content if isinstance(block, mcp_types.TextContent))


def result_value(result: mcp_types.CallToolResult) -> Any:
    """A tool result as a Python value.

    - Structured content (a JSON object) is returned as a ``dict``. The MCP Python SDK wraps a tool's
      non-object return value as ``{"result": value}`` next to a text block that is not that object's
      JSON; such a value is returned unwrapped (a tool that returned ``{"result": ...}`` itself has
      that object's JSON as its text, and keeps it).
    - Otherwise, when every content block is text: the text, joined by newlines (``""`` when empty).
    - Otherwise (images, audio, resources): a list of the blocks as JSON dicts.
    """
    structured = result.structured_content
    if structured is not None:
        if isinstance(structured, dict) and list(structured) == ["result"] and _json_or_none(result_text(result)) != structured:
            return structured["result"]
        return structured
    if all(isinstance(block, mcp_types.TextContent) for block in result.content):
        return result_text(result)
    return [json.loads(block.model_dump_json(by_alias=True, exclude_none=True)) for block in result.content]


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _reason(error: BaseException) -> str:
    """``Type: message`` of an error, looking inside the exception groups anyio raises."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_reason(inner) for inner in error.exceptions)
    text = str(error) or "no message"
    return text if isinstance(error, MCPError) else f"{type(error).__name__}: {text}"
