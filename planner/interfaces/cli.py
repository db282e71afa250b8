"""The ``toolpath`` command line: validate, graph, search, plan, cell, run, serve, catalog draft.

Exit status: 0 on success; 1 when an executed cell fails (exception, timeout, dead kernel) or
``validate`` finds problems; 2 when toolpath refuses before running anything (bad catalog, bad input,
no matching skill, no plan; for ``serve``, also an ``--http`` address that cannot be bound, such as
a port in use).

Errors' advice names the options of the command that reports them (``--add-catalog``, ``--input``,
``--have``; see :func:`_in_command_terms`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import difflib
import gc
import getpass
import json
import logging
import math
import os
import signal
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolpath.catalogs import CATALOGS_VARIABLE
from toolpath.errors import Refusal, ToolpathError, Vocabulary
from toolpath.planner.interfaces.serve_limits import SERVE_MAX_KERNELS, SERVE_MAX_KERNELS_PER_USER, SERVE_MAX_SESSIONS_PER_USER, SERVE_MAX_TASKS_PER_USER
from toolpath.planner.planning.budgets import DEFAULT_TIME_BUDGET_MS

if TYPE_CHECKING:
    from toolpath.kernel import CellResult, CodeMode
    from toolpath.planner.planning.plans import Plan
    from toolpath.planner.search.skills import SkillHit
    from toolpath.planner.tasks.cell import PlannedCell
    from toolpath.planner.tasks.parts import PartMatch
    from toolpath.planner.tasks.task import InputOption, TaskPlan
    from toolpath.planner.tasks.workspace import Workspace

EXAMPLES = {
    "run": """examples:
  toolpath run "is aspirin drug-like? check Lipinski's rule of five" --input smiles='CC(=O)Oc1ccccc1C(=O)O'
  toolpath run "cluster these molecules by structural similarity" --input smiles_list='["CCO","CCCO","c1ccccc1"]' --json
  toolpath run --step "identify the functional groups of this molecule" --step "check Lipinski's rule of five" --input smiles=CCO
  toolpath run "plot a histogram of year_introduced" --input path=catalogs/tabular/data/compounds.csv --input column=year_introduced --images plots/""",
    "cell": """examples:
  toolpath cell "find molecules similar to a query compound" --input query_smiles=CCO --input smiles_list='["CCCO","CCN"]'
  toolpath cell --goal chemistry.molecules_clustered --input smiles_list='["CCO","CCCO"]'""",
    "plan": """examples:
  toolpath plan --goal chemistry.descriptors_computed
  toolpath plan --goal chemistry.similarity_computed --goal chemistry.molecules_clustered --json
  toolpath plan --goal chemistry.descriptors_computed --have chemistry.molecule_parsed""",
    "search": """examples:
  toolpath search "check drug-likeness"
  toolpath search "group similar molecules" --k 3 --json
  toolpath search "filter drug-like molecules" --have chemistry.molecule_parsed --reachable-only
  toolpath search "greet a person" --add-catalog my_catalog.yaml""",
    "validate": """examples:
  toolpath validate catalogs/chemistry/catalog.yaml
  toolpath validate my_catalog.yaml other.json --import --json""",
    "schema": """examples:
  toolpath schema > catalog.schema.json
  # then, first line of a catalog: # yaml-language-server: $schema=catalog.schema.json""",
    "graph": """examples:
  toolpath graph
  toolpath graph --catalog my_catalog.yaml --json
  toolpath graph --format svg --output graph.svg
  toolpath graph --format png --goal chemistry.molecules_clustered --output plan.png
  toolpath graph --format mermaid --goal chemistry.descriptors_computed""",
    "init": """examples:
  toolpath init lab_tools
  toolpath init lab_tools --directory src""",
    "draft": """examples:
  toolpath catalog draft --mcp "uvx mcp-server-time" --output time.yaml
  toolpath catalog draft --mcp "python -m mcp_server_git --repository ." --name git --domain git
  toolpath catalog draft --mcp https://example.com/mcp --header 'Authorization: Bearer ${EXAMPLE_TOKEN}'
${NAME} in --env and --header values is kept in the catalog and read from the environment when the
server is connected, so the catalog holds no secret.""",
    "serve": """examples:
  toolpath serve
  toolpath serve --catalog my_catalog.yaml
  toolpath serve --http 127.0.0.1:8765 --tokens tokens.json   # tokens.json: {"a-long-random-token": "alice"}
  toolpath serve --hash-token    # reads a token, prints "sha256:...": a tokens.json key that does not give the token away
MCP client configuration (e.g. Claude Desktop's mcpServers):
  {"mcpServers": {"toolpath": {"command": "toolpath", "args": ["serve"]}}}
With --http, "toolpath serve: listening on http://HOST:PORT/mcp" goes to stderr once it accepts
connections; an address it cannot bind (a port in use) exits 2 at once, naming the process holding it.""",
}


class CommandLineError(Refusal, ValueError):
    """A malformed option value."""


#: The command line's advice for a domain no loaded catalog covers (see :class:`toolpath.errors.Vocabulary`).
LOAD_CATALOG = "load a catalog for this domain with --add-catalog PATH"


def parse_inputs(pairs: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs → dict.

    VALUE is JSON when it parses as JSON, else the raw string. ``@PATH`` reads the value from a
    file, ``@-`` from standard input, for values too big for a command line:
    a ``.json`` file must hold JSON; any other file (and standard input) is read as VALUE is, JSON
    when it parses, else its text without one trailing line break. ``@@...`` is the literal value
    ``@...`` (one ``@`` dropped). Files are read as UTF-8.

    Raises:
        CommandLineError: a pair that is not ``NAME=VALUE``, a name given twice, ``@-`` twice, or
            a file that cannot be read, is not UTF-8 or (``.json``) is not JSON; each names the input
            and the file.
    """
    inputs: dict[str, Any] = {}
    read_stdin = False
    for pair in pairs:
        name, separator, raw = pair.partition("=")
        name = name.strip()
        if not separator or not name:
            raise CommandLineError(f"--input {pair!r} is not NAME=VALUE; e.g. --input smiles=CCO or --input smiles_list=@molecules.json")
        if name in inputs:
            raise CommandLineError(f"--input {name} is given twice")
        if raw.startswith("@@"):
            inputs[name] = _json_or_text(name, raw[1:])
        elif raw == "@-":
            if read_stdin:
                raise CommandLineError(f"--input {name}=@-: standard input is read by another --input already; give this value in a file (@PATH)")
            read_stdin = True
            inputs[name] = _json_or_text(name, _without_line_break(sys.stdin.read()))
        elif raw.startswith("@"):
            inputs[name] = _input_file(name, raw[1:])
        else:
            inputs[name] = _json_or_text(name, raw)
    return inputs


def _json_or_text(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise CommandLineError(f"--input {name}: the JSON value is nested too deeply") from None
    except ValueError:  # not JSON (or a number Python refuses to convert): the raw string
        return raw


def _without_line_break(text: str) -> str:
    """``text`` without one trailing line break: a file's last line ends with one, its value does not."""
    return text.removesuffix("\n").removesuffix("\r")


def _input_file(name: str, path: str) -> Any:
    """The value of ``--input NAME=@PATH`` (see :func:`parse_inputs`); ``~`` in PATH is the home
    directory, as a shell would expand it without the ``@`` before it."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CommandLineError(f"--input {name}=@{path}: the file is not UTF-8 text (byte {error.start}); give a JSON or text file") from None
    except OSError as error:
        raise CommandLineError(
            f"--input {name}=@{path}: cannot read the file: {error.strerror or error} (write @@... for a value that starts with @)"
        ) from None
    if not path.lower().endswith(".json"):
        return _json_or_text(name, _without_line_break(text))
    try:
        return json.loads(text)
    except RecursionError:
        raise CommandLineError(f"--input {name}=@{path}: the JSON value is nested too deeply") from None
    except json.JSONDecodeError as error:
        raise CommandLineError(f"--input {name}=@{path}: not JSON at line {error.lineno}, column {error.colno}: {error.msg}") from None
    except ValueError as error:  # e.g. a number with more digits than Python converts
        raise CommandLineError(f"--input {name}=@{path}: not JSON Python can read: {error}") from None


def host_and_port(text: str) -> str:
    """argparse type: ``HOST:PORT`` (port 0: a free one), checked as CodeMode checks it."""
    from toolpath.kernel.codemode.options import parse_host_port

    try:
        parse_host_port(text, "the address")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


#: Environment variables of the kernel options (a token stays out of the command line, which
#: other users of the machine can read).
GATEWAY_URL_VARIABLE = "TOOLPATH_GATEWAY_URL"
GATEWAY_TOKEN_VARIABLE = "TOOLPATH_GATEWAY_TOKEN"


def code_mode_options(arguments: argparse.Namespace) -> dict[str, Any]:
    """The :class:`toolpath.kernel.CodeMode` options of ``--gateway-url``, ``--kernel-name`` and ``--bridge-*``
    (and ``$TOOLPATH_GATEWAY_URL``, ``$TOOLPATH_GATEWAY_TOKEN``); empty for kernels on this machine.

    Raises:
        CommandLineError: a gateway token without a gateway URL.
    """
    options: dict[str, Any] = {}
    gateway_url = arguments.gateway_url or os.environ.get(GATEWAY_URL_VARIABLE)
    token = os.environ.get(GATEWAY_TOKEN_VARIABLE)
    if gateway_url:
        options["gateway_url"], options["gateway_token"] = gateway_url, token or None
    elif token:
        raise CommandLineError(
            f"${GATEWAY_TOKEN_VARIABLE} is set but no gateway is: give --gateway-url (or ${GATEWAY_URL_VARIABLE}), or unset the token to run kernels on this machine"
        )
    if arguments.kernel_name:
        options["kernel_name"] = arguments.kernel_name
    if arguments.bridge_address:
        options["bridge_address"] = arguments.bridge_address
    if arguments.bridge_listen:
        options["bridge_listen"] = arguments.bridge_listen
    if arguments.bridge_certificate:
        options["bridge_certificate"] = tuple(arguments.bridge_certificate)
    return options


def lease_seconds(text: str) -> float:
    """argparse type: a session lease in seconds, at least :data:`toolpath.kernel.codemode.snapshot_store.MIN_LEASE_SECONDS`
    (refused as the command line is read, before the server loads anything)."""
    from toolpath.kernel.codemode.snapshot_store import MIN_LEASE_SECONDS

    number = positive_number(text)
    if number < MIN_LEASE_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r} is shorter than the shortest lease, {MIN_LEASE_SECONDS:g} s (it is renewed every third of it)")
    return number


def kernel_caps(arguments: argparse.Namespace) -> dict[str, Any]:
    """The :class:`toolpath.kernel.CodeMode` caps of ``toolpath serve``'s ``--max-kernels`` and ``--max-kernels-per-user``."""
    return {"max_kernels": arguments.max_kernels, "max_kernels_per_user": arguments.max_kernels_per_user}


def positive_number(text: str) -> float:
    """argparse type: a positive, finite number (of seconds or milliseconds, as the option says)."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (number > 0 and math.isfinite(number)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive, finite number")
    return number


def positive_count(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"{count} is not at least 1")
    return count


def hit_count(text: str) -> int:
    """argparse type: an integer from 1 to 100."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= count <= 100:
        raise argparse.ArgumentTypeError(f"{count} is outside 1-100")
    return count


def _emit_json(payload: dict) -> None:
    print(json.dumps(payload, indent=2, ensure_ascii=False, default=str))


def _indent(text: str, prefix: str = "    ") -> str:
    return textwrap.indent(text.rstrip("\n"), prefix)


def _print_plan(plan: Plan) -> None:
    proof = "optimal" if plan.optimal else f"not proven optimal: no plan costs less than {plan.lower_bound:g}"
    print(f"Plan ({len(plan.steps)} step{'s' if len(plan.steps) != 1 else ''}, cost {plan.cost:g}, {proof}):")
    if not plan.steps:
        print("    (the goal is already held)")
    for number, step in enumerate(plan.steps, 1):
        requires = ", ".join(sorted(step.requires)) or "-"
        produces = ", ".join(sorted(step.produces)) or "-"
        print(f"  {number}. {step.tool.server_name}.{step.tool.name}    requires: {requires}    produces: {produces}")


def _print_task_plan(task_plan: TaskPlan) -> None:
    from toolpath.planner.tasks.parts import task_text

    print(f"Task: {' '.join(task_text(task_plan.task).split())}")  # one line: a carriage return would hide what came before it
    if len(task_plan.parts) > 1:
        print("Parts:")
        for number, part in enumerate(task_plan.parts, 1):
            print(f"  {number}. {part.text!r}: {_part_outcome(part)}")
    print(f"Goal: {', '.join([*task_plan.goal, *(f'run {tool}' for tool in sorted(task_plan.plan.must_run))]) or '-'}")
    if len(task_plan.parts) == 1 and task_plan.parts[0].choice is not None:
        choice = task_plan.parts[0].choice
        print(f"  matched {choice.chosen.hit.kind} {choice.chosen.hit.name} ({_strength(choice.chosen.hit)}): {choice.chosen.hit.matched!r}")
        for candidate in choice.passed_over:
            target = f"tool {candidate.hit.server}.{candidate.hit.name}" if candidate.hit.kind == "tool" else ", ".join(sorted(candidate.goal))
            print(f"  passed over {target} ({_strength(candidate.hit)}): {candidate.reason()}")
    _print_plan(task_plan.plan)
    print("Cell:")
    print(_indent(task_plan.cell.display_code))
    if task_plan.cell.unbound:
        print("Unbound required parameters: " + ", ".join(f"{parameter.parameter} ({parameter.type})" for parameter in task_plan.cell.unbound))


def _part_outcome(part: PartMatch) -> str:
    if part.kind == "fact":
        given = "".join(f"; {name} = {value!r}" for name, value in part.values)
        return f"a fact, runs nothing; holds {', '.join(sorted(part.holds))}{given}" if part.holds else "a fact, runs nothing; holds nothing"
    if part.kind == "context":
        return "context (when or why), runs nothing"
    if part.choice is None:
        return f"matched nothing ({part.problem})"
    hit = part.choice.chosen.hit
    target = f"run {part.tool.server_name}.{part.tool.name}" if part.tool is not None else ", ".join(sorted(part.goal))
    held = "; already held, nothing to run for it" if part.status == "held" else ""
    return f"{target} ({hit.kind} {hit.name}, {_strength(hit)}){held}"


def _warn_about_parts(task_plan: TaskPlan) -> None:
    for part in task_plan.unmatched:
        print(f"warning: the part {part.text!r} of the task matched nothing and is not planned: {part.problem}", file=sys.stderr)


def _refuse_unused_inputs(cell: PlannedCell, plan: Plan) -> None:
    """Refuse an ``--input`` the planned cell does not use (a misspelled name, or an optional
    parameter given by its plain name), naming the inputs the plan takes.

    Raises:
        CommandLineError: for the first unused input.
    """
    for name in cell.unused_inputs:
        if name in cell.advice:
            raise CommandLineError(f"--input {name}: {cell.advice[name]}")
        required, optional = cell.input_names(plan)
        close = difflib.get_close_matches(name, [*required, *optional], n=1)
        suggestion = f" (did you mean --input {close[0]}=...?)" if close else ""
        takes = [*(f"{taken} (required)" for taken in required), *(f"{taken} (optional)" for taken in optional)]
        raise CommandLineError(
            f"--input {name}: no tool on the plan takes an input of that name{suggestion}. The plan takes: {', '.join(takes) or 'no inputs'}"
        )


def _warn_about_inputs(cell: PlannedCell) -> None:
    for parameter in cell.unbound:
        print(
            f"warning: {parameter.parameter} ({parameter.type}, for {parameter.tool}) is unbound: define it before running the cell, or pass --input {parameter.parameter}=VALUE",
            file=sys.stderr,
        )


def _task(arguments: argparse.Namespace) -> str | list[str]:
    """The task text, or the ``--step`` list; exactly one of them."""
    if arguments.step and arguments.task:
        raise CommandLineError("give either a TASK or --step ... (one per part), not both")
    if not arguments.step and not arguments.task:
        raise CommandLineError("give a TASK in words, or its parts as --step ... --step ...")
    return arguments.step or arguments.task


def _prepare_embedding_model() -> None:
    """Start loading the embedding model in a thread: it overlaps loading the catalogs and the
    search code, on another core."""
    from toolpath.planner.search.embedding import default_embedder

    default_embedder().prepare()


def command_run(arguments: argparse.Namespace) -> int:
    task = _task(arguments)
    inputs = parse_inputs(arguments.input)
    images_directory = _images_directory(arguments.images) if arguments.images else None
    from toolpath.planner.interfaces.terminal_approval import TerminalApprover

    workspace = _open_workspace(arguments)
    options = {**code_mode_options(arguments), "approver": TerminalApprover(arguments.yes)}
    # A gateway's kernel, or one a kernelspec's provisioner starts, may run on another machine,
    # where a directory of this one does not exist: its files go where it runs, as before.
    elsewhere = bool(options.get("gateway_url") or options.get("kernel_name"))
    if elsewhere and arguments.output_dir:
        raise CommandLineError("--output-dir is for kernels on this machine: a kernel of --gateway-url or --kernel-name writes its files where it runs")
    with contextlib.nullcontext() if elsewhere else _run_directory(arguments.output_dir) as output_directory:
        # The kernel starts first, as soon as the catalogs say how: it takes longest (about 0.7 s);
        # the query model and the planner load while it starts.
        with _early_kernel(workspace, arguments, options) as early:
            _prepare_embedding_model()
            from toolpath.planner.tasks.task import UnboundParametersError, input_options

            def plan_with(inputs: dict) -> TaskPlan:
                return workspace.plan_task(task, inputs, held=arguments.have, output_directory=output_directory)

            task_plan = plan_with(inputs)
            _refuse_unused_inputs(task_plan.cell, task_plan.plan)
            if task_plan.cell.unbound:
                raise UnboundParametersError(task_plan.cell.unbound, input_options(task_plan, plan_with))
            _warn_about_parts(task_plan)
            _warn_about_inputs(task_plan.cell)
            if not arguments.json:
                _print_task_plan(task_plan)
                print("Running in a fresh IPython kernel..." if task_plan.plan.steps else "Nothing to run: the goal is already held.", flush=True)
            gc.enable()  # host tools run in this process for as long as the cell runs: their garbage is collected
            if early is not None:
                run = workspace.run_task(task_plan, session_id=RUN_SESSION, code_mode=early)
            else:
                with _refused_kernel_options():
                    run = workspace.run_task(task_plan, timeout=arguments.timeout, session_id=RUN_SESSION, **options)
        written = sorted(str(path.relative_to(output_directory)) for path in output_directory.rglob("*") if path.is_file()) if output_directory else []
    result = run.result
    image_files = _write_images(result.images, images_directory) if images_directory else []
    if arguments.json:
        payload = run.to_dict()
        payload["output_directory"] = str(output_directory) if written else None
        payload["output_files"] = [str(output_directory / name) for name in written] if output_directory else []
        payload["image_files"] = [str(path) for path in image_files]
        _emit_json(payload)
        return 0 if result.status == "ok" else 1
    print(f"Result ({result.status}):")
    if result.notice:
        print(_indent(result.notice, "  "))
    if result.stdout:
        print("  stdout:")
        print(_indent(result.stdout))
    if result.stderr:
        print("  stderr:")
        print(_indent(result.stderr))
    if result.result is not None:
        print(_indent(result.short_result, "  "))
        if result.short_result != result.result:
            print("  (tables cut to their first and last rows and columns; --json gives the whole text)")
    if result.status == "timeout":
        # Where the interrupt landed is noise here (frames of the tool's libraries); --json keeps it.
        print(f"  {result.error['evalue']}; --timeout SECONDS gives it longer (default 300)")
    elif result.error:
        print(_indent(result.error.get("traceback") or f"{result.error['ename']}: {result.error['evalue']}", "  "))
    if run.variables:
        print(f"  {run.variables_text()}")
    if written:
        print(f"  Files written in {output_directory}: {', '.join(written)}")
    _print_images(result, image_files)
    failed = run.failed_step
    if failed is not None:
        steps = task_plan.plan.steps
        print(f"  Stopped at step {failed + 1} of {len(steps)} ({steps[failed].tool.name}); {failed} step(s) before it completed.")
    return 0 if result.status == "ok" else 1


#: Where ``toolpath run`` makes a fresh directory per run for the files its tools write, under toolpath's home.
RUNS_FOLDER = "runs"
#: The CodeMode session a ``toolpath run`` cell runs in.
RUN_SESSION = "toolpath-run"


@contextlib.contextmanager
def _refused_kernel_options() -> Iterator[None]:
    """CodeMode's ``ValueError`` for kernel options it refuses (an unreadable certificate, ...) as a :class:`CommandLineError`."""
    try:
        yield
    except ValueError as error:
        raise CommandLineError(str(error)) from error


@contextlib.contextmanager
def _early_kernel(workspace: Workspace, arguments: argparse.Namespace, options: dict[str, Any]) -> Iterator[CodeMode | None]:
    """The CodeMode of a ``toolpath run`` with its kernel starting now, while the task is planned
    (on the other core: a kernel takes about 0.8 s to start, about what planning takes), shut down
    afterwards; ``None`` when the catalogs have host-bound tools, which a CodeMode binds when it is
    made, so it is made for the plan's own (:meth:`Workspace.run_task`)."""
    if any(tool.binding == "host" for tool in workspace.loaded.registry):
        yield None
        return
    with _refused_kernel_options():
        code_mode = workspace.code_mode(arguments.timeout, snapshot=False, **options)
    with code_mode:
        code_mode.start_soon(RUN_SESSION)
        yield code_mode


@contextlib.contextmanager
def _run_directory(chosen: str | None) -> Iterator[Path]:
    """The directory (absolute, existing) where a run's tools write the files no input places: ``chosen``
    (``--output-dir``), created when missing, else a fresh one in ``$TOOLPATH_HOME/runs``, named by
    the time it was made. A directory made here is removed afterwards when nothing was written in it.

    Raises:
        CommandLineError: ``chosen`` holds files (they could be written over), is not a directory,
            or cannot be created.
    """
    from datetime import datetime

    from toolpath.registry.storage import default_home

    try:
        if chosen is None:
            runs = default_home() / RUNS_FOLDER
            runs.mkdir(parents=True, exist_ok=True, mode=0o700)
            directory, made = Path(tempfile.mkdtemp(prefix=datetime.now().strftime("%Y%m%d-%H%M%S-"), dir=runs)), True
        else:
            directory = Path(chosen).expanduser().absolute()
            made = not os.path.lexists(directory)
            if not made and not directory.is_dir():
                raise CommandLineError(f"--output-dir {chosen} is not a directory: give a new or empty directory, or leave the option out for a fresh one")
            if not made and any(directory.iterdir()):
                raise CommandLineError(
                    f"--output-dir {chosen} is not empty: the run's files could be written over its files; give a new or empty directory, or leave the option out for a fresh one"
                )
            directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CommandLineError(f"cannot make the run's output directory: {error}") from error
    try:
        yield directory
    finally:
        if made and directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def _images_directory(folder: str) -> Path:
    """``--images``'s directory (absolute), created when missing, checked before anything runs.

    Raises:
        CommandLineError: ``folder`` is not a directory, cannot be made, or cannot be written in.
    """
    directory = Path(folder).expanduser().absolute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CommandLineError(f"--images {folder}: cannot make the directory for the images: {error}; give a directory (new or existing)") from error
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CommandLineError(f"--images {folder}: cannot write in this directory; give one you can write in")
    return directory


def _write_images(images: Sequence[bytes], directory: Path) -> list[Path]:
    """Write ``images`` (PNG bytes) into ``directory`` as ``image-N.png``, N the lowest numbers free
    there, so no file is written over; their paths, in order.

    Raises:
        CommandLineError: the directory cannot be written in (anymore).
    """
    paths: list[Path] = []
    number = 1
    try:
        for image in images:
            while True:
                path = directory / f"image-{number}.png"
                number += 1
                try:
                    with path.open("xb") as file:  # "x": never over an existing file, even one made meanwhile
                        file.write(image)
                    break
                except FileExistsError:
                    continue
            paths.append(path)
    except OSError as error:
        raise CommandLineError(f"--images {directory}: cannot write the images there: {error}") from error
    return paths


def _print_images(result: CellResult, image_files: Sequence[Path]) -> None:
    """Where the cell's images are: their files, or how to get them; and those not kept."""
    if image_files:
        for number, path in enumerate(image_files, 1):
            print(f"  image {number}: {path}")
    elif result.images:
        count = len(result.images)
        them = "them" if count > 1 else "it"
        print(
            f"  {count} image{'s' if count > 1 else ''} (PNG): --images DIR writes {them} as {'files' if count > 1 else 'a file'}, --json gives {them} in base64"
        )
    for line in result.dropped_images:
        print(f"  not kept: {line}")


def command_cell(arguments: argparse.Namespace) -> int:
    if bool(arguments.goal) == bool(arguments.task or arguments.step):
        raise CommandLineError("give either a TASK (or --step ...) or --goal TOKEN ..., not both and not neither")
    if not arguments.goal:
        _prepare_embedding_model()
    workspace = _open_workspace(arguments)
    inputs = parse_inputs(arguments.input)
    if arguments.goal:
        goal_plan, cell = workspace.plan_goal(arguments.goal, inputs, held=arguments.have)
        _refuse_unused_inputs(cell, goal_plan)
        payload = {
            "goal": sorted(goal_plan.goal),
            "plan": goal_plan.to_dict(),
            "cell": cell.code,
            "instructions": cell.instructions,
            "instructions_saved_chars": cell.saved_chars,
            "wiring": cell.wiring(goal_plan),
            "unbound": [parameter.to_dict() for parameter in cell.unbound],
            "unused_inputs": list(cell.unused_inputs),
            "input_advice": dict(cell.advice),
        }
    else:
        from toolpath.planner.tasks.task import input_options  # with the search code, which --goal does not load

        task = _task(arguments)
        task_plan = workspace.plan_task(task, inputs, held=arguments.have)
        _warn_about_parts(task_plan)
        _refuse_unused_inputs(task_plan.cell, task_plan.plan)
        options = input_options(task_plan, lambda more: workspace.plan_task(task, more, held=arguments.have)) if task_plan.cell.unbound else ()
        payload = {**task_plan.to_dict(), "input_options": [option.to_dict() for option in options]}
        cell = task_plan.cell
        _warn_about_input_options(cell, options)
    _warn_about_inputs(cell)
    code, instructions = cell.display_code, cell.instructions
    if arguments.json:
        _emit_json(payload)
    else:
        print(code, end="")
        if arguments.instructions:
            print("\n# Instructions for the model:")
            print(_indent(instructions, "# "))
            if cell.saved_chars is not None:
                print(f"# ({len(instructions):,} characters; describing every catalog tool instead would take {cell.catalog_instruction_chars:,})")
    return 0


def command_plan(arguments: argparse.Namespace) -> int:
    from toolpath.planner.planning.plans import alternative_plans

    workspace = _open_workspace(arguments)
    goal_plan, *others = alternative_plans(
        workspace.graph, arguments.goal, held=arguments.have, avoid=arguments.avoid, k=arguments.k, time_budget_ms=arguments.time_budget
    )
    if arguments.json:
        _emit_json({**goal_plan.to_dict(), "alternatives": [other.to_dict() for other in others]} if arguments.k > 1 else goal_plan.to_dict())
    else:
        print(f"Goal: {', '.join(sorted(goal_plan.goal))}")
        _print_plan(goal_plan)
        for number, other in enumerate(others, 2):
            print(f"\nAlternative {number}:")
            _print_plan(other)
    return 0


def _strength(hit: SkillHit) -> str:
    return f"similarity {hit.similarity:.2f}" if hit.similarity is not None else f"BM25 {hit.lexical:.2f}"


def command_search(arguments: argparse.Namespace) -> int:
    if not arguments.query.strip():
        raise CommandLineError("the query is empty; describe what you want to achieve")
    _prepare_embedding_model()
    from toolpath.planner.search.skills import MIN_SCORE

    workspace = _open_workspace(arguments)
    hits = workspace.search(
        arguments.query, k=arguments.k, held=arguments.have, domain=arguments.domain or None, kind=arguments.kind, reachable_only=arguments.reachable_only
    )
    if not hits and not arguments.json:
        empty = not len(workspace.index)
        print("nothing to search: the catalogs declare no states or tools" if empty else "no hit passes the filters", file=sys.stderr)
    if arguments.json:
        _emit_json(
            {
                "query": arguments.query,
                "have": sorted(arguments.have),
                "mode": workspace.index.mode,
                "min_score": MIN_SCORE,
                "hits": [{**hit.to_dict(), "matches": hit.matches()} for hit in hits],
            }
        )
        return 0
    if hits:
        print(f"{'similarity' if hits[0].similarity is not None else 'BM25':>10}  kind   name    (best-matching text)  [plan from the held states]")
    for hit in hits:
        how = (
            (" -> ".join(step.tool.name for step in hit.plan.steps) or "held now")
            if hit.plan is not None
            else ("reachable" if hit.reachable else "unreachable")
        )
        strength = hit.similarity if hit.similarity is not None else hit.lexical
        weak = "" if hit.matches() else f"  -- weak: below {MIN_SCORE:g}, a task would not match it"
        print(f"{strength:>10.2f}  {hit.kind:<5}  {hit.name}    ({hit.matched})  [{how}]{weak}")
    return 0


def command_validate(arguments: argparse.Namespace) -> int:
    from toolpath.registry import lint_catalogs

    findings = lint_catalogs(arguments.catalogs, import_modules=arguments.import_modules)
    errors = sum(finding.severity == "error" for finding in findings)
    if arguments.json:
        _emit_json({"ok": errors == 0, "errors": errors, "warnings": len(findings) - errors, "findings": [finding.to_dict() for finding in findings]})
    else:
        for finding in findings:
            print(finding)
        verdict = "ok" if errors == 0 else "failed"
        print(f"{verdict}: {errors} error(s), {len(findings) - errors} warning(s) in {len(arguments.catalogs)} catalog(s)")
    return 1 if errors else 0


def command_schema(arguments: argparse.Namespace) -> int:
    from toolpath.registry import catalog_json_schema

    print(json.dumps(catalog_json_schema(), indent=2))
    return 0


def command_graph(arguments: argparse.Namespace) -> int:
    workspace = _open_workspace(arguments)
    if arguments.format is not None:
        return _picture(workspace, arguments)
    if arguments.goal or arguments.have or arguments.output:
        raise CommandLineError("--goal, --have and --output go with --format (mermaid, dot, svg or png)")
    overview = workspace.graph.overview()
    if arguments.json:
        _emit_json(overview)
    else:
        print(f"{overview['states']} states, {overview['tools']} tools, {overview['edges']} edges")
        print("entry tools (no requirements): " + (", ".join(overview["entry_tools"]) or "none"))
        if overview["undeclared_states"]:
            print("states used by tools but declared by no catalog: " + ", ".join(overview["undeclared_states"]))
    return 0


def _catalog_paths(arguments: argparse.Namespace) -> list[Path]:
    """The catalogs the command line names: ``--catalog``, else the shipped ones and
    ``TOOLPATH_CATALOGS``; then ``--add-catalog``."""
    from toolpath.planner.tasks.workspace import resolve_catalog_paths

    return resolve_catalog_paths(arguments.catalog, arguments.add_catalog)


def _open_workspace(arguments: argparse.Namespace) -> Workspace:
    """A workspace on the catalogs the command line names (the planner loads here, not at start:
    a command that embeds has started loading its model first, see :func:`_prepare_embedding_model`)."""
    from toolpath.planner.tasks.workspace import Workspace

    return Workspace.open(_catalog_paths(arguments))


def _picture(workspace: Workspace, arguments: argparse.Namespace) -> int:
    from toolpath.planner.planning import picture  # matplotlib loads only for an image
    from toolpath.planner.planning.plans import plan

    graph = workspace.graph
    graph.check_states(arguments.have)
    shown_plan = plan(graph, arguments.goal, held=arguments.have) if arguments.goal else None
    if arguments.format in ("svg", "png"):
        if not arguments.output:
            raise CommandLineError(f"an {arguments.format.upper()} image is written to a file: give --output FILE")
        written = picture.draw(graph, arguments.output, arguments.format, plan=shown_plan, held=arguments.have)
        print(f"wrote {written}" if not arguments.json else json.dumps({"output": str(written), "format": arguments.format}))
        return 0
    text = (picture.mermaid if arguments.format == "mermaid" else picture.dot)(graph, plan=shown_plan, held=arguments.have)
    if arguments.output:
        with open(arguments.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


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


#: ``--sandbox-limit`` fields (:class:`toolpath.kernel.sandbox.provisioner.SandboxPolicy`'s limits) and byte-size suffixes.
SANDBOX_LIMITS = ("memory_bytes", "cpu_seconds", "processes", "open_files", "disk_bytes")
SIZE_SUFFIXES = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
#: The largest size a byte-size option takes (1 EiB): more is a typo, and would overflow float arithmetic.
MAX_BYTE_SIZE = 2**60


def _whole_number(text: str, sizes: bool) -> int | None:
    """``text`` as a whole number, with a KiB, MiB or GiB suffix when ``sizes``; ``None`` when it is
    not one (``isascii``: ``str.isdigit`` also says yes to "²", which ``int`` refuses)."""
    scale = next((size for suffix, size in SIZE_SUFFIXES.items() if sizes and text.endswith(suffix)), 1)
    number = text[:-3] if scale != 1 else text
    return int(number) * scale if number.isascii() and number.isdigit() else None


def byte_size(text: str) -> int:
    """argparse type: a positive whole number of bytes up to :data:`MAX_BYTE_SIZE`, or of KiB, MiB or GiB (``16GiB``)."""
    # At most 20 digits are read: 400 of them made int() work for nothing, and any such is too large.
    size = _whole_number(text, sizes=True) if len(text) <= 23 else None
    if size is None or not 0 < size <= MAX_BYTE_SIZE:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: give a positive whole number of bytes up to 2**60, or with KiB, MiB or GiB (16GiB)")
    return size


def _sandbox_limits(items: Sequence[str]) -> dict[str, int | None]:
    """``--sandbox-limit FIELD=VALUE`` options as SandboxPolicy keywords: VALUE is a whole number
    (``_bytes`` fields also take a KiB, MiB or GiB suffix), or ``none`` to lift the limit.

    Raises:
        CommandLineError: an unknown field or a value that is not a whole number (the message says
            what is accepted).
    """
    limits: dict[str, int | None] = {}
    for item in items:
        field, _, value = item.partition("=")
        if field not in SANDBOX_LIMITS:
            raise CommandLineError(f"--sandbox-limit {item!r}: the field is one of {', '.join(SANDBOX_LIMITS)} (e.g. --sandbox-limit memory_bytes=1GiB)")
        number = _whole_number(value, sizes=field.endswith("_bytes"))
        if value == "none":
            limits[field] = None
        elif number is not None:
            limits[field] = number
        else:
            raise CommandLineError(
                f"--sandbox-limit {item!r}: give a whole number{' (or with KiB, MiB or GiB)' if field.endswith('_bytes') else ''}, or none to lift the limit"
            )
    return limits


def command_serve(arguments: argparse.Namespace) -> int:
    from toolpath.kernel.sandbox.provisioner import SandboxPolicy
    from toolpath.planner.interfaces.http_serving import HttpLimits
    from toolpath.planner.interfaces.server import ServeError, serve  # the MCP SDK loads only for this command
    from toolpath.registry.database import STORE_VARIABLE, open_database
    from toolpath.registry.storage import StoreError

    if arguments.hash_token:
        print(_hashed_token_from_stdin())
        return 0
    try:
        limits = None
        if arguments.max_connections is not None or arguments.request_timeout is not None:
            defaults = HttpLimits()
            limits = HttpLimits(
                max_connections=arguments.max_connections or defaults.max_connections, request_timeout=arguments.request_timeout or defaults.request_timeout
            )
        quotas = {"max_sessions_per_user": arguments.max_sessions_per_user, "max_tasks_per_user": arguments.max_tasks_per_user}
        sandbox = None
        if arguments.sandbox_network or arguments.sandbox_read or arguments.sandbox_limit:
            sandbox = SandboxPolicy(network=arguments.sandbox_network, read_only=tuple(arguments.sandbox_read), **_sandbox_limits(arguments.sandbox_limit))
        if arguments.store or os.environ.get(STORE_VARIABLE):
            open_database(arguments.store).check("store")  # a store it cannot use stops it now, not at the first request
        serve(
            _catalog_paths(arguments),
            arguments.http,
            arguments.tokens,
            arguments.no_auth,
            {**code_mode_options(arguments), **kernel_caps(arguments), **store_options(arguments)},
            limits,
            arguments.allowed_host,
            quotas,
            arguments.max_request_bytes,
            arguments.kernels,
            sandbox,
            arguments.memory_budget,
        )
    except (ServeError, ValueError, StoreError) as error:  # ValueError: CodeMode refused the kernel options
        raise CommandLineError(str(error)) from error
    return 0


def store_options(arguments: argparse.Namespace) -> dict[str, Any]:
    """The :class:`toolpath.kernel.CodeMode` options of ``--store``, ``--session-lease`` and ``--snapshot``."""
    options: dict[str, Any] = {}
    if arguments.store:
        options["snapshot_store"] = arguments.store
    if arguments.session_lease is not None:
        options["session_lease"] = arguments.session_lease
    if arguments.snapshot is not None:
        options["snapshot_after_each_cell"] = arguments.snapshot == "after-each-cell"
    return options


def _hashed_token_from_stdin() -> str:
    """``toolpath serve --hash-token``: the hashed form of the token read from standard input
    (without echo at a terminal), for a tokens file.

    Raises:
        CommandLineError: no token, a token with spaces or line breaks inside, or a short one.
    """
    from toolpath.planner.interfaces.server import MIN_TOKEN_LENGTH, hash_token

    token = (getpass.getpass("token (not shown): ") if sys.stdin.isatty() else sys.stdin.read()).strip()
    if not token or any(character.isspace() for character in token):
        raise CommandLineError(
            "--hash-token reads one bearer token, without spaces or line breaks, from standard input; e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))' | tee token.txt | toolpath serve --hash-token"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise CommandLineError(
            f"the token has {len(token)} characters, fewer than {MIN_TOKEN_LENGTH}; use a long random one (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return hash_token(token)


def _pairs(values: Sequence[str], separator: str, option: str, example: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        name, found, text = value.partition(separator)
        if not found or not name.strip():
            raise CommandLineError(f"{option} {value!r} is not NAME{separator}VALUE; e.g. {option} {example!r}")
        pairs[name.strip()] = text.strip() if separator == ":" else text
    return pairs


def command_catalog_draft(arguments: argparse.Namespace) -> int:
    import asyncio

    from toolpath.kernel import MCPConnectionError  # the MCP SDK loads only for this command
    from toolpath.planner.interfaces.draft import draft_catalog, load_problems, server_config

    env = _pairs(arguments.env, "=", "--env", "GITHUB_TOKEN=${GITHUB_TOKEN}")
    headers = _pairs(arguments.header, ":", "--header", "Authorization: Bearer ${TOKEN}")
    output = arguments.output
    if output and os.path.exists(output) and not arguments.force:
        raise CommandLineError(f"{output} exists; pass --force to overwrite it")
    if output and not os.path.isdir(os.path.dirname(os.path.abspath(output))):
        raise CommandLineError(f"the directory of {output} does not exist; create it first")
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
        text = asyncio.run(draft_catalog(config, arguments.domain))
    except MCPConnectionError as error:
        raise CommandLineError(str(error)) from None
    for problem in load_problems(text):
        print(f"toolpath: warning: the draft does not load as it is: {problem}", file=sys.stderr)
    if not output:
        print(text, end="")
        return 0
    temporary = f"{output}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as file:  # whole or nothing: renamed into place
            file.write(text)
        os.replace(temporary, output)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise CommandLineError(f"cannot write {output}: {error.strerror or error}") from None
    print(f"wrote {output}; now declare its states and fill in each tool's state_transition, then `toolpath validate {output}`", file=sys.stderr)
    return 0


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata is slow to load)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        import importlib.metadata

        try:
            version = importlib.metadata.version("toolpath")
        except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
            version = "(not installed)"
        print(f"toolpath {version}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolpath",
        description="Plan tool paths over a state-transition graph and run them as one cell in an IPython kernel.",
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES[name], formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.set_defaults(handler=handler)
        sub.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        if name != "validate":
            catalog_options(sub)
        return sub

    def catalog_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--catalog",
            action="append",
            default=[],
            metavar="PATH",
            help=f"a catalog file (YAML or JSON) to load instead of the shipped ones and those ${CATALOGS_VARIABLE} lists; repeatable",
        )
        sub.add_argument(
            "--add-catalog",
            action="append",
            default=[],
            metavar="PATH",
            help=f"a catalog file to load as well; repeatable (${CATALOGS_VARIABLE}, separated by '{os.pathsep}', adds files the same way)",
        )

    def task_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--step",
            action="append",
            default=[],
            metavar="TEXT",
            help="one part of the task, in words, instead of TASK; repeatable, in order (all are planned together)",
        )
        sub.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a tool parameter value; VALUE is parsed as JSON when it parses, else taken as a string; @FILE reads it from a file (a .json file must hold JSON), @- from standard input, @@... is a value starting with @; repeatable",
        )
        sub.add_argument("--have", action="append", default=[], metavar="TOKEN", help="a state already held; repeatable")

    def kernel_options(sub: argparse.ArgumentParser) -> None:
        where = sub.add_argument_group("where kernels run (default: this machine)")
        where.add_argument(
            "--gateway-url",
            metavar="URL",
            help=f"run kernels on this Jupyter Kernel Gateway or Enterprise Gateway (default ${GATEWAY_URL_VARIABLE}); its token is read from ${GATEWAY_TOKEN_VARIABLE}",
        )
        where.add_argument(
            "--kernel-name",
            metavar="NAME",
            help="start kernels from this kernelspec: the gateway's, or an installed one (its kernel provisioner decides where it runs)",
        )
        where.add_argument(
            "--bridge-address",
            type=host_and_port,
            metavar="HOST:PORT",
            help="where kernels on other hosts reach this process's host tools, over TLS (default 127.0.0.1 and a free port)",
        )
        where.add_argument(
            "--bridge-listen",
            type=host_and_port,
            metavar="HOST:PORT",
            help="where the bridge listens, when it differs from --bridge-address (e.g. 0.0.0.0:7443 behind a Kubernetes Service)",
        )
        where.add_argument(
            "--bridge-certificate",
            nargs=2,
            metavar=("CERT", "KEY"),
            help="PEM certificate and key for the bridge's TLS (default: a self-signed certificate made at start)",
        )

    run = command("run", "Plan a task, execute its cell in a fresh kernel and print the outputs.", command_run)
    run.add_argument("task", metavar="TASK", nargs="?", help="what to achieve, in words (parts joined by 'and', 'then', ... are planned together)")
    task_options(run)
    run.add_argument("--timeout", type=positive_number, default=300.0, metavar="SECONDS", help="interrupt the cell after this many seconds (default 300)")
    run.add_argument(
        "--output-dir",
        metavar="DIR",
        help="a new or empty directory for the files the tools write where no input says (default: a fresh one under toolpath's data directory, printed)",
    )
    run.add_argument(
        "--yes",
        action="store_true",
        help="approve every call that asks for approval (a write over an existing file, ...) instead of asking on the terminal; without a terminal such calls are refused",
    )
    run.add_argument(
        "--images", metavar="DIR", help="write the images the cell shows into DIR as image-N.png files (never over existing ones) and print their paths"
    )
    kernel_options(run)

    cell = command("cell", "Print the planned cell of a task (or of explicit goal states) without running it.", command_cell)
    cell.add_argument("task", metavar="TASK", nargs="?", help="what to achieve, in words (parts joined by 'and', 'then', ... are planned together)")
    cell.add_argument("--goal", action="append", default=[], metavar="TOKEN", help="plan to this state instead of searching; repeatable")
    cell.add_argument("--instructions", action="store_true", help="also print the instructions for a model")
    task_options(cell)

    plan_parser = command("plan", "Plan the cheapest tool path from the held states to goal states.", command_plan)
    plan_parser.add_argument("--goal", action="append", required=True, metavar="TOKEN", help="a goal state; repeatable (all must be reached)")
    plan_parser.add_argument("--have", action="append", default=[], metavar="TOKEN", help="a state already held; repeatable")
    plan_parser.add_argument("--avoid", action="append", default=[], metavar="TOOL", help="a tool (name or server.name) the plan must not use; repeatable")
    plan_parser.add_argument(
        "--k", type=hit_count, default=1, metavar="N", help="also show up to N-1 alternative plans with other tool sets, cheapest first (1-100, default 1)"
    )
    plan_parser.add_argument(
        "--time-budget",
        type=positive_number,
        default=DEFAULT_TIME_BUDGET_MS,
        metavar="MS",
        help=f"milliseconds each plan's search may spend proving it optimal; past them the best plan comes with a proven lower bound (default {DEFAULT_TIME_BUDGET_MS:g})",
    )

    search = command("search", "Search states and tools by affordance.", command_search)
    search.add_argument("query", metavar="QUERY", help="what you want to achieve, in words")
    search.add_argument("--k", type=hit_count, default=5, metavar="N", help="number of hits (1-100, default 5)")
    search.add_argument(
        "--have", action="append", default=[], metavar="TOKEN", help="a state already held; hits say whether they are reachable from these; repeatable"
    )
    search.add_argument("--domain", action="append", default=[], metavar="NAME", help="keep only hits of this server/domain; repeatable")
    search.add_argument("--kind", choices=["state", "tool"], help="keep only states or only tools")
    search.add_argument("--reachable-only", action="store_true", help="keep only hits a plan from the held states reaches")

    validate = command(
        "validate", "Lint catalog files: every problem with file, line, rule code and field (codes: see toolpath.registry.lint).", command_validate
    )
    validate.add_argument("catalogs", nargs="+", metavar="CATALOG", help="catalog files (YAML or JSON), linted together")
    validate.add_argument(
        "--import",
        dest="import_modules",
        action="store_true",
        help="also import each tool's module and check its function exists (runs the modules' import-time code)",
    )

    schema = commands.add_parser(
        "schema",
        help="Print the JSON Schema of catalog files.",
        description="Print the JSON Schema of catalog files (for editors: # yaml-language-server: $schema=PATH).",
        epilog=EXAMPLES["schema"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    schema.set_defaults(handler=command_schema)

    graph = command("graph", "Summarise the state-transition graph of the catalogs, or draw it (--format).", command_graph)
    graph.add_argument(
        "--format",
        choices=["mermaid", "dot", "svg", "png"],
        help="draw the graph, left to right in layers by reachability: Mermaid or Graphviz DOT text, or an SVG/PNG image (matplotlib; no Graphviz needed)",
    )
    graph.add_argument("--goal", action="append", default=[], metavar="TOKEN", help="with --format: highlight the plan to this goal state; repeatable")
    graph.add_argument("--have", action="append", default=[], metavar="TOKEN", help="with --format: a state held at the start (the first layer); repeatable")
    graph.add_argument("--output", "-o", metavar="FILE", help="with --format: write here (required for svg and png; text goes to standard output otherwise)")

    init = commands.add_parser(
        "init",
        help="Start a catalog package: catalog.yaml, one tool module and a test, ready to validate and run.",
        description="Start a catalog package DOMAIN/ (catalog.yaml inside it, one tool module, a pytest test) that validates and runs as generated.",
        epilog=EXAMPLES["init"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.set_defaults(handler=command_init)
    init.add_argument("domain", metavar="DOMAIN", help="the domain, also the package name (a lower-case Python name)")
    init.add_argument("--directory", default=".", metavar="DIR", help="where to create the package (default: the current directory)")

    catalog = commands.add_parser("catalog", help="Write catalogs: `toolpath catalog draft --mcp COMMAND|URL`.", description="Write catalogs.")
    catalog_commands = catalog.add_subparsers(dest="catalog_command", required=True, metavar="COMMAND")
    draft = catalog_commands.add_parser(
        "draft",
        help="Draft a catalog of an MCP server's tools (names, descriptions, parameters), leaving the states to you.",
        description="Connect to an MCP server and write a catalog YAML of its tools, each served by that server: names, descriptions and parameters from their input schemas. The states are left for you to fill in; `toolpath validate` reports each tool that produces none (TP004).",
        epilog=EXAMPLES["draft"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    draft.set_defaults(handler=command_catalog_draft)
    draft.add_argument(
        "--mcp", required=True, metavar="COMMAND|URL", help="the server: a command line that starts it over stdio, or an http(s):// Streamable HTTP URL"
    )
    draft.add_argument("--name", metavar="NAME", help="the server's name under mcp_servers (default: the name the server gives itself)")
    draft.add_argument("--domain", metavar="NAME", help="the catalog's domain (default: the server's name)")
    draft.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="an environment variable for a server started by command; repeatable")
    draft.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'", help="an HTTP header for a server reached by URL; repeatable")
    draft.add_argument("--output", "-o", metavar="FILE", help="write the catalog here (default: standard output)")
    draft.add_argument("--force", action="store_true", help="overwrite --output if it exists")

    serve_parser = commands.add_parser(
        "serve",
        help="Serve skill search, planning and persistent kernels to agents over MCP (stdio or Streamable HTTP).",
        description="Serve skill search, planning and persistent kernels to agents over MCP (stdio, or Streamable HTTP with --http): the model and indexes load once.",
        epilog=EXAMPLES["serve"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve_parser.set_defaults(handler=command_serve)
    catalog_options(serve_parser)
    serve_parser.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP at this address (at /mcp) instead of stdio, e.g. 127.0.0.1:8765")
    serve_parser.add_argument(
        "--tokens",
        metavar="FILE",
        help='with --http: a JSON file {"bearer token": "user id", ...}, where a token may be given hashed as "sha256:<hex digest>" (see --hash-token); each request acts for its token\'s user',
    )
    serve_parser.add_argument(
        "--hash-token",
        action="store_true",
        help='read a bearer token from standard input and print its hashed form, "sha256:<hex digest>", a tokens file key that does not give the token away; serves nothing',
    )
    serve_parser.add_argument("--no-auth", action="store_true", help="with --http on a loopback address: no tokens, every request acts for the local user")
    serve_parser.add_argument(
        "--kernels",
        choices=("auto", "sandboxed", "plain"),
        default="auto",
        help="where users' code runs on this machine: sandboxed (bubblewrap: no view of this server's files, environment, other sessions or the network), or plain (as this server's user, with its files); auto: sandboxed with --tokens, plain otherwise",
    )
    serve_parser.add_argument(
        "--sandbox-read",
        action="append",
        default=[],
        metavar="PATH",
        help="a host path sandboxed kernels may read (e.g. a data directory or your catalogs' modules); repeatable",
    )
    serve_parser.add_argument("--sandbox-network", action="store_true", help="let sandboxed kernels use the network (default: none)")
    serve_parser.add_argument(
        "--sandbox-limit",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a sandboxed kernel's limit: memory_bytes (default 2GiB), cpu_seconds (3600), processes (256), open_files (1024) or disk_bytes (512MiB); none lifts one (not disk_bytes); repeatable",
    )
    serve_parser.add_argument(
        "--store",
        metavar="PATH|URL",
        help="where sessions' snapshots, owners, holders and approval decisions are kept: a SQLite file, or a postgresql:// URL that several serve replicas share (default: $TOOLPATH_STORE, else toolpath.db in $TOOLPATH_HOME); keep a password out of the command line (other users can read it): use $TOOLPATH_STORE, PGPASSWORD or ~/.pgpass",
    )
    serve_parser.add_argument(
        "--session-lease",
        type=lease_seconds,
        metavar="SECONDS",
        help="how long this server's hold on a session lasts in the store unless renewed (it renews every third of that); another replica takes a session over once it runs out (default 30)",
    )
    serve_parser.add_argument(
        "--snapshot",
        choices=("after-each-cell", "debounce"),
        help="when a session's variables are saved: after-each-cell (before a cell's result is returned, so a replica's death loses no finished cell; the default with a PostgreSQL --store) or debounce (1.5 s after the last cell; the default with a SQLite store)",
    )
    serve_parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="with --http: a Host name clients (or a proxy) use for this server besides its address; requests naming any other Host or Origin are refused (DNS rebinding); repeatable",
    )
    serve_parser.add_argument(
        "--max-connections",
        type=positive_count,
        metavar="N",
        help="with --http: open connections at once (default 200, fewer if the open-file limit is low); more are answered 503",
    )
    serve_parser.add_argument(
        "--request-timeout", type=positive_number, metavar="SECONDS", help="with --http: time a client has to send a whole request, head and body (default 20)"
    )
    serve_parser.add_argument(
        "--max-kernels-per-user",
        type=positive_count,
        default=SERVE_MAX_KERNELS_PER_USER,
        metavar="N",
        help=f"live kernels one user may have; a new session beyond them snapshots and stops that user's least recently used idle one (default {SERVE_MAX_KERNELS_PER_USER})",
    )
    serve_parser.add_argument(
        "--max-kernels",
        type=positive_count,
        metavar="N",
        help=f"live kernels of all users together; a new session beyond them snapshots and stops the least recently used idle one (default {SERVE_MAX_KERNELS}, and for sandboxed kernels no more than fit --memory-budget at their memory limit; more than fit is refused)",
    )
    serve_parser.add_argument(
        "--memory-budget",
        type=byte_size,
        metavar="BYTES",
        help="memory the sandboxed kernels' limits may add up to, like 16GiB (default 75%% of this machine's memory, or of the control group's limit the server runs in)",
    )
    serve_parser.add_argument(
        "--max-sessions-per-user",
        type=positive_count,
        default=SERVE_MAX_SESSIONS_PER_USER,
        metavar="N",
        help=f"sessions one user may have open in this server (close_session ends one); a call naming a new one beyond them is an error (default {SERVE_MAX_SESSIONS_PER_USER})",
    )
    serve_parser.add_argument(
        "--max-tasks-per-user",
        type=positive_count,
        default=SERVE_MAX_TASKS_PER_USER,
        metavar="N",
        help=f"plan_task, run_task and execute calls one user may have running at once; one more is an error at once, not queued (default {SERVE_MAX_TASKS_PER_USER})",
    )
    serve_parser.add_argument(
        "--max-request-bytes",
        type=positive_count,
        metavar="N",
        help="with --http: the largest request body, in bytes; a larger one is answered 413 (default: the MCP SDK's, 4 MiB)",
    )
    kernel_options(serve_parser)
    return parser


def _exit_on_signal(signum, frame) -> None:
    # Raising here unwinds `async with IPythonKernel()`, so the kernel and its sockets are cleaned up.
    raise SystemExit(128 + signum)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    # A command-line user needs what happened and what to do, not the source line that warned.
    print(f"toolpath: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    warnings.showwarning = _show_warning
    # toolpath's own progress notes (e.g. a one-off model export) go to standard error.
    notes = logging.getLogger("toolpath")
    if not notes.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("toolpath: %(message)s"))
        notes.addHandler(handler)
        notes.setLevel(logging.INFO)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGHUP, _exit_on_signal)
    try:
        with contextlib.nullcontext() if arguments.command == "serve" else _without_cycle_collection():
            return arguments.handler(arguments)
    except KeyboardInterrupt:
        print("toolpath: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away; stop quietly as Unix tools do.
        sys.stdout = open(os.devnull, "w")
        return 141
    except ToolpathError as error:  # any other exception is a bug: its traceback stays
        message = _in_command_terms(error, arguments.command)
        if getattr(arguments, "json", False):
            _emit_json(_error_payload(error, message))
        else:
            print(f"toolpath: {message}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Run a command that ends soon without the cycle collector (:mod:`gc`), and freeze its objects
    at exit. Start-up makes some 300,000 objects that live until exit (modules, the catalogs, the
    query model): collecting them for cycles again and again cost a ``toolpath search`` about
    0.05 s, and interpreter shutdown collecting them all once more about 0.1 s (issue 37). The
    collector is on again afterwards (for a caller in the same process), as it is for ``serve``."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    atexit.register(gc.freeze)  # at exit, before the interpreter's last collections
    try:
        yield
    finally:
        gc.enable()


def _error_payload(error: ToolpathError, message: str) -> dict[str, Any]:
    """``--json``'s object for a refusal: ``error`` (the message), and what the error knows besides."""
    from toolpath.planner.planning.plans import NoPlanError
    from toolpath.planner.tasks.task import UnboundParametersError

    if isinstance(error, NoPlanError):
        return {**error.to_dict(), "error": message}
    if isinstance(error, UnboundParametersError):
        return {"error": message, "input_options": [option.to_dict() for option in error.options]}
    return {"error": message}


def _in_command_terms(error: ToolpathError, command: str) -> str:
    """The error's message, its advice naming only options ``command`` accepts."""
    from toolpath.planner.tasks.task import UnboundParametersError

    if isinstance(error, UnboundParametersError):  # raised by run, which takes --input
        if not error.options:
            return "the plan needs inputs that were not given: " + "; ".join(
                f"pass --input {parameter.parameter}=VALUE ({parameter.type}, for {parameter.tool})" for parameter in error.unbound
            )
        return "the plan needs inputs that were not given: " + _input_options_text(error.options)
    return error.message(Vocabulary(load_catalog=LOAD_CATALOG, give_state=lambda state, names: _how_to_give(command, state, names)))


def _input_options_text(options: Sequence[InputOption]) -> str:
    """``pass --input smiles=VALUE (str, for parse_molecule) for the plan ...; or, for the plan ..., pass ...``."""
    from toolpath.planner.tasks.task import describe_options

    return describe_options(
        options,
        lambda option: "pass " + " ".join(f"--input {name}=VALUE ({option.parameters[name][0]}, for {option.parameters[name][1]})" for name in option.names),
    )


def _warn_about_input_options(cell: PlannedCell, options: Sequence[InputOption]) -> None:
    """Say which inputs give a complete plan when that is not simply the unbound parameters
    (fewer inputs may give another plan: a task's goals are chosen knowing its inputs)."""
    if len(options) > 1 or (options and set(options[0].names) != {parameter.parameter for parameter in cell.unbound}):
        print(f"warning: the task plans otherwise with inputs: {_input_options_text(options)}", file=sys.stderr)


def _how_to_give(command: str, state: str, names: Sequence[str]) -> str:
    """How the user of ``command`` gives an input state that the inputs ``names`` carry."""
    hold = f"hold it with --have {state}"
    inputs = " or ".join(f"--input {name}=VALUE" for name in names)
    if not inputs:
        return hold
    if command in ("cell", "run"):
        return f"pass {inputs} (or {hold})"
    # plan and graph plan over states: they take held states, not values.
    return f"{hold} (to give its value instead: toolpath cell or run with {inputs})"


if __name__ == "__main__":
    sys.exit(main())
