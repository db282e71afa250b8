"""An MCP server (stdio, the SDK's low-level ``Server``) whose tools say, or do not say, whether they
change anything (MCP tool annotations ``readOnlyHint`` / ``destructiveHint``). Each call is appended
to the file ``$ANNOTATED_CALLS``; the first call of each tool kills the server mid-call (a lost
connection, which the next call's fresh server does not repeat), later ones answer
``name: arguments``.
"""

from __future__ import annotations

import asyncio
import json
import os

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def tool(name: str, annotations: types.ToolAnnotations | None) -> types.Tool:
    return types.Tool(
        name=name, description=f"The tool named {name!r}.", input_schema={"type": "object", "properties": {"text": {"type": "string"}}}, annotations=annotations
    )


TOOLS = [
    tool("read_rates", types.ToolAnnotations(read_only_hint=True)),
    tool("add_note", types.ToolAnnotations(read_only_hint=False, destructive_hint=False)),
    tool("say_nothing", None),
    tool("read_and_destroy", types.ToolAnnotations(read_only_hint=True, destructive_hint=True)),
]


async def list_tools(context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(context, params: types.CallToolRequestParams) -> types.CallToolResult:
    log = os.environ["ANNOTATED_CALLS"]
    earlier = open(log).read().split() if os.path.exists(log) else []
    with open(log, "a") as calls:
        calls.write(params.name + "\n")
    if params.name not in earlier:
        os._exit(1)  # the connection is lost mid-call
    answer = f"{params.name}: {json.dumps(params.arguments or {}, sort_keys=True)}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])


async def serve() -> None:
    server = Server("annotated", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(serve())
