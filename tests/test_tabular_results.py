"""A table a step computes is what a later "save it" saves; a destination is the one named or the part is
refused; duplicates and missing values have their own tools; an empty file and a grouping by several
columns are said plainly (issue 52, the tester's silently wrong runs). Requests in my own wording, on
small files written here."""

import pandas
import pytest

from toolpath.catalogs.tabular.count_missing import count_missing
from toolpath.catalogs.tabular.drop_duplicates import drop_duplicates
from toolpath.catalogs.tabular.load_table import load_table
from toolpath.catalogs.tabular.probe import probe_table
from toolpath.planner import Workspace

STAFF = "name,team,pay,town,years\nAda,Research,100,Leeds,40\nBen,Sales,80,York,31\nAda,Research,100,Leeds,40\nCara,Sales,,York,29\nDan,Research,90,,52\n"


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    (tmp_path / "staff.csv").write_text(STAFF)
    (tmp_path / "nothing.csv").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_drop_duplicates_keeps_the_first_of_repeated_rows_or_of_rows_alike_in_the_named_columns(folder):
    table = load_table("staff.csv")
    assert list(drop_duplicates(table)["name"]) == ["Ada", "Ben", "Cara", "Dan"]
    assert list(drop_duplicates(table, ["team"])["name"]) == ["Ada", "Ben"]
    with pytest.raises(KeyError, match="'department'"):
        drop_duplicates(table, ["department"])


def test_count_missing_counts_the_empty_cells_of_each_column_or_of_the_whole_table(folder):
    table = load_table("staff.csv")
    assert count_missing(table).to_dict() == {"name": 0, "team": 0, "pay": 1, "town": 1, "years": 0}
    assert count_missing(table, "total") == 2
    with pytest.raises(ValueError, match="per must be one of column, total"):
        count_missing(table, "row")


def test_an_empty_file_is_a_clear_error_when_loaded_and_when_probed(folder):
    with pytest.raises(ValueError, match="nothing.csv is empty: no header, no rows"):
        load_table("nothing.csv")
    with pytest.raises(ValueError, match="nothing.csv.*empty: no header, no rows"):
        probe_table("nothing.csv")


@pytest.fixture(scope="module")
def shipped(embedder):
    return Workspace.open(embedder=embedder)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "computed"),
    [
        ("average pay for each team in staff.csv and save it as pay.csv", "groups"),
        ("a pivot table of staff.csv with team as rows, town as columns and pay in the cells, then save it as grid.xlsx", "pivot"),
    ],
)
def test_saving_after_a_step_that_makes_a_table_saves_that_table(shipped, folder, task, computed):
    planned = shipped.plan_task(task)
    assert [step.tool.name for step in planned.plan.steps][-1] == "save_table" and not planned.cell.unbound
    assert f"save_table(table={computed}," in planned.cell.code


@pytest.mark.integration
def test_the_saved_groups_are_what_the_file_holds(shipped, folder):
    shipped.run_task(shipped.plan_task("average pay for each team in staff.csv and save it as pay.csv"))
    saved = pandas.read_csv(folder / "pay.csv")
    assert saved.set_index("team")["mean_pay"].to_dict() == {"Research": pytest.approx(290 / 3), "Sales": 80}
    assert pandas.read_csv(folder / "staff.csv").shape == (5, 5)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "pointer"),
    [
        # Statistics and a correlation matrix are no table of the data's rows (the catalog's states):
        # saving "it" would save the loaded table, so the part is refused, saying why.
        ("summarise staff.csv, then save it as overview.csv", "'it' points at what describe_table made"),
        ("describe staff.csv, then save the description as overview.csv", "'description' points at what describe_table made"),
        ("compute the correlations of staff.csv and save them to links.xlsx", "'them' points at what correlate_columns made"),
    ],
)
def test_saving_a_result_that_is_no_table_of_rows_is_not_understood_not_the_raw_table_saved(shipped, folder, task, pointer):
    planned = shipped.plan_task(task)
    refused = [part for part in planned.parts if part.fate == "not understood"]
    assert refused and pointer in refused[0].problem
    assert "save_table" not in [step.tool.name for step in planned.plan.steps]


@pytest.mark.integration
def test_a_summary_then_a_plot_of_a_column_plots_the_data_not_the_statistics(shipped, folder):
    planned = shipped.plan_task("describe staff.csv and draw a histogram of pay")
    assert "plot_histogram(table=table," in planned.cell.code


@pytest.mark.integration
@pytest.mark.parametrize("task", ["order staff.csv by years and save the result as staff.csv", "sort staff.csv by pay, then write it to staff.csv"])
def test_writing_over_the_file_the_task_reads_is_not_understood_with_why(shipped, folder, task):
    planned = shipped.plan_task(task)
    refused = [part for part in planned.parts if part.fate == "not understood"]
    assert refused and "the file the task reads" in refused[0].problem and "name another file" in refused[0].problem
    assert "save_table" not in [step.tool.name for step in planned.plan.steps]


@pytest.mark.integration
def test_a_destination_the_words_name_is_where_the_table_is_written(shipped, folder):
    planned = shipped.plan_task("order staff.csv by years and save the result as by_years.csv")
    assert "tabular_save_table_path = 'by_years.csv'" in planned.cell.code


@pytest.mark.integration
@pytest.mark.parametrize(
    ("task", "tool"),
    [
        ("get rid of the repeated rows in staff.csv", "drop_duplicates"),
        ("dedupe staff.csv", "drop_duplicates"),
        ("how many blanks does each column of staff.csv have", "count_missing"),
        ("get rid of the rows of staff.csv that have gaps", "drop_missing"),
    ],
)
def test_duplicates_and_missing_values_plan_the_tool_a_data_person_means(shipped, folder, task, tool):
    planned = shipped.plan_task(task)
    assert [step.tool.name for step in planned.plan.steps] == ["load_table", tool]


@pytest.mark.integration
def test_grouping_by_two_columns_with_a_one_column_grouping_is_not_understood(shipped, folder):
    planned = shipped.plan_task("mean pay per team and town in staff.csv")
    (part,) = planned.parts
    assert part.fate == "not understood" and "group by several columns ('team', 'town')" in part.problem
    assert not planned.plan.steps
