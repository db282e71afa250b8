"""A whole-number parameter named after a numbered thing (``season_number``, ``episode_number``)
takes the number the words give that thing: "season 2", "the second season", "the 3rd season",
"episode 4". Without it the season's endpoint lost to the show's, whose plan left nothing unbound
("the poster of season 2 of Dark" showed the show's poster); two numbers for one thing are a
question, not a guess.

The catalog is written here: TV shows whose seasons and episodes are numbered, as REST APIs do.
"""

import textwrap

import pytest

from toolpath.planner import Workspace

SHOWS = """\
domain: tv
package: tv_api
states:
  - token: tv.show_id
    description: A TV show's id is known.
  - token: tv.show_poster
    description: The poster of a TV show.
  - token: tv.season_poster
    description: The poster of one season of a TV show.
  - token: tv.episode_still
    description: A still image from one episode of a TV show.
tools:
  - name: find_show
    description: Search TV shows by name.
    required_parameters: [{name: name, type: str}]
    state_transition: {requires: [], produces: [tv.show_id]}
  - name: show_poster
    description: The poster of a TV show.
    required_parameters: [{name: show_id, type: int, state: tv.show_id}]
    state_transition: {requires: [tv.show_id], produces: [tv.show_poster]}
  - name: season_poster
    description: The poster of one season of a TV show.
    required_parameters: [{name: show_id, type: int, state: tv.show_id}, {name: season_number, type: int}]
    state_transition: {requires: [tv.show_id], produces: [tv.season_poster]}
  - name: episode_still
    description: A still image from one episode of a TV show.
    required_parameters:
      - {name: show_id, type: int, state: tv.show_id}
      - {name: season_number, type: int}
      - {name: episode_number, type: int}
    state_transition: {requires: [tv.show_id], produces: [tv.episode_still]}
"""


@pytest.fixture(scope="module")
def shows(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("tv") / "tv.yaml"
    path.write_text(textwrap.dedent(SHOWS))
    return Workspace.open([path], embedder=embedder)


def bound(task):
    return {(reading["tool"], reading["parameter"]): reading["value"] for reading in task.to_dict()["arguments"]}


@pytest.mark.parametrize(
    "words, season",
    [
        ("Show the poster of season 2 of 'Dark'", 2),
        ("Show the poster of the second season of 'Dark'", 2),
        ("Show the poster of the 3rd season of 'Dark'", 3),
        ("Show the poster of season two of 'Dark'", 2),
    ],
)
def test_the_number_the_words_give_a_season_is_its_season_number_and_the_seasons_tool_is_planned(shows, words, season):
    task = shows.plan_task(words)
    assert [step.tool.name for step in task.plan.steps] == ["find_show", "season_poster"]
    assert bound(task)[("season_poster", "season_number")] == season
    # The cell passes it: a reader of the cell sees the number, and the call takes it.
    assert f"tv_season_poster_season_number = {season}\n" in task.cell.code
    assert "season_number=tv_season_poster_season_number" in task.cell.code


def test_an_episode_and_its_season_each_take_their_own_number(shows):
    task = shows.plan_task("I want a still from episode 4 of the 3rd season of 'Dark'")
    assert [step.tool.name for step in task.plan.steps] == ["find_show", "episode_still"]
    assert bound(task) == {("episode_still", "season_number"): 3, ("episode_still", "episode_number"): 4, ("find_show", "name"): "Dark"}
    # Only the show's id is left, which the catalog does not say where find_show returns.
    assert [unbound.parameter for unbound in task.cell.unbound] == ["show_id"]


def test_two_numbers_for_one_season_are_a_question_not_a_guess(shows):
    task = shows.plan_task("Show the poster of season 2 or season 3 of 'Dark'")
    (part,) = task.to_dict()["parts"]
    assert part["fate"] == "not understood"
    assert "several numbers for season (2, 3)" in part["problem"] and "give season_number as an input" in part["problem"]
    assert task.plan.steps == ()
