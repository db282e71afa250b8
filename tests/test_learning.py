"""toolpath learn (issue 53): labelled examples → a catalog overlay that validates, loads like a
catalog, changes what search ranks first, and is undone by removing it; and overlays that are wrong
(a name no catalog has, a prerequisite making a cycle, vectors that do not match) refused with the
file, line and field."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from filelock import FileLock

from toolpath.errors import ToolpathError
from toolpath.planner import learn, read_examples
from toolpath.planner.learning import overlay_learning
from toolpath.planner.learning.examples import ExamplesError
from toolpath.planner.learning.overlay_learning import LearnError
from toolpath.planner.search.embedding_model import DEFAULT_MODEL_ID
from toolpath.planner.tasks.workspace import Workspace
from toolpath.registry import CatalogError, lint_catalogs, load_checked

ROOT = Path(__file__).resolve().parents[1]
TABULAR = ROOT / "catalogs" / "tabular" / "catalog.yaml"

#: Hand-written requests in wording the tabular catalog does not use ("lopsided", "eyeball").
EXAMPLES = [
    {"request": "how lopsided are the ages", "tools": ["plot_histogram"]},
    {"request": "is the income column lopsided", "tools": ["plot_histogram"]},
    {"request": "how lopsided is the rainfall over the year", "tools": ["tabular/plot_histogram"]},
    {"request": "eyeball the first lines of the sheet", "tools": ["show_rows"]},
    {"request": "let me eyeball the top of the file", "tools": ["show_rows"]},
    {"steps": ["read orders.csv", "which fields move together"], "tools": ["load_table", "correlate_columns"]},
    {"request": "read sales.csv and tell me how lopsided the prices are", "tools": ["load_table", "plot_histogram"]},
]
QUERY = "how lopsided are the prices"


def _write_examples(path: Path, examples: list[dict]) -> Path:
    path.write_text("".join(json.dumps(example) + "\n" for example in examples), encoding="utf-8")
    return path


def _toolpath(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolpath.planner.interfaces.cli", *arguments], capture_output=True, text=True, timeout=300, cwd=cwd)


def _first_tool(*arguments: str, cwd: Path) -> str:
    completed = _toolpath("search", QUERY, "--kind", "tool", "--k", "3", "--json", "--catalog", str(TABULAR), *arguments, cwd=cwd)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)["hits"][0]["name"]


class WordHashEmbedder:
    """A small deterministic embedder (each word hashed to one of 16 axes), so that overlays can be
    written and broken without loading the model."""

    model_id = "test/word-hash-16"

    def __call__(self, texts):
        vectors = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, sum(map(ord, word)) % 16] += 1.0
        return vectors + 0.01


@pytest.mark.integration
def test_learned_overlay_validates_loads_and_puts_the_learned_tool_first_until_removed(tmp_path):
    examples = _write_examples(tmp_path / "examples.jsonl", EXAMPLES)
    overlay = tmp_path / "learned.yaml"
    assert _first_tool(cwd=tmp_path) != "plot_histogram"  # the catalog's own words do not say "lopsided"

    completed = _toolpath("learn", "--from-file", str(examples), "--out", str(overlay), "--catalog", str(TABULAR), "--json", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["tools"]["tabular/plot_histogram"] == 3
    assert (tmp_path / "learned.vectors.npz").is_file()

    written = yaml.safe_load(overlay.read_text())
    histogram = next(tool for tool in written["tools"] if tool["name"] == "plot_histogram")
    assert histogram["examples"] == 3
    assert histogram["phrasings"] == ["how lopsided are the ages", "is the income column lopsided", "how lopsided is the rainfall over the year"]
    assert overlay.read_text().startswith("# Catalog overlay written by `toolpath learn`")

    validated = _toolpath("validate", str(TABULAR), str(overlay), cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr

    assert _first_tool("--add-catalog", str(overlay), cwd=tmp_path) == "plot_histogram"
    overlay.unlink()
    assert _first_tool(cwd=tmp_path) != "plot_histogram"


def _learned(tmp_path: Path, examples: list[dict] = EXAMPLES) -> Path:
    out = tmp_path / "learned.yaml"
    learn([TABULAR], read_examples(_write_examples(tmp_path / "examples.jsonl", examples)), out, embedder=WordHashEmbedder())
    return out


def _problems(*paths: Path) -> list:
    with pytest.raises(CatalogError) as raised:
        load_checked([TABULAR, *paths])
    return raised.value.problems


def _edit(overlay: Path, change) -> None:
    document = yaml.safe_load(overlay.read_text())
    change(document)
    overlay.write_text(yaml.safe_dump(document, sort_keys=False))


def test_an_overlay_loads_with_its_phrasings_and_prerequisites(tmp_path):
    overlay = _learned(tmp_path)

    def require_description(document):
        histogram = next(tool for tool in document["tools"] if tool["name"] == "plot_histogram")
        histogram["prerequisites"] = [{"state": "tabular.table_described", "share": 0.9, "uses": 20}]

    _edit(overlay, require_description)
    loaded = load_checked([TABULAR, overlay])
    assert "tabular.table_described" in loaded.registry.get_tool_by_name("plot_histogram").state_transition.requires
    plan = Workspace(loaded).plan(["tabular.histogram_plotted"], held=["tabular.file_given"])
    assert [step.tool.name for step in plan.steps] == ["load_table", "describe_table", "plot_histogram"]
    assert loaded.overlays[0].entries.count(("state", None, "tabular.histogram_plotted")) == 1  # from the request served by two tools
    assert loaded.overlays[0].entries.count(("tool", "tabular", "plot_histogram")) == 3


def test_an_overlay_naming_a_tool_no_catalog_has_is_refused_at_its_line(tmp_path):
    overlay = _learned(tmp_path)
    _edit(overlay, lambda document: document["tools"][0].update(name="plot_violin"))
    (problem,) = _problems(overlay)
    assert (problem.code, problem.path, problem.field) == ("TP108", str(overlay), "tools[0].name")
    assert problem.line == overlay.read_text().splitlines().index("  name: plot_violin") + 1
    assert "tabular/plot_violin" in problem.message


def test_a_prerequisite_only_the_tool_itself_reaches_is_a_cycle(tmp_path):
    overlay = _learned(tmp_path)

    def circular(document):
        histogram = next(tool for tool in document["tools"] if tool["name"] == "plot_histogram")
        histogram["prerequisites"] = [{"state": "tabular.histogram_plotted", "share": 1.0, "uses": 12}]

    _edit(overlay, circular)
    (problem,) = _problems(overlay)
    assert problem.code == "TP109"
    assert problem.field.endswith("prerequisites[0].state")
    assert "cycle" in problem.message


def test_vectors_of_the_wrong_shape_are_refused(tmp_path):
    overlay = _learned(tmp_path)
    vectors = tmp_path / "learned.vectors.npz"
    with np.load(vectors, allow_pickle=False) as archive:
        arrays = dict(archive)
    arrays["vectors"] = arrays["vectors"][:-1]
    with open(vectors, "wb") as file:
        np.savez(file, **arrays)
    from toolpath.registry.overlays import file_sha256

    _edit(overlay, lambda document: document["overlay"].update(vectors_sha256=file_sha256(vectors)))
    (problem,) = _problems(overlay)
    assert problem.code == "TP110" and problem.field == "vectors"
    assert "re-run `toolpath learn`" in problem.message
    assert f"holds {len(arrays['vectors'])} vectors" in problem.message


def test_a_changed_vectors_file_or_an_edited_phrasing_is_refused(tmp_path):
    overlay = _learned(tmp_path)
    vectors = tmp_path / "learned.vectors.npz"
    original = vectors.read_bytes()
    with zipfile.ZipFile(vectors, "a") as archive:
        archive.writestr("extra.npy", b"")
    (problem,) = _problems(overlay)
    assert problem.code == "TP110" and "changed or was replaced" in problem.message

    vectors.write_bytes(original)
    _edit(overlay, lambda document: document["tools"][0]["phrasings"].__setitem__(0, "something else entirely"))
    (problem,) = _problems(overlay)
    assert problem.code == "TP110" and "edited" in problem.message


def test_an_overlay_of_another_embedding_model_is_found_by_lint_and_refused_by_search(tmp_path):
    overlay = _learned(tmp_path)
    findings = lint_catalogs([TABULAR, overlay], embedding_model=DEFAULT_MODEL_ID)
    assert [(finding.code, finding.field) for finding in findings if finding.severity == "error"] == [("TP111", "overlay.embedding_model")]
    assert "re-run `toolpath learn`" in findings[0].message
    workspace = Workspace(load_checked([TABULAR, overlay]))
    with pytest.raises(CatalogError, match="word-hash-16"):
        workspace.learned_search()
    assert lint_catalogs([overlay])[0].code == "TP108"  # an overlay alone: its names cannot be checked


def test_examples_naming_unknown_tools_or_malformed_name_their_lines(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"request": "how lopsided are the ages", "tools": ["plot_histogram"]}\n\n{"request": "x", "tools": ["plot_violin"]}\n', encoding="utf-8")
    with pytest.raises(ExamplesError, match=r"bad\.jsonl:3: no loaded catalog has a tool 'plot_violin'"):
        learn([TABULAR], read_examples(bad), tmp_path / "out.yaml", embedder=WordHashEmbedder())
    bad.write_text('{"request": "a", "tools": ["show_rows"]}\n{"request": "b", "tool": ["show_rows"]}\n', encoding="utf-8")
    completed = _toolpath("learn", "--from-file", str(bad), "--out", str(tmp_path / "out.yaml"), "--catalog", str(TABULAR), cwd=tmp_path)
    assert completed.returncode == 2
    assert "bad.jsonl:2: unknown field 'tool'" in completed.stderr
    assert not (tmp_path / "out.yaml").exists()


def test_learning_never_overwrites_a_file_that_is_not_an_overlay(tmp_path):
    catalog_copy = tmp_path / "catalog.yaml"
    catalog_copy.write_text(TABULAR.read_text())
    examples = read_examples(_write_examples(tmp_path / "examples.jsonl", EXAMPLES))
    with pytest.raises(LearnError, match="not an overlay"):
        learn([TABULAR], examples, catalog_copy, embedder=WordHashEmbedder())
    assert catalog_copy.read_text() == TABULAR.read_text()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["catalog.yaml", "examples.jsonl"]


def test_a_learner_waits_for_another_writing_the_same_overlay_and_gives_up_saying_so(tmp_path, monkeypatch):
    out = _learned(tmp_path)
    written = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    monkeypatch.setattr(overlay_learning, "WRITE_LOCK_WAIT_SECONDS", 0.2)
    examples = read_examples(_write_examples(tmp_path / "more.jsonl", [*EXAMPLES, {"request": "squint at the opening rows", "tools": ["show_rows"]}]))
    with FileLock(overlay_learning.lock_path(out)):  # another learner is putting its files in place
        with pytest.raises(LearnError, match=r"another toolpath learn has been writing .*learned\.yaml for 0\.2 s; try again"):
            learn([TABULAR], examples, out, embedder=WordHashEmbedder())
    # The overlay and its vectors are the first learner's, whole: nothing of the second was put in place.
    assert {name: (tmp_path / name).read_bytes() for name in written} == written
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".toolpath-learn-")]
    learn([TABULAR], examples, out, embedder=WordHashEmbedder())  # once it is free, learning goes on
    assert "squint at the opening rows" in out.read_text()


@pytest.mark.integration
def test_evaluate_reports_search_before_and_after_on_the_examples_held_back(tmp_path):
    histogram = ["how lopsided are the {}", "is the {} column lopsided", "how skewed are the {}", "are the {} lopsided"]
    subjects = ["ages", "prices", "salaries", "weights", "rents", "scores", "heights", "fares"]
    examples = [{"request": pattern.format(subject), "tools": ["plot_histogram"]} for pattern in histogram for subject in subjects]
    examples += [{"request": f"eyeball the first lines of the {noun}", "tools": ["show_rows"]} for noun in ("sheet", "file", "table", "export", "ledger")]
    path = _write_examples(tmp_path / "examples.jsonl", examples)
    completed = _toolpath(
        "learn", "--from-file", str(path), "--out", str(tmp_path / "learned.yaml"), "--catalog", str(TABULAR), "--evaluate", "--json", cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["held_back_examples"] + report["learned_from_examples"] == len(examples)
    assert report["phrasings_measured"] == report["held_back_examples"]
    assert report["search_after"]["r_at_1"] > report["search_before"]["r_at_1"]
    assert "held back by --evaluate" in yaml.safe_load((tmp_path / "learned.yaml").read_text())["overlay"]["learned_from"]


def test_what_an_overlay_says_of_a_catalog_skipped_for_missing_modules_is_passed_over(tmp_path):
    extra = tmp_path / "extra.yaml"
    catalog = {
        "domain": "extra",
        "package": "extra_tools",
        "states": [{"token": "extra.greeted", "description": "A person was greeted."}],
        "tools": [{"name": "greet", "description": "Greet a person.", "state_transition": {"produces": ["extra.greeted"]}}],
    }
    extra.write_text(yaml.safe_dump(catalog))
    overlay = tmp_path / "learned.yaml"
    examples = [*EXAMPLES, {"request": "say hello to the visitor", "tools": ["greet"]}]
    learn([TABULAR, extra], read_examples(_write_examples(tmp_path / "examples.jsonl", examples)), overlay, embedder=WordHashEmbedder())
    extra.write_text(yaml.safe_dump({**catalog, "requirements": {"modules": ["no_module_of_this_name"], "install": "pip install it"}}))
    with pytest.warns(UserWarning, match="'extra'.*skipped"):
        loaded = load_checked([TABULAR, extra, overlay])
    assert [entry.domain for entry in loaded.skipped] == ["extra"]
    assert ("tool", "extra", "greet") in loaded.overlays[0].entries  # kept in the file, found in no index


def test_learning_never_overwrites_or_deletes_npz_files_beside_the_overlay_that_are_not_its_own(tmp_path):
    examples = read_examples(_write_examples(tmp_path / "examples.jsonl", EXAMPLES))
    someone_elses = tmp_path / "learned.vectors.npz"
    someone_elses.write_bytes(b"my own measurements")
    with pytest.raises(LearnError, match="learned.vectors.npz exists and is not a file of an overlay"):
        learn([TABULAR], examples, tmp_path / "learned.yaml", embedder=WordHashEmbedder())
    assert someone_elses.read_bytes() == b"my own measurements"
    assert not (tmp_path / "learned.yaml").exists()

    # Learning again over its own overlay replaces its files; an adapter file it never wrote stays.
    someone_elses.unlink()
    learn([TABULAR], examples, tmp_path / "learned.yaml", embedder=WordHashEmbedder(), adapter=False)
    learn([TABULAR], examples, tmp_path / "learned.yaml", embedder=WordHashEmbedder(), adapter=False)
    (tmp_path / "learned.adapter.npz").write_bytes(b"not the overlay's")
    with pytest.raises(LearnError, match="learned.adapter.npz exists"):
        learn([TABULAR], examples, tmp_path / "learned.yaml", embedder=WordHashEmbedder(), adapter=False)
    assert (tmp_path / "learned.adapter.npz").read_bytes() == b"not the overlay's"
    assert load_checked([TABULAR, tmp_path / "learned.yaml"]).overlays


@pytest.mark.parametrize("elsewhere", ["/etc/passwd", "../learned.vectors.npz", "data/learned.vectors.npz"])
def test_an_overlay_whose_vectors_are_not_beside_it_is_refused_at_its_line(tmp_path, elsewhere):
    overlay = _learned(tmp_path)
    _edit(overlay, lambda document: document.update(vectors=elsewhere))
    (problem,) = _problems(overlay)
    assert problem.field == "vectors" and "a file beside the overlay" in problem.message and elsewhere in problem.message


def test_a_vectors_file_that_would_inflate_beyond_its_shape_is_refused_unread(tmp_path):
    overlay = _learned(tmp_path)
    vectors = tmp_path / "learned.vectors.npz"
    with np.load(vectors, allow_pickle=False) as archive:
        arrays = dict(archive)
    # 64 MB of zeros compress to almost nothing: the hash is the attacker's own, so only sizes tell.
    arrays["vectors"] = np.zeros((len(arrays["vectors"]) * 1000, arrays["vectors"].shape[1]), dtype=np.float64)
    with open(vectors, "wb") as file:
        np.savez_compressed(file, **arrays)
    from toolpath.registry.overlays import file_sha256

    assert vectors.stat().st_size < 1_000_000
    _edit(overlay, lambda document: document["overlay"].update(vectors_sha256=file_sha256(vectors)))
    (problem,) = _problems(overlay)
    assert problem.code == "TP110" and "more than the overlay's size allows" in problem.message


def test_a_request_longer_than_a_request_can_be_is_refused_at_its_line(tmp_path):
    path = _write_examples(tmp_path / "examples.jsonl", [EXAMPLES[0], {"request": "plot " * 2000, "tools": ["plot_histogram"]}])
    with pytest.raises(ExamplesError, match=r"examples.jsonl:2: `request` has 10,000 characters"):
        read_examples(path)


@pytest.mark.integration
def test_a_loose_learned_phrasing_never_makes_a_tool_with_effects_run_but_the_words_a_user_ran_do(tmp_path):
    sales = ROOT / "catalogs" / "tabular" / "data" / "sales.csv"
    examples = [
        {"steps": ["load the sheet", "have a look at the numbers"], "tools": ["load_table", "save_table"]},
        {"steps": ["load the sheet", "glance over it"], "tools": ["load_table", "save_table"]},
        {"steps": ["load the sheet", "keep a copy of it as <file .csv>"], "tools": ["load_table", "save_table"]},
    ]
    overlay = tmp_path / "effects.yaml"
    learn([TABULAR], read_examples(_write_examples(tmp_path / "examples.jsonl", examples)), overlay)
    workspace = Workspace.open([TABULAR, overlay])

    def tools(task: str) -> list[str]:
        try:
            return [step.tool.name for step in workspace.plan_task(task, inputs={"path": str(sales)}).plan.steps]
        except ToolpathError:  # refused: not understood, asked about
            return []

    assert "save_table" not in tools("load the table and take a look at the figures")
    assert tools("load the table and keep a copy of it as backup.csv")[-1] == "save_table"


#: Enough requests (each served by one tool) for learn() to check an adapter on held-back ones.
MANY_EXAMPLES = [
    *({"request": f"how lopsided is the {column}", "tools": ["plot_histogram"]} for column in ("age", "income", "rainfall", "price", "weight", "height")),
    *(
        {"request": f"let me eyeball the {part} of the sheet", "tools": ["show_rows"]}
        for part in ("top", "start", "first lines", "head", "opening rows", "beginning")
    ),
    *(
        {"request": f"do {pair} move together", "tools": ["correlate_columns"]}
        for pair in ("price and size", "age and income", "rain and sales", "heat and load", "speed and fuel", "hours and pay")
    ),
    *({"request": f"open {name}", "tools": ["load_table"]} for name in ("orders.csv", "sales.csv", "stock.csv", "staff.csv", "visits.csv", "costs.csv")),
]


def test_learn_reports_and_writes_whether_it_fitted_an_adapter_and_the_held_back_figures(tmp_path, monkeypatch):
    out = tmp_path / "learned.yaml"
    examples = read_examples(_write_examples(tmp_path / "examples.jsonl", MANY_EXAMPLES))
    report = learn([TABULAR], examples, out, embedder=WordHashEmbedder())
    check = report.adapter_check
    assert check["checked"] == len(MANY_EXAMPLES) and "none" in check["figures"]
    assert (report.adapter is not None) == check["fitted"] == (tmp_path / "learned.adapter.npz").exists()
    assert f"Query adapter: {report.adapter_note}." in out.read_text()
    assert report.to_dict()["adapter_check"] == check

    # An adapter that hurts on the held-back requests is neither written nor named by the overlay.
    from toolpath.planner.search import learned as learned_module

    monkeypatch.setattr(learned_module, "fit_query_adapter", lambda index, vectors, gold, ridge=None: -np.eye(index.text_dimensions, dtype=np.float32))
    report = learn([TABULAR], examples, out, embedder=WordHashEmbedder())
    assert report.adapter is None and not report.adapter_check["fitted"]
    assert not (tmp_path / "learned.adapter.npz").exists()
    assert "adapter" not in yaml.safe_load(out.read_text()) or yaml.safe_load(out.read_text())["adapter"] is None
    assert "Query adapter: none: no ridge beat searching without one" in out.read_text()
