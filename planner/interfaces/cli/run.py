"""``toolpath run``: plan a task and run its cell in a fresh kernel (started while the task is
planned), with a directory for the files its tools write and the images it shows.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolpath.planner.interfaces.cli.planning import check_parts, print_task_plan, refuse_unused_inputs, requested_task, warn_about_inputs
from toolpath.planner.interfaces.cli.recording import CommandRecord
from toolpath.planner.interfaces.cli.shared import (
    CommandLineError,
    add_command,
    add_kernel_options,
    add_task_options,
    code_mode_options,
    emit_json,
    indent,
    open_workspace,
    parse_inputs,
    positive_number,
    prepare_task_reading,
)
from toolpath.planner.planning.budgets import DEFAULT_MAX_REPLANS

#: ``--on-failure``'s choices (:data:`toolpath.planner.tasks.replanning.ON_FAILURE_CHOICES`, not imported: it loads the planner).
ON_FAILURE_CHOICES = ("replan", "stop")

if TYPE_CHECKING:
    from toolpath.kernel import CellResult, CodeMode, FailureInjection
    from toolpath.planner.tasks.task import TaskPlan
    from toolpath.planner.tasks.workspace import Workspace


def _replans(text: str) -> int:
    """``--max-replans``: a whole number ≥ 0."""
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"a whole number of replans, 0 or more, got {text!r}")
    return number


RUN_EXAMPLES = """examples:
  toolpath run "is aspirin drug-like? check Lipinski's rule of five" --input smiles='CC(=O)Oc1ccccc1C(=O)O'
  toolpath run "cluster these molecules by structural similarity" --input smiles_list='["CCO","CCCO","c1ccccc1"]' --json
  toolpath run --step "identify the functional groups of this molecule" --step "check Lipinski's rule of five" --input smiles=CCO
  toolpath run "plot a histogram of year_introduced" --input path=catalogs/tabular/data/compounds.csv --input column=year_introduced --images plots/
  toolpath run "is aspirin drug-like? check Lipinski's rule of five" --input smiles='CC(=O)Oc1ccccc1C(=O)O' --inject-failure chemistry.parse_molecule:0.5"""

#: Where ``toolpath run`` makes a fresh directory per run for the files its tools write, under toolpath's home.
RUNS_FOLDER = "runs"
#: The CodeMode session a ``toolpath run`` cell runs in.
RUN_SESSION = "toolpath-run"


def add_run_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath run`` to ``commands``, run by :func:`command_run`."""
    run = add_command(commands, "run", "Plan a task, execute its cell in a fresh kernel and print the outputs.", command_run, RUN_EXAMPLES)
    run.add_argument("task", metavar="TASK", nargs="?", help="what to achieve, in words (parts joined by 'and', 'then', ... are planned together)")
    add_task_options(run)
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
    run.add_argument(
        "--inject-failure",
        action="append",
        default=[],
        metavar="TOOL[:P]",
        help="make TOOL (server.tool or tool) fail on purpose, each try with probability P (default 1: every try), to see retries and failures; repeatable",
    )
    run.add_argument("--failure-seed", type=int, default=0, metavar="N", help="seed of --inject-failure's draws (default 0: a run repeats with the same seed)")
    run.add_argument(
        "--on-failure",
        choices=ON_FAILURE_CHOICES,
        default="replan",
        help="when a step fails for good (a lost connection, a timeout, a 5xx answer, an injected failure, a denied approval): "
        "replan from the values already made to the same goal, avoiding the failed tool (default), or stop there",
    )
    run.add_argument("--max-replans", type=_replans, default=DEFAULT_MAX_REPLANS, metavar="N", help=f"replan at most N times (default {DEFAULT_MAX_REPLANS})")
    add_kernel_options(run)


def injected_failures(workspace: Workspace, given: Sequence[str], seed: int = 0) -> list[FailureInjection]:
    """The :class:`toolpath.kernel.FailureInjection` of each ``--inject-failure TOOL[:P]``: TOOL as
    the planner names tools (``server.tool``, or ``tool`` when one loaded catalog has it), named by
    its server (the kernel matches it under whatever handle a cell binds); P a probability from 0 to 1 (default 1).

    Raises:
        CommandLineError: a P that is not a probability, a TOOL no loaded catalog has, or a bare
            ``tool`` several servers have (the message lists them).
    """
    from toolpath.kernel import FailureInjection
    from toolpath.planner.planning.plans import qualified_name
    from toolpath.planner.tasks.failure_injections import UnknownInjectionTargetError, named_tools

    tools = list(workspace.loaded.registry)
    injections: list[FailureInjection] = []
    for text in given:
        name, colon, probability_text = text.rpartition(":") if ":" in text else (text, "", "1")
        try:
            probability = float(probability_text)
        except ValueError:
            probability = -1.0
        if not 0 < probability <= 1:
            raise CommandLineError(f"--inject-failure {text}: P is a probability above 0 and at most 1 (TOOL:0.2), got {probability_text!r}")
        try:
            matched = named_tools(name, tools)
        except UnknownInjectionTargetError as error:
            raise CommandLineError(f"--inject-failure {text}: {error} (`toolpath search WORDS` or `toolpath graph` list them)") from None
        if len(matched) > 1:
            choices = ", ".join(sorted(f"{tool.server_name}.{tool.name}" for tool in matched))
            raise CommandLineError(f"--inject-failure {text}: several servers have a tool {name!r}; name one: {choices}")
        # The server as the catalog names it: the kernel matches it whatever handle a cell binds it as.
        target = qualified_name(matched[0])
        if any(injection.tool == target for injection in injections):
            raise CommandLineError(f"--inject-failure names {target} twice; give each tool once")
        injections.append(FailureInjection(target, probability=probability, seed=seed))
    return injections


def command_run(arguments: argparse.Namespace) -> int:
    task = requested_task(arguments)
    inputs = parse_inputs(arguments.input)
    images_directory = _images_directory(arguments.images) if arguments.images else None
    from toolpath.planner.interfaces.terminal_approval import TerminalApprover

    workspace = open_workspace(arguments)
    record = CommandRecord(arguments)
    options = {**code_mode_options(arguments), "approver": TerminalApprover(arguments.yes)}
    injections = injected_failures(workspace, arguments.inject_failure, arguments.failure_seed)
    if injections:
        options["inject_failures"] = injections
    # A gateway's kernel, or one a kernelspec's provisioner starts, may run on another machine,
    # where a directory of this one does not exist: its files go where it runs, as before.
    elsewhere = bool(options.get("gateway_url") or options.get("kernel_name"))
    if elsewhere and arguments.output_dir:
        raise CommandLineError("--output-dir is for kernels on this machine: a kernel of --gateway-url or --kernel-name writes its files where it runs")
    with contextlib.nullcontext() if elsewhere else _run_directory(arguments.output_dir) as output_directory:
        # The kernel starts first, as soon as the catalogs say how: it takes longest (about 0.7 s);
        # the query model and the planner load while it starts.
        with _early_kernel(workspace, arguments, options) as early:
            prepare_task_reading()
            from toolpath.planner.interfaces.terminal_meaning import plan_asking
            from toolpath.planner.tasks.task import UnboundParametersError, input_options

            meant: dict[str, str] = {}  # a person's answers about unclear parts, for every plan of this task

            def plan_with(inputs: dict) -> TaskPlan:
                return workspace.plan_task(task, inputs, held=arguments.have, output_directory=output_directory, meant=meant)

            with record.refusals(task, inputs):
                task_plan = record.task_plan = plan_asking(lambda: plan_with(inputs), meant)
                check_parts(task_plan, arguments.partial)
                refuse_unused_inputs(task_plan.cell, task_plan.plan)
                if task_plan.cell.unbound:
                    raise UnboundParametersError(task_plan.cell.unbound, input_options(task_plan, plan_with))
            warn_about_inputs(task_plan.cell)
            if not arguments.json:
                print_task_plan(task_plan)
                if injections:
                    print(f"Injecting failures into: {', '.join(injection.describe() for injection in injections)}", flush=True)
                print("Running in a fresh IPython kernel..." if task_plan.plan.steps else "Nothing to run: the goal is already held.", flush=True)
            gc.enable()  # host tools run in this process for as long as the cell runs: their garbage is collected
            with record.failures(task_plan):
                replanning = {"on_failure": arguments.on_failure, "max_replans": arguments.max_replans, "output_directory": output_directory}
                if early is not None:
                    run = workspace.run_task(task_plan, session_id=RUN_SESSION, code_mode=early, partial=arguments.partial, **replanning)
                else:
                    with _refused_kernel_options():
                        run = workspace.run_task(
                            task_plan, timeout=arguments.timeout, session_id=RUN_SESSION, partial=arguments.partial, **replanning, **options
                        )
            record.ran(run)
        written = sorted(str(path.relative_to(output_directory)) for path in output_directory.rglob("*") if path.is_file()) if output_directory else []
    result = run.result
    image_files = _write_images(result.images, images_directory) if images_directory else []
    if arguments.json:
        payload = run.to_dict()
        payload["output_directory"] = str(output_directory) if written else None
        payload["output_files"] = [str(output_directory / name) for name in written] if output_directory else []
        payload["image_files"] = [str(path) for path in image_files]
        payload["inject_failures"] = [injection.to_dict() for injection in injections]
        emit_json(payload)
        return 0 if result.status == "ok" else 1
    if run.earlier:
        # The failed cells' output (their retries among it) comes first, in the order it was made.
        print(run.earlier_output_text())
        print(f"Result ({result.status}), from {run.cell_title(len(run.earlier))}:")
    else:
        print(f"Result ({result.status}):")
    if result.notice:
        print(indent(result.notice, "  "))
    if result.stdout:
        print("  stdout:")
        print(indent(result.stdout))
    if result.stderr:
        print("  stderr:")
        print(indent(result.stderr))
    if result.result is not None:
        print(indent(result.short_result, "  "))
        if result.short_result != result.result:
            print("  (tables cut to their first and last rows and columns; --json gives the whole text)")
    if result.status == "timeout":
        # Where the interrupt landed is noise here (frames of the tool's libraries); --json keeps it.
        print(f"  {result.error['evalue']}; --timeout SECONDS gives it longer (default 300)")
    elif result.error:
        print(indent(result.error.get("traceback") or f"{result.error['ename']}: {result.error['evalue']}", "  "))
    if run.variables:
        print(f"  {run.variables_text()}")
    cells = [cell.result for cell in run.cells]
    retries = _summed(cell.retries for cell in cells)
    if retries:
        print(f"  Retried: {_counted(retries)}")
    if injections:
        print(f"  Injected failures: {_counted(_summed(cell.injected_failures for cell in cells)) or 'none struck'}")
    if run.replans or run.stopped:
        print(indent(run.replans_text(), "  "))
    if written:
        print(f"  Files written in {output_directory}: {', '.join(written)}")
    _print_images(result, image_files)
    failed = run.failed_step
    if failed is not None:
        steps = run.task_plan.plan.steps
        after = f" of the route replanned {len(run.replans)} time(s)" if run.replans else ""
        print(f"  Stopped at step {failed + 1} of {len(steps)}{after} ({steps[failed].tool.name}); {failed} step(s) before it completed.")
    return 0 if result.status == "ok" else 1


def _summed(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    """The counts of every cell of a run, added up per tool."""
    total: dict[str, int] = {}
    for cell in counts:
        for target, count in cell.items():
            total[target] = total.get(target, 0) + count
    return total


def _counted(counts: dict[str, int]) -> str:
    """``chemistry.parse_molecule 2 times, ...`` for a person."""
    return ", ".join(f"{target} {count} time{'s' if count != 1 else ''}" for target, count in counts.items())


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
