"""The task-planning benchmark's TMDB catalogs (``benchmarks/taskplan_catalogs.py``): the author's
reviewed edits (``benchmarks/tmdb_reviewed_edits.yaml``) apply to the drafted catalog, and an edit
the draft cannot take is refused by name. Synthetic drafts here; TMDB's, read from ../shared/data,
when present."""

import json

import pytest
from benchmark_module import load_benchmark

from toolpath.registry import lint_catalogs

catalogs = load_benchmark("taskplan_catalogs")
TMDB_DATA = catalogs.DEFAULT_DATA / "tmdb"


def draft():
    """A drafted catalog of two tools: a search giving a film's id, and the film's details."""
    return {
        "domain": "films",
        "states": [
            {"token": "films.film_id", "description": "The id of a film is known.", "affordances": ["find the film"]},
            {"token": "films.film_details", "description": "The response of GET /film/{film_id}.", "affordances": ["Get Details", "film runtime"]},
            {"token": "films.series_id", "description": "The id of a series is known.", "affordances": ["find the series"]},
        ],
        "tools": [
            {
                "name": "get_search_film",
                "description": "Search Films",
                "outputs": {"films.film_id": "results[0].id"},
                "state_transition": {"requires": [], "produces": ["films.film_id"]},
                "affordances": ["Search Films"],
            },
            {
                "name": "get_film_film_id",
                "description": "Get Details",
                "state_transition": {"requires": ["films.film_id"], "produces": ["films.film_details"]},
                "affordances": ["Get Details"],
            },
        ],
    }


def edited(tmp_path, text, document=None):
    edits = tmp_path / "edits.yaml"
    edits.write_text(text)
    return catalogs.apply_reviewed_edits(document or draft(), edits)


def test_edits_rewrite_descriptions_add_and_remove_words_and_set_outputs(tmp_path):
    document = draft()
    reviewed = edited(
        tmp_path,
        """
tools:
  get_film_film_id:
    description: A film's details
    affordances: [how long a film is]
    remove_affordances: [Get Details]
    outputs: {films.series_id: "belongs_to_series.id"}
  get_search_film:
    remove_outputs: [films.film_id]
states:
  films.film_details:
    affordances: [a film's runtime]
""",
        document,
    )
    details = next(tool for tool in reviewed["tools"] if tool["name"] == "get_film_film_id")
    assert details["description"] == "A film's details" and details["affordances"] == ["how long a film is"]
    assert details["outputs"] == {"films.series_id": "belongs_to_series.id"} and "films.series_id" in details["state_transition"]["produces"]
    search = next(tool for tool in reviewed["tools"] if tool["name"] == "get_search_film")
    assert search["state_transition"]["produces"] == [] and search["outputs"] == {}
    state = next(state for state in reviewed["states"] if state["token"] == "films.film_details")
    assert state["affordances"] == ["Get Details", "film runtime", "a film's runtime"]
    assert document == draft()  # the draft itself is left as it was


@pytest.mark.parametrize(
    "text, named",
    [
        ("tools: {get_film_credits: {affordances: [who directed a film]}}", "get_film_credits"),
        ("states: {films.film_credits: {affordances: [the cast]}}", "films.film_credits"),
        ("tools: {get_film_film_id: {remove_affordances: [Get Credits]}}", "Get Credits"),
        ('tools: {get_film_film_id: {outputs: {films.person_id: "cast[0].id"}}}', "films.person_id"),
        ("tools: {get_film_film_id: {remove_outputs: [films.series_id]}}", "films.series_id"),
        ("states: {films.film_id: {outputs: {films.film_id: id}}}", "outputs"),
    ],
)
def test_an_edit_the_draft_cannot_take_is_refused_naming_it(tmp_path, text, named):
    with pytest.raises(ValueError, match=named) as refused:
        edited(tmp_path, text)
    assert "edits.yaml" in str(refused.value)


@pytest.mark.skipif(not (TMDB_DATA / "tmdb_oas.json").exists(), reason="TMDB's data (../shared/data/taskplan/tmdb) is not on this machine")
def test_the_reviewed_edits_apply_to_the_tmdb_draft_and_leave_a_catalog_without_errors(tmp_path):
    reviewed = catalogs.tmdb_reviewed_catalog()  # raises if an edit names anything the draft lacks
    drafted = catalogs.tmdb_drafted_catalog()
    assert [tool["name"] for tool in reviewed["tools"]] == [tool["name"] for tool in drafted["tools"]]
    tools = {tool["name"]: tool for tool in reviewed["tools"]}
    assert tools["GetTrendingItem"]["outputs"]["tmdb.movie_id"] == "results[0].id"
    assert "tmdb.collection_id" in tools["GetMovieDetail"]["state_transition"]["produces"]
    assert "tmdb.movie_id" not in tools["SearchPeople"]["state_transition"]["produces"]
    credits = next(state for state in reviewed["states"] if state["token"] == "tmdb.movie_credits")
    assert "who directed a film" in credits["affordances"]
    path = tmp_path / "tmdb_reviewed.catalog.json"
    path.write_text(json.dumps(reviewed))
    assert [finding for finding in lint_catalogs([path]) if finding.severity == "error"] == []
