"""Requests the catalogs cannot serve, said in words no catalog uses (issue 52): not understood, never run.

The shipped tabular catalog declares ``vocabulary: closed``: its texts name every kind of work and
result it serves. "draw a radar chart" matches its bar chart weakly, and must not draw bars; a weak
match whose head is in the catalog's words or the data's ("tell me the total price per shop") still
plans. A catalog written from an API's names stays open: "rent a hatchback" books its rental car.
"""

import pytest

from toolpath.planner import Workspace
from toolpath.planner.tasks.clauses import head_words
from toolpath.planner.tasks.goals import NoMatchingSkillError, UnservedWordsError
from toolpath.registry import CatalogError

ORDERS = "day,shop,item,quantity,price\n2024-05-01,Leeds,tea,3,4.5\n2024-05-02,York,coffee,1,3.0\n2024-05-02,Leeds,coffee,2,6.0\n2024-05-03,Hull,cake,,2.5\n"


@pytest.fixture
def orders(tmp_path, monkeypatch):
    """A small orders table in the working directory, where planning probes the files a task names."""
    (tmp_path / "orders.csv").write_text(ORDERS)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "orders.csv"


@pytest.mark.parametrize(
    ("text", "head"),
    [
        ("draw a map of the regions", ["draw", "map"]),
        ("please could you tidy up the file", ["tidy", "file"]),
        ("give me a quick peek at the table", ["quick", "peek"]),
        ("I want to know the three biggest shops", ["biggest", "shops"]),
        ("how many rows are there?", []),
    ],
)
def test_the_head_of_a_request_is_its_action_and_object_without_its_preamble(text, head):
    assert head_words(text) == head


@pytest.mark.parametrize(
    ("task", "word"),
    [
        ("draw a radar chart of quantity per item from orders.csv", "radar"),
        ("make a donut chart of price per shop from orders.csv", "donut"),
        ("spruce up orders.csv", "spruce"),
    ],
)
def test_a_weak_match_asked_in_words_no_catalog_uses_is_not_understood_and_names_the_candidates(workspace, orders, task, word):
    with pytest.raises(UnservedWordsError) as refused:
        workspace.plan_task(task)
    message = str(refused.value)
    assert "not understood" in message and repr(word) in message
    assert "state tabular." in message and "other candidates" in message


def test_an_unserved_part_of_a_longer_task_is_reported_with_its_candidates(workspace, orders):
    planned = workspace.plan_task("load orders.csv and draw a radar chart of quantity per item")
    unmatched = [part.to_dict() for part in planned.parts if part.status == "unmatched"]
    assert len(unmatched) == 1 and "radar" in unmatched[0]["part"]
    assert "'radar'" in unmatched[0]["problem"] and "no loaded catalog's texts use" in unmatched[0]["problem"]
    assert unmatched[0]["closest"] and all(candidate.startswith(("state tabular.", "tool tabular.")) for candidate in unmatched[0]["closest"])
    assert "plot_bar" not in [step.tool.name for step in planned.plan.steps]


@pytest.mark.parametrize(
    "task",
    [
        "tell me the total price per shop in orders.csv",
        "I want to know the average quantity per item in orders.csv",
        "sum up the quantity for each shop in orders.csv",
    ],
)
def test_a_weak_match_in_the_catalogs_or_the_datas_words_still_plans(workspace, orders, task):
    planned = workspace.plan_task(task)
    assert [step.tool.name for step in planned.plan.steps] == ["load_table", "group_and_aggregate"]


def test_a_column_of_the_file_a_join_reads_from_the_words_is_a_word_of_the_data(workspace, orders):
    """'supplier' is no catalog word and no column of orders.csv; it is a column of shops.csv, which
    the words name as the file to join, so the weak match on joining still plans."""
    (orders.parent / "shops.csv").write_text("shop,supplier\nLeeds,Ames\nYork,Bell\nHull,Cole\n")
    planned = workspace.plan_task("add each shop's supplier from shops.csv to orders.csv, matching on shop")
    assert not planned.unmatched, [part.to_dict()["problem"] for part in planned.unmatched]
    assert [step.tool.name for step in planned.plan.steps] == ["load_table", "join_tables"]


GARAGE = """\
domain: garage
package: garage_tools
{vocabulary}
states:
  - token: garage.car_booked
    description: A rental car is booked.
    affordances: [book a rental car]
tools:
  - name: book_car
    description: Book a rental car for a day.
    required_parameters: [{{name: day, type: str, description: the day}}]
    return_spec: {{name: booking, type: str, state: garage.car_booked}}
    state_transition: {{requires: [], produces: [garage.car_booked]}}
"""


def test_an_open_catalog_serves_words_its_texts_never_use_and_a_closed_one_does_not(tmp_path, embedder):
    open_catalog, closed_catalog = tmp_path / "open.yaml", tmp_path / "closed.yaml"
    open_catalog.write_text(GARAGE.format(vocabulary=""))
    closed_catalog.write_text(GARAGE.format(vocabulary="vocabulary: closed"))
    task = "rent a hatchback for Friday"
    planned = Workspace.open([open_catalog], embedder=embedder).plan_task(task)
    assert [step.tool.name for step in planned.plan.steps] == ["book_car"]
    with pytest.raises(NoMatchingSkillError, match="'rent'"):
        Workspace.open([closed_catalog], embedder=embedder).plan_task(task)


def test_a_vocabulary_other_than_open_or_closed_is_refused_naming_the_field(tmp_path):
    catalog = tmp_path / "garage.yaml"
    catalog.write_text(GARAGE.format(vocabulary="vocabulary: strict"))
    with pytest.raises(CatalogError, match="vocabulary"):
        Workspace.open([catalog])
