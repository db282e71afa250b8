"""Words that ask for a tool's effect itself (issue 52, items 2 and 3): a file named as where to write
("… called overview.html", "… into trend.png") is the output parameter's value, and it, or a word only
tools writing that kind of file carry in their names ("plot"), lets the writing tool run on a match the
effects rule alone would refuse. Nothing else that matches about as well turns into a write: a plan
that does other work and writes nothing stays a rival ("sort … into sorted.csv" is no plain copy).

The requests are worded here, not taken from ``benchmarks/words_cases.yaml``.
"""

import pytest

from toolpath.planner.tasks.goals import NoMatchingSkillError, UnclearEffectError, hit_label

SALES = "date,month,region,units,revenue\n2024-01-04,2024-01,North,12,1200\n2024-02-11,2024-02,South,5,480\n2024-03-20,2024-03,West,9,910\n"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working directory holding sales.csv (the probe reads the file the words name from there)."""
    (tmp_path / "sales.csv").write_text(SALES)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _tools(planned) -> list[str]:
    return [step.tool.name for step in planned.plan.steps]


def test_a_file_called_so_in_the_words_is_where_the_report_or_the_copy_is_written(workspace, folder):
    report = workspace.plan_task("make an HTML report from sales.csv named review.html")
    assert _tools(report) == ["load_table", "write_report"]
    assert report.inputs["tabular.load_table.path"] == "sales.csv" and report.inputs["tabular.write_report.path"] == "review.html"
    copy = workspace.plan_task("export sales.csv as a spreadsheet called backup.xlsx")
    assert _tools(copy) == ["load_table", "save_table"]
    assert copy.inputs["tabular.load_table.path"] == "sales.csv" and copy.inputs["tabular.save_table.path"] == "backup.xlsx"


def test_the_file_named_to_be_read_is_never_the_destination(workspace, folder):
    planned = workspace.plan_task("save the file named sales.csv as copy.xlsx")
    assert _tools(planned) == ["load_table", "save_table"]
    assert planned.inputs["tabular.load_table.path"] == "sales.csv" and planned.inputs["tabular.save_table.path"] == "copy.xlsx"


def test_a_named_png_lets_a_chart_run_where_other_goals_matched_about_as_well(workspace, folder):
    planned = workspace.plan_task("plot the units per month of sales.csv to units_trend.png")
    assert _tools(planned) == ["load_table", "plot_line"]
    assert planned.inputs["tabular.plot_line.output_path"] == "units_trend.png"
    assert planned.inputs["tabular.plot_line.x"] == "month" and planned.inputs["tabular.plot_line.y"] == "units"
    assert "units_trend.png" in planned.parts[0].choice.effects_evidence


def test_plot_one_column_against_another_is_a_scatter_of_those_columns(workspace, folder):
    planned = workspace.plan_task("plot units against revenue in sales.csv")
    assert _tools(planned) == ["load_table", "plot_scatter"]
    assert planned.inputs["tabular.plot_scatter.y"] == "units" and planned.inputs["tabular.plot_scatter.x"] == "revenue"
    assert "'plot'" in planned.parts[0].to_dict()["effects_evidence"]


def test_two_charts_the_words_and_the_similarity_favour_differently_are_asked_about(workspace, folder):
    # A line chart is the closest by similarity, a scatter plot by the words ("plot y against x"):
    # which chart is meant is not clear, so neither is drawn.
    with pytest.raises(UnclearEffectError) as unclear:
        workspace.plan_task("plot units against revenue for the rows in sales.csv")
    labels = [hit_label(hit) for hit in unclear.value.candidates]
    assert "state tabular.line_plotted" in labels and "state tabular.scatter_plotted" in labels


@pytest.mark.parametrize(
    "task",
    [
        "sort sales.csv by revenue into sorted.csv",  # sorting writes nothing: a copy would drop the order
        "show the first 2 lines of sales.csv",  # 'lines' is no line chart
        "order the rows of sales.csv by units",
    ],
)
def test_words_that_do_not_ask_for_a_file_never_write_one(workspace, folder, task):
    try:
        planned = workspace.plan_task(task)
    except NoMatchingSkillError:
        return
    matched = [part for part in planned.parts if part.status == "matched"]
    assert all(step.tool.side_effect == "none" for part in matched for step in part.choice.chosen.plan.steps), task
