"""The host end of the bridge, through which cells call host tools.

A local kernel gets its own Unix socket; kernels on other hosts share one TCP endpoint per CodeMode
(:class:`BridgeListener`), served over TLS with a certificate the kernel pins.

Contract:

- A Unix socket lives in the kernel's private directory (mode 0700) and is itself mode 0600, so only
  this user's processes can connect. A TCP connection must complete a TLS handshake within 10
  seconds; its hello names the kernel's generation, which picks the kernel's bridge, and must carry
  that kernel's token. The first frame of every connection must be the hello: JSON
  only, at most :data:`toolpath.kernel.inside.protocol.MAX_HELLO_BYTES`, exactly ``{op, token, generation}`` with the
  kernel's secret token and generation, read within 10 seconds. Anything else is refused and the
  connection closed; nothing of an unauthenticated peer is unpickled or buffered beyond 4 kB. A
  kernel that replaced another has a new socket, token and generation, so a call from the previous
  kernel cannot land.
- After the hello, frames are at most :func:`toolpath.kernel.inside.wire.frame_limit` of ``max_result_bytes``. A
  longer announced length is refused at once: the host answers ``closing``, reads nothing more on
  that connection, lets its in-flight calls finish and reply, then closes it; the kernel's next call
  opens a new connection, so the session goes on.
- A malformed message (bad codec or JSON, a call id that is not an integer or string, a non-string
  target, arguments that are not a list and a mapping of names, an unknown ``op``, an id already in
  flight) gets an ``error`` reply saying what is wrong; nothing of it runs.
- Call arguments may be pickles (how a DataFrame reaches a host tool): a cell already runs code as
  this user, so this gives a local kernel no new power. ``accept_pickles=False`` refuses them, for
  kernels the host should not trust.
- Each call runs :meth:`toolpath.kernel.tools.toolkit.Toolkit.acall` on the loop of the current run (the caller's
  loop, set by CodeMode for every cell), so async transports that live there work; when that loop
  is this bridge's own loop the call simply runs here.
- An ``approve`` message asks for approval of a call of a tool bound in the kernel (whose handle
  checked the tool's policy there): only for a tool this kernel has bound with an approval policy
  (anything else is denied without reaching the approver), the host asks its approver for the
  session the kernel serves (:attr:`Bridge.approval`), with the reason marked as checked in the
  kernel, and answers ``result True`` or the ``ApprovalDenied``/``ApprovalTimeout`` error; a kernel
  can only ask, never answer. Such a call runs in the kernel, whose code could also call the tool
  without asking: for approvals a cell cannot get around, bind the tool on the host.
- A call is tagged with the cell that started it (a background task keeps the tag of the cell that
  created it); :meth:`Bridge.cancel_cell` cancels that cell's calls when it is interrupted, and
  :meth:`Bridge.close` cancels every call when the kernel dies or is shut down.
- A result whose frame exceeds ``max_result_bytes`` is not sent: with a result store it is
  offloaded there and the cell gets its id, else (or when the store fails) the cell gets
  ``ResultTooLarge`` saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from toolpath.kernel.inside import wire
from toolpath.kernel.inside.approval_policy import ApprovalDenied, ApprovalRequest
from toolpath.kernel.inside.protocol import MAX_HELLO_BYTES
from toolpath.kernel.inside.result_store import ResultStore
from toolpath.kernel.inside.tool_calls import ToolExitError
from toolpath.kernel.kernels.directory_files import restrict_socket
from toolpath.kernel.kernels.output import cap
from toolpath.kernel.observer import CodeModeObserver
from toolpath.kernel.tools.approvals import ApprovalContext
from toolpath.kernel.tools.toolkit import Toolkit, annotation_text, contained
from toolpath.observability.tool_spans import from_kernel
from toolpath.registry.retry_conditions import TIMEOUT, failure_kind
from toolpath.registry.retry_policy import RetryPolicy
from toolpath.registry.storage import StoreError

if TYPE_CHECKING:
    from toolpath.kernel.bridge.tls import BridgeCertificate

#: Resolves a call's target (``"handle.attribute"``) to its toolkit and the tool's real name.
Lookup = Callable[[str], "tuple[Toolkit, str] | None"]


#: Seconds an unauthenticated connection gets to send its hello.
HELLO_TIMEOUT = 10.0
#: Longest call id (characters of its text form) the host accepts and echoes.
MAX_ID_CHARS = 100
#: Characters of a tool's exception message sent to the kernel (head and tail kept); the cell's own
#: output cap applies after that.
MAX_ERROR_MESSAGE_CHARS = 4000
#: Longest tool name, reason or digest an ``approve`` message may carry.
MAX_APPROVAL_TEXT_CHARS = 2000


class Bridge:
    """The bridge of one kernel.

    Args:
        directory: a private directory for the socket (the kernel's own).
        generation: this kernel's generation number; a hello with another one is refused.
        lookup: resolves call targets; consulted at call time, so tools bound later are found.
        max_result_bytes: largest result frame sent to the kernel; frames from the kernel may be
            up to :func:`toolpath.kernel.inside.wire.frame_limit` of it.
        result_store: where oversized results go; ``None`` makes them ``ResultTooLarge``.
        accept_pickles: load pickled call arguments; ``False`` accepts JSON only.
        listener: serve through this TCP endpoint instead of a Unix socket (``directory`` is then ``None``).
        asks_in_kernel: whether a tool (``"handle.tool"``) is bound in this kernel with an approval
            policy, consulted for each ``approve`` message: the kernel may ask only for those.
        observer: told of each call's tool, outcome and duration (:meth:`CodeModeObserver.bridge_call_finished`).

    Raises:
        ValueError: both or neither of ``directory`` and ``listener``.
    """

    def __init__(
        self,
        directory: str | None,
        generation: int,
        lookup: Lookup,
        max_result_bytes: int,
        result_store: ResultStore | None = None,
        accept_pickles: bool = True,
        listener: BridgeListener | None = None,
        asks_in_kernel: Callable[[str], bool] = lambda tool: False,
        observer: CodeModeObserver | None = None,
    ):
        if (directory is None) == (listener is None):
            raise ValueError("a bridge is reached through a Unix socket in directory, or through a listener: give exactly one")
        self.path = os.path.join(directory, "bridge.sock") if directory is not None else ""
        self.listener = listener
        self.token = secrets.token_hex(32)
        self.generation = generation
        self.lookup = lookup
        self.max_result_bytes = max_result_bytes
        self.max_frame_bytes = wire.frame_limit(max_result_bytes)
        self.result_store = result_store
        self.accept_pickles = accept_pickles
        self.asks_in_kernel = asks_in_kernel
        self.observer = observer or CodeModeObserver()
        #: The loop tool calls run on; ``None`` means the bridge's own loop.
        self.call_loop: asyncio.AbstractEventLoop | None = None
        #: Where calls that need approval ask, for the session the kernel serves now (set per cell).
        self.approval: ApprovalContext | None = None
        self._server: asyncio.AbstractServer | None = None
        self._calls: dict[tuple[int, int | str], tuple[asyncio.Task, str]] = {}
        self._connections: set[asyncio.StreamWriter] = set()
        self._serving: set[asyncio.Task] = set()

    async def start(self) -> None:
        if self.listener is not None:
            self.listener.attach(self)
            return
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)
        try:
            # The kernel can write the directory: never chmod through a link it swapped in.
            restrict_socket(self.path)
        except BaseException:
            self._server.close()
            self._server = None
            raise

    def spec(self) -> dict[str, Any]:
        """What the kernel needs to connect: the socket path (or the TCP address and the certificate to
        pin), token, generation and the limits it must keep."""
        endpoint = self.listener.spec() if self.listener is not None else {"socket": self.path}
        return {**endpoint, "token": self.token, "generation": self.generation, "max_frame_bytes": self.max_frame_bytes, "json_only": not self.accept_pickles}

    def cancel_cell(self, cell_id: str) -> int:
        """Cancel the in-flight calls started by cell ``cell_id``; returns how many were cancelled."""
        tasks = [task for task, cell in self._calls.values() if cell == cell_id and not task.done()]
        for task in tasks:
            task.cancel()
        return len(tasks)

    async def close(self) -> None:
        """Stop accepting connections, cancel every in-flight call and close the connections."""
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.listener is not None:
            self.listener.detach(self)
        for task, _ in list(self._calls.values()):
            task.cancel()
        for writer in list(self._connections):
            writer.close()
        self._calls.clear()
        # Closing a writer ends its connection's loop; wait for them so none is left to be cancelled
        # mid-read when the loop stops.
        if self._serving:
            await asyncio.wait(self._serving, timeout=1.0)
        if self.path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve a connection to this kernel's Unix socket."""
        await self.serve(reader, writer, *await read_hello(reader))

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: tuple[str, int] | None, reason: str) -> None:
        """Serve one connection whose hello was read (``hello`` is ``None`` and ``reason`` says why
        when it was not a hello): welcome it if the token and generation are this kernel's, then
        answer its calls until it closes."""
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        try:
            refusal = self._refusal(hello) if hello is not None else reason
            if refusal:
                await _refuse(writer, refusal)
                return
            self._send(writer, {"op": "welcome"})
            self._connections.add(writer)
            while True:
                try:
                    body = await wire.read_frame(reader, self.max_frame_bytes)
                except wire.FrameTooLarge as error:
                    # The stream cannot be resynchronised; answer what is in flight, then hang up
                    # (the kernel's next call opens a new connection).
                    self._send(writer, {"op": "closing", "reason": f"{error} (max_result_bytes + 64 KiB); this connection is closed after its calls in flight"})
                    await self._finish_calls(writer)
                    return
                if body is None:
                    return
                self._receive(body, writer)
        except (asyncio.IncompleteReadError, OSError):  # OSError: a reset, or a broken TLS record
            return
        finally:
            # The kernel hung up (it died, or dropped this connection): nobody awaits these replies,
            # so the calls' side effects must not go on. After ``closing`` none is left here.
            for (connection, _), (call, _) in list(self._calls.items()):
                if connection == id(writer):
                    call.cancel()
            self._serving.discard(task)
            self._connections.discard(writer)
            writer.close()

    def _receive(self, body: bytes, writer: asyncio.StreamWriter) -> None:
        """Act on one frame of an admitted connection: start or cancel a call, or answer what is wrong."""
        try:
            message = wire.decode(body, accept_pickles=self.accept_pickles)
        except wire.WireError as error:
            # The envelope of a pickled call names its id even when its arguments cannot be loaded
            # here: answer that call and keep the connection.
            call_id = _usable_id(error.envelope.get("id"))
            target = error.envelope.get("target")
            what = f"the arguments of {target}" if isinstance(target, str) else "a message from the kernel"
            self._send(writer, {"op": "error", "id": call_id, "type": "BridgeError", "message": f"{what} cannot be loaded in the host: {error}"})
            return
        op, call_id = message.get("op"), message.get("id")
        problem = _call_problem(message) if op == "call" else _approval_problem(message) if op == "approve" else None
        if op not in ("call", "approve", "cancel"):
            problem = f"unknown op {_short(op)}; the kernel sends 'call', 'approve' and 'cancel'"
        elif _usable_id(call_id) is None:
            problem = f"the call id must be an integer or a string of at most {MAX_ID_CHARS} characters, not {_short(call_id)}"
        elif op in ("call", "approve") and problem is None and (id(writer), call_id) in self._calls:
            problem = f"call id {call_id!r} is already in flight on this connection"
        if problem is not None:
            self._send(writer, {"op": "error", "id": _usable_id(call_id), "type": "BridgeError", "message": f"malformed bridge message: {problem}"})
            return
        key = (id(writer), call_id)
        if op in ("call", "approve"):
            task = asyncio.create_task(self._call(message, writer, key) if op == "call" else self._approve(message, writer, key))
            self._calls[key] = (task, message.get("cell", ""))
        else:
            entry = self._calls.get(key)
            if entry is not None:  # a cancel that crossed its call's reply needs no answer
                entry[0].cancel()

    async def _finish_calls(self, writer: asyncio.StreamWriter) -> None:
        """Wait for the calls in flight on ``writer``'s connection (their replies go out as they end)."""
        tasks = [task for (connection, _), (task, _) in list(self._calls.items()) if connection == id(writer)]
        if tasks:
            await asyncio.wait(tasks)
        await writer.drain()

    def _refusal(self, hello: tuple[str, int]) -> str:
        """Why a connection with this hello is refused ("" when its token and generation are this kernel's)."""
        token, generation = hello
        if not secrets.compare_digest(token.encode(), self.token.encode()):
            return "wrong token: this connection does not belong to the kernel the socket serves"
        if generation != self.generation:
            return f"call from kernel generation {generation!r}, but this socket serves generation {self.generation}"
        return ""

    async def _call(self, message: dict[str, Any], writer: asyncio.StreamWriter, key: tuple[int, int | str]) -> None:
        call_id, target = message["id"], message["target"]
        # The observer is told a bound tool's name only: the target is the cell's text.
        started, tool, outcome = time.perf_counter(), "unknown", "cancelled"
        try:
            found = self.lookup(target)
            if found is None:
                outcome = "unknown_tool"
                self._send(
                    writer,
                    {
                        "op": "error",
                        "id": call_id,
                        "type": "LookupError",
                        "message": f"no host tool is bound as {target!r}; it may have been removed: list the handles with dir()",
                    },
                )
                return
            toolkit, name = found
            tool = f"{toolkit.name}.{name}"
            try:
                call = contained(toolkit.acall(name, message.get("args") or (), message.get("kwargs") or {}, approval=self.approval))
                value = await self._on_call_loop(from_kernel(message.get("trace"), call))  # in the trace of the cell that called
            except Exception as error:
                # The tool's own failure, a ConnectionError among them (a server it calls hung up),
                # is the cell's: only a ConnectionError writing to the kernel means the kernel is gone.
                outcome = "error"
                self._send(writer, _error_message(call_id, error))
                return
            outcome = "ok"
            self._send_result(writer, call_id, tool, value)
            # Backpressure: a peer that sends calls but never reads replies stalls its own calls
            # here instead of growing the host's write buffer.
            await writer.drain()
        except ConnectionError:
            return  # the kernel is gone; nobody awaits the reply
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                return  # the kernel asked for it (interrupted cell) or the kernel is gone: nobody awaits a reply
            outcome = "error"
            self._send(writer, _error_message(call_id, ToolExitError("the tool raised CancelledError")))
        except Exception as error:  # a tool's exception is the cell's exception
            outcome = "error"
            self._send(writer, _error_message(call_id, error))
        finally:
            self._calls.pop(key, None)
            self.observer.bridge_call_finished(tool, outcome, time.perf_counter() - started)

    async def _on_call_loop(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Await ``coroutine`` on :attr:`call_loop` (the loop of the current run), or here when that
        is this loop or not running."""
        loop = self.call_loop
        if loop is None or loop is asyncio.get_running_loop() or loop.is_closed() or not loop.is_running():
            return await coroutine
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))

    async def _approve(self, message: dict[str, Any], writer: asyncio.StreamWriter, key: tuple[int, int | str]) -> None:
        """Ask for approval of a call of a tool bound in the kernel (its handle checked the policy
        there, where the files are): ``result True`` for a yes, an ``error`` for anything else."""
        call_id = message["id"]
        try:
            context = self.approval
            if context is None:
                raise ApprovalDenied("nobody can approve calls from this kernel: give CodeMode an approver")
            if not self.asks_in_kernel(message["tool"]):
                # Not one of this kernel's tools that ask: a cell's forged message, never shown to the approver.
                raise ApprovalDenied(f"no tool bound in this kernel asks for approval as {message['tool']!r}; only such tools' calls are put to the approver")
            # The check ran in the kernel, and the call runs there: the approver and the log are told
            # so. The kernel wrote every word of it: control characters (a terminal's escape codes
            # could hide that note, or the rest of a line) are shown escaped.
            reason = f"{_escaped(message['reason'])} (checked in the kernel, where the tool runs)"
            arguments = {_escaped(name): _escaped(value) for name, value in message["arguments"].items()}
            request = ApprovalRequest(_escaped(message["tool"]), arguments, reason, message["digest"], context.session_id, context.user_id)
            # On the caller's loop, like a host tool: an approver may talk over a connection opened there.
            await self._on_call_loop(context.check(request))
            self._send(writer, {"op": "result", "id": call_id, "value": True})
        except ConnectionError:
            return
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                return
            raise
        except Exception as error:  # a no, no answer, or a log that cannot be written: the tool must not run
            self._send(writer, _error_message(call_id, error))
        finally:
            self._calls.pop(key, None)

    def _send_result(self, writer: asyncio.StreamWriter, call_id: int | str, tool: str, value: Any) -> None:
        try:
            frame = wire.encode({"op": "result", "id": call_id, "value": value})
        except (wire.WireError, ValueError, RecursionError) as error:  # json refuses deep nesting
            self._send(
                writer,
                {
                    "op": "error",
                    "id": call_id,
                    "type": "BridgeError",
                    "message": f"the result of {tool} (type {type(value).__name__}) cannot cross the bridge: {error}; return JSON-like data, or bind the tool in-kernel",
                },
            )
            return
        if len(frame) <= self.max_result_bytes:
            if not writer.is_closing():
                writer.write(frame)
            return
        too_large = f"the result of {tool} is {len(frame):,} bytes, over max_result_bytes={self.max_result_bytes:,}"
        if self.result_store is None:
            # A kernel on another host cannot read offloaded results, so do not suggest them there.
            offloading = "" if self.listener is not None else "enable result offloading (CodeMode(offload_results=True)), "
            ways_out = f"ask the tool for less (filter or paginate), {offloading}or raise max_result_bytes"
            self._send(writer, {"op": "error", "id": call_id, "type": "ResultTooLarge", "message": f"{too_large}; {ways_out}"})
            return
        try:
            result_id = self.result_store.put(wire.encode({"op": "value", "value": value})[4:], tool, type(value).__name__)
        except Exception as error:  # a full disk or a corrupt file: the store failed, not the tool
            reason = str(error) if isinstance(error, StoreError) else f"{self.result_store.path}: {type(error).__name__}: {error}"
            self._send(writer, {"op": "error", "id": call_id, "type": "ResultTooLarge", "message": f"{too_large}, and offloading it failed: {reason}"})
            return
        self._send(writer, {"op": "offloaded", "id": call_id, "result_id": result_id, "size": len(frame), "type": type(value).__name__, "tool": tool})

    def _send(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        """Write ``message``; one that would exceed the kernel's frame limit (an error naming a huge
        target, say) becomes a short error for the same call, so the connection survives."""
        if writer.is_closing():
            return
        frame = wire.encode(message)
        if len(frame) - 4 > self.max_frame_bytes:
            frame = wire.encode(
                {
                    "op": "error",
                    "id": _usable_id(message.get("id")),
                    "type": "BridgeError",
                    "message": f"the host's {message.get('op')} reply was {len(frame) - 4:,} bytes, over the frame limit of {self.max_frame_bytes:,}",
                }
            )
        writer.write(frame)


async def read_hello(reader: asyncio.StreamReader) -> tuple[tuple[str, int] | None, str]:
    """Read a connection's first frame: ``((token, generation), "")`` for a well-formed hello, else
    ``(None, why not)``. At most :data:`toolpath.kernel.inside.protocol.MAX_HELLO_BYTES` are read, for at most
    :data:`HELLO_TIMEOUT` seconds, and nothing but JSON is decoded."""
    try:
        body = await asyncio.wait_for(wire.read_frame(reader, MAX_HELLO_BYTES), timeout=HELLO_TIMEOUT)
    except wire.FrameTooLarge as error:
        return None, f"the hello is too long ({error})"
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        return None, "no hello arrived"
    hello = wire.decode_hello(body) if body is not None else None
    return hello, "" if hello is not None else "the first message must be a JSON hello {op, token, generation}"


async def _refuse(writer: asyncio.StreamWriter, reason: str) -> None:
    if not writer.is_closing():
        writer.write(wire.encode({"op": "refused", "reason": reason}))
        with contextlib.suppress(ConnectionError):
            await writer.drain()


class BridgeListener:
    """One TLS-over-TCP endpoint through which every remote kernel of a CodeMode reaches its bridge.

    Args:
        listen: ``(host, port)`` to listen on; port 0 picks a free one.
        address: ``(host, port)`` kernels connect to (port 0: the port listened on). It must be
            a name or address the certificate holds: a generated one holds exactly this host.
        certificate: the TLS certificate and context (:mod:`toolpath.kernel.bridge.tls`).
    """

    def __init__(self, listen: tuple[str, int], address: tuple[str, int], certificate: BridgeCertificate):
        self.listen, self.address, self.certificate = listen, address, certificate
        self._server: asyncio.AbstractServer | None = None
        self._bridges: dict[int, Bridge] = {}
        self._port = 0

    async def start(self) -> None:
        """Listen.

        Raises:
            OSError: the address cannot be listened on (in use, not this host's); the message names it.
        """
        host, port = self.listen
        try:
            self._server = await asyncio.start_server(self._serve, host, port, ssl=self.certificate.context, ssl_handshake_timeout=HELLO_TIMEOUT)
        except OSError as error:
            raise OSError(
                error.errno,
                f"the bridge cannot listen on {host}:{port} ({error.strerror or error}); set bridge_listen (or bridge_address) to an address of this host and a free port",
            ) from None
        self._port = self._server.sockets[0].getsockname()[1]

    def spec(self) -> dict[str, Any]:
        host, port = self.address
        return {"address": [host, port or self._port], "certificate": self.certificate.pem}

    def attach(self, bridge: Bridge) -> None:
        self._bridges[bridge.generation] = bridge

    def detach(self, bridge: Bridge) -> None:
        if self._bridges.get(bridge.generation) is bridge:
            del self._bridges[bridge.generation]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello, reason = await read_hello(reader)
        if hello is None:
            await _refuse(writer, reason)
        elif (bridge := self._bridges.get(hello[1])) is None:
            await _refuse(writer, f"no kernel of generation {hello[1]!r} is served here (it was shut down or replaced)")
        else:
            await bridge.serve(reader, writer, hello, reason)
            return
        writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


def _usable_id(call_id: Any) -> int | str | None:
    """``call_id`` when it can key a call (an integer or a string, short enough to echo; not a
    bool), else ``None``."""
    return call_id if type(call_id) in (int, str) and len(str(call_id)) <= MAX_ID_CHARS else None


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for echoing a peer's bad value in a reply."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_problem(message: dict[str, Any]) -> str | None:
    """What is wrong with the fields of a ``call`` message, or ``None`` when it can run."""
    target, args, kwargs, cell = message.get("target"), message.get("args", []), message.get("kwargs", {}), message.get("cell", "")
    if not isinstance(target, str):
        return f"the target must be a string 'handle.tool', not {type(target).__name__}"
    if not isinstance(args, (list, tuple)):
        return f"args must be a list, not {type(args).__name__}"
    if not isinstance(kwargs, dict) or not all(isinstance(name, str) for name in kwargs):
        return "kwargs must be a mapping of argument names to values"
    if not isinstance(cell, str):
        return f"cell must be a string, not {type(cell).__name__}"
    return None


def _approval_problem(message: dict[str, Any]) -> str | None:
    """What is wrong with the fields of an ``approve`` message, or ``None`` when it can be asked."""
    tool, arguments, reason, digest = (message.get(name) for name in ("tool", "arguments", "reason", "digest"))
    if not all(isinstance(text, str) and len(text) <= MAX_APPROVAL_TEXT_CHARS for text in (tool, reason, digest)):
        return f"tool, reason and digest must be strings of at most {MAX_APPROVAL_TEXT_CHARS} characters"
    if not _SHA256.fullmatch(digest):
        return "digest must be the SHA-256 of the call, 64 lowercase hexadecimal digits (as ApprovalRequest.of makes it)"
    if not isinstance(arguments, dict) or not all(isinstance(name, str) and isinstance(value, str) for name, value in arguments.items()):
        return "arguments must map argument names to their shown values (strings)"
    return None


#: An ``approve`` message's digest: what the audit log keeps and answers are matched by.
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _escaped(text: str) -> str:
    """``text`` with every character that is not printable (control characters, escape codes,
    surrogates, direction overrides) written as its Python escape."""
    return "".join(character if character.isprintable() else character.encode("unicode_escape").decode("ascii") for character in text)


def _text(error: BaseException) -> str:
    try:
        text = str(error.args[0]) if isinstance(error, KeyError) and len(error.args) == 1 else str(error)
    except Exception:  # an exception whose __str__ fails still deserves a reply
        return f"<{type(error).__name__} whose message cannot be shown>"
    return cap(text, MAX_ERROR_MESSAGE_CHARS)[0]


def _error_message(call_id: Any, error: BaseException) -> dict[str, Any]:
    """The reply for a call that raised: its type, the built-in type the kernel raises for it
    (:func:`_crossing_builtin`) and its message, both capped."""
    return {"op": "error", "id": call_id, "type": cap(type(error).__name__, 200)[0], "builtin": _crossing_builtin(error), "message": _text(error)}


def _crossing_builtin(error: BaseException) -> str:
    """The built-in type the kernel raises for ``error`` when it cannot rebuild its own: the nearest
    one it derives from (so ``except ValueError`` still catches it); for a connection or timeout
    failure whose nearest is ``OSError`` or ``Exception`` (requests' ``ProxyError``, urllib3's
    ``NewConnectionError``), ``ConnectionError`` or ``TimeoutError``, which derive from both: its
    class hierarchy, which says what it is, does not cross the bridge
    (:func:`toolpath.registry.retry_conditions.failure_kind`)."""
    nearest = _nearest_builtin(type(error))
    kind = failure_kind(error)
    if kind and nearest in ("OSError", "Exception"):
        return "TimeoutError" if kind == TIMEOUT else "ConnectionError"
    return nearest


def _nearest_builtin(kind: type[BaseException]) -> str:
    """The first built-in class in ``kind``'s MRO that a message alone constructs
    (``UnicodeDecodeError`` needs five arguments, so it maps to ``UnicodeError``, a ``ValueError``)."""
    for base in kind.__mro__:
        if base.__module__ == "builtins" and issubclass(base, Exception):
            try:
                base("message")
            except Exception:  # a constructor that wants more than a message
                continue
            return base.__name__
    return "Exception"


def toolkit_spec(toolkit: Toolkit, attributes: dict[str, str], error: str = "") -> dict[str, Any]:
    """How the kernel should bind ``toolkit`` (the JSON :func:`toolpath.kernel.inside.bridge_client.install` reads).

    Args:
        toolkit: the toolkit.
        attributes: ``{attribute: tool real name}`` from :class:`toolpath.kernel.tools.bindings.Bindings`.
        error: why the whole toolkit cannot be bound (its handle then raises it on every access).
    """
    if error:
        return {"name": toolkit.name, "error": error}
    functions = {}
    for attribute, name in attributes.items():
        tool = toolkit.functions[name]
        entry: dict[str, Any] = {"name": name, "doc": tool.description, "refusal": tool.pause_reason, "error": tool.load_error}
        if isinstance(tool.retry, RetryPolicy):
            entry["retry"] = tool.retry.to_spec()
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
