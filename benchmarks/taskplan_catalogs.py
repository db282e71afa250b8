"""Toolpath catalogs built from the task-planning benchmark data (``../shared/data/taskplan/``).

Both data sets come from the GNN4TaskPlan release (see that directory's README); the catalogs are
built at run time from the files there and never copied into the project.

**TMDB** (RestBench, 46 endpoints). What is inferred from ``tmdb_oas.json`` and ``tool.json``:

- *requires*: every path parameter named ``{kind_id}`` (``{movie_id}``, ``{person_id}`` ...) is a
  state (``tmdb.movie_id`` ...) the endpoint needs, and the parameter carries it (``state:``), so
  a planned cell passes the id an earlier step found. Other parameters (``query``,
  ``{media_type}``, ``{time_window}``, ``{season_number}``, ``{episode_number}``) are user inputs,
  not states: requests say "the second episode of the first season", they do not look it up.
- *produces*, where the 200-response schema (or, where the schema is broken, its example: the
  trending endpoint's schema names its list ``""``) says so:
  - a ``results`` array of a listing, search, discovery, trending, similar or recommendations
    endpoint lists ids of the kind its path names (``/search/person`` → ``tmdb.person_id``;
    ``/movie/{movie_id}/similar`` → ``tmdb.movie_id``; trending lists movies, shows and people);
  - an endpoint without path parameters that returns one object with an ``id`` (``/movie/latest``)
    gives that kind's id;
  - nested properties carry other kinds' ids: ``cast``, ``crew``, ``guest_stars`` and ``created_by``
    list people (on ``/person/...`` credit endpoints, the movies or shows instead),
    ``production_companies`` companies, ``networks`` networks, ``belongs_to_collection`` a
    collection, a collection's ``parts`` movies, ``seasons`` season numbers and ``episodes``
    episode numbers.
- each endpoint's affordances are its name in words, the operation's ``summary`` and the first
  sentence of its ``description`` in the OpenAPI file;
- every endpoint also produces a state of its own, ``tmdb.result.<endpoint>``, described by the
  endpoint's description, so a request can name what it wants from any endpoint.

**TMDB drafted** (issue 54): the catalog the product drafts from ``tmdb_oas.json``
(:func:`toolpath.registry.openapi_draft.draft_openapi_catalog`, no hand edits), restricted to the 46
endpoints of ``tool.json`` and each tool renamed to the benchmark's id (``GET /movie/{movie_id}/credits``
→ ``GetMovieCredit``) so gold chains score; the non-GET operations are left out (RestBench's requests
only read). States no kept tool names are dropped. The tools keep their ``http`` blocks and
``outputs`` (only planning is measured; nothing is called).

**TMDB reviewed** (issue 54): the same draft with the edits a catalog author makes after reading it
and its ``# TODO:`` notes, ``tmdb_reviewed_edits.yaml`` (its header says what they are and how each
TODO was settled): descriptions and affordances in the words users ask with, a few outputs fixed.
They are applied to the whole draft by drafted tool name and state token (an edit naming anything the
draft lacks is an error), before the draft is kept to the benchmark's tools as above. They were
checked against our own development requests only, never RestBench's.

**UltraTool** (260 tools). ``tool_desc.json`` gives only an id, a description and domains, with no
inputs or outputs, so nothing is inferred about data flow: each tool requires nothing and produces
its own state ``ultratool.result.<tool>``. The order of a plan then comes from the order of the
parts of the request.

All tools cost 1. Tool modules are never imported: the benchmark only plans.

What use teaches on top of these (phrasings, prerequisite habits) is not built here: the benchmark
learns it through ``toolpath.planner.learning.learn`` as a catalog overlay (``bench_taskplan.py``,
training examples from :mod:`taskplan_training`).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "taskplan"

#: The catalog author's reviewed edits of the drafted TMDB catalog (issue 54; what they are: its header).
TMDB_REVIEWED_EDITS = Path(__file__).resolve().parent / "tmdb_reviewed_edits.yaml"


_KINDS = ("movie", "tv", "person", "collection", "company", "network")
_LISTINGS = {"popular", "top_rated", "now_playing", "on_the_air", "similar", "recommendations", "upcoming"}
_PEOPLE = {"cast", "crew", "guest_stars", "created_by"}
_NESTED = {"production_companies": "company_id", "networks": "network_id", "belongs_to_collection": "collection_id", "parts": "movie_id"}


def _words(name: str) -> str:
    """``GetMovieCredit`` → ``get movie credit``; ``clock_alarm_cancel`` → ``clock alarm cancel``."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).replace("_", " ").lower()


def _response_properties(operation: dict[str, Any]) -> dict[str, Any]:
    """The 200 response's top-level properties: the schema's, and the keys of its example."""
    content = operation.get("responses", {}).get("200", {}).get("content", {}).get("application/json", {})
    example = content.get("examples", {}).get("response", {}).get("value")
    return {**(example if isinstance(example, dict) else {}), **(content.get("schema", {}).get("properties", {}) or {})}


def _first_sentences(operation: dict[str, Any]) -> list[str]:
    """The operation's summary and the first sentence of its description (what the API says it does)."""
    description = re.split(r"(?<=\.)\s", (operation.get("description") or "").strip(), maxsplit=1)[0]
    return [text for text in (operation.get("summary") or "", re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", description)) if text.strip()]


def _tmdb_produces(path: str, properties: dict[str, Any]) -> set[str]:
    segments = [segment for segment in path.strip("/").split("/") if not segment.startswith("{")]
    parameters = re.findall(r"\{(\w+)\}", path)
    produced: set[str] = set()
    if "results" in properties:
        if segments[0] in ("search", "discover") and len(segments) > 1 and segments[1] in ("movie", "tv", "person", "collection", "company"):
            produced.add(f"{segments[1]}_id")
        elif segments[0] == "trending":
            produced.update({"movie_id", "tv_id", "person_id"})
        elif segments[-1] in _LISTINGS and segments[0] in _KINDS:
            produced.add(f"{segments[0]}_id")
    if not parameters and "id" in properties and segments[0] in _KINDS:
        produced.add(f"{segments[0]}_id")
    for name in properties:
        if name in _PEOPLE:
            if segments[0] == "person":
                produced.add("tv_id" if segments[-1].startswith("tv") else "movie_id")
            else:
                produced.add("person_id")
        elif name in _NESTED:
            produced.add(_NESTED[name])
    return produced


def tmdb_catalog(data: Path = DEFAULT_DATA) -> dict[str, Any]:
    """The TMDB catalog as a catalog document (see the module docstring for what is inferred)."""
    specification = json.loads((data / "tmdb" / "tmdb_oas.json").read_text())
    endpoints = json.loads((data / "tmdb" / "tool.json").read_text())["nodes"]
    tools, states = [], {}
    for endpoint in endpoints:
        path = endpoint["raw"]
        operation = specification["paths"][path]["get"]
        requires = {f"tmdb.{name}" for name in re.findall(r"\{(\w+)\}", path) if name.endswith("_id")}
        produces = {f"tmdb.{name}" for name in _tmdb_produces(path, _response_properties(operation))} - requires
        own = f"tmdb.result.{_words(endpoint['id']).replace(' ', '_')}"
        states[own] = {
            "token": own,
            "description": f"The result of {endpoint['id']}: {endpoint['desc']}",
            "affordances": [endpoint["desc"], endpoint["raw_desc"]],
        }
        for token in requires | produces:
            kind = token.removeprefix("tmdb.").replace("_", " ")
            states.setdefault(token, {"token": token, "description": f"A {kind} is known.", "affordances": [f"find the {kind}"]})
        parameters = [
            {"name": name, "type": "str", **({"state": f"tmdb.{name}"} if f"tmdb.{name}" in requires else {})} for name in re.findall(r"\{(\w+)\}", path)
        ]
        parameters += [
            {"name": parameter["name"], "type": "str"}
            for parameter in operation.get("parameters", [])
            if parameter.get("required") and parameter.get("in") == "query"
        ]
        tools.append(
            {
                "name": endpoint["id"],
                "description": f"{endpoint['desc']} ({endpoint['raw_desc']}; GET {path})",
                "required_parameters": parameters,
                "state_transition": {"requires": sorted(requires), "produces": sorted(produces | {own})},
                "affordances": [_words(endpoint["id"]), *_first_sentences(operation)],
            }
        )
    return {"domain": "tmdb", "package": "tmdb_api", "states": sorted(states.values(), key=lambda state: state["token"]), "tools": tools}


def tmdb_drafted_catalog(data: Path = DEFAULT_DATA) -> dict[str, Any]:
    """The TMDB catalog as ``toolpath catalog draft --openapi`` drafts it (see the module docstring)."""
    return _benchmark_tools(_tmdb_draft(data), data)


def tmdb_reviewed_catalog(data: Path = DEFAULT_DATA, edits: Path = TMDB_REVIEWED_EDITS) -> dict[str, Any]:
    """The drafted TMDB catalog with the author's reviewed edits (``edits``) applied to the whole
    draft, then kept to the benchmark's tools as :func:`tmdb_drafted_catalog` keeps them.

    Raises:
        ValueError: an edit names a tool, state, affordance or output the draft lacks, or a field
            edits do not have (see :func:`apply_reviewed_edits`).
    """
    return _benchmark_tools(apply_reviewed_edits(_tmdb_draft(data), edits), data)


def _tmdb_draft(data: Path) -> dict[str, Any]:
    from toolpath.registry.openapi_draft import draft_openapi_catalog

    document, _, _ = draft_openapi_catalog(str(data / "tmdb" / "tmdb_oas.json"), domain="tmdb")
    return document


def _benchmark_tools(document: dict[str, Any], data: Path) -> dict[str, Any]:
    """The drafted GET tools of ``tool.json``'s endpoints, renamed to the benchmark's ids, and the states they use."""
    benchmark_ids = {endpoint["raw"]: endpoint["id"] for endpoint in json.loads((data / "tmdb" / "tool.json").read_text())["nodes"]}
    tools = []
    for tool in document["tools"]:
        path = tool["http"]["path"]
        if tool["http"]["method"] == "GET" and path in benchmark_ids:
            tools.append(tool | {"name": benchmark_ids[path]})
    used = {token for tool in tools for token in (*tool["state_transition"]["requires"], *tool["state_transition"]["produces"])}
    states = [state for state in document["states"] if state["token"] in used]
    return {"domain": "tmdb", "package": "tmdb_api", "http_apis": document["http_apis"], "states": states, "tools": tools}


_TOOL_EDITS = {"description", "affordances", "remove_affordances", "outputs", "remove_outputs"}
_STATE_EDITS = {"description", "affordances", "remove_affordances"}


def apply_reviewed_edits(document: dict[str, Any], edits: Path) -> dict[str, Any]:
    """``document`` (a drafted catalog) with the edits of the YAML file ``edits`` applied; ``document`` is not changed.

    ``edits`` has ``tools:`` and ``states:``, keyed by the drafted tool name and state token; what
    each entry may say is in the header of :data:`TMDB_REVIEWED_EDITS`. An output set on a tool is
    also produced by it; an output removed is no longer produced.

    Raises:
        ValueError: naming the edits file and the entry: a tool or state the draft lacks, a field
            edits do not have, an affordance to remove the draft does not give, an output to set
            that is not a drafted state, or one to remove the tool does not produce.
    """
    import copy

    import yaml

    reviewed = copy.deepcopy(document)
    with edits.open() as stream:  # the parser's errors then name the file
        content = yaml.safe_load(stream) or {}
    tools = {tool["name"]: tool for tool in reviewed["tools"]}
    states = {state["token"]: state for state in reviewed["states"]}
    for kind, entries, allowed in (("tool", tools, _TOOL_EDITS), ("state", states, _STATE_EDITS)):
        for name, edit in (content.get(f"{kind}s") or {}).items():
            where = f"{edits}: {kind}s.{name}"
            if name not in entries:
                raise ValueError(f"{where}: the draft has no {kind} {name!r}; use the drafted name (toolpath catalog draft --openapi ... --domain tmdb)")
            if unknown := set(edit) - allowed:
                raise ValueError(f"{where}: {', '.join(sorted(unknown))} is not an edit of a {kind}; edits are {', '.join(sorted(allowed))}")
            entry = entries[name]
            for affordance in edit.get("remove_affordances", []):
                if affordance not in entry.get("affordances", []):
                    raise ValueError(f"{where}.remove_affordances: the draft gives no affordance {affordance!r}")
                entry["affordances"].remove(affordance)
            entry["affordances"] = [*entry.get("affordances", []), *edit.get("affordances", [])]
            if "description" in edit:
                entry["description"] = edit["description"]
            produces = entry.get("state_transition", {}).get("produces", [])
            for token in edit.get("remove_outputs", []):
                if token not in produces:
                    raise ValueError(f"{where}.remove_outputs: {name} does not produce {token!r}")
                produces.remove(token)
                entry.get("outputs", {}).pop(token, None)
            for token, path in (edit.get("outputs") or {}).items():
                if token not in states:
                    raise ValueError(f"{where}.outputs: the draft has no state {token!r}")
                entry.setdefault("outputs", {})[token] = path
                if token not in produces:
                    produces.append(token)
    return reviewed


def ultratool_catalog(data: Path = DEFAULT_DATA) -> dict[str, Any]:
    """The UltraTool catalog: one state per tool, no data flow (see the module docstring)."""
    nodes = json.loads((data / "ultratool" / "tool_desc.json").read_text())["nodes"]
    tools, states = [], []
    for node in nodes:
        own = f"ultratool.result.{node['id']}"
        states.append({"token": own, "description": f"The result of {node['id']}: {node['desc']}", "affordances": [node["desc"]]})
        tools.append(
            {
                "name": node["id"],
                "description": f"{node['desc']} (domains: {', '.join(node.get('domain', []))})",
                "state_transition": {"requires": [], "produces": [own]},
                "affordances": [_words(node["id"])],
            }
        )
    return {"domain": "ultratool", "package": "ultratool_api", "states": states, "tools": tools}


def write_catalogs(directory: Path, data: Path = DEFAULT_DATA) -> dict[str, Path]:
    """Write the catalogs as JSON files into ``directory``; returns ``{data set: path}``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    builds = (("tmdb", tmdb_catalog), ("tmdb_drafted", tmdb_drafted_catalog), ("tmdb_reviewed", tmdb_reviewed_catalog), ("ultratool", ultratool_catalog))
    for name, build in builds:
        paths[name] = directory / f"{name}.catalog.json"
        paths[name].write_text(json.dumps(build(data), indent=1))
    return paths


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, required=True, help="directory to write tmdb.catalog.json and ultratool.catalog.json into")
    options = parser.parse_args()
    for name, path in write_catalogs(options.out, options.data).items():
        print(f"{name}: {path}")
