"""The query path of skill search: the shipped model through ONNX Runtime, exported once, agreeing
with sentence-transformers; a damaged export is made again; an export that cannot run says why and
queries fall back to sentence-transformers."""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.planner.search.embedding import DefaultEmbedder, SentenceTransformerEmbedder
from toolpath.planner.search.onnx_embedding import BULK_FROM, DATA_FILE, MANIFEST_FILE, MODEL_FILE, OnnxEmbedder, QueryModelError
from toolpath.registry import load_catalogs

pytestmark = pytest.mark.integration

QUERIES = [
    "group similar molecules",
    "is aspirin drug-like? check Lipinski's rule of five",
    "Wie schwer ist dieses Molekül?",
    "café ☕ and 東京 — emoji 🧪 and mojibake caf茅",
    "x",
    "   spaces around   ",
    " ".join(["a very long request about molecular descriptors of every compound"] * 30),
]


@pytest.fixture(scope="module")
def reference():
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="module")
def onnx(toolpath_models):
    embedder = OnnxEmbedder()
    embedder(["warm up"])  # exports into the session's models directory the first time
    return embedder


def catalog_texts():
    loaded = load_catalogs(default_catalog_paths())
    texts = [text for state in loaded.states.values() for text in (state.description, *state.affordances)]
    texts += [text for tool in loaded.registry for text in (tool.description, *tool.affordances)]
    return [text for text in dict.fromkeys(texts) if text.strip()]


def test_queries_and_catalog_texts_embed_as_sentence_transformers_does(onnx, reference):
    texts = catalog_texts() + QUERIES
    assert len(texts) > 100
    expected = reference(texts)
    one_by_one = np.concatenate([onnx([text]) for text in texts])
    batched = onnx(texts)
    assert one_by_one.shape == batched.shape == expected.shape == (len(texts), 384)
    assert (1 - (one_by_one * expected).sum(axis=1)).max() <= 1e-5
    assert (1 - (batched * expected).sum(axis=1)).max() <= 1e-5
    assert onnx([]).shape == (0, 384)


def test_many_texts_on_every_core_embed_as_one_call_does_in_the_callers_order(onnx, reference):
    texts = catalog_texts() + QUERIES
    texts = [f"{text} ({number})" for number in range(-(-BULK_FROM // len(texts))) for text in texts][::-1]
    assert len(texts) >= BULK_FROM  # so the bulk session embeds them, two passes at once
    with onnx.many_texts(workers=2) as many:
        vectors = many(texts)
        assert many(["a few texts", "go through the query session"]).shape == (2, 384)
    np.testing.assert_allclose(vectors, onnx(texts), atol=1e-6)
    sample = slice(None, None, 7)
    assert (1 - (vectors[sample] * reference(texts[sample])).sum(axis=1)).max() <= 1e-5


def test_the_default_embedder_sends_queries_and_catalog_texts_through_onnx_and_never_loads_sentence_transformers(onnx):
    class Counting:
        def __init__(self, inner):
            self.inner, self.texts = inner, []

        def __call__(self, texts):
            self.texts += list(texts)
            return self.inner(texts)

    fallback, queries = Counting(lambda texts: pytest.fail("sentence-transformers was used")), Counting(onnx)
    embedder = DefaultEmbedder(queries, fallback)
    embedder(["one query"])
    embedder(["two", "texts"])
    assert queries.texts == ["one query", "two", "texts"] and fallback.texts == []


def copy_export(source, models):
    (target,) = [directory for directory in source.glob("*/*") if (directory / MANIFEST_FILE).exists()]
    destination = models / target.relative_to(source)
    shutil.copytree(target, destination)
    return target, destination


def test_a_damaged_export_is_noticed_and_exported_again(onnx, toolpath_models, tmp_path, monkeypatch):
    good, damaged = copy_export(toolpath_models, tmp_path)
    data = bytearray((damaged / DATA_FILE).read_bytes())
    data[len(data) // 3 : len(data) // 3 + 4096] = bytes(4096)  # same size, some weights zeroed
    (damaged / DATA_FILE).write_bytes(bytes(data))
    exported = []

    def export_again(directory):  # the real export takes 20 s; it is run once per test session
        exported.append(directory)
        shutil.rmtree(directory)
        shutil.copytree(good, directory)

    monkeypatch.setattr("toolpath.planner.search.onnx_embedding._export", export_again)
    embedder = OnnxEmbedder(tmp_path)
    vector = embedder(["group similar molecules"])
    assert exported == [damaged]
    assert float(vector[0] @ onnx(["group similar molecules"])[0]) > 1 - 1e-6
    # A manifest that is not JSON, and a missing data file, are damage too.
    for damage in (lambda: (damaged / MANIFEST_FILE).write_text("{"), lambda: (damaged / DATA_FILE).unlink()):
        damage()
        OnnxEmbedder(tmp_path)(["x"])
    assert len(exported) == 3


def test_processes_starting_together_export_once_and_the_others_load_that_export(onnx, toolpath_models, tmp_path, monkeypatch):
    good, _ = copy_export(toolpath_models, tmp_path / "source")
    exported = []

    def slow_export(directory):  # the real export takes 20 s; it is run once per test session
        exported.append(directory)
        time.sleep(1)
        shutil.copytree(good, directory)

    monkeypatch.setattr("toolpath.planner.search.onnx_embedding._export", slow_export)
    # Separate opens of the lock file conflict as separate processes' do (flock locks the open file).
    embedders = [OnnxEmbedder(tmp_path / "models") for _ in range(3)]
    loaders = [threading.Thread(target=embedder.load) for embedder in embedders]
    for loader in loaders:
        loader.start()
    for loader in loaders:
        loader.join()
    assert len(exported) == 1
    for embedder in embedders:
        assert float(embedder(["group similar molecules"])[0] @ onnx(["group similar molecules"])[0]) > 1 - 1e-6


def test_an_export_that_cannot_run_says_why_and_queries_fall_back_to_sentence_transformers(tmp_path, monkeypatch, reference):
    # A sentence_transformers that fails to import, first on the export's path.
    shadow = tmp_path / "shadow"
    (shadow / "sentence_transformers").mkdir(parents=True)
    (shadow / "sentence_transformers" / "__init__.py").write_text("raise ImportError('sentence-transformers is broken here')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    queries = OnnxEmbedder(tmp_path / "models")
    queries.load(background=True)
    with pytest.raises(QueryModelError, match=r"exporting the query model to ONNX failed \(ImportError: sentence-transformers is broken here\)"):
        queries(["group similar molecules"])
    assert not any((tmp_path / "models").glob("*/*/" + MODEL_FILE)), "a failed export left files in place"
    assert not any(path.name.startswith(".export-") for path in (tmp_path / "models").glob("*/*")), "a failed export left its staging directory"
    # The failure is recorded: the next process is told at once instead of spending 20 s again.
    started = time.perf_counter()
    with pytest.raises(QueryModelError, match=r"sentence-transformers is broken here.*recorded in .*\.failed"):
        OnnxEmbedder(tmp_path / "models")(["group similar molecules"])
    assert time.perf_counter() - started < 5

    embedder = DefaultEmbedder(OnnxEmbedder(tmp_path / "models"), reference)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = embedder(["group similar molecules"])
        second = embedder(["cluster molecules", "catalog texts too"])
    assert [str(warning.message) for warning in caught if "sentence-transformers instead" in str(warning.message)] == [
        next(str(warning.message) for warning in caught)
    ]
    assert "sentence-transformers is broken here" in embedder.fallback_reason
    np.testing.assert_allclose(first, reference(["group similar molecules"]), atol=1e-6)
    assert second.shape == (2, 384)
    # A catalog's first embedding falls back too, when the ONNX model fails to load on entering.
    catalog = DefaultEmbedder(OnnxEmbedder(tmp_path / "models"), reference)
    with pytest.warns(RuntimeWarning, match="sentence-transformers is broken here.*sentence-transformers instead"), catalog.many_texts() as many:
        np.testing.assert_allclose(many(["cluster molecules"]), reference(["cluster molecules"]), atol=1e-6)
    assert "sentence-transformers is broken here" in catalog.fallback_reason


#: Runs the CLI with ``sys.argv[2:]`` and writes, at exit, which heavy modules the process imported
#: to the file ``sys.argv[1]``.
IMPORT_PROBE = """
import atexit, json, runpy, sys

report, arguments = sys.argv[1], sys.argv[2:]
heavy = ("torch", "sentence_transformers", "transformers", "jupyter_client", "toolpath.kernel.kernels.ipython_kernel")
atexit.register(lambda: open(report, "w").write(json.dumps(sorted(name for name in heavy if name in sys.modules))))
sys.argv = ["toolpath", *arguments]
runpy.run_module("toolpath.planner.interfaces.cli", run_name="__main__")
"""


def test_search_cell_and_run_with_a_new_catalog_never_import_torch_once_the_model_is_exported(onnx, tmp_path):
    # A fresh home: none of the catalogs' texts is embedded yet, the new catalog's least of all.
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    environment = {**os.environ, "TOOLPATH_HOME": str(home)}

    def toolpath(*arguments):
        report = tmp_path / "imported.json"
        completed = subprocess.run(
            [sys.executable, "-c", IMPORT_PROBE, str(report), *arguments], capture_output=True, text=True, timeout=300, cwd=work, env=environment
        )
        assert completed.returncode == 0, completed.stdout + completed.stderr
        return completed, json.loads(report.read_text())

    created, _ = toolpath("init", "lab_notes", "--directory", str(work))
    catalog = str(work / "lab_notes" / "catalog.yaml")
    searched, imported = toolpath("search", "shorten a text", "--add-catalog", catalog, "--k", "1", "--json")
    assert imported == [], f"search imported {imported}"
    assert json.loads(searched.stdout)["hits"][0]["name"] == "lab_notes.text_summarised"
    # The one-off embedding is announced with its expected time; a second search finds it cached.
    assert re.search(r"embedding \d+ new catalog texts with .* \(about \d+ s\), once", searched.stderr), searched.stderr
    again, _ = toolpath("search", "shorten a text", "--add-catalog", catalog, "--k", "1", "--json")
    assert "new catalog text" not in again.stderr

    (home / "toolpath.db").unlink()  # the cache forgotten: cell and run embed the texts again
    cell, imported = toolpath("cell", "summarise a text", "--add-catalog", catalog, "--input", "text=Plans are cells. Cells run.")
    assert imported == [], f"cell imported {imported}"
    assert "summarise_text(" in cell.stdout
    (home / "toolpath.db").unlink()
    run, imported = toolpath("run", "summarise a text", "--add-catalog", catalog, "--input", "text=Plans are cells. Cells run.", "--json")
    assert set(imported) <= {"jupyter_client", "toolpath.kernel.kernels.ipython_kernel"}, f"run imported {imported}"
    assert json.loads(run.stdout)["result"]["result"] == "Plans are cells."


def test_a_copied_export_is_hashed_once_then_trusted_by_its_recorded_times(onnx, toolpath_models, tmp_path, monkeypatch):
    _, copied = copy_export(toolpath_models, tmp_path)
    (copied / MANIFEST_FILE).chmod(0o644)
    later = time.time_ns() + 10**9
    for name in (MODEL_FILE, DATA_FILE):  # copied without its times, as `cp -r` does
        os.utime(copied / name, ns=(later, later))
    hashed = []
    real_digest = sys.modules["toolpath.planner.search.onnx_embedding"].file_sha256

    def counted_digest(path):
        hashed.append(path.name)
        return real_digest(path)

    monkeypatch.setattr("toolpath.planner.search.onnx_embedding.file_sha256", counted_digest)
    exported = []

    def export_refused(directory):
        exported.append(directory)
        raise QueryModelError("export refused by the test")

    monkeypatch.setattr("toolpath.planner.search.onnx_embedding._export", export_refused)
    first = OnnxEmbedder(tmp_path)(["group similar molecules"])
    assert sorted(hashed) == [MODEL_FILE, DATA_FILE]
    manifest = json.loads((copied / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert {name: entry["mtime_ns"] for name, entry in manifest["files"].items()} == {MODEL_FILE: later, DATA_FILE: later}
    assert (copied / MANIFEST_FILE).stat().st_mode & 0o777 == 0o644 and not list(copied.glob(".manifest-*"))

    hashed.clear()
    again = OnnxEmbedder(tmp_path)(["group similar molecules"])
    assert hashed == [] and np.array_equal(first, again)

    # A later same-size change still changes the time, so it is hashed and found.
    data = bytearray((copied / DATA_FILE).read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4096] = bytes(4096)
    (copied / DATA_FILE).write_bytes(bytes(data))
    assert exported == []
    with pytest.raises(QueryModelError, match="refused by the test"):
        OnnxEmbedder(tmp_path)(["x"])
    assert exported == [copied]
