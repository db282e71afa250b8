"""A request that names a thing whose kind its words give ("pictures of the museum Prado", "pictures
of Frida Kahlo") plans the lookup of that kind and a goal that thing leads to
(:mod:`toolpath.planner.tasks.named_kinds`).

The catalog is written here: an art archive whose searches find artworks, artists and museums by
name, and whose per-thing calls give each one's pictures; "pictures of ..." matches all three alike.
"""

import textwrap

import pytest

from toolpath.planner import Workspace
from toolpath.planner.tasks.named_kinds import kind_lookups, name_kinds

ARCHIVE = """\
    domain: art
    package: art_tools
    states:
      - {token: art.artwork_id, description: The id of an artwork is known., affordances: [find the artwork]}
      - {token: art.artist_id, description: The id of an artist is known., affordances: [find the artist]}
      - {token: art.museum_id, description: The id of a museum is known., affordances: [find the museum]}
      - {token: art.artwork_search, description: Artworks found by title., affordances: [search artworks by title]}
      - {token: art.artist_search, description: Artists found by name., affordances: [search artists by name]}
      - {token: art.museum_search, description: Museums found by name., affordances: [search museums by name]}
      - {token: art.featured, description: The artworks featured this week., affordances: [featured artworks this week]}
      - {token: art.artwork_pictures, description: Pictures of an artwork., affordances: [pictures, images of an artwork]}
      - {token: art.artist_pictures, description: Pictures of an artist., affordances: [pictures, portraits of an artist]}
      - {token: art.museum_pictures, description: Pictures of a museum., affordances: [pictures, photos of a museum building]}
      - {token: art.artwork_details, description: An artwork's details., affordances: [artwork details, the museum that holds an artwork, the artist who made it]}
      - {token: art.museum_details, description: A museum's details., affordances: [opening hours, address and ticket prices]}
      - {token: art.artist_works, description: The works an artist made., affordances: [works an artist made, an artist's paintings]}
      - {token: art.artist_followed, description: An artist followed for news., affordances: [follow an artist, get news about an artist]}
    tools:
      - name: search_artworks
        description: Search artworks by title.
        required_parameters: [{name: title, type: str}]
        state_transition: {requires: [], produces: [art.artwork_search, art.artwork_id]}
      - name: search_artists
        description: Search artists by name.
        required_parameters: [{name: name, type: str}]
        state_transition: {requires: [], produces: [art.artist_search, art.artist_id]}
      - name: search_museums
        description: Search museums by name.
        required_parameters: [{name: name, type: str}]
        state_transition: {requires: [], produces: [art.museum_search, art.museum_id]}
      - name: list_featured
        description: List the artworks featured this week.
        state_transition: {requires: [], produces: [art.featured, art.artwork_id]}
      - name: artwork_pictures
        description: Get the pictures of an artwork.
        required_parameters: [{name: artwork_id, type: int, state: art.artwork_id}]
        state_transition: {requires: [art.artwork_id], produces: [art.artwork_pictures]}
      - name: artist_pictures
        description: Get the pictures of an artist.
        required_parameters: [{name: artist_id, type: int, state: art.artist_id}]
        state_transition: {requires: [art.artist_id], produces: [art.artist_pictures]}
      - name: museum_pictures
        description: Get the pictures of a museum.
        required_parameters: [{name: museum_id, type: int, state: art.museum_id}]
        state_transition: {requires: [art.museum_id], produces: [art.museum_pictures]}
      - name: artwork_details
        description: Get an artwork's details.
        required_parameters: [{name: artwork_id, type: int, state: art.artwork_id}]
        state_transition: {requires: [art.artwork_id], produces: [art.artwork_details]}
      - name: museum_details
        description: Get a museum's opening hours, address and ticket prices.
        required_parameters: [{name: museum_id, type: int, state: art.museum_id}]
        state_transition: {requires: [art.museum_id], produces: [art.museum_details]}
      - name: artist_works
        description: List the works an artist made.
        required_parameters: [{name: artist_id, type: int, state: art.artist_id}]
        state_transition: {requires: [art.artist_id], produces: [art.artist_works]}
      - name: follow_artist
        description: Follow an artist to get news about them.
        effects: writes
        required_parameters: [{name: artist_id, type: int, state: art.artist_id}]
        state_transition: {requires: [art.artist_id], produces: [art.artist_followed]}
    """


@pytest.fixture(scope="module")
def archive(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("archive") / "archive.yaml"
    path.write_text(textwrap.dedent(ARCHIVE))
    return Workspace.open([path], embedder=embedder)


def tools_of(task_plan):
    return [step.tool.name for step in task_plan.plan.steps]


def kinds(text):
    return [(found.name, found.kind, found.evidence) for found in name_kinds(text)]


def test_a_kind_noun_before_or_after_a_name_gives_its_kind():
    assert kinds("Tell me about the production company Blumhouse.") == [("Blumhouse", "production company", "kind noun")]
    assert kinds("Show me pictures for the Jurassic Park collection.") == [("Jurassic Park", "collection", "kind noun")]
    assert kinds("What did critics write about the movie Barbie?") == [("Barbie", "movie", "kind noun")]


def test_a_name_starting_with_a_given_name_reads_as_a_persons():
    assert kinds("Show me some pictures of Tilda Swinton.") == [("Tilda Swinton", "person", "given name")]
    assert kinds("Who is older, Meryl Streep or Viola Davis?") == [("Meryl Streep", "person", "given name"), ("Viola Davis", "person", "given name")]


def test_a_name_of_no_readable_kind_is_left_alone():
    assert kinds("I'd like a headshot of Zendaya.") == []  # one word: a given name alone says nothing
    assert kinds("Who composed the music for Interstellar?") == []
    # "the person who directed" is no kind noun of Whiplash: function words end a kind noun
    assert kinds("Show a photo of the person who directed Whiplash.") == []
    assert kinds("Which network airs Breaking Bad?") == []


def test_a_persons_name_plans_the_person_lookup_and_their_own_pictures(archive):
    planned = archive.plan_task("Show me some pictures of Frida Kahlo.")
    assert tools_of(planned) == ["search_artists", "artist_pictures"]
    (part,) = planned.to_dict()["parts"]
    assert part["name_kind"] == {"name": "Frida Kahlo", "kind": "person", "evidence": "given name", "lookup": "art.search_artists"}
    assert "given name" in part["why"]


def test_a_kind_noun_plans_that_kinds_lookup(archive):
    (lookup,) = kind_lookups(archive.graph, archive.index, "Show me some pictures of the museum Prado.")
    assert (lookup.kind.name, lookup.kind.kind, lookup.tool.name) == ("Prado", "museum", "search_museums")
    assert tools_of(archive.plan_task("Show me some pictures of the museum Prado.")) == ["search_museums", "museum_pictures"]


def test_a_catalog_without_lookups_by_name_reads_no_kind(tmp_path, embedder):
    # One-step tools whose results nothing takes: no name is looked up, so no kind is read.
    path = tmp_path / "desk.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            domain: desk
            package: desk_tools
            states:
              - {token: desk.person_found, description: A colleague found by name., affordances: [find a person by name]}
              - {token: desk.trip_booked, description: A trip booked., affordances: [book a trip]}
            tools:
              - name: find_person
                description: Find a colleague by name.
                required_parameters: [{name: name, type: str}]
                state_transition: {requires: [], produces: [desk.person_found]}
              - name: book_trip
                description: Book a trip for a traveller.
                required_parameters: [{name: traveller, type: str}]
                state_transition: {requires: [], produces: [desk.trip_booked]}
            """
        )
    )
    workspace = Workspace.open([path], embedder=embedder)
    assert kind_lookups(workspace.graph, workspace.index, "Book a trip for Maria Lopez.") == []


def test_words_that_already_look_the_thing_up_are_not_read_again(archive):
    planned = archive.plan_task("Which works did the artist Frida Kahlo make?")
    assert tools_of(planned) == ["search_artists", "artist_works"]
    assert planned.to_dict()["parts"][0]["name_kind"] is None


def test_a_name_of_no_kind_changes_nothing(archive):
    planned = archive.plan_task("Show me some pictures of Guernica.")
    assert planned.to_dict()["parts"][0]["name_kind"] is None
