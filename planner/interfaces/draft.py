"""Draft a catalog from an MCP server: its tools, with the states left for the author to fill in.

``toolpath catalog draft --mcp "uvx mcp-server-time"`` connects to the server, reads every page of
its tool list and writes a catalog in which each tool is served by that server (``mcp_server``), with
its name, description, parameters (from the tool's input schema: required ones, then optional ones
with their defaults; types mapped by :func:`toolpath.registry.type_strings.type_from_json_schema`) and a return
value (from its output schema when it has one, else its text). What no server can say is left
empty for the author: the states, and each tool's ``state_transition``. ``toolpath validate`` then
reports each tool that produces no state (TP004) until they are filled in.

A tool that toolpath cannot bind (:func:`toolpath.kernel.tools.mcp_toolkit.unbindable_reason`: an empty name, a
control character in it, an input schema that is not an object...) is left out, and named with why
in a ``RuntimeWarning`` and in the catalog's header comment.
"""

from __future__ import annotations

import datetime
import re
import shlex
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from toolpath.kernel.tools.mcp_connection import MCPConnection
from toolpath.kernel.tools.mcp_toolkit import shown_name, unbindable_reason
from toolpath.registry import CatalogError, read_catalog
from toolpath.registry.mcp_servers import MCPServerConfig
from toolpath.registry.names import python_identifier
from toolpath.registry.type_strings import type_from_json_schema


def server_config(target: str, name: str, env: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None) -> MCPServerConfig:
    """The server ``target`` names: a URL (``scheme://...``), else a command line (split like a shell does).

    Raises:
        ValueError: an empty command, a URL that is not http(s), ``env`` for a URL or ``headers``
            for a command (as a one-line message).
    """
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", target):
        return MCPServerConfig.checked(name=name, url=target, headers=dict(headers or {}), env=dict(env or {}))
    words = shlex.split(target)
    if not words:
        raise ValueError("the MCP server command is empty; give it like --mcp 'uvx mcp-server-time'")
    return MCPServerConfig.checked(name=name, command=words[0], args=tuple(words[1:]), env=dict(env or {}), headers=dict(headers or {}))


@dataclass(frozen=True)
class MCPDraft:
    """A drafted catalog of an MCP server's tools: ``document`` (plain data), the server's
    ``config`` under the name it is declared by, and ``skipped`` (``{tool name: why}``), the tools
    left out."""

    document: dict[str, Any]
    config: MCPServerConfig
    skipped: dict[str, str]

    def text(self) -> str:
        """The catalog as YAML, under its header comment (:func:`render`)."""
        return render(self.document, self.config, self.skipped)


async def draft_catalog(config: MCPServerConfig, domain: str | None = None) -> str:
    """Connect to the server, list its tools and return the drafted catalog as YAML text
    (:func:`draft_mcp_catalog`, rendered)."""
    return (await draft_mcp_catalog(config, domain)).text()


async def draft_mcp_catalog(config: MCPServerConfig, domain: str | None = None) -> MCPDraft:
    """Connect to the server, list its tools and draft their catalog.

    Args:
        config: the server; its ``name`` names it under ``mcp_servers`` (default: the name the
            server gives itself, made an identifier).
        domain: the catalog's domain (default: the server's name).

    Tools that cannot be drafted are left out and named in a ``RuntimeWarning`` and the header.

    Raises:
        kernel.tools.mcp_connection.MCPConnectionError: the server could not be started, reached or listed.
    """
    connection = MCPConnection(config)
    try:
        await connection.connect()
        tools, reported = connection.tools, connection.server_name
    finally:
        await connection.aclose()
    name = config.name or python_identifier(reported or "server").lower()
    listed = [tool.model_dump(by_alias=True, exclude_none=True) for tool in tools]
    skipped = skipped_tools(listed)
    if skipped:
        listing = "; ".join(f"{shown_name(tool)} ({reason})" for tool, reason in skipped.items())
        warnings.warn(
            f"left out {len(skipped)} tool{'s' if len(skipped) != 1 else ''} of the MCP server that toolpath cannot bind: {listing}",
            RuntimeWarning,
            stacklevel=2,
        )
    named = config.model_copy(update={"name": name})
    return MCPDraft(catalog_document(named, listed, domain or name), named, skipped)


def skipped_tools(tools: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``{name: why}`` for the ``tools/list`` entries (as JSON) that cannot be drafted, by
    :func:`toolpath.kernel.tools.mcp_toolkit.unbindable_reason`."""
    reasons = {tool["name"]: unbindable_reason(tool["name"], tool.get("inputSchema")) for tool in tools}
    return {name: reason for name, reason in reasons.items() if reason}


def catalog_document(config: MCPServerConfig, tools: Sequence[Mapping[str, Any]], domain: str) -> dict[str, Any]:
    """The catalog (as plain data) of ``tools``, each a ``tools/list`` entry as JSON
    (``name``, ``description``, ``inputSchema``, ``outputSchema``), less those
    :func:`skipped_tools` names."""
    server = config.model_dump(exclude={"name"}, exclude_defaults=True)
    if "args" in server:
        server["args"] = list(server["args"])
    return {
        "domain": domain,
        "mcp_servers": {config.name: server},
        "states": [],
        "tools": [_tool_entry(tool, config.name) for tool in tools if not unbindable_reason(tool["name"], tool.get("inputSchema"))],
    }


def _tool_entry(tool: Mapping[str, Any], server: str) -> dict[str, Any]:
    schema = tool.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    required = [name for name in schema.get("required") or () if name in properties]

    def parameter(name: str, optional: bool) -> dict[str, Any]:
        property_schema = properties[name] if isinstance(properties[name], dict) else {}
        entry: dict[str, Any] = {"name": name, "type": type_from_json_schema(property_schema)}
        description = property_schema.get("description") or property_schema.get("title")
        if description:
            entry["description"] = description
        if optional and "default" in property_schema:
            entry["default"] = property_schema["default"]
        return entry

    entry: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        entry["description"] = " ".join(str(tool["description"]).split())
    entry["mcp_server"] = server
    if required:
        entry["required_parameters"] = [parameter(name, False) for name in required]
    optional = [name for name in properties if name not in required]
    if optional:
        entry["optional_parameters"] = [parameter(name, True) for name in optional]
    entry["return_spec"] = _return_spec(tool)
    entry["state_transition"] = {"requires": [], "produces": []}
    return entry


def _return_spec(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The value a call returns (see :func:`toolpath.kernel.tools.mcp_connection.result_value`): the structured
    content (unwrapped when the MCP SDK wrapped a non-object in ``result``), else the text."""
    name = f"{python_identifier(tool['name'])}_result"
    output = tool.get("outputSchema")
    if not isinstance(output, dict):
        return {"name": name, "type": "str", "description": "the tool's text output"}
    properties = output.get("properties") or {}
    if list(properties) == ["result"]:
        return {"name": name, "type": type_from_json_schema(properties["result"])}
    return {"name": name, "type": "dict", "description": f"keys: {', '.join(properties)}" if properties else "the tool's structured output"}


def load_problems(text: str) -> list[str]:
    """What stops the drafted catalog ``text`` from loading as it is (a parameter name such as
    ``page size``, say), one line each; empty when it loads."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "draft.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            read_catalog(path)
        except CatalogError as error:
            return [f"line {problem.line}: {problem.code} {problem.field}: {problem.message}" for problem in error.problems]
    return []


def render(document: Mapping[str, Any], config: MCPServerConfig, skipped: Mapping[str, str] | None = None) -> str:
    """The drafted catalog as YAML, under a comment saying where it came from, which tools
    (``skipped``: ``{name: why}``) it leaves out and what is left to do."""
    source = config.url if config.url is not None else shlex.join([config.command or "", *config.args])
    tools = len(document["tools"])
    header = (
        f"# Drafted by `toolpath catalog draft` on {datetime.date.today().isoformat()} from the MCP server `{source}` ({tools} tool{'s' if tools != 1 else ''}).\n"
        "# Left for you: declare the states these tools require and produce under `states`, fill in each\n"
        "# tool's `state_transition` (and a parameter's or return's `state` where it carries one), and\n"
        "# write affordances. Until then `toolpath validate` warns (TP004) that no plan can use a tool.\n"
    )
    if skipped:
        header += "# Left out, as toolpath cannot bind them:\n" + "".join(f"#   {shown_name(name)}: {reason}\n" for name, reason in skipped.items())
    return header + yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True, width=100)
