"""``toolpath graph``: the state-transition graph of the catalogs, summarised or drawn (Mermaid,
Graphviz DOT, SVG or PNG), with the plan to a goal highlighted.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from toolpath.planner.interfaces.cli.shared import CommandLineError, add_command, emit_json, open_workspace

if TYPE_CHECKING:
    from toolpath.planner.tasks.workspace import Workspace

GRAPH_EXAMPLES = """examples:
  toolpath graph
  toolpath graph --catalog my_catalog.yaml --json
  toolpath graph --format svg --output graph.svg
  toolpath graph --format png --goal chemistry.molecules_clustered --output plan.png
  toolpath graph --format mermaid --goal chemistry.descriptors_computed"""


def add_graph_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath graph`` to ``commands``, run by :func:`command_graph`."""
    graph = add_command(commands, "graph", "Summarise the state-transition graph of the catalogs, or draw it (--format).", command_graph, GRAPH_EXAMPLES)
    graph.add_argument(
        "--format",
        choices=["mermaid", "dot", "svg", "png"],
        help="draw the graph, left to right in layers by reachability: Mermaid or Graphviz DOT text, or an SVG/PNG image (matplotlib; no Graphviz needed)",
    )
    graph.add_argument("--goal", action="append", default=[], metavar="TOKEN", help="with --format: highlight the plan to this goal state; repeatable")
    graph.add_argument("--have", action="append", default=[], metavar="TOKEN", help="with --format: a state held at the start (the first layer); repeatable")
    graph.add_argument("--output", "-o", metavar="FILE", help="with --format: write here (required for svg and png; text goes to standard output otherwise)")


def command_graph(arguments: argparse.Namespace) -> int:
    workspace = open_workspace(arguments)
    if arguments.format is not None:
        return _picture(workspace, arguments)
    if arguments.goal or arguments.have or arguments.output:
        raise CommandLineError("--goal, --have and --output go with --format (mermaid, dot, svg or png)")
    overview = workspace.graph.overview()
    if arguments.json:
        emit_json(overview)
    else:
        print(f"{overview['states']} states, {overview['tools']} tools, {overview['edges']} edges")
        print("entry tools (no requirements): " + (", ".join(overview["entry_tools"]) or "none"))
        if overview["undeclared_states"]:
            print("states used by tools but declared by no catalog: " + ", ".join(overview["undeclared_states"]))
    return 0


def _picture(workspace: Workspace, arguments: argparse.Namespace) -> int:
    from toolpath.planner.planning import picture  # matplotlib loads only for an image
    from toolpath.planner.planning.plans import plan

    graph = workspace.graph
    graph.check_states(arguments.have)
    shown_plan = plan(graph, arguments.goal, held=arguments.have) if arguments.goal else None
    if arguments.format in ("svg", "png"):
        if not arguments.output:
            raise CommandLineError(f"{arguments.format.upper()} pictures are written to a file: give --output FILE")
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
