"""The query path of skill search: the shipped model through ONNX Runtime, exported once, agreeing
with sentence-transformers; a damaged export is made again; an export that cannot run says why and
queries fall back to sentence-transformers."""

import json
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.planner.search.embedding import DefaultEmbedder, SentenceTransformerEmbedder
from toolpath.planner.search.onnx_embedding import DATA_FILE, MANIFEST_FILE, MODEL_FILE, OnnxEmbedder, QueryModelError
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


def test_the_default_embedder_sends_single_queries_through_onnx_and_batches_through_sentence_transformers(onnx):
    class Counting:
        def __init__(self, inner):
            self.inner, self.texts = inner, []

        def __call__(self, texts):
            self.texts += list(texts)
            return self.inner(texts)

    reference, queries = Counting(SentenceTransformerEmbedder()), Counting(onnx)
    embedder = DefaultEmbedder(reference, queries)
    embedder(["one query"])
    embedder(["two", "texts"])
    assert queries.texts == ["one query"] and reference.texts == ["two", "texts"]


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

    embedder = DefaultEmbedder(reference, OnnxEmbedder(tmp_path / "models"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = embedder(["group similar molecules"])
        second = embedder(["cluster molecules"])
    assert [str(warning.message) for warning in caught if "sentence-transformers instead" in str(warning.message)] == [
        next(str(warning.message) for warning in caught)
    ]
    assert "sentence-transformers is broken here" in embedder.query_fallback
    np.testing.assert_allclose(first, reference(["group similar molecules"]), atol=1e-6)
    assert second.shape == (1, 384)


def test_search_from_the_command_line_imports_no_torch_once_the_catalog_is_embedded(toolpath_models):
    probe = (
        "import sys, contextlib, io\n"
        "from toolpath.planner.interfaces.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    main(['search', 'group similar molecules', '--k', '1', '--json'])\n"
        "print(json.dumps({'hits': json.loads(out.getvalue())['hits'], 'loaded': sorted(m for m in ('torch', 'sentence_transformers', 'jupyter_client', 'toolpath.kernel.ipython_kernel') if m in sys.modules)}))\n"
    )
    for _ in range(2):  # the first may embed the catalogs' texts (sentence-transformers) into the cache
        completed = subprocess.run([sys.executable, "-c", "import json\n" + probe], capture_output=True, text=True, timeout=300)
        assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["hits"][0]["name"] == "chemistry.molecules_clustered" and report["hits"][0]["matches"]
    assert report["loaded"] == []
