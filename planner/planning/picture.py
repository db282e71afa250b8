"""Pictures of a state graph: Mermaid and Graphviz DOT text, SVG and PNG images.

Every format lays the graph out the same way, left to right in **layers by reachability** from the
start: the held states (and the input states the user gives) and the tools that need nothing come
first, each tool one layer after the last of its requirements, each state one layer after its
earliest producer; what cannot be reached at all comes last. Within a layer, nodes are ordered by
the mean position of their predecessors (the barycentre heuristic of Sugiyama, Tagawa & Toda, IEEE
SMC 11(2), 1981), which keeps most edges short and uncrossed at 40 and more tools. Given a plan,
its steps and the states they hold are highlighted.

SVG and PNG are drawn with matplotlib alone: no Graphviz or other system package is needed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toolpath.errors import MissingExtraError

if TYPE_CHECKING:  # annotations only: the graph draws itself through this module (StateGraph.to_mermaid)
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.planning.plans import Plan


Node = tuple[str, object]  # ("state", token) or ("tool", tool id), as in StateGraph.graph


@dataclass(frozen=True)
class Layout:
    """Where each node goes: ``layer`` (column, from 0) and ``rank`` (row within its column, from 0)."""

    layer: dict[Node, int]
    rank: dict[Node, int]

    @property
    def layers(self) -> int:
        return max(self.layer.values(), default=-1) + 1

    @property
    def widest(self) -> int:
        return max(self.rank.values(), default=-1) + 1


def layered(graph: StateGraph, held: Iterable[str] = ()) -> Layout:
    """Layers by reachability from ``held`` and the input states (see the module docstring)."""
    start = set(held) | {token for token, state in graph.states.items() if state.input}
    layer: dict[Node, int] = {("state", token): 0 for token in start if ("state", token) in graph.graph}
    tools = list(graph.registry)
    changed = True
    while changed:  # levels only fall, so this settles (in at most as many passes as there are layers)
        changed = False
        for tool in tools:
            needed = [layer.get(("state", token)) for token in tool.state_transition.requires]
            if any(level is None for level in needed):
                continue
            node, level = ("tool", tool.id), max(needed, default=-1) + 1  # type: ignore[type-var]
            if level < layer.get(node, math.inf):
                layer[node], changed = level, True
            for token in tool.state_transition.produces:
                if level + 1 < layer.get(("state", token), math.inf):
                    layer[("state", token)], changed = level + 1, True
    last = max(layer.values(), default=-1) + 1
    for node in graph.graph.nodes:
        layer.setdefault(node, last)
    columns: dict[int, list[Node]] = {}
    for node in sorted(graph.graph.nodes, key=lambda node: (graph.graph.nodes[node]["label"], str(node[1]))):
        columns.setdefault(layer[node], []).append(node)
    rank: dict[Node, int] = {}
    for level in sorted(columns):

        def barycentre(node: Node) -> float:
            before = [rank[predecessor] for predecessor in graph.graph.predecessors(node) if predecessor in rank]
            return sum(before) / len(before) if before else math.inf

        ordered = sorted(columns[level], key=barycentre)  # stable: ties keep the label order
        rank.update((node, position) for position, node in enumerate(ordered))
    return Layout(layer, rank)


def _highlighted(plan: Plan | None) -> set[Node]:
    if plan is None:
        return set()
    nodes: set[Node] = {("tool", step.tool.id) for step in plan.steps}
    nodes |= {("state", token) for token in plan.held | plan.goal}
    nodes |= {("state", token) for step in plan.steps for token in step.requires | step.produces}
    return nodes


def _label(graph: StateGraph, node: Node) -> str:
    return str(graph.graph.nodes[node]["label"])


def _ordered(graph: StateGraph, layout: Layout) -> list[Node]:
    return sorted(graph.graph.nodes, key=lambda node: (layout.layer[node], layout.rank[node]))


def mermaid(graph: StateGraph, plan: Plan | None = None, held: Collection[str] = ()) -> str:
    """Mermaid flowchart text: states as rounded nodes, tools as boxes, left to right in layers
    (a subgraph per layer); node ids are generated (``n0``, ``n1``...), so any label is safe."""
    layout = layered(graph, held or (plan.held if plan else ()))
    nodes = _ordered(graph, layout)
    ids = {node: f"n{number}" for number, node in enumerate(nodes)}
    lines = ["flowchart LR"]
    for level in range(layout.layers):
        lines.append(f'    subgraph layer{level}[" "]')
        for node in (node for node in nodes if layout.layer[node] == level):
            text = _mermaid_text(_label(graph, node))
            lines.append(f'        {ids[node]}("{text}")' if node[0] == "state" else f'        {ids[node]}["{text}"]')
        lines.append("    end")
    lines += [f"    {ids[source]} --> {ids[target]}" for source, target in sorted(graph.graph.edges, key=lambda edge: (ids[edge[0]], ids[edge[1]]))]
    marked = _highlighted(plan)
    if marked:
        lines.append("    classDef plan fill:#ffd8a8,stroke:#e8590c,stroke-width:2px")
        lines.append(f"    class {','.join(ids[node] for node in nodes if node in marked)} plan")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    """``text`` safe inside a quoted Mermaid label (quotes and angle brackets as HTML entities)."""
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def dot(graph: StateGraph, plan: Plan | None = None, held: Collection[str] = ()) -> str:
    """Graphviz DOT text (``dot -Tsvg``), left to right, one ``rank=same`` group per layer."""
    layout = layered(graph, held or (plan.held if plan else ()))
    nodes = _ordered(graph, layout)
    ids = {node: f"n{number}" for number, node in enumerate(nodes)}
    marked = _highlighted(plan)
    lines = ["digraph toolpath {", "    rankdir=LR;", '    node [fontname="Helvetica", fontsize=10];']
    for node in nodes:
        shape = "ellipse" if node[0] == "state" else "box"
        style = ', style=filled, fillcolor="#ffd8a8", color="#e8590c", penwidth=2' if node in marked else ""
        lines.append(f'    {ids[node]} [label="{_dot_text(_label(graph, node))}", shape={shape}{style}];')
    for level in range(layout.layers):
        members = " ".join(ids[node] for node in nodes if layout.layer[node] == level)
        lines.append(f"    {{ rank=same; {members} }}")
    for source, target in sorted(graph.graph.edges, key=lambda edge: (ids[edge[0]], ids[edge[1]])):
        emphasis = ' [color="#e8590c", penwidth=2]' if source in marked and target in marked else ""
        lines.append(f"    {ids[source]} -> {ids[target]}{emphasis};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def draw(graph: StateGraph, path: str | Path, image_format: str, plan: Plan | None = None, held: Collection[str] = ()) -> Path:
    """Draw the graph to an SVG or PNG file with matplotlib (no display needed).

    Args:
        path: the file to write (replaced if it exists).
        image_format: ``"svg"`` or ``"png"``.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: another format.
        toolpath.errors.MissingExtraError: matplotlib is not installed (``toolpath[pictures]``).
    """
    if image_format not in ("svg", "png"):
        raise ValueError(f"cannot draw {image_format!r}; choose svg or png")
    try:
        import matplotlib
    except ImportError as error:
        raise MissingExtraError(
            f"drawing the graph as {image_format} needs matplotlib: pip install 'toolpath[pictures]' (or draw it as Mermaid or DOT text instead)"
        ) from error

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as pyplot

    layout = layered(graph, held or (plan.held if plan else ()))
    marked = _highlighted(plan)
    sizes = Counter(layout.layer.values())
    # Column width fits a label of about 30 characters at 8 points; rows are 0.45 inch apart.
    width, height = max(4.0, 2.6 * layout.layers), max(3.0, 0.45 * layout.widest + 1.0)
    figure, axes = pyplot.subplots(figsize=(width, height))
    position = {node: (2.6 * layout.layer[node], -0.45 * (layout.rank[node] - (sizes[layout.layer[node]] - 1) / 2)) for node in graph.graph.nodes}
    # Data units are about inches here; a 7-point character is about 0.055 inch wide. Arrows run
    # from the right side of one label to the left side of the next, so their heads show.
    half = {node: 0.0275 * len(_label(graph, node)) + 0.06 for node in graph.graph.nodes}
    for source, target in graph.graph.edges:
        on_plan = source in marked and target in marked
        (source_x, source_y), (target_x, target_y) = position[source], position[target]
        axes.annotate(
            "",
            xy=(target_x - half[target], target_y),
            xytext=(source_x + half[source], source_y),
            arrowprops={"arrowstyle": "-|>", "color": "#e8590c" if on_plan else "#adb5bd", "lw": 1.6 if on_plan else 0.6, "shrinkA": 0, "shrinkB": 0},
            zorder=1,
        )
    for node, (x, y) in position.items():
        tool = node[0] == "tool"
        face = "#ffd8a8" if node in marked else ("#e9ecef" if tool else "#d0ebff")
        edge = "#e8590c" if node in marked else ("#495057" if tool else "#1c7ed6")
        axes.text(
            x,
            y,
            _label(graph, node),
            ha="center",
            va="center",
            fontsize=7,
            zorder=2,
            bbox={"boxstyle": "square,pad=0.3" if tool else "round,pad=0.3", "facecolor": face, "edgecolor": edge, "linewidth": 0.8},
        )
    axes.set_xlim(-1.4, 2.6 * max(layout.layers - 1, 0) + 1.4)
    axes.set_ylim(-0.45 * layout.widest / 2 - 0.4, 0.45 * layout.widest / 2 + 0.4)
    axes.axis("off")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, format=image_format, dpi=150)
    pyplot.close(figure)
    return path
