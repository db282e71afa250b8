"""An MCP server (stdio, the SDK's low-level ``Server``) listing tools no well-behaved server would:
names that are empty, punctuation only, Python keywords, the same once made identifiers, with a NUL
or a tab, 200 characters long; an input schema nested 30 levels deep in ``[array, array]`` unions;
``properties`` and ``required`` of the wrong JSON type. Every call answers ``name: arguments``.
"""

from __future__ import annotations

import asyncio
import json

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def nested_union(levels: int) -> dict:
    """``{"type": ["array", "array"], "items": ...}``, ``levels`` deep: about 1 kB for 30 levels."""
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": ["array", "array"], "items": schema}
    return schema


def tool(name: str, **properties: dict) -> types.Tool:
    return types.Tool(name=name, description=f"The tool named {name!r}.", input_schema={"type": "object", "properties": properties})


TOOLS = [
    tool("echo", text={"type": "string"}),
    tool(""),
    tool("!!!"),
    tool("class"),
    tool("get-time"),
    tool("get_time"),
    tool("bad\x00name"),
    tool("tab\tname"),
    tool("x" * 200),
    tool("deep", rows=nested_union(30)),
    types.Tool(name="listed_properties", input_schema={"type": "object", "properties": ["text"]}),
    types.Tool(name="counted_required", input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": 5}),
]


async def list_tools(context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(context, params: types.CallToolRequestParams) -> types.CallToolResult:
    answer = f"{params.name}: {json.dumps(params.arguments or {}, sort_keys=True)}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=answer)])


async def serve() -> None:
    server = Server("odd", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(serve())
