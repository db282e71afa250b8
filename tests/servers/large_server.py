"""An MCP server (stdio, the SDK's low-level ``Server``) that is large in the ways real ones can be.

``--tools N`` lists N tools ``record_0`` ... (one page), each looking up one record, and among them
``send_invoice`` at position ``N - 10``: a tool no listing of the first few would show. The tool
``huge(megabytes)`` answers with a text of that many MB; ``shout(megabytes)`` first sends a
notification of that many MB (a line that answers no request). ``--gate FILE`` holds an answer over
``HEAD_BYTES`` after its first ``HEAD_BYTES`` until FILE exists, then sends the rest and creates
``FILE.sent``: a client that waits for the whole answer waits for the gate. ``--linger`` keeps the
process running after its stdin closes (a server that would not notice its client is gone).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

HEAD_BYTES = 2 * 1024 * 1024
MEGABYTE = 1024 * 1024


class GatedStdout(io.TextIOBase):
    """stdout that, with a gate, sends a long line's head, waits for the gate file, then the rest."""

    def __init__(self, gate: Path | None):
        self.gate = gate
        self.binary = sys.stdout.buffer

    def write(self, text: str) -> int:
        data = text.encode()
        if self.gate is None or len(data) <= HEAD_BYTES:
            self.binary.write(data)
            return len(text)
        self.binary.write(data[:HEAD_BYTES])
        self.binary.flush()
        while not self.gate.exists():  # in anyio's worker thread: the server's loop goes on
            time.sleep(0.05)
        self.binary.write(data[HEAD_BYTES:])
        self.binary.flush()
        self.gate.with_name(self.gate.name + ".sent").touch()
        return len(text)

    def flush(self) -> None:
        self.binary.flush()


def tools(count: int) -> list[types.Tool]:
    listed = [
        types.Tool(name=f"record_{index}", description=f"Look up record number {index} of the archive.", input_schema={"type": "object", "properties": {}})
        for index in range(count)
    ]
    if count >= 10:
        listed[count - 10] = types.Tool(
            name="send_invoice",
            description="Email an invoice to a customer.",
            input_schema={"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]},
        )
    size = {"type": "object", "properties": {"megabytes": {"type": "number"}}, "required": ["megabytes"]}
    huge = types.Tool(name="huge", description="A text of some megabytes.", input_schema=size)
    shout = types.Tool(name="shout", description="A notification of some megabytes, then a short answer.", input_schema=size)
    return [*listed, huge, shout]


def server(count: int, stdout: anyio.AsyncFile) -> Server:
    listed = tools(count)

    async def list_tools(context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(context, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        if params.name == "huge":
            text = "x" * int(arguments["megabytes"] * MEGABYTE)
        elif params.name == "shout":
            padding = "x" * int(arguments["megabytes"] * MEGABYTE)
            await stdout.write(f'{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{padding}"}}}}\n')
            await stdout.flush()
            text = "shouted"
        else:
            text = f"{params.name}: {arguments}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("large", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(count: int, gate: Path | None) -> None:
    stdout = anyio.wrap_file(GatedStdout(gate))
    async with stdio_server(stdout=stdout) as (read_stream, write_stream):
        listing = server(count, stdout)
        await listing.run(read_stream, write_stream, listing.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=3)
    parser.add_argument("--gate", type=Path)
    parser.add_argument("--linger", action="store_true")
    options = parser.parse_args()
    asyncio.run(serve(options.tools, options.gate))
    while options.linger:
        time.sleep(60)
