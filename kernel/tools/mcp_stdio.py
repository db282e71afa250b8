"""The stdio transport toolpath connects to MCP servers with: the SDK's, with bounded messages and
servers that die with their host.

Why not the SDK's ``stdio_client``: it reads a server's line whole, however long, before anything
can look at it (and joins its chunks in a way that grows with the square of the line: a 50 MB
answer took about 40 s), and it starts the server with no way to make it die with its host. This
transport differs in exactly these two points; the server's environment, process group and
shutdown (close stdin, wait, then terminate the process group) are the SDK's.

- A line (one JSON-RPC message) longer than ``max_message_bytes`` is not read further once the limit
  is reached. When it is the answer to a request (``{"jsonrpc": "2.0", "id": ..., "result": ...``,
  the order servers write), that request fails at once with a JSON-RPC error whose ``data`` is
  ``{"reason": MESSAGE_TOO_LARGE, "max_message_bytes": N}``; the rest of the line is discarded as
  the server sends it, and the connection stays open. Any other oversized line (its id cannot be
  found at its head) resets the connection: :attr:`StdioTransport.reset_reason` says why, and the
  requests in flight fail as for a closed connection.
- The server is started by :mod:`toolpath.kernel.tools.mcp_launcher`, so on Linux it is killed when the
  thread that started it ends, even when this process is killed without a chance to stop it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

import anyio
import mcp_types
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import _stop_server_process, get_default_environment  # its shutdown sequence: private, mcp<3 pins it
from mcp.shared.message import SessionMessage

#: Bytes one message from a stdio server may have (16 MiB) unless ``max_message_bytes`` says otherwise.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: The ``reason`` in the ``data`` of the error that answers a request whose answer was too large.
MESSAGE_TOO_LARGE = "toolpath.message_too_large"
LAUNCHER = Path(__file__).with_name("mcp_launcher.py")

# The id of a response, at the head of its line: `{"jsonrpc":"2.0","id":7,"result":` (or id first).
_RESPONSE_HEAD = re.compile(
    rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"\s*:'
)


def launch_command(command: str, args: list[str]) -> list[str]:
    """The command line that runs ``command args`` through the launcher, which ties it to this process."""
    return [sys.executable, "-I", "-S", str(LAUNCHER), str(os.getpid()), command, *args]


class StdioTransport:
    """An MCP transport to a server started over stdio (``Client(StdioTransport(...).open())``).

    Args:
        parameters: the server's command, arguments, environment (over the SDK's default one) and
            working directory.
        errlog: where the server's stderr goes.
        max_message_bytes: the longest message read whole, in bytes.
    """

    def __init__(self, parameters: StdioServerParameters, errlog: TextIO, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        self.parameters = parameters
        self.errlog = errlog
        self.max_message_bytes = max_message_bytes
        #: Why this transport closed the connection itself (an oversized message that answers no
        #: request it could name), or ``None``.
        self.reset_reason: str | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[TransportStreams]:
        """Start the server and yield the session's ``(read stream, write stream)``; stop it on exit.

        Raises:
            OSError: the launcher could not be started (a missing command makes the server exit
                with status 127 and a line on its stderr instead).
        """
        parameters = self.parameters
        process = await anyio.open_process(
            launch_command(parameters.command, parameters.args),
            env=get_default_environment() | (parameters.env or {}),
            stderr=self.errlog,
            cwd=parameters.cwd,
            start_new_session=True,
        )
        incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)

        async def deliver(item: SessionMessage | Exception) -> bool:
            """Hand ``item`` to the session; ``False`` once the session is gone."""
            try:
                await incoming_writer.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return False
            return True

        async def read_stdout() -> None:
            assert process.stdout is not None
            line = bytearray()
            discarding, listening = False, True
            async with incoming_writer:
                # Read to the end even after the session is gone: a server blocked writing could not exit.
                async for chunk in process.stdout:
                    while chunk:
                        end = chunk.find(b"\n")
                        piece, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
                        if not discarding:
                            line += piece
                            if len(line) > self.max_message_bytes:
                                refusal = self._refusal(line)
                                if refusal is None:
                                    await incoming_writer.aclose()  # the session sees the connection close
                                    listening = False
                                elif listening:
                                    listening = await deliver(refusal)
                                discarding = True
                                line = bytearray()
                        if end >= 0:
                            if not discarding and line.strip() and listening:
                                listening = await deliver(_parsed(bytes(line)))
                            line = bytearray()
                            discarding = False

        async def write_stdin() -> None:
            assert process.stdin is not None
            try:
                async with outgoing_reader:
                    async for message in outgoing_reader:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                        await process.stdin.send(data.encode(parameters.encoding, parameters.encoding_error_handler))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await incoming_writer.aclose()  # the server stopped reading: requests must not wait forever

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_stdout)
            tasks.start_soon(write_stdin)
            try:
                yield incoming, outgoing
            finally:
                # Stopping must finish under cancellation too, or the server would outlive the
                # connection; every wait in the SDK's sequence is bounded.
                with anyio.CancelScope(shield=True):
                    incoming.close()
                    outgoing.close()
                    await _stop_server_process(process)
                tasks.cancel_scope.cancel()

    def _refusal(self, head: bytearray) -> SessionMessage | None:
        """The error answering the request whose answer starts with ``head`` (over the limit), or
        ``None`` (and :attr:`reset_reason` set) when ``head`` names no request."""
        found = _RESPONSE_HEAD.match(head)
        limit = f"{self.max_message_bytes:,} bytes (max_message_bytes)"
        if found is None:
            self.reset_reason = f"sent a message over {limit} that answers no request; toolpath stopped reading it and reset the connection"
            return None
        request_id = json.loads(found.group(1))
        error = mcp_types.ErrorData(
            code=mcp_types.INTERNAL_ERROR,
            message=f"the answer is over {limit}: toolpath stopped reading it there and discards the rest",
            data={"reason": MESSAGE_TOO_LARGE, "max_message_bytes": self.max_message_bytes},
        )
        return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _parsed(line: bytes) -> SessionMessage | Exception:
    """One line as a message, or the error the session is given for a line that is none."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error
