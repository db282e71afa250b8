"""Learned search (issue 53): phrasings seen in use move their tool up, tools without any stay where
they were, the query adapter, and learned data that does not fit the index is refused by name."""

import numpy as np
import pytest

from toolpath.planner import SkillIndex, StateGraph
from toolpath.planner.search import learned as learned_module
from toolpath.planner.search.learned import LearnedSearch, LearnedSearchError, choose_query_adapter, fit_query_adapter
from toolpath.registry import ToolDefinition, ToolRegistry

pytestmark = pytest.mark.integration

#: An office catalog whose dunning tool speaks accounting jargon that requests in plain words miss.
OFFICE_TOOLS = {
    "send_invoice": "Email an invoice for completed work to a client.",
    "dunning_run": "Run the dunning procedure on the open items of a debtor account.",
    "book_meeting_room": "Reserve a meeting room for a date and time.",
    "archive_documents": "Move old documents into the long-term archive.",
    "translate_text": "Translate a text into another language.",
}

#: How people in this office asked for the dunning tool (their own words, not the catalog's).
DUNNING_PHRASINGS = [
    "remind a client that their payment is late",
    "chase a customer who has not paid yet",
    "tell Hendricks their bill is overdue",
    "the Jansen account still owes us money, follow up",
]


def tool(name):
    return ("tool", None, name)


@pytest.fixture(scope="module")
def office():
    registry = ToolRegistry(package="office")
    for name, description in OFFICE_TOOLS.items():
        registry.register_tool(ToolDefinition(name=name, description=description, module="office"))
    return StateGraph(registry)


@pytest.fixture(scope="module")
def unlearned(office, embedder):
    return SkillIndex(office, embedder, cache=False)


@pytest.fixture(scope="module")
def learned(office, embedder, unlearned):
    phrasings = [(text, tool("dunning_run")) for text in DUNNING_PHRASINGS]
    phrasings.append(("find us a room for Thursday's stand-up", tool("book_meeting_room")))
    return SkillIndex(office, embedder, cache=False, learned=LearnedSearch.from_phrasings(unlearned.embedder, phrasings))


def top_tool(index, query):
    return index.search(query, k=5, kind="tool")[0].name


@pytest.mark.parametrize("query", ["nudge a customer who is late settling up", "ping Acme, their money is overdue"])
def test_a_tool_learned_from_phrasings_wins_a_request_it_lost_before(unlearned, learned, query):
    assert top_tool(unlearned, query) != "dunning_run"  # the premise: the catalog's words alone miss it
    hit = learned.search(query, k=5, kind="tool")[0]
    assert hit.name == "dunning_run"
    assert hit.learned is not None and hit.learned.phrasing in DUNNING_PHRASINGS
    assert hit.to_dict()["learned"]["phrasing"] == hit.learned.phrasing
    relevance = learned.tool_relevance(query)
    assert max(relevance, key=relevance.get) == learned.graph.registry.get_tool_by_name("dunning_run").id


def test_a_phrasing_asked_again_word_for_word_wins_and_few_phrasings_temper_its_similarity(learned):
    # The meeting room was learned from one phrasing: asked again, it is the whole evidence.
    room = learned.search("find us a room for Thursday's stand-up", k=5, kind="tool")[0]
    assert room.name == "book_meeting_room"
    assert room.learned is not None and room.learned.similarity == pytest.approx(1.0, abs=1e-4)
    # Dunning was learned from four phrasings of different words: the one asked again is nearest,
    # their prototype is further, and with so few the reported similarity lies between the two.
    dunning = learned.search(DUNNING_PHRASINGS[2], k=5, kind="tool")[0]
    assert dunning.name == "dunning_run" and dunning.learned is not None
    match = dunning.learned
    assert match.phrasing == DUNNING_PHRASINGS[2] and match.phrasing_similarity == pytest.approx(1.0, abs=1e-4)
    assert match.mean_similarity < match.similarity < match.phrasing_similarity


@pytest.mark.parametrize(
    ("query", "expected"),
    [("get the Dutch version of this letter", "translate_text"), ("put last year's contracts away in cold storage", "archive_documents")],
)
def test_a_tool_without_examples_keeps_its_place_when_others_are_learned(unlearned, learned, query, expected):
    assert top_tool(unlearned, query) == expected
    hit = learned.search(query, k=5, kind="tool")[0]
    assert hit.name == expected
    assert hit.learned is None


def test_no_learned_phrasings_and_no_adapter_search_exactly_as_without(office, embedder, unlearned):
    empty = SkillIndex(office, embedder, cache=False, learned=LearnedSearch((), np.zeros((0, unlearned.text_dimensions), dtype=np.float32)))
    for query in ["nudge a customer who is late settling up", "get the Dutch version of this letter"]:
        assert [(hit.name, hit.score) for hit in empty.search(query)] == [(hit.name, hit.score) for hit in unlearned.search(query)]


def test_an_identity_adapter_changes_nothing_and_a_fitted_one_moves_queries_to_their_tools(office, embedder, unlearned):
    phrasings = [(text, tool("dunning_run")) for text in DUNNING_PHRASINGS]
    plain = LearnedSearch.from_phrasings(unlearned.embedder, phrasings)
    dimensions = plain.dimensions
    with_identity = SkillIndex(office, embedder, cache=False, learned=plain.with_adapter(np.eye(dimensions, dtype=np.float32)))
    without = SkillIndex(office, embedder, cache=False, learned=plain)
    query = "ping Acme, their money is overdue"
    assert [hit.name for hit in with_identity.search(query)] == [hit.name for hit in without.search(query)]
    assert [hit.score for hit in with_identity.search(query)] == pytest.approx([hit.score for hit in without.search(query)], abs=1e-6)

    adapter = fit_query_adapter(unlearned, plain.vectors, list(plain.entries))
    assert adapter.shape == (dimensions, dimensions)
    dunning_texts = unlearned.entry_text_vectors(tool("dunning_run"))
    before = (plain.vectors @ dunning_texts.T).max(axis=1)
    adapted = plain.vectors @ adapter
    adapted /= np.linalg.norm(adapted, axis=1, keepdims=True)
    assert ((adapted @ dunning_texts.T).max(axis=1) > before).all()
    # Four examples in 384 dimensions: the ridge keeps the map close to the identity elsewhere.
    unrelated = embedder(["get the Dutch version of this letter"])[0]
    moved = unrelated @ adapter
    assert float(moved @ unrelated / np.linalg.norm(moved) / np.linalg.norm(unrelated)) > 0.9


def test_learned_data_for_a_tool_the_catalogs_lack_is_refused_by_name(office, embedder, unlearned):
    stray = LearnedSearch.from_phrasings(unlearned.embedder, [("fax the contract to legal", tool("send_fax"))])
    with pytest.raises(LearnedSearchError, match=r"fax the contract to legal.*tool send_fax, which the catalogs do not have"):
        SkillIndex(office, embedder, cache=False, learned=stray)


def test_learned_vectors_of_another_model_are_refused(office, embedder):
    other_model = LearnedSearch((tool("dunning_run"),), np.ones((1, 8), dtype=np.float32))
    with pytest.raises(LearnedSearchError, match="8 dimensions.*384"):
        SkillIndex(office, embedder, cache=False, learned=other_model)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (((tool("a"), tool("b")), np.ones((1, 4))), "shape"),
        (((tool("a"),), np.zeros((1, 4))), "all-zero"),
        (((tool("a"),), np.full((1, 4), np.nan)), "NaN"),
        (((("widget", None, "a"),), np.ones((1, 4))), "kind 'tool' or 'state'"),
        (((("state", "office", "a.done"),), np.ones((1, 4))), "server is None"),
        (((tool("a"),), np.ones((1, 4)), np.eye(3)), "adapter has shape"),
    ],
)
def test_malformed_learned_data_is_refused_with_what_to_do(arguments, problem):
    with pytest.raises(LearnedSearchError, match=problem):
        LearnedSearch(*arguments)


def test_without_embeddings_learned_phrasings_still_count_by_their_words(office, unlearned):
    # Five phrasings for five tools: enough for their words to join the BM25 documents.
    phrasings = [(text, tool("dunning_run")) for text in DUNNING_PHRASINGS] + [("find us a room for Thursday's stand-up", tool("book_meeting_room"))]
    learned = LearnedSearch.from_phrasings(unlearned.embedder, phrasings)
    query = "Hendricks is overdue again"
    assert "dunning_run" not in [hit.name for hit in SkillIndex(office, mode="bm25", cache=False).search(query)]
    with pytest.warns(RuntimeWarning, match="learned vectors are ignored"):
        words_only = SkillIndex(office, mode="bm25", cache=False, learned=learned)
    assert words_only.search(query)[0].name == "dunning_run"


#: More ways people in the office asked for each tool, in their own words: enough (with the dunning
#: phrasings above) for an adapter to be checked on phrasings held back from its fitting.
OFFICE_PHRASINGS = {
    "send_invoice": [
        "bill Hendricks for the March work",
        "send the client what they owe for the job",
        "get the bill out to Jansen",
        "charge Acme for the audit we did",
    ],
    "book_meeting_room": [
        "find us a room for Thursday's stand-up",
        "grab the big room at 3 tomorrow",
        "we need somewhere to meet on Monday",
        "hold a room for the board on Friday",
    ],
    "archive_documents": [
        "put last year's contracts away",
        "clear the old files out of the shared drive",
        "store the 2019 records somewhere safe",
        "pack away the closed cases",
    ],
    "translate_text": [
        "get the Dutch version of this letter",
        "put this email into French",
        "what does this German memo say in English",
        "render the brochure in Spanish",
    ],
    "dunning_run": DUNNING_PHRASINGS,
}


@pytest.fixture(scope="module")
def office_phrasings(unlearned):
    rows = [(text, tool(name)) for name, texts in OFFICE_PHRASINGS.items() for text in texts]
    return LearnedSearch.from_phrasings(unlearned.embedder, rows)


def test_entry_rank_is_the_place_search_gives_and_with_learned_searches_with_other_phrasings(unlearned, learned, office_phrasings):
    query = "ping Acme, their money is overdue"
    for index in (unlearned, learned):
        order = [hit.name for hit in index.search(query, k=10, kind="tool")]
        assert [index.entry_rank(query, tool(name)) for name in order] == list(range(1, len(order) + 1))
    # The same catalogs with the learned data swapped in search as an index built with it.
    swapped = unlearned.with_learned(learned.learned)
    assert [(hit.name, hit.score) for hit in swapped.search(query)] == [(hit.name, hit.score) for hit in learned.search(query)]
    assert [(hit.name, hit.score) for hit in learned.with_learned(None).search(query)] == [(hit.name, hit.score) for hit in unlearned.search(query)]
    with pytest.raises(LearnedSearchError, match="no entry"):
        unlearned.entry_rank(query, tool("send_fax"))


def test_an_adapter_is_checked_on_held_back_phrasings_and_the_choice_says_so(unlearned, office_phrasings):
    choice = choose_query_adapter(unlearned, office_phrasings)
    assert choice.checked == len(office_phrasings)  # every phrasing held back once
    assert set(choice.figures) == {"none", *(f"ridge {ridge:g}" for ridge in learned_module.ADAPTER_RIDGES)}
    best = max(figures["mrr_at_10"] for figures in choice.figures.values())
    if choice.adapter is None:
        assert choice.ridge is None and choice.figures["none"]["mrr_at_10"] == best and choice.note.startswith("none")
    else:
        assert choice.figures[f"ridge {choice.ridge:g}"]["mrr_at_10"] == best > choice.figures["none"]["mrr_at_10"]
        assert choice.adapter.shape == (unlearned.text_dimensions, unlearned.text_dimensions)
    assert f"on {choice.checked} held-back phrasings" in choice.note


def test_an_adapter_that_hurts_on_held_back_phrasings_is_not_fitted(unlearned, office_phrasings, monkeypatch):
    # An adapter turning every query around puts the catalog texts least like it first.
    monkeypatch.setattr(learned_module, "fit_query_adapter", lambda index, vectors, gold, ridge=None: -np.eye(index.text_dimensions, dtype=np.float32))
    choice = choose_query_adapter(unlearned, office_phrasings)
    assert choice.adapter is None and choice.ridge is None
    # No better than none (ties go to none: an adapter must earn its place).
    assert all(choice.figures["none"]["mrr_at_10"] >= figures["mrr_at_10"] for figures in choice.figures.values())
    assert choice.note.startswith("none: no ridge beat searching without one")


def test_too_few_phrasings_to_check_an_adapter_fit_none(unlearned):
    few = LearnedSearch.from_phrasings(unlearned.embedder, [(text, tool("dunning_run")) for text in DUNNING_PHRASINGS])
    choice = choose_query_adapter(unlearned, few)
    assert choice.adapter is None and choice.checked == 0
    assert f"{len(DUNNING_PHRASINGS)} phrasings are too few" in choice.note
    with pytest.raises(LearnedSearchError, match="positive ridges"):
        choose_query_adapter(unlearned, few, ridges=(0.0,))
