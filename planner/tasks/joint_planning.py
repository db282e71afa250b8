"""One plan for all the matched parts of a task: their goals reached and their tools run together.

The goals of all parts are planned **jointly** as one cost-optimal plan
(:func:`toolpath.planner.planning.plans.plan` with ``must_run``), so a state one part produces is
what the next part consumes, and shared steps run once; among plans of equal cost, the one whose
tools the parts' words are most about (``prefer``). Steps are then ordered by data flow and, where
data flow leaves the order open, by the part they serve (the first part's steps first).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.plans import NoPlanError, Plan, TieBreak, plan, qualified_name
from toolpath.planner.tasks.clauses import named_entities
from toolpath.planner.tasks.goals import GoalSearch
from toolpath.planner.tasks.named_kinds import name_lookups
from toolpath.planner.tasks.parts import PartMatch
from toolpath.planner.tasks.task_spans import traced_joint_plan
from toolpath.registry import ToolDefinition


@traced_joint_plan
def plan_jointly(search: GoalSearch, parts: Sequence[PartMatch], held: Collection[str], names: bool = True) -> Plan:
    """The plan of a task's ``parts`` from ``held`` and the states the parts hold (a fact's, an
    action's own value): :func:`joint_plan`, with ties broken by how well each tool matches the
    parts' words; a plan of no steps when no part asks for work.

    With ``names`` (free text), things the parts name are looked up rather than invented; an
    agent's own steps (``names=False``) say themselves how each thing is found.

    Raises:
        NoPlanError: no single plan reaches every part's goal.
        PlanningTimeout, PlanningCancelled: from ``search.budget``, checked before each relevance
            query and before the joint plan.
    """
    held = frozenset(held).union(*(part.holds for part in parts))
    if not any(part.status == "matched" for part in parts):
        goal = frozenset().union(*(part.goal for part in parts))
        return Plan(goal, held, (), 0.0, True)
    relevance = _relevance(search, parts, names)
    search.budget.check()
    return joint_plan(search.graph, parts, held, relevance, names)


def joint_plan(
    graph: StateGraph, matches: Sequence[PartMatch], held: Collection[str] = (), relevance: Mapping[int, float] | None = None, names: bool = True
) -> Plan:
    """One cost-optimal plan for the goals of every matched part: their states reached, their tools
    run; steps ordered by data flow, then by the first part each serves.

    With ``names``, a part that names a thing ("the Wikipedia article about Ada Lovelace") does not
    have what it needs invented: the tools its own plan would make an input state with (a text
    generated) are avoided, so the thing is looked up (searched, fetched) instead, at a higher cost
    if need be (:func:`_invented_for_names`). Without a plan that avoids them, they are used.

    Among plans of equal cost, tools of the domains the task is about (the domains of the parts'
    matched states and tools) win over tools of other domains, and then the tools ``relevance``
    scores higher (the task's words match them better). So a cross-domain bridge (chemistry's
    ``tabulate_descriptors`` also loads a table) serves only when the task asks for what it adds.
    The plan's ``tie_breaks`` say where a tie was broken and why.

    Raises:
        NoPlanError: no single plan reaches every part's goal.
        ValueError: no part matched anything that needs work.
    """
    states = frozenset().union(*(match.goal for match in matches if match.status == "matched" and match.tool is None))
    tools = list({match.tool.id: match.tool for match in matches if match.status == "matched" and match.tool is not None}.values())
    # A tool a part's plan runs for the columns its words name ("the molecular weights": the tool that adds them).
    tools += list({tool.id: tool for match in matches if match.status == "matched" for tool in match.through if tool.id not in {t.id for t in tools}}.values())
    if not states and not tools:
        raise ValueError("no part of the task asks for work the held states do not already do")
    domains = frozenset(match.choice.chosen.hit.server for match in matches if match.status == "matched" and match.choice is not None) - {None}
    relevance = dict(relevance or {})
    # In-domain tools first, then by relevance: every in-domain score lies above every other one.
    span = (max(relevance.values()) - min(relevance.values()) + 1.0) if relevance else 1.0
    prefer = {tool.id: relevance.get(tool.id, 0.0) + (span if tool.server_name in domains else 0.0) for tool in graph.registry}
    avoid = _invented_for_names(matches) - {qualified_name(tool) for tool in tools} if names else set()
    try:
        cheapest = plan(graph, states, held=held, must_run=tools, prefer=prefer, avoid=avoid)
    except NoPlanError:
        if not avoid:
            raise
        avoid = set()
        cheapest = plan(graph, states, held=held, must_run=tools, prefer=prefer)
    joint = _ordered_by_parts(_with_repeats(cheapest, matches), matches)
    return replace(joint, tie_breaks=_tie_breaks(graph, joint, domains, relevance, avoid))


def _invented_for_names(matches: Sequence[PartMatch]) -> set[str]:
    """The tools by which a part that names something would invent what it needs: the steps of its
    chosen plan, before its goal, that make an input state (``GoalCandidate.invents``)."""
    avoid = set()
    for match in matches:
        chosen = match.choice.chosen if match.status == "matched" and match.choice is not None else None
        if chosen is not None and chosen.invents and chosen.plan is not None and named_entities(match.text):
            avoid |= {qualified_name(step.tool) for step in chosen.plan.steps[:-1] if step.produces & set(chosen.invents)}
    return avoid


def _with_repeats(joint: Plan, matches: Sequence[PartMatch]) -> Plan:
    """``joint`` with one more call of a tool for each further part that asks to run it (steps
    "call clock_alarm_set for 7:00", "call clock_alarm_cancel", "call clock_alarm_set for 5:30" are
    three calls; a plan, being a set of tools, runs each once). A part whose goal is a *state*
    already reached adds nothing: the state is held."""
    asked = Counter(match.tool.id for match in matches if match.status == "matched" and match.tool is not None)
    extra = [step for step in joint.steps for _ in range(asked.get(step.tool.id, 1) - 1)]
    if not extra:
        return joint
    return replace(
        joint,
        steps=(*joint.steps, *extra),
        cost=joint.cost + sum(step.tool.cost for step in extra),
        lower_bound=(joint.lower_bound or 0.0) + sum(step.tool.cost for step in extra),
    )


def _relevance(search: GoalSearch, matches: Sequence[PartMatch], names: bool = True) -> dict[int, float]:
    """Each tool's best search score over the matched parts: what the task is about, for ties.

    With ``names``, a tool that starts from nothing (it requires no state: where a name goes in)
    also scores for looking up each thing the parts name ("find Sofia Coppola by name"), in any part
    (a fact's too), and a lookup that takes the name (:func:`toolpath.planner.tasks.named_kinds.name_lookups`) outranks every other
    tool. So of two tools that make a movie id at equal cost, a request naming "the movie Titanic"
    takes the one that searches by title, not the one that lists the latest movies. An agent's own
    steps (``names=False``) say themselves how each thing is found."""
    matched = [match for match in matches if match.status == "matched"]
    # One query for all the names the task mentions: each query is an embedding (about 10 ms).
    # "I loved Amelie; which movies are similar to it?" names it in a part that runs nothing.
    mentioned = list(dict.fromkeys(name for match in matches for name in named_entities(match.text))) if names else []
    lookups = [f"find {', '.join(mentioned)} by name"] if mentioned else []
    starts = {tool.id for tool in search.graph.registry if not tool.state_transition.requires}
    best: dict[int, float] = {}
    for query in dict.fromkeys([match.text for match in matched] + lookups):
        search.budget.check()
        lookup = query in lookups
        for tool_id, score in search.index.tool_relevance(query).items():
            if not lookup or tool_id in starts:
                best[tool_id] = max(score, best.get(tool_id, score))
    if mentioned and best:
        # A name goes into a lookup that takes text (a search by title), not a list that takes none
        # ("similar to Amelie": a movie's id from the search, not from the newest releases).
        span = max(best.values()) - min(best.values()) + 1.0
        for tool in name_lookups(search.graph):
            if tool.id in best:
                best[tool.id] += span
    return best


def _tie_breaks(graph: StateGraph, joint: Plan, domains: frozenset[str], relevance: Mapping[int, float], avoided: Collection[str] = ()) -> tuple[TieBreak, ...]:
    """Each step (not one the task asked to run) that other tools (not ``avoided``) could have
    taken at the same cost: producing everything the step gives later steps and the goal, and
    runnable at that point."""
    ties = []
    reached = set(joint.held)
    for position, step in enumerate(joint.steps):
        later = set(joint.goal).union(*(other.requires for other in joint.steps[position + 1 :]))
        supplies = step.produces & later
        if supplies and qualified_name(step.tool) not in joint.must_run:
            token = next(iter(supplies))
            rivals = [
                tool
                for tool in graph.tools_for(token)
                if tool.id != step.tool.id
                and qualified_name(tool) not in avoided
                and tool.cost == step.tool.cost
                and supplies <= tool.state_transition.produces
                and tool.state_transition.requires <= reached
            ]
            if rivals:
                ties.append(
                    TieBreak(
                        position, qualified_name(step.tool), tuple(qualified_name(tool) for tool in rivals), _why_chosen(step.tool, rivals, domains, relevance)
                    )
                )
        reached |= step.produces
    return tuple(ties)


def _why_chosen(chosen: ToolDefinition, rivals: Sequence[ToolDefinition], domains: frozenset[str], relevance: Mapping[int, float]) -> str:
    outside = sorted({tool.server_name or "" for tool in rivals if tool.server_name not in domains})
    if chosen.server_name in domains and outside:
        return f"the task is about {', '.join(sorted(domains))}, not {', '.join(outside)}"
    if all(relevance.get(chosen.id, 0.0) > relevance.get(tool.id, 0.0) for tool in rivals):
        return f"the task's words match {chosen.name} best"
    return "no preference between them (the same cost, domain and match to the task's words)"


def _ordered_by_parts(joint: Plan, matches: Sequence[PartMatch]) -> Plan:
    """``joint`` with its steps in a data-flow order that runs the first part's steps first."""
    steps = list(joint.steps)
    # A state held before the plan needs no producer first, so its producers set no order: the
    # parts do ("simplify the text, then expand it" simplifies the held text first).
    needs = [{source for token, source in step.satisfied_by.items() if source is not None and token not in joint.held} for step in steps]
    # The first part each step serves: the part whose goal it produces or whose tool it is (the k-th
    # call of a tool serves the k-th part asking for it), then (backwards) the earliest part of any
    # step it feeds.
    asking: dict[int, list[int]] = {}
    for number, match in enumerate(matches):
        if match.status == "matched" and match.tool is not None:
            asking.setdefault(match.tool.id, []).append(number)
    serves = [len(matches)] * len(steps)
    for position, step in enumerate(steps):
        parts = asking.get(step.tool.id)  # type: ignore[arg-type]
        served = [parts.pop(0)] if parts else []
        served += [number for number, match in enumerate(matches) if match.status == "matched" and match.tool is None and step.produces & match.goal][:1]
        serves[position] = min(served, default=len(matches))
    for position in range(len(steps) - 1, -1, -1):
        for required_from in needs[position]:
            serves[required_from] = min(serves[required_from], serves[position])
    waiting = [len(sources) for sources in needs]
    feeds: list[list[int]] = [[] for _ in steps]
    for position, sources in enumerate(needs):
        for source in sources:
            feeds[source].append(position)
    ready = [(serves[position], position) for position in range(len(steps)) if not waiting[position]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, position = heapq.heappop(ready)
        order.append(position)
        for consumer in feeds[position]:
            waiting[consumer] -= 1
            if not waiting[consumer]:
                heapq.heappush(ready, (serves[consumer], consumer))
    return joint.reordered([steps[position].tool for position in order])
