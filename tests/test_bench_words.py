"""The hand-written requests of ``benchmarks/words_cases.yaml`` (issue 52) are well formed: enough
of them, every bullet of the issue covered, ids unique, every tool and parameter they name declared
by the shipped catalogs, every data file they read shipped in ``benchmarks/words_data``; and the
benchmark's checks of a plan's arguments and a run's result say what they should. Structural only:
nothing is planned or run here (``python benchmarks/bench_words.py`` does that)."""

from collections import Counter
from pathlib import Path

import pandas
import pytest
from benchmark_module import load_benchmark

bench_words = load_benchmark("bench_words")
CASES = bench_words.load_cases()


@pytest.fixture(scope="module")
def tools():
    """The shipped catalogs' tools by name (the workspace loads no embedding model until it searches)."""
    from toolpath.planner import Workspace

    return bench_words.shipped_tools(Workspace.open())


def test_there_are_enough_cases_and_every_bullet_has_some():
    counts = Counter(case["bullet"] for case in CASES)
    assert len(CASES) >= 80
    assert len({case["id"] for case in CASES}) == len(CASES)
    for bullet in bench_words.BULLETS:
        assert counts[bullet] >= 4, f"{bullet} has {counts[bullet]} cases"
    refusals = sum(case["expect"] == "not_understood" for case in CASES)
    assert 10 <= refusals <= len(CASES) // 3, f"{refusals} cases expect a refusal"


def test_every_tool_and_parameter_named_is_declared_and_every_file_read_is_shipped(tools):
    assert bench_words.catalog_problems(CASES, tools) == []


def test_the_shipped_sales_table_is_the_one_the_expected_values_were_worked_out_on():
    sales = pandas.read_csv(bench_words.DATA / "sales.csv")
    assert list(sales.columns) == ["date", "month", "region", "product", "units", "revenue"]
    assert len(sales) == 30 and sales["revenue"].isna().sum() == 1 and sales["units"].isna().sum() == 1
    assert sales.groupby("region")["revenue"].sum().to_dict() == {"East": 6950, "North": 9770, "South": 9500, "West": 9250}
    assert set(pandas.read_csv(bench_words.DATA / "regions.csv")["region"]) == {"North", "South", "East", "West", "Central"}
    assert "smiles" in pandas.read_csv(bench_words.DATA / "molecules.csv").columns


def test_a_case_naming_an_unknown_tool_parameter_or_file_is_reported(tools):
    cases = [
        {"id": "a", "task": "load sales.csv and wave at it", "inputs": {}, "expect": {"tools": ["load_table", "wave"], "arguments": {}, "result": []}},
        {
            "id": "b",
            "task": "sort sales.csv",
            "inputs": {},
            "expect": {"tools": ["load_table", "sort_rows"], "arguments": {"sort_rows.colour": "red"}, "result": []},
        },
        {"id": "c", "task": "describe budget.csv", "inputs": {}, "expect": "not_understood"},
        {
            "id": "d",
            "task": "save sales.csv as copy.csv",
            "inputs": {},
            "expect": {"tools": ["load_table", "save_table"], "arguments": {"save_table.path": "copy.csv"}, "result": []},
        },
        {"id": "e", "task": "count rows of sales.csv", "inputs": {}, "expect": {"tools": ["load_table"], "arguments": {"count_rows.table": 1}, "result": []}},
    ]
    problems = bench_words.catalog_problems(cases, tools)
    assert problems == [
        "a: no catalog declares the tool 'wave'",
        "b: argument sort_rows.colour: sort_rows has no parameter 'colour'",
        "c: the case names budget.csv, which words_data does not ship (and no tool of the case writes)",
        "e: argument count_rows.table: count_rows is not among the expected tools",
    ]


def test_a_malformed_case_is_refused_with_its_line_and_field(tmp_path):
    cases = tmp_path / "cases.yaml"
    good = "  bullet: parts\n  task: load sales.csv and count the rows\n  expect: {tools: [load_table, count_rows], result: {number: 30}}\n"
    cases.write_text(f"- id: same\n{good}- id: same\n{good}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"cases\.yaml:5: case same: id: is used by an earlier case"):
        bench_words.load_cases(cases)
    cases.write_text(f"- id: one\n{good.replace('number: 30', 'size: 30')}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"cases\.yaml:1: case one: expect\.result\[1\]: must be a mapping with one of number"):
        bench_words.load_cases(cases)
    cases.write_text(f"- id: one\n{good.replace('bullet: parts', 'bullet: wishes')}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"case one: bullet: must be one of parts"):
        bench_words.load_cases(cases)


def test_arguments_are_read_from_the_cell_with_defaults_for_the_ones_left_out(tools):
    class Step:
        def __init__(self, tool):
            self.tool = tool

    code = (
        "path = 'sales.csv'\nconditions = [['region', '==', 'North']]\n\n"
        "table = await tabular.load_table(path=path)\n"
        "rows = await tabular.filter_rows(table=table, conditions=conditions)\n"
        "line_png = await tabular.plot_line(table=rows, x='month', y='revenue')\n"
    )
    steps = [Step(tools[name]) for name in ("load_table", "filter_rows", "plot_line")]
    arguments = bench_words.cell_arguments(code, steps)
    assert arguments["load_table.path"] == "sales.csv"
    assert arguments["filter_rows.conditions"] == [["region", "==", "North"]]
    assert arguments["filter_rows.table"] == "<step variable table>"
    assert (arguments["plot_line.x"], arguments["plot_line.y"], arguments["plot_line.how"]) == ("month", "revenue", "sum")
    assert arguments["plot_line.output_path"] == "line.png"


@pytest.mark.parametrize(
    ("expected", "got", "agree"),
    [
        ([["region", "==", "North"], ["revenue", ">", 1000]], [["revenue", ">", 1000.0], ["region", "==", "North"]], True),  # order-free, 1000 is 1000.0
        ([["region", "==", "North"]], [["region", "==", "north"]], False),  # a value's case matters
        ([["revenue", "is missing"]], [["revenue", "is missing", None]], True),  # no value either way
        ([["region", "==", "North"]], [["region", "==", "North"], ["units", ">", 0]], False),  # an extra condition
    ],
)
def test_conditions_compare_order_free_and_by_value(tools, expected, got, agree):
    conditions = next(parameter for parameter in tools["filter_rows"].parameters if parameter.name == "conditions")
    assert bench_words.values_agree(expected, got, conditions) is agree


def test_a_file_name_matches_the_path_given_and_any_of_takes_either():
    assert bench_words.values_agree("sales.csv", "/tmp/case/sales.csv")
    assert not bench_words.values_agree("sales.csv", "/tmp/case/regions.csv")
    assert bench_words.values_agree({"any_of": ["North", "north"]}, "north")
    assert not bench_words.values_agree(["units", "revenue"], ["revenue", "units"])  # a column list keeps its order


def test_result_checks_find_wrong_values_and_unasked_files(tmp_path):
    groups = {
        "kind": "table",
        "rows": 4,
        "columns": ["region", "sum_revenue"],
        "index": [0, 1, 2, 3],
        "records": [{"region": r, "sum_revenue": v} for r, v in [("North", 9770), ("South", 9500), ("West", 9250), ("East", 6950)]],
    }
    assert bench_words.result_differences([{"rows": 4, "first": {"region": "North", "sum_revenue": 9770}}], groups, []) == []
    assert bench_words.result_differences([{"row": {"where": {"region": "East"}, "values": {"sum_revenue": 7000}}}], groups, []) == [
        "the row where {'region': 'East'}: sum_revenue = 6950, expected 7000"
    ]
    report = tmp_path / "report.md"
    report.write_text("# Table report\n", encoding="utf-8")
    assert bench_words.result_differences([{"rows": 4}], groups, [report]) == ["wrote report.md, which the task did not ask for"]
    png = tmp_path / "line.png"
    png.write_text("not a picture", encoding="utf-8")
    assert bench_words.result_differences([{"file": "png"}], None, [png]) == ["line.png is not a png file"]
    assert bench_words.result_differences([{"number": 30}], {"kind": "int", "value": 28}, []) == ["value 28, expected 30 (± 0.01)"]


def test_sales_xlsx_is_written_from_the_csv(tmp_path):
    bench_words.prepare_data(tmp_path)
    assert pandas.read_excel(tmp_path / "sales.xlsx").equals(pandas.read_csv(tmp_path / "sales.csv"))
    assert {path.name for path in Path(bench_words.DATA).iterdir()} <= {path.name for path in tmp_path.iterdir()}
