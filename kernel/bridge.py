"""The host end of the bridge: one Unix socket per kernel through which cells call host tools.

Contract:

- The socket lives in the kernel's private directory (mode 0700) and is itself mode 0600; the first
  frame of every connection must carry the kernel's secret token and generation, else the
  connection is refused and closed. A kernel that replaced another has a new socket, token and
  generation, so a call from the previous kernel cannot land.
- Each call runs :meth:`kernel.toolkit.Toolkit.acall` on the loop of the current run (the caller's
  loop, set by CodeMode for every cell), so async transports that live there work; when that loop
  is this bridge's own loop the call simply runs here.
- A call is tagged with the cell that started it (a background task keeps the tag of the cell that
  created it); :meth:`Bridge.cancel_cell` cancels that cell's calls when it is interrupted, and
  :meth:`Bridge.close` cancels every call when the kernel dies or is shut down.
- A result whose frame exceeds ``max_result_bytes`` is not sent: with a result store it is
  offloaded there and the cell gets its id, else the cell gets ``ResultTooLarge``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
from collections.abc import Callable
from typing import Any

from kernel import wire
from kernel.result_store import ResultStore
from kernel.toolkit import ToolExitError, Toolkit, annotation_text, contained

#: Resolves a call's target (``"handle.attribute"``) to its toolkit and the tool's real name.
Lookup = Callable[[str], "tuple[Toolkit, str] | None"]


class Bridge:
    """The bridge of one kernel.

    Args:
        directory: a private directory for the socket (the kernel's own).
        generation: this kernel's generation number; a hello with another one is refused.
        lookup: resolves call targets; consulted at call time, so tools bound later are found.
        max_result_bytes: largest result frame sent to the kernel.
        result_store: where oversized results go; ``None`` makes them ``ResultTooLarge``.
    """

    def __init__(self, directory: str, generation: int, lookup: Lookup, max_result_bytes: int, result_store: ResultStore | None = None):
        self.path = os.path.join(directory, "bridge.sock")
        self.token = secrets.token_hex(32)
        self.generation = generation
        self.lookup = lookup
        self.max_result_bytes = max_result_bytes
        self.result_store = result_store
        #: The loop tool calls run on; ``None`` means the bridge's own loop.
        self.call_loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._calls: dict[tuple[int, Any], tuple[asyncio.Task, str]] = {}
        self._connections: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)
        os.chmod(self.path, 0o600)

    def spec(self) -> dict[str, Any]:
        """What the kernel needs to connect: socket path, token and generation."""
        return {"socket": self.path, "token": self.token, "generation": self.generation}

    def cancel_cell(self, cell_id: str) -> int:
        """Cancel the in-flight calls started by cell ``cell_id``; returns how many were cancelled."""
        tasks = [task for task, cell in self._calls.values() if cell == cell_id and not task.done()]
        for task in tasks:
            task.cancel()
        return len(tasks)

    @property
    def in_flight(self) -> int:
        """How many calls are running now."""
        return sum(not task.done() for task, _ in self._calls.values())

    async def close(self) -> None:
        """Stop accepting connections, cancel every in-flight call and close the connections."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task, _ in list(self._calls.values()):
            task.cancel()
        for writer in list(self._connections):
            writer.close()
        self._calls.clear()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if not await self._admit(reader, writer):
                return
            self._connections.add(writer)
            while True:
                body = await wire.read_frame(reader)
                if body is None:
                    return
                try:
                    message = wire.decode(body)
                except wire.WireError as error:
                    # The envelope of a pickled call names its id even when its arguments cannot be
                    # loaded here: answer that call and keep the connection.
                    self._send(writer, {"op": "error", "id": error.envelope.get("id"), "type": "BridgeError", "message": f"the arguments of {error.envelope.get('target', 'the call')} cannot be loaded in the host: {error}"})
                    continue
                if message["op"] == "call":
                    key = (id(writer), message.get("id"))
                    task = asyncio.create_task(self._call(message, writer, key))
                    self._calls[key] = (task, str(message.get("cell", "")))
                elif message["op"] == "cancel":
                    entry = self._calls.get((id(writer), message.get("id")))
                    if entry is not None:
                        entry[0].cancel()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self._connections.discard(writer)
            writer.close()

    async def _admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read the hello frame; True when its token and generation are this kernel's."""
        try:
            body = await asyncio.wait_for(wire.read_frame(reader), timeout=10)
            hello = wire.decode(body) if body is not None else {}
        except (TimeoutError, wire.WireError, asyncio.IncompleteReadError):
            hello = {}
        if hello.get("op") != "hello" or not secrets.compare_digest(str(hello.get("token", "")), self.token):
            reason = "wrong token: this connection does not belong to the kernel the socket serves"
        elif hello.get("generation") != self.generation:
            reason = f"call from kernel generation {hello.get('generation')!r}, but this socket serves generation {self.generation}"
        else:
            self._send(writer, {"op": "welcome"})
            return True
        self._send(writer, {"op": "refused", "reason": reason})
        await writer.drain()
        return False

    async def _call(self, message: dict[str, Any], writer: asyncio.StreamWriter, key: tuple[int, Any]) -> None:
        call_id, target = message.get("id"), str(message.get("target", ""))
        try:
            found = self.lookup(target)
            if found is None:
                self._send(writer, {"op": "error", "id": call_id, "type": "LookupError", "message": f"no host tool is bound as {target!r}; it may have been removed: list the handles with dir()"})
                return
            toolkit, name = found
            call = contained(toolkit.acall(name, message.get("args") or (), message.get("kwargs") or {}))
            loop = self.call_loop
            if loop is None or loop is asyncio.get_running_loop() or loop.is_closed() or not loop.is_running():
                value = await call
            else:
                value = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, loop))
            self._send_result(writer, call_id, f"{toolkit.name}.{name}", value)
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                return  # the kernel asked for it (interrupted cell) or the kernel is gone: nobody awaits a reply
            self._send(writer, _error_message(call_id, ToolExitError("the tool raised CancelledError")))
        except Exception as error:  # a tool's exception is the cell's exception
            self._send(writer, _error_message(call_id, error))
        finally:
            self._calls.pop(key, None)

    def _send_result(self, writer: asyncio.StreamWriter, call_id: Any, tool: str, value: Any) -> None:
        try:
            frame = wire.encode({"op": "result", "id": call_id, "value": value})
        except (wire.WireError, ValueError, RecursionError) as error:  # json refuses huge ints, deep nesting
            self._send(writer, {"op": "error", "id": call_id, "type": "BridgeError", "message": f"the result of {tool} (type {type(value).__name__}) cannot cross the bridge: {error}; return JSON-like data, or bind the tool in-kernel"})
            return
        if len(frame) <= self.max_result_bytes:
            if not writer.is_closing():
                writer.write(frame)
            return
        if self.result_store is None:
            ways_out = "ask the tool for less (filter or paginate), enable result offloading (CodeMode(offload_results=True)), or raise max_result_bytes"
            self._send(writer, {"op": "error", "id": call_id, "type": "ResultTooLarge", "message": f"the result of {tool} is {len(frame):,} bytes, over max_result_bytes={self.max_result_bytes:,}; {ways_out}"})
            return
        result_id = self.result_store.put(wire.encode({"op": "value", "value": value})[4:], tool, type(value).__name__)
        self._send(writer, {"op": "offloaded", "id": call_id, "result_id": result_id, "size": len(frame), "type": type(value).__name__, "tool": tool})

    @staticmethod
    def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        if not writer.is_closing():
            writer.write(wire.encode(message))


def _text(error: BaseException) -> str:
    try:
        return str(error.args[0]) if isinstance(error, KeyError) and len(error.args) == 1 else str(error)
    except Exception:  # an exception whose __str__ fails still deserves a reply
        return f"<{type(error).__name__} whose message cannot be shown>"


def _error_message(call_id: Any, error: BaseException) -> dict[str, Any]:
    """The reply for a call that raised: its type, the nearest built-in type it derives from (so the
    kernel can raise something ``except ValueError`` still catches) and its message."""
    builtin = next((kind.__name__ for kind in type(error).__mro__ if kind.__module__ == "builtins"), "Exception")
    return {"op": "error", "id": call_id, "type": type(error).__name__, "builtin": builtin, "message": _text(error)}


def toolkit_spec(toolkit: Toolkit, attributes: dict[str, str], error: str = "") -> dict[str, Any]:
    """How the kernel should bind ``toolkit`` (the JSON :func:`kernel.bridge_client.install` reads).

    Args:
        toolkit: the toolkit.
        attributes: ``{attribute: tool real name}`` from :class:`kernel.bindings.Bindings`.
        error: why the whole toolkit cannot be bound (its handle then raises it on every access).
    """
    if error:
        return {"name": toolkit.name, "error": error}
    functions = {}
    for attribute, name in attributes.items():
        tool = toolkit.functions[name]
        entry: dict[str, Any] = {"name": name, "doc": tool.description, "refusal": tool.pause_reason, "error": tool.load_error}
        if tool.signature is not None:
            entry["parameters"] = [_parameter_spec(parameter) for parameter in tool.signature.parameters.values()]
            entry["returns"] = annotation_text(tool.signature.return_annotation)
        functions[attribute] = entry
    return {"name": toolkit.name, "functions": functions}


def _parameter_spec(parameter: inspect.Parameter) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": parameter.name, "kind": parameter.kind.name, "annotation": annotation_text(parameter.annotation)}
    if parameter.default is not inspect.Parameter.empty:
        if wire.is_json_value(parameter.default):
            spec["value"] = parameter.default
        else:
            spec["default_repr"] = repr(parameter.default)
    return spec
