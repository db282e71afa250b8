"""Input probes: the tabular catalog's probe_table on real files, and what the planner lets a probe read."""

import os

import pandas
import pytest

from toolpath.catalogs.tabular.probe import MAX_ROWS, probe_table
from toolpath.planner.tasks.probes import readable_file, run_probe

TABLE = pandas.DataFrame(
    {
        "when": pandas.to_datetime(["2024-01-05", "2024-02-03", "2024-03-09"]),
        "city": ["Oslo", "Lima", "Oslo"],
        "amount": [10.5, 20.0, 7.25],
        "paid": [True, False, True],
    }
)
KINDS = {"when": "date", "city": "text", "amount": "number", "paid": "bool"}


@pytest.mark.parametrize("name", ["table.csv", "table.tsv", "table.parquet", "table.xlsx"])
def test_probe_table_reads_the_columns_kinds_and_text_values_of_each_format(tmp_path, name):
    path = tmp_path / name
    if name.endswith(".csv"):
        TABLE.to_csv(path, index=False)
    elif name.endswith(".tsv"):
        TABLE.to_csv(path, sep="\t", index=False)
    elif name.endswith(".parquet"):
        TABLE.to_parquet(path)
    else:
        TABLE.to_excel(path, index=False)
    found = probe_table(str(path))
    assert found == {"columns": KINDS, "values": {"city": ["Oslo", "Lima"]}, "rows_read": 3}


def test_probe_table_reads_only_the_start_of_a_big_file(tmp_path):
    path = tmp_path / "big.csv"
    with path.open("w") as stream:
        stream.write("id,label\n")
        stream.writelines(f"{number},item {number % 50}\n" for number in range(200_000))
    found = probe_table(str(path))
    assert found["rows_read"] == MAX_ROWS
    assert len(found["values"]["label"]) == 20  # at most 20 distinct values kept


@pytest.mark.parametrize(
    ("name", "content", "said"), [("notes.txt", "a,b\n", "a table file ends in"), ("broken.xlsx", "not a workbook", "cannot read broken.xlsx")]
)
def test_probe_table_refuses_what_it_cannot_read_with_a_value_error(tmp_path, name, content, said):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=said):
        probe_table(str(path))


def test_only_a_regular_file_inside_the_directory_may_be_read(tmp_path):
    inside, outside = tmp_path / "work", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (inside / "mine.csv").write_text("a\n1\n")
    (outside / "theirs.csv").write_text("a\n1\n")
    assert readable_file("mine.csv", inside)[0] == (inside / "mine.csv").resolve()
    assert readable_file(str(outside / "theirs.csv"), inside)[0] is None
    assert "outside" in readable_file("../elsewhere/theirs.csv", inside)[1]
    os.symlink(outside / "theirs.csv", inside / "link.csv")
    assert "outside" in readable_file("link.csv", inside)[1]  # a link pointing out is not followed out
    assert "not a regular file" in readable_file(".", inside)[1]
    assert "not probed" in readable_file("mine.csv", None)[1]


def test_a_probe_that_raises_or_returns_nonsense_is_reported_not_raised(tmp_path, monkeypatch):
    (tmp_path / "mine.csv").write_text("a\n1\n")
    (tmp_path / "broken_probes.py").write_text("def fails(path):\n    raise RuntimeError('disk on fire')\n\ndef nonsense(path):\n    return ['a']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    failed = run_probe("path", "mine.csv", "tabular.file_given", "broken_probes:fails", tmp_path)
    assert failed.found is None and failed.problem == "the probe failed: RuntimeError: disk on fire"
    assert "not {'columns'" in run_probe("path", "mine.csv", "tabular.file_given", "broken_probes:nonsense", tmp_path).problem
    assert run_probe("path", "mine.csv", "tabular.file_given", "toolpath.catalogs.tabular.probe:probe_table", tmp_path).columns == {"a": "number"}
    refused = run_probe("path", "/etc/passwd", "tabular.file_given", "broken_probes:fails", tmp_path)
    assert "outside" in refused.problem and refused.seconds == 0
