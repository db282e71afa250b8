"""The shipped tabular catalog: each tool on the sample data, the writing tools refusing paths that
would destroy data, and a task across the chemistry and tabular domains planned and run end to end in
a real kernel."""

import shutil

import pandas
import pytest

from toolpath.catalogs.chemistry._common import InvalidSmilesError
from toolpath.catalogs.chemistry.tabulate_descriptors import tabulate_descriptors
from toolpath.catalogs.tabular import SAMPLE_DATA
from toolpath.catalogs.tabular._common import OutputPathError
from toolpath.catalogs.tabular.describe_table import describe_table
from toolpath.catalogs.tabular.filter_rows import filter_rows
from toolpath.catalogs.tabular.group_and_aggregate import group_and_aggregate
from toolpath.catalogs.tabular.join_tables import join_tables
from toolpath.catalogs.tabular.load_table import load_table
from toolpath.catalogs.tabular.plot_histogram import plot_histogram
from toolpath.catalogs.tabular.plot_line import plot_line
from toolpath.catalogs.tabular.plot_scatter import plot_scatter
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
    for plot, columns in ((plot_histogram, ["year_introduced"]), (plot_scatter, ["year_introduced"] * 2), (plot_line, ["year_introduced"] * 2)):
        with pytest.raises(OutputPathError, match=rf"{plot.__name__} refuses to write over .*compounds.csv"):
            plot(table, *columns, output_path=str(data))
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
