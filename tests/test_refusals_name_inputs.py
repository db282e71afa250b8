"""Refusals that say what is missing (issue 52, a tester's confusing refusals): an input option
always names an input; a quoted file name may hold spaces, and a long suffix ('.parquet') is a file's."""

import pytest

from toolpath.planner import Workspace
from toolpath.planner.tasks.clauses import is_file_name, without_file_names
from toolpath.planner.tasks.task import InputOption, describe_options

STAFF = """\
person,team,pay,town,years
Ann,Research,81000,Leeds,41
Ben,Research,64000,York,25
Cal,Support,52000,Leeds,33
"""


@pytest.fixture(scope="module")
def workspace():
    return Workspace.open()


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "crew.csv").write_text(STAFF)
    (tmp_path / "crew list.tsv").write_text(STAFF.replace(",", "\t"))
    return tmp_path


def planned(workspace, folder, words):
    task_plan = workspace.plan_task(words, probe_directory=folder)
    bound = {(reading.tool, reading.parameter): reading.value for reading in task_plan.arguments.bound}
    return [step.tool.name for step in task_plan.plan.steps], bound, task_plan


def test_an_input_option_that_names_no_input_cannot_be_described(workspace, folder):
    _, _, task_plan = planned(workspace, folder, "only keep the crew.csv rows whose team is Support")
    with pytest.raises(AssertionError):
        describe_options([InputOption((), {}, task_plan.plan)], lambda option: "pass " + " ".join(option.names))


def test_a_quoted_file_name_with_a_space_is_the_file_the_plan_reads(workspace, folder):
    steps, bound, task_plan = planned(workspace, folder, 'sum of pay for each team in "crew list.tsv"')
    assert steps == ["load_table", "group_and_aggregate"]
    assert task_plan.inputs["tabular.load_table.path"] == "crew list.tsv"
    assert bound[("group_and_aggregate", "by")] == "team" and bound[("group_and_aggregate", "columns")] == ["pay"]


@pytest.mark.parametrize(("value", "is_file"), [("crew list.tsv", True), ("team.parquet", True), ("e.g.", False), ("a b", False)])
def test_file_names_have_suffixes_up_to_seven_characters_and_may_hold_spaces(value, is_file):
    assert is_file_name(value) is is_file


def test_search_words_read_a_long_suffix_and_a_quoted_name_whole_as_a_file():
    assert without_file_names('write crew.csv to crew.parquet from "crew list.tsv"') == 'write a file to a file from "a file"'
