"""Skill search: hybrid ranking with the real embedded model, reachability and plans on hits, the
embedding cache, custom embedders, the BM25-only fallback, and awkward queries."""

import logging
import sys
import warnings

import numpy as np
import pytest

from toolpath.planner import GoalSearch, NoMatchingSkillError, NoPlanError, SkillIndex, StateGraph, choose_goal
from toolpath.planner.search.embedding import SentenceTransformerEmbedder
from toolpath.planner.search.embedding_cache import EmbeddingCache
from toolpath.planner.search.skills import QueryError
from toolpath.registry import State, ToolDefinition, ToolRegistry

pytestmark = pytest.mark.integration


class CountingEmbedder:
    """Bag-of-words vectors over a tiny vocabulary; counts the texts it is asked to embed."""

    model_id = "test/bag-of-words-v1"
    vocabulary = ("cluster", "lipinski", "fingerprint", "smiles", "weight", "report")

    def __init__(self):
        self.embedded: list[str] = []

    def __call__(self, texts):
        self.embedded.extend(texts)
        return np.array([[text.lower().count(word) for word in self.vocabulary] + [1.0] for text in texts], dtype=float)


def lab_graph(*extra_tools):
    """A small lab: parse → weigh; `report` needs a signature nobody produces."""
    registry = ToolRegistry(package="lab")
    tools = [
        ToolDefinition(name="parse", description="parse a SMILES string", state_transition={"produces": ["lab.parsed"]}),
        ToolDefinition(name="weigh", description="molecular weight of a molecule", state_transition={"requires": ["lab.parsed"], "produces": ["lab.weighed"]}),
        ToolDefinition(
            name="report", description="write the weight report", state_transition={"requires": ["lab.weighed", "lab.signed"], "produces": ["lab.reported"]}
        ),
        *extra_tools,
    ]
    for tool in tools:
        registry.register_tool(tool)
    states = [
        State("lab.parsed", "a parsed molecule", ["read a SMILES string"]),
        State("lab.weighed", "the molecular weight", ["know how heavy a molecule is"]),
        State("lab.reported", "a signed weight report", ["report the weight"]),
        State("lab.signed", "a signature"),
    ]
    return StateGraph(registry, states)


@pytest.fixture(scope="module")
def index(chemistry_graph, embedder):
    return SkillIndex(chemistry_graph, embedder)


def test_drug_likeness_finds_descriptors_and_filter_states(index):
    names = [hit.name for hit in index.search("check drug-likeness", k=4)]
    assert {"chemistry.descriptors_computed", "chemistry.candidates_filtered"} & set(names)


def test_grouping_similar_molecules_finds_clustering(index):
    best = index.search("group similar molecules", k=3)[0]
    assert "chemistry.molecules_clustered" in best.states


def test_hits_carry_the_text_that_matched(index):
    (hit,) = index.search("cluster molecules by structural similarity", k=1)
    assert hit.kind == "state" and hit.matched == "cluster molecules by structural similarity"
    assert hit.similarity > 0.9 and hit.lexical > 0


def test_hybrid_ranking_uses_both_rankings(chemistry_graph, embedder):
    query = "group similar molecules"
    hybrid = SkillIndex(chemistry_graph, embedder, mode="hybrid").search(query, k=1)[0]
    dense = SkillIndex(chemistry_graph, embedder, mode="dense").search(query, k=1)[0]
    lexical = SkillIndex(chemistry_graph, mode="bm25").search(query, k=1)[0]
    assert hybrid.score != dense.score and dense.score == pytest.approx(dense.similarity)
    assert lexical.similarity is None and lexical.score == pytest.approx(lexical.lexical)


def test_hits_say_whether_they_are_reachable_and_carry_the_plan():
    index = SkillIndex(lab_graph(), mode="bm25")
    weighed = index.search("molecular weight", k=1, kind="state")[0]
    assert weighed.name == "lab.weighed" and weighed.reachable
    assert [step.tool.name for step in weighed.plan.steps] == ["parse", "weigh"]
    reported = index.search("weight report", k=1, kind="state")[0]
    assert reported.name == "lab.reported" and not reported.reachable and reported.plan is None
    held = index.search("weight report", k=3, held=["lab.weighed", "lab.signed"], kind="state")
    assert held[0].reachable and [step.tool.name for step in held[0].plan.steps] == ["report"]


def test_filters_keep_only_matching_hits(chemistry_graph, index):
    tools = index.search("molecules", k=5, kind="tool")
    assert tools and all(hit.kind == "tool" for hit in tools)
    assert {hit.server for hit in index.search("molecules", k=5, domain=["chemistry"])} == {"chemistry"}
    reachable = SkillIndex(lab_graph(), mode="bm25").search("report the weight", k=10, reachable_only=True)
    assert reachable and all(hit.reachable for hit in reachable) and "lab.reported" not in {hit.name for hit in reachable}


def test_reopening_embeds_nothing_and_one_new_tool_embeds_one_text(tmp_path):
    cache = EmbeddingCache(tmp_path / "toolpath.db")
    first = CountingEmbedder()
    built = SkillIndex(lab_graph(), first, cache=cache)
    texts = len(first.embedded)
    assert built.cache_counts == (0, texts) and texts > 0

    again = CountingEmbedder()
    reopened = SkillIndex(lab_graph(), again, cache=cache, store=False)  # the cache itself, not the stored index
    assert again.embedded == [] and reopened.cache_counts == (texts, 0)
    assert [hit.name for hit in reopened.search("weight", k=3)] == [hit.name for hit in built.search("weight", k=3)]

    grown = CountingEmbedder()
    SkillIndex(lab_graph(ToolDefinition(name="sign_report", state_transition={"produces": ["lab.signed"]})), grown, cache=cache)
    assert grown.embedded == ["sign report"]


def test_a_name_restating_the_description_is_not_embedded_but_its_words_still_match(tmp_path):
    restating = ToolDefinition(name="Forecast_Sales-Per_Region", description="Forecast the sales, per region.", state_transition={"produces": ["lab.forecast"]})
    other = ToolDefinition(name="sign_report", description="Put a signature under the report", state_transition={"produces": ["lab.signed"]})
    embedder = CountingEmbedder()
    index = SkillIndex(lab_graph(restating, other), embedder, cache=False)
    assert "Forecast the sales, per region." in embedder.embedded and "Forecast Sales Per Region" not in embedder.embedded
    assert "sign report" in embedder.embedded  # differs in words from its description: kept
    # The tool's BM25 document keeps every text: its name as written still finds it.
    (hit,) = SkillIndex(lab_graph(restating, other), mode="bm25", cache=False).search("Forecast_Sales-Per_Region", k=1, kind="tool")
    assert hit.name == "Forecast_Sales-Per_Region"
    (dense_hit,) = index.search("sales forecast", k=1, kind="tool")
    assert dense_hit.name == "Forecast_Sales-Per_Region" and dense_hit.matched == "Forecast the sales, per region."


def test_importing_search_leaves_out_what_bm25s_would_import_unused():
    import subprocess

    program = (
        "import sys; import toolpath.kernel.inside.tool_search as search\n"
        "assert 'scipy.sparse' not in sys.modules and 'tqdm.auto' not in sys.modules and 'asyncio' not in sys.modules, "
        "[name for name in ('scipy.sparse', 'tqdm.auto', 'asyncio') if name in sys.modules]\n"
        "import tqdm.auto  # still importable afterwards\n"
        "print(search.ToolSearch({'send_invoice': 'send an invoice', 'pay': 'pay a bill'}).search('invoice', 1))"
    )
    finished = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "['send_invoice']"


def test_another_model_id_does_not_reuse_vectors(tmp_path):
    cache = EmbeddingCache(tmp_path / "toolpath.db")
    SkillIndex(lab_graph(), CountingEmbedder(), cache=cache)
    other = CountingEmbedder()
    other.model_id = "test/bag-of-words-v2"
    SkillIndex(lab_graph(), other, cache=cache)
    assert other.embedded


def test_without_sentence_transformers_search_falls_back_to_bm25(monkeypatch, chemistry_graph):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    with pytest.warns(RuntimeWarning, match="BM25 only"):
        index = SkillIndex(chemistry_graph, SentenceTransformerEmbedder(), cache=False)
    assert index.mode == "bm25"
    best = index.search("cluster molecules", k=3)
    assert any("chemistry.molecules_clustered" in hit.states for hit in best)
    assert all(hit.similarity is None for hit in best)


def test_very_long_and_non_english_queries(index):
    long_query = "group similar molecules " + " ".join(f"filler{number}" for number in range(5000))
    assert index.search(long_query, k=3)
    for query in ("regrouper des molécules similaires", "分子をクラスタリングする", "Lipinski-Regel prüfen"):
        hits = index.search(query, k=3)
        assert len(hits) == 3 and all(np.isfinite(hit.score) for hit in hits)


def test_non_english_affordances_match_non_english_queries():
    registry = ToolRegistry(package="labo")
    registry.register_tool(ToolDefinition(name="regrouper", description="regrouper des molécules similaires", state_transition={"produces": ["labo.groupes"]}))
    registry.register_tool(ToolDefinition(name="peser", description="calculer la masse molaire", state_transition={"produces": ["labo.masse"]}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # BM25 by choice: no fallback warning
        index = SkillIndex(StateGraph(registry), mode="bm25")
    assert index.search("molécules similaires", k=1)[0].name == "regrouper"


def test_goal_choice_prefers_the_goal_the_inputs_can_feed(index, chemistry_graph):
    task = "is aspirin drug-like? check Lipinski's rule of five"
    with_one_molecule = choose_goal(GoalSearch(chemistry_graph, index), task, inputs={"smiles": "CC(=O)Oc1ccccc1C(=O)O"})
    assert with_one_molecule.chosen.goal == {"chemistry.descriptors_computed"}
    with_a_list = choose_goal(GoalSearch(chemistry_graph, index), task, inputs={"smiles_list": ["CCO"]})
    assert with_a_list.chosen.goal == {"chemistry.candidates_filtered"}


def test_unrelated_task_is_refused_with_advice_in_python_terms(index, chemistry_graph):
    with pytest.raises(NoMatchingSkillError, match="no catalog can serve") as refused:
        choose_goal(GoalSearch(chemistry_graph, index), "book a flight to Paris next Tuesday")
    # A Python caller is told how to load a catalog in Python, not with a command-line flag.
    assert "Workspace.open([..., 'my_catalog.yaml'])" in str(refused.value) and "--" not in str(refused.value)


def test_empty_query_is_refused(index):
    with pytest.raises(ValueError, match="empty"):
        index.search("   ")


def test_a_custom_embedder_replaces_the_model(chemistry_graph):
    vocabulary = ["cluster", "lipinski", "fingerprint", "smiles"]

    def bag_of_words(texts):
        return np.array([[text.lower().count(word) for word in vocabulary] for text in texts], dtype=float)

    hits = SkillIndex(chemistry_graph, bag_of_words, mode="dense").search("cluster", k=2)
    assert {hit.name for hit in hits} == {"chemistry.molecules_clustered", "cluster_molecules"}


def test_camel_case_tool_names_match_their_words():
    registry = ToolRegistry(package="web")
    registry.register_tool(ToolDefinition(name="getWeatherForecast", state_transition={"produces": ["web.forecast_known"]}))
    registry.register_tool(ToolDefinition(name="bookFlight", state_transition={"produces": ["web.flight_booked"]}))
    (hit,) = SkillIndex(StateGraph(registry), mode="bm25").search("weather forecast", k=1, kind="tool")
    assert hit.name == "getWeatherForecast" and hit.matched == "get Weather Forecast"


def test_a_single_query_embeds_exactly_like_a_batch(embedder):
    texts = ["group similar molecules", "check drug-likeness"]
    one_by_one = np.vstack([embedder([text]) for text in texts])
    assert np.allclose(embedder(texts), one_by_one, atol=1e-5)


def test_tool_hits_are_reachable_when_the_tool_can_run_and_their_plan_ends_with_it():
    index = SkillIndex(lab_graph(), mode="bm25")
    weigh = index.search("molecular weight", k=5, kind="tool")[0]
    assert weigh.name == "weigh" and weigh.reachable and [step.tool.name for step in weigh.plan.steps] == ["parse", "weigh"]
    report = index.search("write the weight report", k=1, kind="tool")[0]
    assert report.name == "report" and not report.reachable and report.plan is None
    assert "report" not in {hit.name for hit in index.search("write the weight report", k=5, kind="tool", reachable_only=True)}


def test_bad_filters_are_refused_not_ignored(index):
    with pytest.raises(QueryError, match="unknown domain 'nosuch'; the catalogs have: chemistry"):
        index.search("molecules", domain="nosuch")
    with pytest.raises(QueryError, match="kind must be"):
        index.search("molecules", kind="states")
    with pytest.raises(QueryError, match="k must be"):
        index.search("molecules", k=None)


def test_bm25_only_returns_nothing_when_no_word_matches():
    index = SkillIndex(lab_graph(), mode="bm25")
    assert index.search("🧪 xyzzy") == [] and index.search("the and of") == []


@pytest.mark.parametrize(
    "output, problem",
    [
        (lambda texts: np.ones((len(texts) + 1, 3)), "shape"),
        (lambda texts: np.ones((len(texts) - 1, 3)), "shape"),
        (lambda texts: np.ones(len(texts)), "shape"),
        (lambda texts: None, "shape"),
        (lambda texts: "vectors", "not numbers"),
        (lambda texts: np.full((len(texts), 3), np.nan), "NaN or infinite"),
    ],
)
def test_embedders_breaking_the_contract_get_a_clear_error(output, problem):
    with pytest.raises(ValueError, match=problem):
        SkillIndex(lab_graph(), output, cache=False)


def test_non_finite_vectors_are_never_cached(tmp_path):
    cache = EmbeddingCache(tmp_path / "toolpath.db")
    with pytest.raises(ValueError, match="NaN"):
        SkillIndex(lab_graph(), NaNEmbedder(), cache=cache)
    fixed = CountingEmbedder()
    fixed.model_id = NaNEmbedder.model_id
    SkillIndex(lab_graph(), fixed, cache=cache)
    assert fixed.embedded, "nothing from the failed build may be reused"


class NaNEmbedder:
    model_id = "test/broken"

    def __call__(self, texts):
        return np.full((len(texts), 7), np.nan)


def test_a_corrupt_cache_file_warns_and_search_still_works(tmp_path):
    path = tmp_path / "toolpath.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.warns(RuntimeWarning, match="embedding cache .* is unusable"):
        index = SkillIndex(lab_graph(), CountingEmbedder(), cache=path)
    assert index.search("weight", k=1)


def test_goal_choice_explains_when_no_hit_can_be_reached():
    graph = lab_graph()
    index = SkillIndex(graph, CountingEmbedder(), cache=False)
    with pytest.raises(NoPlanError, match="lab.signed"):
        choose_goal(GoalSearch(graph, index, k=1), "write the weight report", min_score=-1.0)


@pytest.mark.integration
def test_goal_choice_never_picks_a_held_state_and_says_true_reasons(index, chemistry_graph):
    held = choose_goal(
        GoalSearch(chemistry_graph, index),
        "validate a SMILES string and get the molecular weight of a molecule",
        inputs={"smiles": "CCO"},
        held=["chemistry.molecule_parsed"],
    )
    assert held.chosen.plan.steps, "a task asks for work: a held goal must not be chosen"
    assert "it is already held, and the task asks for work" in [candidate.reason() for candidate in held.passed_over]
    aspirin = choose_goal(GoalSearch(chemistry_graph, index), "is aspirin drug-like? check Lipinski's rule of five", inputs={"smiles": "CCO"})
    for candidate in aspirin.passed_over:
        if "unbound" in candidate.reason():
            assert aspirin.chosen.binds_all_inputs  # the reason is not also true of the chosen goal


def test_embedding_new_catalog_texts_is_announced_with_its_count_and_never_on_standard_output(tmp_path, caplog, capsys):
    cache = EmbeddingCache(tmp_path / "toolpath.db")
    # Listen on the "toolpath" logger itself: an earlier in-process CLI call may have stopped its
    # records from reaching the root logger, where caplog listens.
    records: list[logging.LogRecord] = []
    listener = logging.Handler(logging.INFO)
    listener.emit = records.append
    logging.getLogger("toolpath").addHandler(listener)
    try:
        with caplog.at_level("INFO", logger="toolpath"):
            built = SkillIndex(lab_graph(), CountingEmbedder(), cache=cache)
            misses = built.cache_counts[1]
            assert [record.getMessage() for record in records] == [
                f"embedding {misses} new catalog texts with test/bag-of-words-v1, once: later loads read them from {tmp_path / 'toolpath.db'}"
            ]
            records.clear()
            SkillIndex(lab_graph(), CountingEmbedder(), cache=cache)
            assert records == []  # all cached: nothing to say
            SkillIndex(lab_graph(ToolDefinition(name="sign_report", state_transition={"produces": ["lab.signed"]})), CountingEmbedder(), cache=cache)
            assert [record.getMessage().split(" with ")[0] for record in records] == ["embedding 1 new catalog text"]
    finally:
        logging.getLogger("toolpath").removeHandler(listener)
    captured = capsys.readouterr()
    assert captured.out == "" and "%|" not in captured.err  # no terminal: no bar, and never anything on stdout


def test_a_terminal_sees_a_progress_bar_of_the_embedding_on_standard_error(tmp_path, monkeypatch, capsys):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    built = SkillIndex(lab_graph(), CountingEmbedder(), cache=EmbeddingCache(tmp_path / "toolpath.db"))
    misses = built.cache_counts[1]
    assert "embedding catalog texts: 100%" in terminal.getvalue() and f"{misses}/{misses}" in terminal.getvalue()
    assert capsys.readouterr().out == ""
