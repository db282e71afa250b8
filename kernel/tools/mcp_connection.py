"""One connection to an MCP server, owned by one task, through the official ``mcp`` SDK's ``Client``.

Why a task owns it: the SDK's ``Client`` is an anyio context manager whose task group and cancel
scopes belong to the task that entered it; leaving it from another task fails. A toolkit is
connected on one task (a run's first cell) and closed on another (whoever ends the run), so
:meth:`MCPConnection.connect` starts an *owner* task that enters the client, waits until it is told
to close, and leaves it. Requests (listing tools, calling one) may come from any task on the owner's
event loop; one from another loop is sent to the owner's loop and awaited there.

Contract:

- ``connect()`` starts or reaches the server, completes the handshake and lists every tool (all
  pages of ``tools/list``), all within ``connect_timeout`` seconds, or stops the server again and
  raises. It is idempotent, and connects again when the server has closed the connection.
- A call after ``PROBE_AFTER_IDLE`` seconds without traffic first asks the server for the first
  page of its tools (MCP's ``ping`` is gone as of protocol 2026-07-28; a listing has no side
  effects), so a server that died while idle is started again and the call goes through. A server
  that dies *during* a call fails that call (it is not retried: it may have run), and the next call
  starts it again.
- Failures raise :class:`MCPConnectionError` naming the server, with the last lines the server wrote
  to stderr (stdio servers: their stderr goes to a private temporary file, not to ours). A tool
  result with ``isError``, or a call the server refuses, raises :class:`MCPToolError`; a call over
  ``call_timeout`` raises ``TimeoutError``. Otherwise the result becomes a Python value (see
  :func:`result_value`).
- A stdio server's answer over ``max_message_bytes`` is refused as soon as that much has been read
  (:class:`MCPToolError`), and the rest is discarded as it arrives (see :mod:`toolpath.kernel.tools.mcp_stdio`);
  its server is started so that it dies with this process (:mod:`toolpath.kernel.tools.mcp_launcher`).
- ``aclose()`` ends the owner task (and so the server process of a stdio server) and waits for it.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from typing import Any

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolpath.errors import ToolpathError
from toolpath.kernel.tools.mcp_stdio import DEFAULT_MAX_MESSAGE_BYTES, MESSAGE_TOO_LARGE, StdioTransport
from toolpath.registry.mcp_servers import MCPServerConfig

#: Characters of a server's stderr quoted in an error (its last lines).
STDERR_TAIL_CHARS = 2000
#: Seconds an HTTP request may wait for the server's response stream: the MCP SDK's own default,
#: since a Streamable HTTP server may hold a response open while a tool runs.
HTTP_READ_TIMEOUT = 300.0
#: Seconds without traffic after which a call first checks that the server is still there (one
#: round trip of about a millisecond over stdio, paid only after a pause, when it cannot matter).
PROBE_AFTER_IDLE = 1.0
#: Seconds a closing server gets to leave the SDK's client cleanly before its task is cancelled.
CLOSE_GRACE = 5.0


class MCPConnectionError(ToolpathError, RuntimeError):
    """The MCP server could not be started, reached or listed, or it closed the connection."""


class MCPToolError(ToolpathError, RuntimeError):
    """The MCP server reported an error for a tool call (``isError``), or refused the call; the
    message is the server's."""


class MCPConnection:
    """A connection to the MCP server ``config`` describes (not opened until :meth:`connect`).

    Args:
        config: the server; ``${NAME}`` in its values is read from the environment at each connect.
        max_message_bytes: the longest message read whole from a stdio server, in bytes; a longer
            answer to a call raises :class:`MCPToolError` once that much is read.
    """

    def __init__(self, config: MCPServerConfig, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        self.config = config
        self.max_message_bytes = max_message_bytes
        self._transport: StdioTransport | None = None
        self._client: Client | None = None
        self._tools: dict[str, mcp_types.Tool] = {}
        self._owner: asyncio.Task | None = None
        self._closing: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stderr: Any = None
        self._lock: asyncio.Lock | None = None
        self._last_traffic = 0.0

    @property
    def is_connected(self) -> bool:
        return self._client is not None and self._owner is not None and not self._owner.done()

    @property
    def server_name(self) -> str | None:
        """The name the connected server gives itself (``serverInfo.name``), if it gave one."""
        info = self._client.server_info if self._client is not None else None
        return info.name if info is not None else None

    @property
    def tools(self) -> list[mcp_types.Tool]:
        """The tools the server listed when it was last connected (empty before that)."""
        return list(self._tools.values())

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the connection lives on (``None`` before the first connect)."""
        return self._loop

    async def connect(self) -> None:
        """Start (or reach) the server, complete the MCP handshake and list its tools, unless connected.

        Raises:
            MCPConnectionError: the server could not be started, reached or listed within
                ``config.connect_timeout`` seconds (it is stopped again), or its configuration names
                an environment variable (``${NAME}``) that is not set.
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
            except (KeyError, ValueError) as error:  # an unset ${NAME}, or a URL that is none once read
                raise MCPConnectionError(error.args[0] if isinstance(error, KeyError) else f"MCP server {self.config.label!r}: {_reason(error)}") from None
            ready: asyncio.Future = loop.create_future()
            self._closing = asyncio.Event()
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") if config.command is not None else None
            self._owner = asyncio.create_task(self._own(config, ready, self._closing), name=f"toolpath-mcp-{self.config.label}")
            try:
                async with asyncio.timeout(self.config.connect_timeout):
                    await asyncio.shield(ready)
                    self._tools = await self._list_all()
            except BaseException as error:
                ready.cancel()  # the owner reports nothing more to anyone
                await self._stop_owner(cancel=True)  # first, so a stdio server has exited and its stderr is complete
                if isinstance(error, TimeoutError):
                    raise MCPConnectionError(
                        self._describe(f"did not start, answer and list its tools within {self.config.connect_timeout:g} s (connect_timeout)")
                    ) from None
                if isinstance(error, MCPConnectionError) or not isinstance(error, Exception):
                    raise
                raise MCPConnectionError(self._describe(f"could not be started or reached ({_reason(error)})")) from None
            self._last_traffic = time.monotonic()

    async def _own(self, config: MCPServerConfig, ready: asyncio.Future, closing: asyncio.Event) -> None:
        """The owner task: enter the client, report ready, wait for ``closing``, leave the client."""
        try:
            if config.command is not None:
                parameters = StdioServerParameters(command=config.command, args=list(config.args), env=config.env or None, cwd=config.cwd)
                self._transport = StdioTransport(parameters, self._stderr, self.max_message_bytes)
                async with Client(self._transport.open(), read_timeout_seconds=config.call_timeout) as client:
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
        if not ready.done():
            ready.set_result(None)
        await closing.wait()

    async def _list_all(self) -> dict[str, mcp_types.Tool]:
        """Every tool of every ``tools/list`` page, by name."""
        tools: dict[str, mcp_types.Tool] = {}
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            try:
                page = await self._connected_client().list_tools(cursor=cursor)
            except (MCPError, ValidationError) as error:
                raise MCPConnectionError(self._describe(f"failed to list its tools ({_reason(error)})")) from None
            tools.update((tool.name, tool) for tool in page.tools)
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
            MCPToolError: the tool reported an error, the server refused the call, or lists no such tool.
            TimeoutError: no answer within ``config.call_timeout`` seconds.
            MCPConnectionError: the server could not be reached, or closed the connection mid-call.
        """
        if self._elsewhere():
            return await self._on_own_loop(self.call(name, arguments))
        await self.connect()
        if time.monotonic() - self._last_traffic > PROBE_AFTER_IDLE:
            await self._check_alive()
        if name not in self._tools:
            self._tools = await self._list_all()  # a server may add tools after it was listed
            if name not in self._tools:
                raise MCPToolError(f"MCP server {self.config.label!r} lists no tool {name!r}; it lists {', '.join(sorted(self._tools)) or 'none'}")
        try:
            result = await self._connected_client().call_tool(name, arguments)
        except MCPError as error:
            if error.error.code == mcp_types.CONNECTION_CLOSED:
                reset = self._transport.reset_reason if self._transport is not None else None
                closed = reset or "closed the connection"
                message = self._describe(f"{closed} during tool {name!r}; the next call connects again")
                await self._stop_owner(cancel=True)
                raise MCPConnectionError(message) from None
            if error.error.code == mcp_types.REQUEST_TIMEOUT:
                raise TimeoutError(f"MCP server {self.config.label!r}, tool {name!r}: no answer within {self.config.call_timeout:g} s (call_timeout)") from None
            if isinstance(error.error.data, dict) and error.error.data.get("reason") == MESSAGE_TOO_LARGE:
                raise MCPToolError(
                    f"MCP server {self.config.label!r}, tool {name!r}: its answer is over max_message_bytes={self.max_message_bytes:,} bytes; "
                    "toolpath stopped reading it there (the rest is discarded as the server sends it; the connection stays open). "
                    "Ask the tool for less (filter or paginate), or raise MCPToolkit(max_message_bytes=...)"
                ) from None
            raise MCPToolError(f"MCP server {self.config.label!r} refused the call of tool {name!r}: {error.error.message}") from None
        finally:
            self._last_traffic = time.monotonic()
        if result.is_error:
            raise MCPToolError(f"MCP server {self.config.label!r}, tool {name!r}: {result_text(result) or 'the tool failed without a message'}")
        return result_value(result)

    async def _check_alive(self) -> None:
        """Connect again if the server has gone; any other answer (an error included) means it is there."""
        try:
            await self._connected_client().list_tools(cache_mode="bypass")
        except MCPError as error:
            if error.error.code != mcp_types.CONNECTION_CLOSED:
                return
            await self._stop_owner(cancel=True)
            await self.connect()
        except ValidationError:  # a reply the SDK refused: still a reply
            return

    async def aclose(self) -> None:
        """Close the connection (and stop a stdio server); a no-op when not connected."""
        if self._elsewhere():
            return await self._on_own_loop(self.aclose())
        if self._loop is asyncio.get_running_loop():
            await self._stop_owner()
        self._owner = self._client = None
        self._close_stderr()

    async def _stop_owner(self, cancel: bool = False) -> None:
        """End the owner task: ask it to leave the client (or cancel it, for one that may be stuck
        starting a server), and cancel it anyway after :data:`CLOSE_GRACE` seconds."""
        owner, self._owner = self._owner, None
        if owner is None:
            return
        assert self._closing is not None
        self._closing.set()
        if cancel:
            owner.cancel()
        done, _ = await asyncio.wait({owner}, timeout=CLOSE_GRACE)
        if not done:
            owner.cancel()
            await asyncio.wait({owner}, timeout=CLOSE_GRACE)
        if owner.done() and not owner.cancelled():
            owner.exception()  # retrieved: what it raised was reported to connect() or by the failed call

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
    """``Type: message`` of an error, looking inside the exception groups anyio raises, and
    summing up a validation error (a reply the SDK refused, a configuration) in one line."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_reason(inner) for inner in error.exceptions)
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the value"
        return f"{error.error_count()} invalid value(s), the first at {where}: {first['msg']}"
    text = str(error) or "no message"
    return text if isinstance(error, MCPError) else f"{type(error).__name__}: {text}"
