"""A part that asks for something of a thing it names by how it is found ("the reviews of the book
that sells best this week") plans both: the tool that finds the thing, then the head's goal from the
id it gives (:mod:`toolpath.planner.tasks.sources`).

The catalog is written here: a bookshop API whose lists and searches give a book's id, and whose
per-book calls take it; a book's details name its publisher.
"""

import textwrap

import pytest

from toolpath.planner import Workspace
from toolpath.planner.tasks.clauses import noun_phrase_cuts

BOOKSHOP = """\
    domain: shop
    package: shop_tools
    states:
      - {token: shop.book_id, description: The id of a book is known., affordances: [find the book, book id]}
      - {token: shop.publisher_id, description: The id of a publisher is known., affordances: [find the publisher, publisher id]}
      - {token: shop.bestsellers, description: The books selling best this week., affordances: [bestselling books this week, best sellers]}
      - {token: shop.new_releases, description: The books published most recently., affordances: [newest books, latest releases]}
      - {token: shop.book_reviews, description: Reader reviews of a book., affordances: [reviews of a book, what readers say about a book]}
      - {token: shop.book_details, description: A book's details, affordances: [book details, book page count, book publisher]}
      - {token: shop.publisher_logo, description: A publisher's logo images., affordances: [publisher logo, logo of a publishing house]}
      - {token: shop.book_search, description: Books found by title., affordances: [search books by title]}
      - {token: shop.publisher_search, description: Publishers found by name., affordances: [search publishers by name]}
      - {token: shop.review_flagged, description: A review reported to the moderators., affordances: [report a review]}
    tools:
      - name: list_bestsellers
        description: List the books selling best this week.
        state_transition: {requires: [], produces: [shop.bestsellers, shop.book_id]}
      - name: list_new_releases
        description: List the books published most recently.
        state_transition: {requires: [], produces: [shop.new_releases, shop.book_id]}
      - name: search_books
        description: Search books by title.
        required_parameters: [{name: title, type: str}]
        state_transition: {requires: [], produces: [shop.book_search, shop.book_id]}
      - name: search_publishers
        description: Search publishers by name.
        required_parameters: [{name: name, type: str}]
        state_transition: {requires: [], produces: [shop.publisher_search, shop.publisher_id]}
      - name: get_book_reviews
        description: Get the reader reviews of a book.
        required_parameters: [{name: book_id, type: int, state: shop.book_id}]
        state_transition: {requires: [shop.book_id], produces: [shop.book_reviews]}
      - name: get_book_details
        description: Get a book's details, with its publisher.
        required_parameters: [{name: book_id, type: int, state: shop.book_id}]
        state_transition: {requires: [shop.book_id], produces: [shop.book_details, shop.publisher_id]}
      - name: get_publisher_logo
        description: Get the logo images of a publisher.
        required_parameters: [{name: publisher_id, type: int, state: shop.publisher_id}]
        state_transition: {requires: [shop.publisher_id], produces: [shop.publisher_logo]}
      - name: flag_review
        description: Report a book's review to the moderators.
        effects: sends
        required_parameters: [{name: book_id, type: int, state: shop.book_id}]
        state_transition: {requires: [shop.book_id], produces: [shop.review_flagged]}
    """


@pytest.fixture(scope="module")
def shop(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("shop") / "shop.yaml"
    path.write_text(textwrap.dedent(BOOKSHOP))
    return Workspace.open([path], embedder=embedder)


def tools_of(task_plan):
    return [step.tool.name for step in task_plan.plan.steps]


def test_noun_phrase_cuts_keep_a_head_that_asks_for_something():
    assert noun_phrase_cuts("What do readers say about the book that sells best this week?") == [
        ("What do readers say about", "the book that sells best this week")
    ]
    # "show me" asks for nothing by itself; a quote is never cut
    assert noun_phrase_cuts("show me the bestsellers") == []
    assert noun_phrase_cuts("caption 'the cat on a mat'") == []


def test_the_thing_found_by_a_list_feeds_the_heads_goal(shop):
    planned = shop.plan_task("What do readers say about the book that sells best this week?")
    assert tools_of(planned) == ["list_bestsellers", "get_book_reviews"]
    (part,) = planned.to_dict()["parts"]
    assert part["source"]["words"] == "the book that sells best this week"
    assert part["source"]["gives"] == ["shop.book_id"]
    assert part["source"]["runs"] == ["shop.list_bestsellers", "shop.get_book_reviews"]
    assert "comes from" in part["why"]


def test_a_thing_the_found_thing_names_is_reached_through_it_not_searched_anew(shop):
    planned = shop.plan_task("Show the logo of the publishing house behind the newest book.")
    assert tools_of(planned) == ["list_new_releases", "get_book_details", "get_publisher_logo"]
    assert "search_publishers" not in tools_of(planned)


def test_a_thing_named_by_its_title_is_looked_up_not_read_as_a_source(shop):
    planned = shop.plan_task("What do readers say about the book Dune?")
    assert tools_of(planned) == ["search_books", "get_book_reviews"]
    assert planned.to_dict()["parts"][0]["source"] is None


def test_a_head_with_effects_is_never_planned_from_a_description(shop):
    planned = shop.plan_task("Flag the reviews of the newest book.")
    assert planned.to_dict()["parts"][0]["source"] is None
    assert "flag_review" not in tools_of(planned)


def test_a_question_about_the_found_thing_itself_plans_its_own_call(shop):
    planned = shop.plan_task("Who publishes the book that sells best this week?")
    assert tools_of(planned) == ["list_bestsellers", "get_book_details"]
