"""``toolpath serve`` builds what a search needs as it starts (the skill index, the query model):
requests that arrive meanwhile wait for that one build, and a build that fails reaches each caller
as it did when the first search built the index. A real server subprocess over stdio, driven by the
MCP SDK's client; its standard error is read for what the operator sees."""

import asyncio
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from toolpath.planner.tasks.workspace import Workspace

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
#: What toolpath says on standard error when it embeds catalog texts the cache lacks.
EMBEDDING_NOTE = "toolpath: embedding "


def _served(home: Path, log, **environment: str) -> Client:
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolpath.planner.interfaces.cli", "serve"],
        env={**os.environ, "TOOLPATH_HOME": str(home), **environment},
        cwd=str(ROOT),
    )
    return Client(stdio_client(parameters, errlog=log))


def test_searches_sent_right_after_initialize_wait_for_the_one_start_up_build_and_are_answered(tmp_path):
    # A new home: the index is not stored and the catalog texts are not embedded, so the start-up
    # build takes a second and the searches arrive while it runs.
    queries = {"parse a SMILES string into a molecule": {"parse_molecule", "chemistry.molecule_parsed"}, "plot a histogram of a column": {"plot_histogram"}}

    async def scenario(log):
        async with _served(tmp_path / "home", log) as client:  # entered: initialized, nothing listed
            return await asyncio.gather(*(client.call_tool("search_skills", {"query": query, "k": 3}) for query in queries))

    with open(tmp_path / "stderr.txt", "w") as log:
        results = asyncio.run(scenario(log))
    for result, expected in zip(results, queries.values()):
        assert not result.is_error, result.content[0].text
        best = result.structured_content["hits"][0]
        assert best["name"] in expected and best["similarity"] is not None  # ranked with the embeddings, not BM25 alone
    stderr = (tmp_path / "stderr.txt").read_text()
    # One build for the start-up and both searches: the texts were embedded once.
    assert stderr.count(EMBEDDING_NOTE) == 1, stderr
    assert "could not be prepared" not in stderr


def test_without_a_usable_embedding_model_each_search_fails_as_before_and_the_server_keeps_serving(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TOOLPATH_HOME", str(home))
    assert Workspace.open().index.stored is not None  # stored with its vectors: searches embed their queries
    # Then the model is gone: its ONNX export cannot be written (its directory would be under a
    # file) and sentence-transformers, the fallback, does not import.
    (tmp_path / "a-file").write_text("")
    shim = tmp_path / "shim" / "sentence_transformers"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('sentence-transformers is left out here')\n")
    python_path = os.pathsep.join(filter(None, [str(shim.parent), os.environ.get("PYTHONPATH")]))

    async def scenario(log):
        async with _served(home, log, TOOLPATH_MODELS=str(tmp_path / "a-file" / "models"), PYTHONPATH=python_path) as client:
            first = await client.call_tool("search_skills", {"query": "parse a SMILES string into a molecule", "k": 3})
            second = await client.call_tool("search_skills", {"query": "plot a histogram of a column", "k": 3})
            variables = await client.call_tool("list_variables", {})
            return first, second, variables

    with open(tmp_path / "stderr.txt", "w") as log:
        first, second, variables = asyncio.run(scenario(log))
    # The client gets what the MCP SDK gives for a tool that raised an unexpected error, each time.
    for failed in (first, second):
        assert failed.is_error and [block.text for block in failed.content] == ["Error executing tool search_skills"]
    assert not variables.is_error
    stderr = (tmp_path / "stderr.txt").read_text()
    # The operator reads why: at start-up, and in the traceback of each failed search.
    reason = "sentence-transformers is not installed (sentence-transformers is left out here)"
    assert f"toolpath: warning: skill search could not be prepared at start-up ({reason}" in stderr, stderr
    assert stderr.count(f"EmbedderUnavailableError: {reason}") == 2, stderr
