"""agora-workbench's served catalogs: the catalog JSON an agora-workbench tool server serves —
``{server_name, tools: [...], skills: [...]}`` with types written ``"builtins.str"`` — translated
into toolpath's catalog format (:mod:`toolpath.registry.catalog_format`), so that it is read as a
catalog file is (see :func:`from_agora_workbench`).
"""

from __future__ import annotations

import re
from typing import Any

from toolpath.registry.catalog_documents import as_list, as_mapping

_BUILTINS_PREFIX = re.compile(r"\bbuiltins\.")


def _plain_type(value: Any) -> Any:
    """``"builtins.list[builtins.str]"`` → ``"list[str]"``; anything else unchanged (validation reports it)."""
    return _BUILTINS_PREFIX.sub("", value) if isinstance(value, str) else value


def from_agora_workbench(document: dict) -> dict:
    """Translate the catalog an agora-workbench tool server serves (``GET /catalog``) into this
    module's format.

    The payload (agora-workbench 0.2, ``code_execution/server.py``) is ``{"server_name", "tools",
    "skills"}``. Tools carry this format's fields, except that types are qualified names
    (``"builtins.str"``), ``return_spec`` is a list of named values (``{name, type, description}``),
    ``server_name`` is ``null`` and each has an ``id`` (its position on that server). ``skills`` are
    workflow skills (``{name, description, domain, states}``), not states; the payload declares no
    states at all, only tokens in ``state_transition`` and in skills. So:

    - the server name becomes the domain, and each tool's server;
    - every token becomes a declared state, described by the tools that produce it (their
      descriptions and affordances are what search can match);
    - one named return keeps its name and type; several become one ``dict`` named after the state
      the tool produces, each field listed in its description; either carries that state when the
      tool produces exactly one;
    - ``id`` is dropped (toolpath numbers tools itself) and skills are kept as workflow skills.

    Nothing from agora-workbench is imported; fields this format does not know are kept, so
    validation reports them.
    """
    server_name = document.get("server_name")
    translated: dict[str, Any] = {key: value for key, value in document.items() if key != "server_name"}
    translated["domain"] = server_name
    tools = document.get("tools")
    if isinstance(tools, list):
        translated["tools"] = [_agora_tool(tool, server_name) for tool in tools]
        translated.setdefault("states", _agora_states(translated["tools"], as_list(document.get("skills"))))
    return translated


def _agora_states(tools: list, skills: list) -> list[dict]:
    """A state for each token the tools and skills use, described by the tools that produce it."""
    tokens: dict[str, dict[str, Any]] = {}
    for tool in tools:
        transition = as_mapping(tool.get("state_transition")) if isinstance(tool, dict) else {}
        for token in [*as_list(transition.get("requires")), *as_list(transition.get("produces"))]:
            if isinstance(token, str):
                tokens.setdefault(token, {"token": token, "description": "", "affordances": []})
        for token in as_list(transition.get("produces")):
            if isinstance(token, str) and isinstance(tool.get("name"), str):
                state = tokens[token]
                made_by = f"{tool['name']}: {tool.get('description') or 'no description'}"
                state["description"] = f"{state['description']} {made_by}".strip() if state["description"] else f"Reached by {made_by}"
                state["affordances"] += [
                    phrase for phrase in as_list(tool.get("affordances")) if isinstance(phrase, str) and phrase not in state["affordances"]
                ]
    for skill in skills:
        for token in as_list(as_mapping(skill).get("states")):
            if isinstance(token, str):
                tokens.setdefault(token, {"token": token, "description": f"A state of the {skill.get('name')} skill.", "affordances": []})
    return list(tokens.values())


def _agora_tool(tool: Any, server_name: Any) -> Any:
    if not isinstance(tool, dict):
        return tool
    tool = {key: value for key, value in tool.items() if key != "id"}
    if tool.get("server_name") is None:
        tool["server_name"] = server_name
    for key in ("required_parameters", "optional_parameters"):
        if isinstance(tool.get(key), list):
            tool[key] = [{**parameter, "type": _plain_type(parameter.get("type"))} if isinstance(parameter, dict) else parameter for parameter in tool[key]]
    returns = tool.get("return_spec")
    if isinstance(returns, list):
        produced = [token for token in as_list(as_mapping(tool.get("state_transition")).get("produces")) if isinstance(token, str)]
        carried = produced[0] if len(produced) == 1 else None
        if not returns:
            tool["return_spec"] = None
        elif len(returns) == 1 and isinstance(returns[0], dict):
            tool["return_spec"] = {**returns[0], "type": _plain_type(returns[0].get("type")), "state": carried}
        else:
            fields = [entry for entry in returns if isinstance(entry, dict)]
            listed = "; ".join(f"{entry.get('name')} ({_plain_type(entry.get('type'))}): {entry.get('description') or ''}".rstrip(": ") for entry in fields)
            name = carried.rsplit(".", 1)[-1] if carried else f"{tool.get('name')}_result"
            tool["return_spec"] = {"name": name, "type": "dict", "description": f"a dict of {listed}", "state": carried}
    elif isinstance(returns, dict):
        tool["return_spec"] = {**returns, "type": _plain_type(returns.get("type"))}
    return tool


def is_agora_workbench(document: dict) -> bool:
    return "server_name" in document and "domain" not in document
