"""Host handles inside the kernel (this module is imported *in the kernel process*).

CodeMode calls :func:`install` in every kernel with the bridge's address and a description of each
host toolkit; a cell then reaches a toolkit through its handle (``await inventory.stock_level("x")``)
or through :func:`host_toolkit`, which planned cells use. Each call is one frame to the host over the
kernel's Unix socket, or over TLS to the host's TCP endpoint for a kernel on another host
(:mod:`toolpath.kernel.inside.wire`); many calls share one connection and may be in flight at
once, so ``asyncio.gather`` over a thousand calls costs a thousand round trips' worth of bytes, not
of latency.

What the cell sees:

- the tool's real signature and docstring (``help(inventory.stock_level)`` works);
- the tool's exception, re-raised as the same built-in type (or :class:`ToolError` for other
  types) with a note naming the tool;
- :class:`ResultTooLarge` for a result over the host's ``max_result_bytes``, or an
  :class:`OffloadedResult` to read back with ``await results.get(id)`` when offloading is on;
- ``KeyboardInterrupt`` when the cell is interrupted; the host is told to cancel the call.
- A tool that would pause the run raises ``ToolPausedError`` without contacting the host.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import itertools
import json
import ssl
from collections.abc import Callable
from typing import Any

from toolpath.errors import ToolpathError
from toolpath.kernel.inside import call_traces, wire
from toolpath.kernel.inside.approval_policy import ApprovalDenied, ApprovalPending, ApprovalRequest, ApprovalTimeout
from toolpath.kernel.inside.handles import ask_host_with, awaitable, current_cell, track_cells
from toolpath.kernel.inside.http_results import HttpToolError
from toolpath.kernel.inside.protocol import MAX_FRAME_BYTES, SEARCH_ATTRIBUTE
from toolpath.kernel.inside.tool_calls import ShownText, ToolExitError, ToolPausedError

#: Tools named in a message about a missing one; a handle may have thousands.
LISTED_IN_ERRORS = 50
#: Characters of a tool's first docstring line that a search shows.
SUMMARY_CHARS = 300


class BridgeError(ToolpathError, RuntimeError):
    """The call could not cross the bridge (connection refused or lost, value not transferable)."""


class ToolError(ToolpathError, RuntimeError):
    """A host tool raised an exception whose type is not a Python built-in; the message names it."""


class ResultTooLarge(ToolpathError, RuntimeError):
    """The tool's result is over the host's ``max_result_bytes``; the message names the ways out."""


class OffloadedResult:
    """A result too large for the bridge, kept in toolpath's SQLite file; read it with ``await results.get(id)``."""

    def __init__(self, result_id: str, size: int, type_name: str, tool: str):
        self.id, self.size, self.type, self.tool = result_id, size, type_name, tool

    def __repr__(self) -> str:
        return f"<offloaded result {self.id!r} of {self.tool}: a {self.type} of {self.size:,} bytes; read it with `await results.get({self.id!r})`>"


class _Connection:
    """One connection to the host on one event loop, with the calls waiting for replies."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_frame_bytes: int):
        self.reader, self.writer = reader, writer
        self.max_frame_bytes = max_frame_bytes
        self.pending: dict[int, asyncio.Future] = {}
        #: Why no new call may use this connection ("" while it may).
        self.closed_reason = ""
        self.reader_task = asyncio.get_running_loop().create_task(self._read_replies())

    async def _read_replies(self) -> None:
        reason = "the host closed the bridge (the CodeMode run ended or the kernel is being replaced)"
        try:
            while True:
                body = await wire.read_frame(self.reader, self.max_frame_bytes)
                if body is None:
                    break
                try:
                    message = wire.decode(body)
                except wire.WireError as error:
                    message = {
                        "op": "error",
                        "id": error.envelope.get("id"),
                        "type": "BridgeError",
                        "message": f"the result cannot be loaded in the kernel: {error}",
                    }
                if message.get("op") == "closing":
                    # The host answers the calls in flight, then hangs up; new calls open a new connection.
                    self.closed_reason = reason = f"the host closed this bridge connection: {message.get('reason')}"
                    continue
                call_id = message.get("id")
                future = self.pending.pop(call_id, None) if type(call_id) is int else None
                if future is not None and not future.done():
                    future.set_result(message)
        except (ConnectionError, asyncio.IncompleteReadError, wire.FrameTooLarge) as error:
            reason = f"the bridge connection was lost ({error})"
        finally:
            self.closed_reason = reason
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(BridgeError(reason))
            self.pending.clear()


def client_context(certificate: str) -> ssl.SSLContext:
    """A TLS context that trusts exactly ``certificate`` (PEM, the host's bridge certificate or chain)
    and checks that it names the host connected to."""
    context = ssl.create_default_context(cadata=certificate)
    # The pinned certificate is itself the trust anchor, whether self-signed or issued by a CA the
    # kernel does not know.
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


class BridgeClient:
    """The kernel's end of the bridge: connects on first use, on the loop that makes the call.

    Args:
        endpoint: the host's Unix socket (a local kernel), or ``(host, port, certificate PEM)`` of
            its TLS endpoint (a kernel on another host).
        token, generation: what the hello carries.
        max_frame_bytes: largest frame either end accepts (:func:`toolpath.kernel.inside.wire.frame_limit`); a call
            whose arguments would exceed it raises :class:`BridgeError` without being sent.
        json_only: the host refuses pickled arguments; a call with non-JSON arguments raises
            :class:`BridgeError` without being sent.
    """

    def __init__(self, endpoint: str | tuple[str, int, str], token: str, generation: int, max_frame_bytes: int = MAX_FRAME_BYTES, json_only: bool = False):
        self.endpoint, self.token, self.generation = endpoint, token, generation
        self.max_frame_bytes, self.json_only = max_frame_bytes, json_only
        self._ids = itertools.count(1)
        self._connections: dict[asyncio.AbstractEventLoop, asyncio.Task] = {}

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        # A cell may run a short-lived loop per call (asyncio.run in a thread): forget the
        # connections of closed loops, so their sockets are released rather than kept for good.
        for closed in [other for other in self._connections if other.is_closed()]:
            del self._connections[closed]
        opening = self._connections.get(loop)
        if opening is not None and opening.done() and (opening.exception() is not None or opening.result().closed_reason):
            opening = None
        if opening is None:
            opening = self._connections[loop] = loop.create_task(self._open())
        return await asyncio.shield(opening)

    async def _open(self) -> _Connection:
        try:
            if isinstance(self.endpoint, str):
                reader, writer = await asyncio.open_unix_connection(self.endpoint)
            else:
                host, port, certificate = self.endpoint
                reader, writer = await asyncio.open_connection(host, port, ssl=client_context(certificate), server_hostname=host, ssl_handshake_timeout=30)
        except (OSError, TimeoutError) as error:
            where = self.endpoint if isinstance(self.endpoint, str) else f"{self.endpoint[0]}:{self.endpoint[1]}"
            raise BridgeError(
                f"cannot reach the host bridge at {where} ({error}); check that this kernel's host can reach that address (CodeMode's bridge_address), or restart the kernel"
            ) from None
        writer.write(wire.encode({"op": "hello", "token": self.token, "generation": self.generation}))
        try:
            body = await wire.read_frame(reader, self.max_frame_bytes)
            answer = wire.decode(body) if body is not None else {"op": "refused", "reason": "the host closed the connection"}
        except (ConnectionError, asyncio.IncompleteReadError, wire.WireError) as error:
            answer = {"op": "refused", "reason": f"the host's answer could not be read ({error})"}
        if answer.get("op") != "welcome":
            writer.close()
            raise BridgeError(f"the host refused the bridge connection: {answer.get('reason', answer)}")
        return _Connection(reader, writer, self.max_frame_bytes)

    def close(self) -> None:
        """Drop every connection (their waiting calls fail with :class:`BridgeError`)."""
        for opening in self._connections.values():
            if opening.done() and opening.exception() is None:
                connection = opening.result()
                connection.writer.close()
                connection.reader_task.cancel()
            else:
                opening.cancel()
        self._connections.clear()

    def _frame(self, target: str, call_id: int, args: tuple, kwargs: dict[str, Any]) -> bytes:
        """The call's frame, or :class:`BridgeError` saying why the host would refuse it."""
        message = {"op": "call", "id": call_id, "target": target, "args": list(args), "kwargs": kwargs, "cell": current_cell()}
        trace = call_traces.bridge_fields()
        if trace is not None:  # the host's span of the call joins the cell's trace
            message["trace"] = trace
        # A kernel on another host shares no files with the host: a path would not help there.
        on_host = isinstance(self.endpoint, str)
        if self.json_only and not wire.is_json_value(message):
            by_file = ", or save the data to a file and pass its path" if on_host else ""
            raise BridgeError(
                f"the arguments of {target} are not JSON values, and the host accepts JSON only from this kernel (CodeMode's accept_pickles is off, as it is by default for kernels on other hosts); pass str, int, float, bool, None, lists and dicts with string keys{by_file}"
            )
        try:
            frame = wire.encode(message)
        except wire.WireError as error:
            raise BridgeError(f"the arguments of {target} cannot cross the bridge: {error}") from None
        if len(frame) - 4 > self.max_frame_bytes:
            ways_out = (
                "save the data to a file and pass its path, or raise CodeMode(max_result_bytes=...)"
                if on_host
                else "pass less, or raise CodeMode(max_result_bytes=...)"
            )
            raise BridgeError(
                f"the arguments of {target} are {len(frame) - 4:,} bytes, over the bridge's limit of {self.max_frame_bytes:,} (max_result_bytes + 64 KiB); {ways_out}"
            )
        return frame

    async def call(self, target: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        """Call host tool ``target`` (``"handle.attribute"``) and return its result (see the module docstring)."""
        __tracebackhide__ = True
        call_id = next(self._ids)
        return await self._exchange(call_id, self._frame(target, call_id, args, kwargs), f"host tool {target}")

    async def approve(self, request: ApprovalRequest) -> None:
        """Wait for the host's approver to approve ``request`` (a call of a tool bound in this kernel).

        Raises:
            ApprovalDenied, ApprovalTimeout: as the host's gate decided.
        """
        __tracebackhide__ = True
        call_id = next(self._ids)
        message = {"op": "approve", "id": call_id, "tool": request.tool, "arguments": request.arguments, "reason": request.reason}
        frame = wire.encode({**message, "digest": request.digest, "cell": current_cell()})
        await self._exchange(call_id, frame, f"the host's approver, for {request.tool}")

    async def _exchange(self, call_id: int, frame: bytes, source: str) -> Any:
        """Send ``frame`` and return the unpacked reply to ``call_id``; a cancelled wait cancels it on
        the host. An error reply is raised noting ``source`` (what raised it on the host)."""
        __tracebackhide__ = True
        connection = await self._connection()
        future = asyncio.get_running_loop().create_future()
        connection.pending[call_id] = future
        connection.writer.write(frame)
        try:
            reply = await future
        except asyncio.CancelledError:
            connection.pending.pop(call_id, None)
            if not connection.writer.is_closing():
                connection.writer.write(wire.encode({"op": "cancel", "id": call_id}))
            raise
        return _unpack(reply, source)


def _unpack(reply: dict[str, Any], source: str) -> Any:
    __tracebackhide__ = True
    op = reply["op"]
    if op == "result":
        return reply.get("value")
    if op == "offloaded":
        return OffloadedResult(reply["result_id"], reply["size"], reply["type"], reply["tool"])
    raise _exception(str(reply.get("type", "Error")), str(reply.get("builtin", "")), str(reply.get("message", "")), source)


def _exception(type_name: str, builtin: str, message: str, source: str) -> BaseException:
    """The tool's exception as the cell sees it: its own type when the kernel knows it, else the
    nearest built-in type it derives from (``class MyError(ValueError)`` → ``ValueError``), noting
    ``source`` ("host tool inventory.reject")."""
    known = {
        "ResultTooLarge": ResultTooLarge,
        "BridgeError": BridgeError,
        "ToolPausedError": ToolPausedError,
        "ToolExitError": ToolExitError,
        "ApprovalDenied": ApprovalDenied,
        "ApprovalTimeout": ApprovalTimeout,
        "ApprovalPending": ApprovalPending,
        "HttpToolError": HttpToolError,
    }
    own = known.get(type_name) or getattr(builtins, type_name, None)
    # Its own type first; the nearest built-in next (a built-in like UnicodeDecodeError cannot be
    # built from a message alone, and the host names one that can).
    candidates = [(own, message), (getattr(builtins, builtin, None), f"{type_name}: {message}")]
    error: BaseException = ToolError(f"{type_name}: {message}")
    for kind, text in candidates:
        if isinstance(kind, type) and issubclass(kind, Exception) and kind is not Exception:
            try:
                error = kind(text)
            except TypeError:
                continue
            break
    error.add_note(f"(raised by {source})")
    return error


class HostHandle:
    """The handle of one host toolkit: attribute ``x`` is the awaitable tool bound as ``x``, and
    ``search_tools(query, k=10)`` finds its tools by words (unless a tool is bound as ``search_tools``:
    the tool wins)."""

    def __init__(self, toolkit: str, functions: dict[str, Callable[..., Any]], handle: str | None = None):
        self._toolkit = toolkit
        self._functions = functions
        self._handle = handle or toolkit
        self._search: Any = None

    def __getattr__(self, attribute: str) -> Callable[..., Any]:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        try:
            return self._functions[attribute]
        except KeyError:
            if attribute == SEARCH_ATTRIBUTE:
                return self._search_tools
            raise AttributeError(f"{self._toolkit} has no tool {attribute!r}; {self._some_tools()}") from None

    def _some_tools(self) -> str:
        """The bound tools, for a message: all of them, or the first few and how to find the others."""
        names = sorted(self._functions)
        if len(names) <= LISTED_IN_ERRORS:
            return f"bound tools: {', '.join(names) or 'none'}"
        return f"it has {len(names):,} tools, the first: {', '.join(names[:LISTED_IN_ERRORS])}; find others with {self._handle}.search_tools('words') or dir({self._handle})"

    def _search_tools(self, query: str, k: int = 10) -> list[str]:
        """The ``k`` tools of this handle that best match ``query`` in their names and docstrings
        (BM25), best first, as ``handle.tool(signature): first docstring line``; only tools that share
        a word with ``query``, so possibly none.

        Raises:
            TypeError: ``query`` is not a string, or ``k`` not a whole number.
            ValueError: ``k`` below 1.
        """
        if not isinstance(query, str) or isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"search_tools(query: str, k: int = 10), got query={query!r}, k={k!r}")
        if k < 1:
            raise ValueError(f"search_tools: k is how many tools to return, at least 1, got {k}")
        if self._search is None:
            from toolpath.kernel.inside.tool_search import ToolSearch  # bm25s: imported by the first search only

            self._search = ToolSearch({attribute: function.__doc__ or "" for attribute, function in self._functions.items()})
        return [self._shown(attribute) for attribute in self._search.search(query, k)]

    def _shown(self, attribute: str) -> str:
        function = self._functions[attribute]
        summary = (inspect.cleandoc(function.__doc__).split("\n", 1)[0] if function.__doc__ else "")[:SUMMARY_CHARS]
        return f"{self._handle}.{attribute}{inspect.signature(function)}" + (f": {summary}" if summary else "")

    def __dir__(self) -> list[str]:
        return sorted(self._functions)

    def __repr__(self) -> str:
        return f"<toolpath host handle {self._toolkit}: {', '.join(sorted(self._functions))}>"


class FailedHandle:
    """Stands in for a toolkit that could not be bound: every public attribute raises ``RuntimeError``."""

    def __init__(self, toolkit: str, error: str):
        self._toolkit = toolkit
        self._error = error

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        raise RuntimeError(f"toolkit {self._toolkit!r} is unavailable in this kernel: {self._error}")

    def __dir__(self) -> list[str]:
        return []

    def __repr__(self) -> str:
        return f"<toolpath handle {self._toolkit}: unavailable ({self._error})>"


class ResultsHandle:
    """``results``: reads offloaded results straight from toolpath's SQLite file."""

    def __init__(self, path: str):
        self._path = path

    async def get(self, result_id: str) -> Any:
        """The offloaded value with id ``result_id`` (``KeyError`` if there is none)."""
        from toolpath.kernel.inside.result_store import ResultStore

        return await asyncio.to_thread(ResultStore(self._path).get, result_id)

    async def delete(self, result_id: str) -> None:
        """Forget an offloaded value once it has been read."""
        from toolpath.kernel.inside.result_store import ResultStore

        await asyncio.to_thread(ResultStore(self._path).delete, result_id)

    def __repr__(self) -> str:
        return f"<toolpath results in {self._path}: await results.get(id)>"


def _signature(parameters: list[dict[str, Any]], returns: str | None) -> inspect.Signature:
    built = []
    for parameter in parameters:
        default: Any = inspect.Parameter.empty
        if "value" in parameter:
            default = parameter["value"]
        elif "default_repr" in parameter:
            default = ShownText(parameter["default_repr"])
        annotation = ShownText(parameter["annotation"]) if parameter.get("annotation") else inspect.Parameter.empty
        built.append(inspect.Parameter(parameter["name"], getattr(inspect.Parameter, parameter["kind"]), default=default, annotation=annotation))
    return inspect.Signature(built, return_annotation=ShownText(returns) if returns else inspect.Signature.empty)


def _function(client: BridgeClient, toolkit: str, handle: str, attribute: str, spec: dict[str, Any]) -> Callable[..., Any]:
    target, wire_name = f"{handle}.{attribute}", spec["name"]
    if spec.get("refusal"):
        message = f"tool {wire_name!r} of {toolkit} {spec['refusal']}, so it cannot run inside a cell; ask for it as a regular tool call instead"

        async def function(*args: Any, **kwargs: Any) -> Any:
            raise ToolPausedError(message)

    elif spec.get("error"):
        message = f"tool {wire_name!r} of {toolkit} is unavailable: {spec['error']}"

        async def function(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(message)

    else:

        async def function(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            return await client.call(target, args, kwargs)

    function.__name__ = function.__qualname__ = attribute
    function.__module__ = toolkit
    function.__doc__ = spec.get("doc") or None
    if spec.get("parameters") is not None:
        function.__signature__ = _signature(spec["parameters"], spec.get("returns"))  # type: ignore[attr-defined]
    return awaitable(function, name=attribute, wire_name=wire_name, target=target, retry=spec.get("retry"), server=toolkit)


_installed: dict[str, Any] = {}
_results: ResultsHandle | None = None
#: Why there is no ``results`` handle.
_results_off = ""
_client: BridgeClient | None = None


def install(spec: str) -> None:
    """Bind the host toolkits described by ``spec`` (JSON written by CodeMode); replaces earlier ones.

    The handles are then available through :func:`host_toolkit`, and the ``results`` handle through
    :func:`results_handle` when offloading is on.
    """
    global _client, _results, _results_off
    track_cells()
    data = json.loads(spec)
    endpoint = data["socket"] if "socket" in data else (data["address"][0], data["address"][1], data["certificate"])
    address = (endpoint, data["token"], data["generation"], data["max_frame_bytes"], data["json_only"])
    if _client is None or (_client.endpoint, _client.token, _client.generation, _client.max_frame_bytes, _client.json_only) != address:
        if _client is not None:
            _client.close()
        _client = BridgeClient(*address)
    client = _client
    ask_host_with(client.approve)
    handles: dict[str, Any] = {}
    for handle, toolkit in data["toolkits"].items():
        if toolkit.get("error"):
            handles[toolkit["name"]] = FailedHandle(toolkit["name"], toolkit["error"])
            continue
        functions = {attribute: _function(client, toolkit["name"], handle, attribute, function) for attribute, function in toolkit["functions"].items()}
        handles[toolkit["name"]] = HostHandle(toolkit["name"], functions, handle)
    _installed.clear()
    _installed.update(handles)
    _results = ResultsHandle(data["results"]) if data.get("results") else None
    _results_off = data.get("results_off") or "result offloading is off; enable it with CodeMode(offload_results=True)"


def host_toolkit(name: str) -> Any:
    """The handle of host toolkit ``name``; a :class:`FailedHandle` explaining why when it is not bound."""
    handle = _installed.get(name)
    if handle is None:
        bound = ", ".join(sorted(_installed)) or "none"
        return FailedHandle(name, f"it is not bound in this kernel (bound toolkits: {bound}); pass it to CodeMode(tools=[...])")
    return handle


def results_handle() -> ResultsHandle | FailedHandle:
    """The ``results`` handle for offloaded results, or a :class:`FailedHandle` when offloading is off."""
    return _results if _results is not None else FailedHandle("results", _results_off)
