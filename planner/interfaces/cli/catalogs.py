"""Writing catalogs from the command line: ``toolpath validate`` (lint catalog files), ``toolpath
schema`` (their JSON Schema), ``toolpath init`` (a new catalog package), ``toolpath catalog draft``
(a catalog of an MCP server's tools) and ``toolpath catalog index`` (their skill index, ahead of time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolpath.planner.interfaces.cli.shared import CommandLineError, add_command, catalog_paths, emit_json

if TYPE_CHECKING:
    from toolpath.planner.search.skills import SkillIndex
    from toolpath.planner.tasks.workspace import Workspace

VALIDATE_EXAMPLES = """examples:
  toolpath validate catalogs/chemistry/catalog.yaml
  toolpath validate my_catalog.yaml other.json --import --json"""
SCHEMA_EXAMPLES = """examples:
  toolpath schema > catalog.schema.json
  # then, first line of a catalog: # yaml-language-server: $schema=catalog.schema.json"""
INIT_EXAMPLES = """examples:
  toolpath init lab_tools
  toolpath init lab_tools --directory src"""
DRAFT_EXAMPLES = """examples:
  toolpath catalog draft --mcp "uvx mcp-server-time" --output time.yaml
  toolpath catalog draft --mcp "python -m mcp_server_git --repository ." --name git --domain git
  toolpath catalog draft --mcp https://example.com/mcp --header 'Authorization: Bearer ${EXAMPLE_TOKEN}'
  toolpath catalog draft --openapi tmdb_oas.json --domain tmdb --output tmdb.yaml
  toolpath catalog draft --openapi https://petstore3.swagger.io/api/v3/openapi.json --name petstore
  toolpath catalog draft --openapi tmdb_oas.json --json   # the catalog as a "catalog" string, with its tools, TODOs and lint findings
${NAME} in --env and --header values is kept in the catalog and read from the environment when the
server is connected, so the catalog holds no secret."""

INDEX_EXAMPLES = """examples:
  toolpath catalog index big.json                    # the shipped catalogs and big.json: what `toolpath search --add-catalog big.json` searches
  toolpath catalog index --catalog big.json --json   # big.json alone: what `--catalog big.json` searches
  TOOLPATH_CATALOGS=big.json toolpath catalog index  # what every command searches with that variable set
The index is stored per set of catalogs: index the set your commands load."""


def add_validate_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath validate`` to ``commands``, run by :func:`command_validate`."""
    validate = add_command(
        commands,
        "validate",
        "Lint catalog files: every problem with file, line, rule code and field (codes: see toolpath.registry.lint).",
        command_validate,
        VALIDATE_EXAMPLES,
        catalogs=False,
    )
    validate.add_argument("catalogs", nargs="+", metavar="CATALOG", help="catalog files (YAML or JSON), linted together")
    validate.add_argument(
        "--import",
        dest="import_modules",
        action="store_true",
        help="also import each tool's module and check its function exists (runs the modules' import-time code)",
    )


def command_validate(arguments: argparse.Namespace) -> int:
    from toolpath.planner.search.embedding_model import DEFAULT_MODEL_ID
    from toolpath.registry import lint_catalogs

    # An overlay's vectors must come from the model search uses (TP111).
    findings = lint_catalogs(arguments.catalogs, import_modules=arguments.import_modules, embedding_model=DEFAULT_MODEL_ID)
    errors = sum(finding.severity == "error" for finding in findings)
    if arguments.json:
        emit_json({"ok": errors == 0, "errors": errors, "warnings": len(findings) - errors, "findings": [finding.to_dict() for finding in findings]})
    else:
        for finding in findings:
            print(finding)
        verdict = "ok" if errors == 0 else "failed"
        print(f"{verdict}: {errors} error(s), {len(findings) - errors} warning(s) in {len(arguments.catalogs)} catalog(s)")
    return 1 if errors else 0


def add_schema_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath schema`` to ``commands``, run by :func:`command_schema`."""
    schema = commands.add_parser(
        "schema",
        help="Print the JSON Schema of catalog files.",
        description="Print the JSON Schema of catalog files (for editors: # yaml-language-server: $schema=PATH).",
        epilog=SCHEMA_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    schema.set_defaults(handler=command_schema)


def command_schema(arguments: argparse.Namespace) -> int:
    from toolpath.registry import catalog_json_schema

    print(json.dumps(catalog_json_schema(), indent=2))
    return 0


def add_init_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath init`` to ``commands``, run by :func:`command_init`."""
    init = commands.add_parser(
        "init",
        help="Start a catalog package: catalog.yaml, one tool module and a test, ready to validate and run.",
        description="Start a catalog package DOMAIN/ (catalog.yaml inside it, one tool module, a pytest test) that validates and runs as generated.",
        epilog=INIT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.set_defaults(handler=command_init)
    init.add_argument("domain", metavar="DOMAIN", help="the domain, also the package name (a lower-case Python name)")
    init.add_argument("--directory", default=".", metavar="DIR", help="where to create the package (default: the current directory)")


def command_init(arguments: argparse.Namespace) -> int:
    from toolpath.planner.interfaces.scaffold import ScaffoldError, scaffold

    try:
        catalog = scaffold(arguments.domain, arguments.directory)
    except ScaffoldError as error:
        raise CommandLineError(str(error)) from error
    print(f"wrote {catalog.parent}/ (catalog.yaml, summarise_text.py, tests/)")
    print("next:")
    print(f"  toolpath validate {catalog} --import")
    print(f"  toolpath run \"summarise a text\" --add-catalog {catalog} --input text='Plans are cells. Cells run.'")
    print(f"  cd {catalog.parent.parent} && python -m pytest {arguments.domain}")
    return 0


def add_catalog_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath catalog`` to ``commands``, with its verbs ``draft`` (:func:`command_catalog_draft`)
    and ``index`` (:func:`command_catalog_index`)."""
    catalog = commands.add_parser(
        "catalog",
        help="Write catalogs (`toolpath catalog draft --mcp COMMAND|URL` or `--openapi SPEC`) and index them ahead of time (`toolpath catalog index PATH`).",
        description="Write catalogs, and index them ahead of time.",
    )
    catalog_commands = catalog.add_subparsers(dest="catalog_command", required=True, metavar="COMMAND")
    draft = catalog_commands.add_parser(
        "draft",
        help="Draft a catalog of an MCP server's tools, or of a REST API's OpenAPI description (states drawn from its schemas).",
        description="--mcp: connect to an MCP server and write a catalog YAML of its tools, each served by that server: names, descriptions and parameters from their input schemas; the states are left for you to fill in (`toolpath validate` reports each tool that produces none, TP004). --openapi: read an OpenAPI 3.0/3.1 or Swagger 2.0 description and write one HTTP tool per operation, with the identifiers its responses give as states the operations taking them require, and TODO comments where it could not decide.",
        epilog=DRAFT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    draft.set_defaults(handler=command_catalog_draft)
    _add_index_parser(catalog_commands)
    source = draft.add_mutually_exclusive_group(required=True)
    source.add_argument("--mcp", metavar="COMMAND|URL", help="the server: a command line that starts it over stdio, or an http(s):// Streamable HTTP URL")
    source.add_argument("--openapi", metavar="SPEC", help="an OpenAPI 3.0/3.1 or Swagger 2.0 description: a JSON or YAML file, or an http(s):// URL")
    draft.add_argument(
        "--name",
        metavar="NAME",
        help="the server's name under mcp_servers, or the API's under http_apis (default: the server's own name; for --openapi the domain)",
    )
    draft.add_argument("--domain", metavar="NAME", help="the catalog's domain (default: the server's name; for --openapi the description's title)")
    draft.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="an environment variable for a server started by command; repeatable")
    draft.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'", help="an HTTP header for a server reached by URL; repeatable")
    draft.add_argument("--output", "-o", metavar="FILE", help='write the catalog here (default: standard output; with --json, its "catalog" field)')
    draft.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    draft.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: the catalog's tools, states, TODOs and lint findings (and the catalog itself without --output)",
    )


def _pairs(values: Sequence[str], separator: str, option: str, example: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        name, found, text = value.partition(separator)
        if not found or not name.strip():
            raise CommandLineError(f"{option} {value!r} is not NAME{separator}VALUE; e.g. {option} {example!r}")
        pairs[name.strip()] = text.strip() if separator == ":" else text
    return pairs


def _write_draft(text: str, output: str | None, next_step: str, quiet: bool = False) -> None:
    """Write ``text`` to ``output`` whole or not at all (to standard output when ``None``, unless
    ``quiet``: ``--json`` puts it in its object), and say what to do next on standard error."""
    if not output:
        if not quiet:
            print(text, end="")
        return
    temporary = f"{output}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as file:  # whole or nothing: renamed into place
            file.write(text)
        os.replace(temporary, output)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise CommandLineError(f"cannot write {output}: {error.strerror or error}") from None
    if not quiet:
        print(f"wrote {output}; {next_step}", file=sys.stderr)


def draft_report(
    kind: str,
    source: str,
    document: Mapping[str, Any],
    text: str,
    output: str | None,
    todos: Mapping[str, Sequence[str]] | None = None,
    notes: Sequence[str] = (),
    left_out: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``catalog draft --json``'s object: what a program driving the draft needs to act on it.

    Keys: ``kind`` (``openapi`` or ``mcp``), ``source`` (the description or server as given),
    ``output`` (the file written, or ``None``), ``domain``, ``api`` (the ``http_apis`` name; ``None`` for ``mcp``) and
    ``server`` (the ``mcp_servers`` name; ``None`` for ``openapi``), ``tools`` (names, in catalog
    order), ``states`` (tokens declared), ``approval_always`` (tools whose every call waits for the
    approver), ``todos`` (``{"tool", "text"}``, what the author must decide; ``tool`` ``None`` for the
    catalog as a whole), ``left_out`` (``{"tool", "reason"}``, server tools not drafted), and the
    draft linted as ``toolpath validate --json`` reports it: ``errors``, ``warnings``, ``findings``
    (``path`` ``None`` and lines of the ``catalog`` text when no file was written); last,
    ``catalog``: the YAML text when no file was written (else ``None``), so it is never lost.
    """
    tools = list(document.get("tools") or [])
    report: dict[str, Any] = {
        "kind": kind,
        "source": source,
        "output": output,
        "domain": document.get("domain"),
        "api": next(iter(document.get("http_apis") or {}), None),
        "server": next(iter(document.get("mcp_servers") or {}), None),
        "tools": [tool["name"] for tool in tools],
        "states": [state["token"] for state in document.get("states") or []],
        "approval_always": [tool["name"] for tool in tools if tool.get("approval") == "always"],
        "todos": [{"tool": None, "text": note} for note in notes]
        + [{"tool": tool["name"], "text": todo} for tool in tools for todo in (todos or {}).get(tool["name"], [])],
        "left_out": [{"tool": name, "reason": reason} for name, reason in (left_out or {}).items()],
    }
    findings = _draft_findings(text, output)
    errors = sum(finding["severity"] == "error" for finding in findings)
    # The catalog last: a person reading the object sees the summary before the long text.
    return {**report, "errors": errors, "warnings": len(findings) - errors, "findings": findings, "catalog": None if output else text}


def _draft_findings(text: str, output: str | None) -> list[dict[str, Any]]:
    """``toolpath validate``'s findings for the drafted ``text`` (read from ``output`` when written)."""
    import tempfile

    from toolpath.registry import lint_catalogs

    if output:
        return [finding.to_dict() for finding in lint_catalogs([output])]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "draft.yaml")
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        return [{**finding.to_dict(), "path": None} for finding in lint_catalogs([path])]


def _check_output(output: str | None, force: bool) -> None:
    # The draft is renamed over the output (_write_draft): over a pipe or device it would replace it.
    if output and os.path.exists(output) and not os.path.isfile(output):
        raise CommandLineError(f"{output} is not a regular file; give the path of a file to write")
    if output and os.path.exists(output) and not force:
        raise CommandLineError(f"{output} exists; pass --force to overwrite it")
    if output and not os.path.isdir(os.path.dirname(os.path.abspath(output))):
        raise CommandLineError(f"the directory of {output} does not exist; create it first")


def command_catalog_draft_openapi(arguments: argparse.Namespace) -> int:
    """``toolpath catalog draft --openapi SPEC``: the catalog :mod:`toolpath.registry.openapi_draft` drafts."""
    import datetime

    from toolpath.registry.openapi_draft import OpenAPIDraftError, draft_openapi_catalog, render_catalog

    if arguments.env or arguments.header:
        raise CommandLineError("--env and --header are for --mcp; an API's auth is drafted from its securitySchemes into http_apis")
    _check_output(arguments.output, arguments.force)
    try:
        document, todos, notes = draft_openapi_catalog(arguments.openapi, arguments.domain, arguments.name)
    except OpenAPIDraftError as error:
        raise CommandLineError(str(error)) from None
    text = render_catalog(document, todos, notes, arguments.openapi, datetime.date.today().isoformat())
    left = sum(len(items) for items in todos.values()) + len(notes)
    _write_draft(text, arguments.output, f"review its {left} TODO(s), then `toolpath validate {arguments.output}`", quiet=arguments.json)
    if arguments.json:
        emit_json(draft_report("openapi", arguments.openapi, document, text, arguments.output, todos, notes))
    return 0


def command_catalog_draft(arguments: argparse.Namespace) -> int:
    if arguments.openapi is not None:
        return command_catalog_draft_openapi(arguments)
    import asyncio

    from toolpath.kernel import MCPConnectionError  # the MCP SDK loads only for this command
    from toolpath.planner.interfaces.draft import draft_mcp_catalog, load_problems, server_config

    env = _pairs(arguments.env, "=", "--env", "GITHUB_TOKEN=${GITHUB_TOKEN}")
    headers = _pairs(arguments.header, ":", "--header", "Authorization: Bearer ${TOKEN}")
    output = arguments.output
    _check_output(output, arguments.force)
    try:
        config = server_config(arguments.mcp, arguments.name or "", env, headers)
    except ValueError as error:
        raise CommandLineError(f"--mcp {arguments.mcp!r}: {error}") from None
    for option, values in (("--env", env), ("--header", headers)):
        for name, value in values.items():
            if "${" not in value:
                print(
                    f"toolpath: warning: {option} {name} is written into the catalog as given; write ${{NAME}} to read a secret from the environment when connecting instead",
                    file=sys.stderr,
                )
    try:
        draft = asyncio.run(draft_mcp_catalog(config, arguments.domain))
    except MCPConnectionError as error:
        raise CommandLineError(str(error)) from None
    text = draft.text()
    if not arguments.json:  # --json reports them among its findings
        for problem in load_problems(text):
            print(f"toolpath: warning: the draft does not load as it is: {problem}", file=sys.stderr)
    _write_draft(text, output, f"now declare its states and fill in each tool's state_transition, then `toolpath validate {output}`", quiet=arguments.json)
    if arguments.json:
        emit_json(draft_report("mcp", arguments.mcp, draft.document, text, output, left_out=draft.skipped))
    return 0


def _add_index_parser(catalog_commands: argparse._SubParsersAction) -> None:
    index = add_command(
        catalog_commands,
        "index",
        "Build and store the skill index of a set of catalogs ahead of time (the first embedding of their texts, the BM25 index), so that "
        "`toolpath search`, `plan`, `cell`, `run` and `serve` over the same catalogs load it instead of building it. Nothing is built when it is stored already.",
        command_catalog_index,
        INDEX_EXAMPLES,
    )
    index.add_argument("catalogs", nargs="*", metavar="PATH", help="catalog files to index with the others, as --add-catalog adds them")
    index.add_argument("--rebuild", action="store_true", help="build and store it again even when it is stored (the embedding cache is still used)")


def command_catalog_index(arguments: argparse.Namespace) -> int:
    """``toolpath catalog index``: the catalogs' skill index built and stored (or found stored), and
    what it holds (:func:`index_report`)."""
    import shutil
    import time
    import warnings

    from toolpath.errors import ToolpathError
    from toolpath.planner.search.skills import SkillIndex
    from toolpath.planner.tasks.workspace import Workspace
    from toolpath.registry.storage import StoreError

    arguments.add_catalog = [*arguments.add_catalog, *arguments.catalogs]
    paths = catalog_paths(arguments)
    started = time.perf_counter()
    workspace = Workspace.open(paths)
    workspace.recorder = None
    graph = workspace.graph
    load_seconds = time.perf_counter() - started
    started = time.perf_counter()
    with warnings.catch_warnings():
        # Not storing it is this command's failure, said once below rather than warned too.
        warnings.filterwarnings("ignore", message="the skill index cannot be stored", category=RuntimeWarning)
        # The catalog part only: learned overlays are applied on top by each process that loads it.
        index = SkillIndex(graph)
        if arguments.rebuild and index.stored is not None and index.stored.loaded:
            shutil.rmtree(index.stored.directory, ignore_errors=True)
            index = SkillIndex(graph)
    index_seconds = time.perf_counter() - started
    stored = index.stored
    if stored is None:  # the embedding model could not load: the index fell back to BM25, as warned
        raise ToolpathError("nothing was stored: an index without embeddings is not what later commands would load; install the embedding model and run again")
    if not stored.stored:
        raise StoreError(
            stored.directory.parent,
            "skill index store",
            stored.problem or "it cannot be written",
            "Make it writable, or set TOOLPATH_HOME to a writable directory.",
        )
    report = index_report(paths, workspace, index, load_seconds, index_seconds)
    if arguments.json:
        emit_json(report)
    elif stored.loaded:
        print(f"already indexed: {report['entries']:,} entries of {len(paths)} catalog(s), {report['bytes']['total'] / 2**20:,.1f} MiB in {stored.directory}")
    else:
        embedded, cached = report["texts_embedded"], report["texts_from_cache"]
        print(
            f"indexed {report['entries']:,} entries ({report['texts']:,} texts: {embedded:,} embedded, {cached:,} from the embedding cache) "
            f"of {len(paths)} catalog(s) in {index_seconds:.1f} s: {report['bytes']['total'] / 2**20:,.1f} MiB in {stored.directory}"
        )
    return 0


def index_report(paths: Sequence[Path], workspace: Workspace, index: SkillIndex, load_seconds: float, index_seconds: float) -> dict[str, Any]:
    """``catalog index --json``'s object.

    Keys: ``catalogs`` (the files, in load order), ``tools``, ``states``, ``entries`` (states and
    tools indexed), ``texts`` (their texts embedded), ``dimensions``, ``model`` (``{"id", "version"}``),
    ``built`` (false when it was stored already and only loaded), ``texts_embedded`` and
    ``texts_from_cache`` (this run's embedding-cache misses and hits; both 0 when loaded),
    ``directory``, ``key``, ``approximate`` (whether dense search goes through an approximate
    nearest-neighbour index), ``bytes`` (``dense``: the vectors and any such index; ``bm25``;
    ``total``, with the manifest and where each entry's texts start), ``seconds``
    (``load_catalogs``, ``index``: building, or loading when it was stored).
    """
    from toolpath.planner.search.stored_index import model_identity

    stored = index.stored
    assert stored is not None
    hits, misses = index.cache_counts
    dense = stored.directory / "dense"
    model = model_identity(index.embedder)
    return {
        "catalogs": [str(path) for path in paths],
        "tools": len(workspace.loaded.registry),
        "states": len(workspace.graph.states),
        "entries": len(index),
        "texts": stored.texts,
        "dimensions": index.text_dimensions,
        "model": None if model is None else model.to_dict(),
        "built": not stored.loaded,
        "texts_embedded": misses,
        "texts_from_cache": hits,
        "directory": str(stored.directory),
        "key": stored.key,
        "approximate": index.dense_index is not None and index.dense_index.approximate,
        "bytes": {
            "dense": sum(path.stat().st_size for path in dense.iterdir()) if dense.is_dir() else 0,
            "bm25": sum(path.stat().st_size for path in (stored.directory / "bm25").iterdir()),
            "total": stored.bytes,
        },
        "seconds": {"load_catalogs": round(load_seconds, 3), "index": round(index_seconds, 3)},
    }
