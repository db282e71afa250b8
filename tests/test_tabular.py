"""The shipped tabular catalog: each tool on the sample data, and a task across the chemistry and
tabular domains planned and run end to end in a real kernel."""

import pandas
import pytest

from catalogs.chemistry._common import InvalidSmilesError
from catalogs.chemistry.tabulate_descriptors import tabulate_descriptors
from catalogs.tabular import SAMPLE_DATA
from catalogs.tabular.describe_table import describe_table
from catalogs.tabular.filter_rows import filter_rows
from catalogs.tabular.group_and_aggregate import group_and_aggregate
from catalogs.tabular.join_tables import join_tables
from catalogs.tabular.load_table import load_table
from catalogs.tabular.plot_histogram import plot_histogram
from catalogs.tabular.plot_line import plot_line
from catalogs.tabular.plot_scatter import plot_scatter
from catalogs.tabular.write_report import write_report

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
    recent = filter_rows(compounds, "category == 'analgesic' and year_introduced > 1950")
    assert sorted(recent["name"]) == ["diclofenac", "ibuprofen", "naproxen"]
    with pytest.raises(ValueError, match="the columns are name, smiles, category, year_introduced"):
        filter_rows(compounds, "colour == 'red'")
    per_category = group_and_aggregate(compounds, by="category", column="year_introduced", how="min")
    assert per_category.iloc[0].to_dict() == {"category": "antidiabetic", "min_year_introduced": 1956}
    with pytest.raises(KeyError, match="no column 'colour'"):
        group_and_aggregate(compounds, by="colour", column="year_introduced")
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
    from planner import Workspace

    monkeypatch.chdir(tmp_path)  # the kernel writes scatter.png in its working directory
    workspace = Workspace.open(embedder=embedder)
    inputs = {"path": str(COMPOUNDS), "x": "molecular_weight", "y": "logp"}
    task = workspace.plan_task("compute descriptors of the molecules in compounds.csv and plot logP against weight", inputs)
    assert [part.goal for part in task.parts] == [frozenset({"chemistry.descriptors_tabulated"}), frozenset({"tabular.scatter_plotted"})]
    assert [step.tool.name for step in task.plan.steps] == ["tabulate_descriptors", "plot_scatter"]
    assert "plot_scatter(table=table, x=x, y=y)" in task.cell.code
    run = workspace.run_task(task, timeout=180)
    assert run.result.status == "ok", run.result.error
    (image,) = run.result.images
    assert image[:8] == PNG
