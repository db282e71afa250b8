"""Graph pictures: layers by reachability, Mermaid/DOT text and SVG/PNG files a viewer opens."""

import random
import xml.dom.minidom

from toolpath.planner import StateGraph, plan
from toolpath.planner.planning import picture
from toolpath.registry import State, ToolDefinition, ToolRegistry


def forty_five_tools() -> StateGraph:
    """A seeded catalog of 45 tools over 6 layers of states (some unreachable)."""
    rng = random.Random(3)
    registry = ToolRegistry()
    states = [f"lab.s{index}" for index in range(40)]
    for index in range(45):
        layer = 1 + index * 6 // 45
        requires = rng.sample(states[: layer * 6], k=rng.randint(0, 2)) if layer > 1 else []
        produces = rng.sample(states[layer * 6 : layer * 6 + 6], k=rng.randint(1, 2))
        registry.register_tool(
            ToolDefinition(name=f"tool_{index}", server_name="lab", module="lab.tools", state_transition={"requires": requires, "produces": produces})
        )
    return StateGraph(registry, [State(token, description=token) for token in states])


def test_every_tool_comes_after_its_requirements_and_every_state_after_a_producer(chemistry_graph):
    for graph in (chemistry_graph, forty_five_tools()):
        layout = picture.layered(graph)
        last = layout.layers - 1
        for tool in graph.registry:
            node = ("tool", tool.id)
            if layout.layer[node] == last:
                continue  # the unreachable go last
            assert all(layout.layer[("state", token)] < layout.layer[node] for token in tool.state_transition.requires)
            assert all(layout.layer[("state", token)] <= layout.layer[node] + 1 for token in tool.state_transition.produces)
        ranks = {}
        for node, level in layout.layer.items():
            ranks.setdefault(level, []).append(layout.rank[node])
        assert all(sorted(column) == list(range(len(column))) for column in ranks.values())  # one row per node


def test_held_states_open_the_first_layer(chemistry_graph):
    layout = picture.layered(chemistry_graph, held=["chemistry.molecule_parsed"])
    assert layout.layer[("state", "chemistry.molecule_parsed")] == 0


def test_mermaid_and_dot_highlight_the_plan(chemistry_graph):
    goal_plan = plan(chemistry_graph, ["chemistry.molecules_clustered"])
    text = picture.mermaid(chemistry_graph, plan=goal_plan)
    ids = {line.split('"')[1]: line.split("[")[0].split("(")[0].strip() for line in text.splitlines() if '"' in line and "subgraph" not in line}
    (marked,) = [line for line in text.splitlines() if line.strip().startswith("class ")]
    marked_ids = set(marked.split()[1].split(","))
    assert {ids["chemistry.compute_fingerprints"], ids["chemistry.cluster_molecules"]} <= marked_ids
    assert ids["chemistry.parse_molecule"] not in marked_ids
    dot = picture.dot(chemistry_graph, plan=goal_plan)
    assert dot.startswith("digraph toolpath {") and "rankdir=LR" in dot and dot.count("rank=same") == picture.layered(chemistry_graph).layers
    assert dot.count('fillcolor="#ffd8a8"') == len(goal_plan.steps) + len(goal_plan.reached - goal_plan.held)


def test_svg_and_png_files_are_images_a_viewer_opens(tmp_path):
    graph = forty_five_tools()
    goal_plan = plan(graph, ["lab.s9"])
    svg = picture.draw(graph, tmp_path / "graph.svg", "svg", plan=goal_plan)
    root = xml.dom.minidom.parse(str(svg)).documentElement
    assert root.tagName == "svg" and "lab.tool_4" in svg.read_text()
    png = picture.draw(graph, tmp_path / "graph.png", "png")
    header = png.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
    assert width >= 1500 and height >= 1000  # room for 45 tools in layers, not a thumbnail
