"""Near-duplicate tools (issue 53, item 4): lint TP018 names a pair of tools with one signature whose
texts say the same, and goal choice between them says it was a coin toss, lets learned examples
decide, and never runs a tool with effects on a coin toss.

The catalogs are written here: a travel desk where booking a flight is declared twice in other words.
"""

import json
import subprocess
import sys
import textwrap

import pytest

from toolpath.planner import Workspace
from toolpath.planner.tasks.goals import DuplicateEffectError, GoalSearch, UnclearEffectError, choose_goal
from toolpath.planner.tasks.near_duplicate_choice import favoured_tool
from toolpath.registry import lint_catalogs

TOOL = """\
  - name: {name}
    description: {description}
    required_parameters: [{{name: destination, type: str}}, {{name: day, type: str}}]
    state_transition: {{requires: [], produces: [{produces}]}}
"""

STATES = """\
domain: trips
package: trips_tools
states:
  - token: trips.booking
    description: a confirmed booking
  - token: trips.offers
    description: offers found for a trip
tools:
"""


def travel_desk(tmp_path, *tools, extra="", name="trips.yaml"):
    """A catalog of ``tools`` (``(name, description, produces)``), each taking a destination and a day;
    ``extra`` is added to every tool (``approval: always`` ...)."""
    text = STATES + "".join(TOOL.format(name=tool, description=description, produces=produces) + extra for tool, description, produces in tools)
    path = tmp_path / name
    path.write_text(text)
    return path


BOOK_FLIGHT = ("book_flight", "Book a seat on a flight for the traveller.", "trips.booking")
RESERVE_FLIGHT = ("reserve_flight", "Book a flight seat for the traveller.", "trips.booking")


def near_duplicate_findings(paths):
    return [finding for finding in lint_catalogs(paths) if finding.code == "TP018"]


def test_lint_names_both_tools_of_a_pair_that_says_the_same_and_what_to_do(tmp_path):
    path = travel_desk(tmp_path, BOOK_FLIGHT, RESERVE_FLIGHT)
    (finding,) = near_duplicate_findings([path])
    assert finding.severity == "warning" and finding.field == "tools[1]" and finding.line == 13
    assert "'book_flight'" in finding.message and "'reserve_flight'" in finding.message
    assert "merge them" in finding.message and "say how they differ" in finding.message


def test_lint_leaves_alone_tools_that_differ_in_signature_or_in_what_they_say(tmp_path):
    path = travel_desk(
        tmp_path,
        BOOK_FLIGHT,
        # the same words, but it finds offers: another signature
        ("find_flight", "Book a seat on a flight for the traveller.", "trips.offers"),
        # the same signature, but each says something the other does not (a hotel room, a flight seat)
        ("book_hotel", "Book a hotel room for the traveller.", "trips.booking"),
    )
    assert near_duplicate_findings([path]) == []


def test_lint_finds_a_pair_across_catalogs_checked_together_and_names_the_other_file(tmp_path):
    first = travel_desk(tmp_path, BOOK_FLIGHT, name="flights.yaml")
    second = tmp_path / "agency.yaml"
    tool = TOOL.format(name="reserve_flight", description=RESERVE_FLIGHT[1], produces="trips.booking")
    second.write_text("domain: agency\npackage: agency_tools\ntools:\n" + tool)
    (finding,) = near_duplicate_findings([first, second])
    assert finding.path == str(second) and f"'book_flight' (in {first})" in finding.message and "'reserve_flight'" in finding.message
    assert near_duplicate_findings([first]) == []


def test_each_tools_own_result_counts_by_number_but_a_result_a_later_tool_reads_does_not(tmp_path):
    """Catalogs written from an API give each tool a result state of its own (UltraTool's)."""
    catalog = """\
        domain: desk
        package: desk_tools
        states:
          - {token: desk.result.check_flight_availability, description: seats of a flight}
          - {token: desk.result.check_flight_seats_availability, description: seats of a flight}
          - {token: desk.result.pick_seat, description: a seat picked}
        tools:
          - name: check_flight_availability
            description: Check the seat availability of a specified flight
            state_transition: {requires: [], produces: [desk.result.check_flight_availability]}
          - name: check_flight_seats_availability
            description: Check the seat availability of a specified flight
            state_transition: {requires: [], produces: [desk.result.check_flight_seats_availability]}
        """
    path = tmp_path / "desk.yaml"
    path.write_text(textwrap.dedent(catalog))
    (finding,) = near_duplicate_findings([path])
    assert "'check_flight_availability'" in finding.message and "'check_flight_seats_availability'" in finding.message
    reads_one = """\
          - name: pick_seat
            description: Pick a seat from the seats found.
            state_transition: {requires: [desk.result.check_flight_seats_availability], produces: [desk.result.pick_seat]}
        """
    path.write_text(textwrap.dedent(catalog + reads_one))
    assert near_duplicate_findings([path]) == []


def run_cli(*arguments):
    completed = subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], capture_output=True, text=True, timeout=300)
    return completed.returncode, completed.stdout, completed.stderr


def test_the_json_of_a_planned_task_says_the_choice_between_near_duplicates_was_a_coin_toss(tmp_path):
    path = travel_desk(tmp_path, BOOK_FLIGHT, RESERVE_FLIGHT)
    status, output, errors = run_cli("cell", "--catalog", str(path), "book a seat on a flight to Oslo", "--json")
    assert status == 0, errors
    (part,) = json.loads(output)["parts"]
    duplicate = part["near_duplicate"]
    assert sorted(duplicate["tools"]) == ["trips.book_flight", "trips.reserve_flight"]
    assert duplicate["decided_by"] == "coin toss" and duplicate["lint"] == "TP018"
    assert duplicate["chosen"] == f"trips.{part['matched']['name']}"
    (other,) = [alternative for alternative in part["alternatives"] if alternative["hit"]["name"] in ("book_flight", "reserve_flight")]
    assert other["reason"].startswith("a coin toss")


def test_the_tool_more_learned_examples_favour_is_preferred():
    assert favoured_tool("trips.book_flight", "trips.reserve_flight", {"trips.reserve_flight": 4, "trips.book_flight": 1}) == "trips.reserve_flight"
    assert favoured_tool("trips.book_flight", "trips.reserve_flight", {"trips.book_flight": 2}) == "trips.book_flight"
    assert favoured_tool("trips.book_flight", "trips.reserve_flight") is None
    assert favoured_tool("trips.book_flight", "trips.reserve_flight", {"trips.book_flight": 3, "trips.reserve_flight": 3}) is None


@pytest.fixture(scope="module")
def desk(tmp_path_factory, embedder):
    return Workspace.open([travel_desk(tmp_path_factory.mktemp("desk"), BOOK_FLIGHT, RESERVE_FLIGHT)], embedder=embedder)


def goal_tool_name(choice):
    return choice.chosen.plan.steps[-1].tool.name


def test_learned_examples_choose_between_near_duplicates_whichever_the_search_put_first(desk):
    task = "book a seat on a flight to Oslo"
    tossed = choose_goal(GoalSearch(desk.graph, desk.index), task)
    first = goal_tool_name(tossed)
    other = "reserve_flight" if first == "book_flight" else "book_flight"
    favoured = choose_goal(GoalSearch(desk.graph, desk.index, learned_examples={f"trips.{other}": 3, f"trips.{first}": 1}), task)
    assert goal_tool_name(favoured) == other
    assert favoured.near_duplicate.decided_by == "learned examples" and favoured.near_duplicate.learned_examples == (3, 1)
    (passed,) = [candidate for candidate in favoured.passed_over if candidate.plan.steps[-1].tool.name == first]
    assert "learned examples favour" in passed.reason()


def test_a_coin_toss_between_tools_that_send_is_not_run_unless_examples_or_the_task_decide(tmp_path, embedder):
    path = travel_desk(tmp_path, BOOK_FLIGHT, RESERVE_FLIGHT, extra="    approval: always\n    binding: host\n")
    paid = Workspace.open([path], embedder=embedder)
    task = "book a seat on a flight to Oslo"
    with pytest.raises(UnclearEffectError) as refused:
        choose_goal(GoalSearch(paid.graph, paid.index), task)
    assert isinstance(refused.value, DuplicateEffectError)
    assert "trips.book_flight" in str(refused.value) and "trips.reserve_flight" in str(refused.value) and "coin toss" in str(refused.value)
    learned = choose_goal(GoalSearch(paid.graph, paid.index, learned_examples={"trips.reserve_flight": 2}), task)
    assert goal_tool_name(learned) == "reserve_flight"
    named = choose_goal(GoalSearch(paid.graph, paid.index), "call reserve_flight to book a seat on a flight to Oslo")
    assert goal_tool_name(named) == "reserve_flight" and named.near_duplicate is None


def test_an_overlay_learned_from_use_decides_a_near_duplicate_pair_when_planning_a_task(tmp_path, embedder):
    from toolpath.planner import learn, read_examples

    path = travel_desk(tmp_path, BOOK_FLIGHT, RESERVE_FLIGHT)
    task = "book a seat on a flight to Oslo"
    tossed = Workspace.open([path], embedder=embedder).plan_task(task, inputs={"destination": "Oslo", "day": "Monday"})
    first = tossed.plan.steps[-1].tool.name
    other = "reserve_flight" if first == "book_flight" else "book_flight"
    examples = tmp_path / "examples.jsonl"
    examples.write_text(
        "".join(json.dumps({"request": words, "tools": [other]}) + "\n" for words in ("a flight to Rome on Friday", "get me on a plane to Lima"))
    )
    overlay = tmp_path / "learned.yaml"
    learn([path], read_examples(examples), overlay, embedder=embedder)
    learned = Workspace.open([path, overlay], embedder=embedder).plan_task(task, inputs={"destination": "Oslo", "day": "Monday"})
    assert learned.plan.steps[-1].tool.name == other
    (part,) = learned.to_dict()["parts"]
    assert part["near_duplicate"]["decided_by"] == "learned examples"
