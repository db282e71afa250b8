"""The notebooks under notebooks/ run top to bottom without an error, and are kept without outputs."""

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.integration


def test_the_three_guides_are_there():
    assert {path.stem for path in NOTEBOOKS} >= {"writing_a_catalog", "agent_session", "tools_in_code"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_a_notebook_is_stored_without_outputs(path):
    import nbformat  # here, not at the top: it imports jsonschema, whose import takes 1.5 s in every worker that collects this file

    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_a_notebook_runs_without_an_error(path, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    # An error in any cell raises CellExecutionError with that cell's traceback.
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs if output.output_type == "error"]
    assert not errors
