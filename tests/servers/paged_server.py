"""A small MCP server for the MCP client tests (stdio), written with the SDK's low-level ``Server``.

It lists its tools two per page, has names that are not Python identifiers (``get-forecast``,
``gmail.search``), a parameter named by a Python keyword (``from``), results of every shape
(structured, a wrapped ``{"result": ...}``, plain text, an image) and a tool that reports an error.

``python paged_server.py`` serves stdio; ``python paged_server.py --http PORT --token TOKEN`` serves
Streamable HTTP at ``/mcp`` and answers 401 to a request without ``Authorization: Bearer TOKEN``.
``--broken-listing`` answers ``tools/list`` with an error. The tools ``slow`` (sleeps) and ``crash``
(the process exits mid-call) are for timeouts and failures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

PAGE_SIZE = 2
#: A 1x1 transparent PNG.
PIXEL = base64.b64encode(
    bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
).decode()

TOOLS = [
    types.Tool(
        name="get-forecast",
        description="Weather forecast for a city.",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}}, "required": ["city"]},
    ),
    types.Tool(
        name="gmail.search",
        description="Search mail.",
        input_schema={"type": "object", "properties": {"query": {"type": "string"}, "from": {"type": "string"}}, "required": ["query"]},
    ),
    types.Tool(
        name="count_words",
        description="Count the words of a text.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(name="object_with_result", description="Return an object that has a result key.", input_schema={"type": "object", "properties": {}}),
    types.Tool(name="pixel", description="A one-pixel image.", input_schema={"type": "object", "properties": {}}),
    types.Tool(name="fail", description="Always fails.", input_schema={"type": "object", "properties": {"why": {"type": "string"}}, "required": ["why"]}),
    types.Tool(
        name="slow",
        description="Answer after some seconds.",
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    ),
    types.Tool(name="crash", description="The server process exits during the call.", input_schema={"type": "object", "properties": {}}),
]


async def list_tools(context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE_SIZE
    return types.ListToolsResult(tools=TOOLS[start:end], next_cursor=str(end) if end < len(TOOLS) else None)


async def call_tool(context, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "get-forecast":
        forecast = {"city": arguments["city"], "days": arguments.get("days", 3), "sky": "clear"}
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(forecast))], structured_content=forecast)
    if params.name == "gmail.search":
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"3 mails about {arguments['query']} from {arguments.get('from', 'anyone')}")])
    if params.name == "count_words":
        count = len(arguments["text"].split())
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(count))], structured_content={"result": count})
    if params.name == "object_with_result":
        value = {"result": "kept"}
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(value))], structured_content=value)
    if params.name == "pixel":
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PIXEL, mime_type="image/png")])
    if params.name == "slow":
        await asyncio.sleep(arguments["seconds"])
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])
    if params.name == "crash":
        os._exit(1)
    if params.name == "fail":
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"it failed because {arguments['why']}")], is_error=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"unknown tool {params.name}")], is_error=True)


async def broken_listing(context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    raise RuntimeError("the tool index is corrupt")


async def serve_stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(server: Server, port: int, token: str) -> None:
    import uvicorn

    app = server.streamable_http_app()
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"a bearer token is required"})
            return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--token", default="")
    parser.add_argument("--broken-listing", action="store_true")
    options = parser.parse_args()
    paged = Server("paged", on_list_tools=broken_listing if options.broken_listing else list_tools, on_call_tool=call_tool)
    if options.http:
        serve_http(paged, options.http, options.token)
    else:
        asyncio.run(serve_stdio(paged))
