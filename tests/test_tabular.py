"""The shipped tabular catalog: each tool on the sample data, the writing tools refusing paths that
would destroy data, and a task across the chemistry and tabular domains planned and run end to end in
a real kernel."""

import shutil

import pandas
import pytest

from toolpath.catalogs.chemistry._common import InvalidSmilesError
from toolpath.catalogs.chemistry.tabulate_descriptors import tabulate_descriptors
from toolpath.catalogs.tabular import SAMPLE_DATA
from toolpath.catalogs.tabular._common import OutputPathError, show_figure
from toolpath.catalogs.tabular.correlate_columns import correlate_columns
from toolpath.catalogs.tabular.count_rows import count_rows
from toolpath.catalogs.tabular.describe_table import describe_table
from toolpath.catalogs.tabular.drop_columns import drop_columns
from toolpath.catalogs.tabular.drop_missing import drop_missing
from toolpath.catalogs.tabular.filter_rows import filter_rows
from toolpath.catalogs.tabular.group_and_aggregate import group_and_aggregate
from toolpath.catalogs.tabular.join_tables import join_tables
from toolpath.catalogs.tabular.load_table import load_table
from toolpath.catalogs.tabular.pivot_table import pivot_table
from toolpath.catalogs.tabular.plot_bar import plot_bar
from toolpath.catalogs.tabular.plot_histogram import plot_histogram
from toolpath.catalogs.tabular.plot_line import plot_line
from toolpath.catalogs.tabular.plot_scatter import plot_scatter
from toolpath.catalogs.tabular.save_table import save_table
from toolpath.catalogs.tabular.select_columns import select_columns
from toolpath.catalogs.tabular.show_rows import show_rows
from toolpath.catalogs.tabular.sort_rows import sort_rows
from toolpath.catalogs.tabular.top_rows import top_rows
from toolpath.catalogs.tabular.write_report import write_report

COMPOUNDS = SAMPLE_DATA / "compounds.csv"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture()
def compounds():
    return load_table(str(COMPOUNDS))


def test_csv_parquet_and_excel_load_the_same_table(compounds, tmp_path):
    assert compounds.shape == (20, 4) and list(compounds.columns) == ["name", "smiles", "category", "year_introduced"]
    compounds.to_parquet(tmp_path / "compounds.parquet")
    compounds.to_excel(tmp_path / "compounds.xlsx", index=False)
    for path in ("compounds.parquet", "compounds.xlsx"):
        pandas.testing.assert_frame_equal(load_table(str(tmp_path / path)), compounds)
    with pytest.raises(ValueError, match="use a file ending in .csv"):
        load_table(str(tmp_path / "compounds.json"))
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_table(str(tmp_path / "missing.csv"))


def test_describe_filter_group_and_join(compounds):
    statistics = describe_table(compounds)
    assert statistics.loc["count", "name"] == 20 and statistics.loc["min", "year_introduced"] == 1819
    recent = filter_rows(compounds, [["category", "==", "analgesic"], ["year_introduced", ">", 1950]])
    assert sorted(recent["name"]) == ["diclofenac", "ibuprofen", "naproxen"]
    with pytest.raises(KeyError, match="no column 'colour' in the table; its columns are name, smiles, category, year_introduced"):
        filter_rows(compounds, [["colour", "==", "red"]])
    per_category = group_and_aggregate(compounds, by="category", columns=["year_introduced"], how="min")
    assert per_category.iloc[0].to_dict() == {"category": "antidiabetic", "min_year_introduced": 1956}
    with pytest.raises(KeyError, match="no column 'colour'"):
        group_and_aggregate(compounds, by="colour", columns=["year_introduced"])
    joined = join_tables(compounds, str(SAMPLE_DATA / "suppliers.csv"), on="name")
    assert len(joined) == 10 and joined.set_index("name").loc["aspirin", "supplier"] == "Northwind Labs"


def test_plots_write_pngs_and_return_their_paths(compounds, tmp_path):
    for drawn in (
        plot_histogram(compounds, "year_introduced", bins=5, output_path=str(tmp_path / "histogram.png")),
        plot_scatter(compounds, "year_introduced", "year_introduced", output_path=str(tmp_path / "scatter.png")),
        plot_line(compounds, "year_introduced", "year_introduced", output_path=str(tmp_path / "line.png")),
    ):
        with open(drawn, "rb") as image:
            assert image.read(8) == PNG
    with pytest.raises(KeyError, match="no column 'molecular_weight', 'logp' in the table; its columns are name, smiles"):
        plot_scatter(compounds, "molecular_weight", "logp", output_path=str(tmp_path / "never.png"))


def test_reports_in_markdown_and_html(compounds, tmp_path):
    markdown = open(write_report(compounds, str(tmp_path / "report.md"), title="Compounds")).read()
    assert markdown.startswith("# Compounds\n\n20 rows, 4 columns.") and "| aspirin | CC(=O)Oc1ccccc1C(=O)O |" in markdown
    page = open(write_report(compounds, str(tmp_path / "report.html"), title="Compounds <1>")).read()
    assert "<title>Compounds &lt;1&gt;</title>" in page and "<table" in page


def test_no_report_or_plot_overwrites_a_file_the_kernel_read_as_data(tmp_path, monkeypatch):
    data = shutil.copy(COMPOUNDS, tmp_path / "compounds.csv")
    original = data.read_bytes()
    table = load_table(str(data))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.md").symlink_to(data)
    (tmp_path / "hard.md").hardlink_to(data)
    for spelling in (str(data), "compounds.csv", "report.md", "hard.md"):  # any name of the same file
        with pytest.raises(
            OutputPathError, match=r"write_report refuses to write over .*compounds.csv: this kernel read it as data \(load_table\); pass another path"
        ):
            write_report(table, path=spelling)
    for plot, columns in (
        (plot_histogram, ["year_introduced"]),
        (plot_scatter, ["year_introduced"] * 2),
        (plot_line, ["year_introduced"] * 2),
        (plot_bar, ["category", "year_introduced"]),
    ):
        with pytest.raises(OutputPathError, match=rf"{plot.__name__} refuses to write over .*compounds.csv"):
            plot(table, *columns, output_path=str(data))
    for spelling in (str(data), "compounds.csv", "hard.md"):
        with pytest.raises(OutputPathError, match=r"save_table refuses to write over .*compounds.csv: this kernel read it as data \(load_table\)"):
            save_table(table, path=spelling)
    assert data.read_bytes() == original


def test_files_read_by_join_tables_and_tabulate_descriptors_are_protected_too(compounds, tmp_path):
    suppliers = shutil.copy(SAMPLE_DATA / "suppliers.csv", tmp_path / "suppliers.csv")
    molecules = shutil.copy(COMPOUNDS, tmp_path / "molecules.csv")
    joined = join_tables(compounds, str(suppliers), on="name")
    tabulate_descriptors(str(molecules))
    for path, reader in ((suppliers, "join_tables"), (molecules, "tabulate_descriptors")):
        original = path.read_bytes()
        with pytest.raises(OutputPathError, match=rf"read it as data \({reader}\)"):
            write_report(joined, path=str(path))
        assert path.read_bytes() == original


def test_writing_tools_refuse_other_kinds_of_file_and_directories(compounds, tmp_path, monkeypatch):
    with pytest.raises(OutputPathError, match=r"write_report writes .md, .markdown, .html or .htm files, not 'x.xlsx': pass a path such as report.md"):
        write_report(compounds, path=str(tmp_path / "x.xlsx"))
    with pytest.raises(OutputPathError, match=r"plot_scatter writes .png files, not 'x.svg': pass a path such as scatter.png"):
        plot_scatter(compounds, "year_introduced", "year_introduced", output_path=str(tmp_path / "x.svg"))
    with pytest.raises(OutputPathError, match=r"write_report cannot write to .*: it is a directory; pass a file path in it, such as .*report.md"):
        write_report(compounds, path=str(tmp_path))
    assert list(tmp_path.iterdir()) == []
    monkeypatch.chdir(tmp_path)  # the defaults still write where they did
    assert write_report(compounds) == "report.md" and plot_histogram(compounds, "year_introduced") == "histogram.png"
    assert (tmp_path / "report.md").read_text().startswith("# Table report") and (tmp_path / "histogram.png").read_bytes()[:8] == PNG


def test_descriptors_of_a_table_of_molecules(tmp_path):
    table = tabulate_descriptors(str(COMPOUNDS))
    assert len(table) == 20 and {"molecular_weight", "logp", "tpsa", "lipinski_passes"} <= set(table.columns)
    assert round(table.set_index("name").loc["aspirin", "molecular_weight"], 1) == 180.2
    broken = tmp_path / "broken.csv"
    broken.write_text("name,smiles\nok,CCO\nbad,C1CC\n")
    with pytest.raises(InvalidSmilesError, match="index 1"):
        tabulate_descriptors(str(broken))


@pytest.mark.integration
def test_a_task_across_chemistry_and_tabular_plans_and_runs_with_its_plot(embedder, tmp_path, monkeypatch):
    from toolpath.planner import Workspace

    monkeypatch.chdir(tmp_path)  # the kernel writes scatter.png in its working directory
    workspace = Workspace.open(embedder=embedder)
    inputs = {"path": str(COMPOUNDS), "x": "molecular_weight", "y": "logp"}
    task = workspace.plan_task("compute descriptors of the molecules in compounds.csv and plot logP against weight", inputs)
    # The first part reaches the descriptor table (as its state, or by running the tool that makes it).
    assert "chemistry.descriptors_tabulated" in task.parts[0].goal and task.parts[1].goal == frozenset({"tabular.scatter_plotted"})
    assert [step.tool.name for step in task.plan.steps] == ["tabulate_descriptors", "plot_scatter"]
    assert "plot_scatter(table=table, x=x, y=y)" in task.cell.code
    run = workspace.run_task(task, timeout=180)
    assert run.result.status == "ok", run.result.error
    (image,) = run.result.images
    assert image[:8] == PNG


def test_an_output_directory_takes_the_files_tools_would_write_by_default_and_never_a_destination_the_user_gave(embedder, tmp_path):
    from toolpath.planner import Workspace

    workspace = Workspace.open(embedder=embedder)
    inputs = {"path": str(COMPOUNDS), "column": "year_introduced", "write_report.path": "mine.md"}
    task = workspace.plan_task("plot a histogram of a column and write a report", inputs, output_directory=tmp_path / "run")
    assert [step.tool.name for step in task.plan.steps] == ["load_table", "plot_histogram", "write_report"]
    assert f"tabular_plot_histogram_output_path = {str(tmp_path / 'run' / 'histogram.png')!r}" in task.cell.code
    assert "write_report_path = 'mine.md'" in task.cell.code and "path=write_report_path)" in task.cell.code
    # The default destination is named only in the handle's approval policy, never passed.
    assert not [line for line in task.cell.code.splitlines() if "report.md" in line and "'approval'" not in line]
    assert task.inputs == inputs  # the user's inputs, as given
    plain = workspace.plan_task("plot a histogram of a column", inputs={"path": str(COMPOUNDS), "column": "year_introduced"})
    assert "output_path=" not in plain.cell.code  # without a directory the default stays


# ---------------------------------------------------------------- the tools a data person asks for, on sales.csv
# Expected figures are worked out by hand from the file (its README lists them): 30 sales, the region of
# one and the revenue of another left empty.

SALES = SAMPLE_DATA / "sales.csv"


@pytest.fixture()
def sales():
    return load_table(str(SALES))


def test_count_show_and_select_rows_and_columns(sales):
    assert count_rows(sales) == 30 and count_rows(sales.iloc[0:0]) == 0
    assert list(show_rows(sales, 3)["date"]) == ["2024-01-04", "2024-01-09", "2024-01-15"]
    assert list(show_rows(sales, 2, end="last")["date"]) == ["2024-06-21", "2024-06-27"]
    assert len(show_rows(sales)) == 5 and len(show_rows(sales, 100)) == 30 and show_rows(sales, 0).empty
    with pytest.raises(ValueError, match="show_rows: end must be one of first, last, not 'middle'"):
        show_rows(sales, 3, end="middle")
    with pytest.raises(ValueError, match="show_rows: count must be a whole number of rows, 0 or more, not -1"):
        show_rows(sales, -1)
    assert list(select_columns(sales, ["revenue", "region"]).columns) == ["revenue", "region"]
    assert list(drop_columns(sales, ["date", "month"]).columns) == ["region", "product", "units", "revenue"]
    for tool in (select_columns, drop_columns):
        with pytest.raises(KeyError, match="no column 'price' in the table; its columns are date, month, region, product, units, revenue"):
            tool(sales, ["revenue", "price"])
    assert len(drop_missing(sales)) == 28 and len(drop_missing(sales, ["revenue"])) == 29
    assert drop_missing(sales, ["region"])["region"].notna().all() and len(sales) == 30  # the table itself is untouched


def test_sort_and_top_rows(sales):
    by_revenue = sort_rows(sales, ["revenue"], order="descending")
    assert list(by_revenue["revenue"].head(3)) == [3000, 2500, 2250] and pandas.isna(by_revenue["revenue"].iloc[-1])
    by_region = sort_rows(sales, ["region", "revenue"])
    assert list(by_region[["region", "revenue"]].head(2).itertuples(index=False, name=None)) == [("East", 360), ("East", 600)]
    assert pandas.isna(by_region["region"].iloc[-1])  # the sale without a region comes last
    american = pandas.DataFrame({"day": ["03/01/2024", "12/01/2023", "01/15/2024"], "amount": [1, 2, 3]})
    assert list(sort_rows(american, ["day"])["amount"]) == [2, 3, 1]  # by date, not alphabetically
    with pytest.raises(ValueError, match="sort_rows: order must be one of ascending, descending, not 'biggest'"):
        sort_rows(sales, ["revenue"], order="biggest")
    assert list(top_rows(sales, "revenue", 3)["revenue"]) == [3000, 2500, 2250]
    assert list(top_rows(sales, "revenue", 2, order="ascending")["revenue"]) == [300, 360]  # the empty revenue never ranks
    assert list(top_rows(sales, "units")["units"]) == [40, 30, 25, 20, 20]
    assert list(top_rows(american, "day", 1)["amount"]) == [1]  # the latest date
    with pytest.raises(KeyError, match="no column 'profit'"):
        top_rows(sales, "profit")


def test_filter_rows_compares_each_value_as_its_column_holds_it(sales):
    north_over_1000 = filter_rows(sales, [["region", "==", "north"], ["revenue", ">", "1000"]])
    assert sorted(north_over_1000["revenue"]) == [1200, 1200, 1400, 2000, 3000]
    march = filter_rows(sales, [["date", "between", ["2024-03-01", "03/31/2024"]]])
    assert list(march["date"]) == ["2024-03-05", "2024-03-11", "2024-03-18", "2024-03-22", "2024-03-28"]
    assert list(filter_rows(sales, [["date", ">=", "2024-06-20"]])["revenue"]) == [3000, 1000]
    assert len(filter_rows(sales, [["region", "!=", "North"]])) == 21  # 30 less 8 in the North, less the one with no region
    assert len(filter_rows(sales, [["region", "not in", ["North"]]])) == 21
    assert len(filter_rows(sales, [["region", "in", ["North", " south "]]])) == 15
    assert list(filter_rows(sales, [["region", "is missing"]])["product"]) == ["Gadget"]
    assert len(filter_rows(sales, [["revenue", "is not missing", None]])) == 29
    assert set(filter_rows(sales, [["product", "contains", "GET"]])["product"]) == {"Widget", "Gadget"}
    assert list(filter_rows(sales, [["units", "between", [25, 40]]])["units"]) == [30, 25, 40]
    assert list(filter_rows(sales, [["units", "==", 40.0]]).index) == [20]  # the index says which rows of the table they were
    flags = pandas.DataFrame({"name": ["a", "b"], "approved": [True, False]})
    assert list(filter_rows(flags, [["approved", "==", "yes"]])["name"]) == ["a"]


def test_filter_rows_says_which_condition_it_cannot_use(sales):
    refusals = {
        "unknown operator '=~' in condition ['region', '=~', 'N']; use one of ==, !=, >, >=, <, <=, between, in, not in, contains": [["region", "=~", "N"]],
        "column 'revenue' holds numbers, and 'a lot' is not one (condition ['revenue', '>', 'a lot'])": [["revenue", ">", "a lot"]],
        "column 'region' holds text, not numbers or dates, so '>' cannot order it": [["region", ">", "M"]],
        "column 'date' holds dates, and ['soon'] are not all dates (condition ['date', '<', 'soon'])": [["date", "<", "soon"]],
        "between takes [low, high] in condition ['units', 'between', [1, 2, 3]]": [["units", "between", [1, 2, 3]]],
        "in takes a list of values, such as ['North', 'South']": [["region", "in", "North, South"]],
        "each condition is [column, operator, value]": [["region", "==", "North", "extra"]],
        "not a text query: 'revenue > 1000'": "revenue > 1000",
        "needs at least one condition": [],
        "condition ['region', '=='] has no value to compare with": [["region", "=="]],
    }
    for message, conditions in refusals.items():
        with pytest.raises(ValueError) as raised:
            filter_rows(sales, conditions)
        assert message in str(raised.value)


def test_filter_rows_compares_code_as_text_and_never_runs_it(tmp_path):
    marker = tmp_path / "ran"
    code = f"__import__('os').system('touch {marker}')"
    table = pandas.DataFrame({"note": ["plain", code], "amount": [1, 2]})
    assert list(filter_rows(table, [["note", "==", code]])["amount"]) == [2]  # the very text matches, as text
    assert filter_rows(table, [["note", "==", "@amount > 0 or True"]]).empty
    assert filter_rows(table, [["note", "contains", "__import__('os')"]])["amount"].tolist() == [2]
    with pytest.raises(ValueError, match="holds numbers"):
        filter_rows(table, [["amount", ">", code]])
    with pytest.raises(KeyError, match="no column"):
        filter_rows(table, [[code, "==", 1]])
    assert not marker.exists()


def test_group_and_aggregate_several_columns(sales):
    totals = group_and_aggregate(sales, by="region", columns=["revenue", "units"], how="sum")
    assert list(totals.columns) == ["region", "sum_revenue", "sum_units"]
    assert list(totals["region"].head(4)) == ["North", "South", "West", "East"]  # largest total revenue first
    assert list(totals["sum_revenue"].head(4)) == [10350, 8450, 7390, 6910] and list(totals["sum_units"].head(4)) == [104, 99, 87, 79]
    assert pandas.isna(totals["region"].iloc[4]) and totals["sum_revenue"].iloc[4] == 1500  # the sale without a region still counts
    counts = group_and_aggregate(sales, by="product", columns=["revenue"], how="count")
    assert counts.set_index("product")["count_revenue"].to_dict() == {"Widget": 12, "Gadget": 10, "Gizmo": 8}  # rows, the empty revenue too
    means = group_and_aggregate(sales, by="product", columns="units", how="mean")
    assert means.set_index("product")["mean_units"].round(2).to_dict() == {"Gizmo": 21.25, "Widget": 11.58, "Gadget": 6.6}
    with pytest.raises(ValueError, match="group_and_aggregate: cannot take the mean of column 'product': it holds .* values, not numbers"):
        group_and_aggregate(sales, by="region", columns=["product"])
    with pytest.raises(ValueError, match="how must be one of sum, mean, median, count, min, max, not 'average'"):
        group_and_aggregate(sales, by="region", columns=["revenue"], how="average")
    with pytest.raises(ValueError, match="columns must be a list of column names"):
        group_and_aggregate(sales, by="region", columns=[])


def test_pivot_and_correlation(sales):
    pivot = pivot_table(sales, rows="month", columns="product", values="revenue").set_index("month")
    assert list(pivot.columns) == ["Gadget", "Gizmo", "Widget"] and list(pivot.index) == ["2024-01", "2024-02", "2024-03", "2024-04", "2024-05", "2024-06"]
    assert pivot.loc["2024-06", "Gadget"] == 5250 and pivot.loc["2024-02", "Widget"] == 1500  # the empty revenue adds nothing
    counts = pivot_table(sales, rows="region", columns="product", values="units", how="count").set_index("region")
    assert counts.loc["North", "Widget"] == 3 and counts.loc["East", "Gadget"] == 2 and counts.to_numpy().sum() == 30
    # The sale without a region is a row of its own: a Gadget only, so its other cells have no rows.
    assert counts.iloc[-1].to_dict() == {"Gadget": 1, "Gizmo": 0, "Widget": 0}
    without_region = pivot_table(sales, rows="region", columns="product", values="revenue").iloc[-1]
    assert pandas.isna(without_region["region"]) and without_region[["Gadget", "Gizmo", "Widget"]].tolist() == [1500, 0, 0]
    lowest = pivot_table(sales, rows="region", columns="product", values="revenue", how="min")
    assert lowest.set_index("region").loc["West", "Gadget"] == 500 and lowest.iloc[-1]["Gadget"] == 1500 and lowest.iloc[-1][["Gizmo", "Widget"]].isna().all()
    steady = pandas.DataFrame({"x": [1, 2, 3, 4], "double": [2, 4, 6, 8], "opposite": [4, 3, 2, 1], "label": list("abcd")})
    correlations = correlate_columns(steady)
    assert list(correlations.columns) == ["x", "double", "opposite"]
    assert correlations.loc["x", "double"] == pytest.approx(1) and correlations.loc["x", "opposite"] == pytest.approx(-1)
    assert list(correlate_columns(steady, ["x", "opposite"]).columns) == ["x", "opposite"]
    with pytest.raises(
        ValueError, match=r"correlate_columns needs at least two numeric columns; the table has only 'revenue' \(its columns are region, revenue\)"
    ):
        correlate_columns(select_columns(sales, ["region", "revenue"]))
    with pytest.raises(ValueError, match="'label' do not hold numbers"):
        correlate_columns(steady, ["x", "label"])


def test_bar_and_line_charts_draw_one_aggregate_per_value(sales, tmp_path, monkeypatch):
    drawn = {}

    def keep_figure(figure, path):
        drawn["axes"] = figure.axes[0]
        return show_figure(figure, path)

    monkeypatch.setattr("toolpath.catalogs.tabular.plot_line.show_figure", keep_figure)
    monkeypatch.setattr("toolpath.catalogs.tabular.plot_bar.show_figure", keep_figure)
    line = plot_line(sales, "month", "revenue", output_path=str(tmp_path / "monthly.png"))
    (points,) = drawn["axes"].get_lines()
    assert list(points.get_ydata()) == [4600, 4450, 5750, 5640, 6160, 8000]  # revenue by month: each month's total
    assert [label.get_text() for label in drawn["axes"].get_xticklabels()] == ["2024-01", "2024-02", "2024-03", "2024-04", "2024-05", "2024-06"]
    assert drawn["axes"].get_ylabel() == "sum of revenue" and open(line, "rb").read(8) == PNG
    plot_line(sales.iloc[::-1], "units", "revenue", how="max", output_path=str(tmp_path / "units.png"))
    (points,) = drawn["axes"].get_lines()
    assert list(points.get_xdata())[:3] == [2, 3, 4] and list(points.get_ydata())[:3] == [500, 750, 1000]  # sorted by x
    bar = plot_bar(sales, "region", "revenue", output_path=str(tmp_path / "regions.png"))
    assert [label.get_text() for label in drawn["axes"].get_xticklabels()] == ["East", "North", "South", "West", "(missing)"]
    assert [patch.get_height() for patch in drawn["axes"].patches] == [6910, 10350, 8450, 7390, 1500]
    assert open(bar, "rb").read(8) == PNG
    plot_bar(sales, "product", "revenue", how="count", output_path=str(tmp_path / "count.png"))
    assert [patch.get_height() for patch in drawn["axes"].patches] == [10, 8, 12]
    with pytest.raises(ValueError, match="plot_bar: cannot take the sum of column 'region'"):
        plot_bar(sales, "product", "region", output_path=str(tmp_path / "never.png"))
    with pytest.raises(OutputPathError, match="plot_bar writes .png files, not 'bar.jpg'"):
        plot_bar(sales, "region", "revenue", output_path=str(tmp_path / "bar.jpg"))


def test_save_table_as_csv_excel_and_parquet(sales, tmp_path):
    for name in ("sales.csv", "sales.xlsx", "sales.parquet"):
        saved = save_table(sales, str(tmp_path / name))
        assert saved == str(tmp_path / name)
        pandas.testing.assert_frame_equal(load_table(saved), sales, check_dtype=False)
    pivot = pivot_table(sales, rows="region", columns="units", values="revenue")  # numbers as column names
    back = load_table(save_table(pivot, str(tmp_path / "pivot.parquet")))
    assert "20" in back.columns and back.set_index("region").loc["South", "20"] == 2000
    with pytest.raises(OutputPathError, match=r"save_table writes .csv, .xlsx or .parquet files, not 'sales.json': pass a path such as table.csv"):
        save_table(sales, str(tmp_path / "sales.json"))


def test_sales_join_their_regions_managers(sales):
    joined = join_tables(sales, str(SAMPLE_DATA / "regions.csv"), on="region")
    assert len(joined) == 29 and joined.loc[joined["region"] == "East", "manager"].unique().tolist() == ["Chen Wei"]
    assert len(join_tables(sales, str(SAMPLE_DATA / "regions.csv"), on="region", how="left")) == 30
