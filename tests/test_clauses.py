"""Reading requests into clauses (issue 34): facts are not actions, quotes are data, every asked-for
step is kept, connectives and subordinate clauses are no parts, "and" inside a noun phrase cuts
nothing for good. These read words only: no model is loaded."""

from pathlib import Path

import pytest

from toolpath.planner import Workspace
from toolpath.planner.tasks.clauses import action_words, quoted_values, read_request, without_file_names, without_quotes

MEDIA = Path(__file__).resolve().parent.parent / "benchmarks" / "catalogs" / "media" / "catalog.yaml"


@pytest.fixture(scope="module")
def verbs():
    """The verbs of the shipped catalogs and the benchmarks' media catalog."""
    return action_words(Workspace.open().graph) | action_words(Workspace.open([MEDIA]).graph)


def kinds(text, verbs):
    return [(clause.kind, clause.text) for clause in read_request(text, verbs)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I have an image file 'example.jpg'. Describe what is in it.", [("fact", "I have an image file 'example.jpg'"), ("action", "Describe what is in it")]),
        (
            "I uploaded an audio file called 'example.wav', transcribe it",
            [("fact", "I uploaded an audio file called 'example.wav'"), ("action", "transcribe it")],
        ),
        ("The URL is 'https://example.org/a'. Summarize the page.", [("fact", "The URL is 'https://example.org/a'"), ("action", "Summarize the page")]),
        ("I booked the wrong flight and need to change the ticket", [("fact", "I booked the wrong flight"), ("action", "need to change the ticket")]),
        # Requests, obligations and questions are actions, whoever their subject is.
        ("I need to book a hotel", [("action", "I need to book a hotel")]),
        ("I have to translate this letter", [("action", "I have to translate this letter")]),
        ("I'm looking for a hotel in Paris", [("action", "I'm looking for a hotel in Paris")]),
        ("My goal is to translate the letter", [("action", "My goal is to translate the letter")]),
        ("Is my file a spreadsheet?", [("action", "Is my file a spreadsheet?")]),
    ],
)
def test_a_fact_tells_and_an_action_asks(text, expected, verbs):
    assert kinds(text, verbs) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Commas, sentence ends and "and" inside quotes cut nothing.
        ("Translate 'Bonjour, comment ça va ?' into English, then read it aloud", ["Translate 'Bonjour, comment ça va ?' into English", "read it aloud"]),
        ('Summarize this: "The museum opened in 1902. It holds two million objects, and most visitors come in May."', None),
        ("Write an email following 'Thank the team, mention the deadline, and ask for the slides.'", None),
        # An apostrophe between letters is no quote, also inside quoted text.
        ("Read 'Today's meeting went well' aloud and check Lipinski's rule", ["Read 'Today's meeting went well' aloud", "check Lipinski's rule"]),
    ],
)
def test_quoted_text_is_one_value(text, expected, verbs):
    assert [clause.text for clause in read_request(text, verbs)] == (expected or [text.rstrip(".")])


def test_the_values_a_text_gives_and_the_words_a_search_reads():
    assert quoted_values("I have an image file 'example.jpg'") == ["example.jpg"]
    assert quoted_values("the URL is https://x.org/a?b=1.") == ["https://x.org/a?b=1"]
    assert quoted_values("load people.csv and data/x.tsv") == ["people.csv", "data/x.tsv"]
    assert quoted_values("version 1.2 of it, with Dr. Smith") == []
    assert without_quotes("Say 'Welcome aboard. Doors close!' in a calm voice") == "Say '\u2026' in a calm voice"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Two verbs sharing one object are two actions on it.
        ("rewrite and simplify the text", ["rewrite the text", "simplify the text"]),
        # Each verb after a comma starts an action of its own.
        ("expand it, rewrite it uniquely, summarize it", ["expand it", "rewrite it uniquely", "summarize it"]),
        # A value named by a verb is an action on that value; two quoted values stay together.
        ("Combine 'intro.wav' and 'outro.wav', then transcribe the result", ["Combine 'intro.wav' and 'outro.wav'", "transcribe the result"]),
        # A named value is still the argument of its action, in the user's words.
        ("log in with ID 123456 and password abc123, then check the balance", ["log in with ID 123456 and password abc123", "check the balance"]),
    ],
)
def test_every_asked_for_action_is_kept(text, expected, verbs):
    assert [clause.text for clause in read_request(text, verbs) if clause.kind == "action"] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # No shipped catalog acts with "rebook" or "remit": their objects tell they are verbs.
        ("search the flights to Beijing, and rebook the CA234 flight", [("search the flights to Beijing", False), ("rebook the CA234 flight", False)]),
        ("translate the letter and remit it to Wang", [("translate the letter", False), ("remit it to Wang", False)]),
        # Words before a number are no verb: a value of the action, not an action.
        ("book the hotel for Li Lei and ID number 1101", [("book the hotel for Li Lei and ID number 1101", False)]),
        ("make a black and white image", [("make a black", False), ("white image", True)]),
    ],
)
def test_a_verb_no_catalog_knows_starts_an_action_by_its_object(text, expected, verbs):
    assert {"rebook", "remit"}.isdisjoint(verbs)
    assert [(clause.text, clause.weak) for clause in read_request(text, verbs)] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Remit 2000 yuan to Wang, no need for SMS notifications", [("action", "Remit 2000 yuan to Wang"), ("context", "no need for SMS notifications")]),
        ("I do not want a window seat, book the flight", [("context", "I do not want a window seat"), ("action", "book the flight")]),
        ("Please don't send it, just translate the letter", [("context", "don't send it"), ("action", "just translate the letter")]),
        # An order after all, and an address
        ("Don't forget to book the hotel", [("action", "Don't forget to book the hotel")]),
        ("Update my address to No. 998 Zhangjiang Road", [("action", "Update my address to No. 998 Zhangjiang Road")]),
        # A reason is no action either.
        (
            "Due to the change in meeting arrangements, cancel the flight",
            [("context", "Due to the change in meeting arrangements"), ("action", "cancel the flight")],
        ),
    ],
)
def test_what_not_to_do_and_why_are_no_actions(text, expected, verbs):
    assert kinds(text, verbs) == expected


def test_a_value_said_after_its_action_is_not_searched(verbs):
    """A value's name ("password is …") is data, not the operation: the search reads the action's words."""
    (clause,) = read_request("log in to online banking with account ID123456, password is abcD1234", verbs)
    assert clause.text == "log in to online banking with account ID123456, password is abcD1234"
    assert clause.query == "log in to online banking with account ID123456"


def test_a_lone_verb_keeps_the_words_it_was_said_with(verbs):
    lone, second = read_request("rewrite and simplify the text", verbs)
    assert lone.together == "rewrite and simplify the text" and "lone verb" in lone.why
    assert second.together == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("After that, cancel the alarm. Afterwards, set a new one.", [("action", "cancel the alarm"), ("action", "set a new one")]),
        ("Hey, caption this photo", [("action", "caption this photo")]),
        ("Before sending the artwork, compress it", [("context", "Before sending the artwork"), ("action", "compress it")]),
        ("Transcribe the call after booking the flight", [("action", "Transcribe the call"), ("context", "after booking the flight")]),
        ("Log in so that I can read my mail", [("action", "Log in"), ("context", "so that I can read my mail")]),
        ("We will screen more analogues; for now, caption the photo", [("context", "We will screen more analogues"), ("action", "for now, caption the photo")]),
        # A question is not a clause saying when.
        ("When is the film released?", [("action", "When is the film released?")]),
        # "Dr.", "No. 88" and "8 a.m." end no sentence.
        (
            "Ask Dr. Smith about No. 88 Hongxing Road at 8 a.m. every day, and book a table",
            [("action", "Ask Dr. Smith about No. 88 Hongxing Road at 8 a.m. every day"), ("action", "book a table")],
        ),
    ],
)
def test_connectives_and_subordinate_clauses_are_no_actions(text, expected, verbs):
    assert kinds(text, verbs) == expected


@pytest.mark.parametrize(
    ("text", "weak_pieces"),
    [
        ("make a black and white image", ["white image"]),
        ("measure the blood pressure and heart rate", ["heart rate"]),
        ("draw a blue background and red foreground objects", ["red foreground objects"]),
        ("write a natural, conversational text response", ["conversational text response"]),
        ("caption the photo and translate the caption", []),
    ],
)
def test_and_inside_a_noun_phrase_is_a_weak_cut(text, weak_pieces, verbs):
    """A weak piece is a part only if it matches a skill well on its own (``PartMatcher.match``)."""
    assert [clause.text for clause in read_request(text, verbs) if clause.weak] == weak_pieces


def test_a_clause_keeps_the_words_between_it_and_the_one_before(verbs):
    clauses = read_request("Translate the text into German, and translate it into Spanish", verbs)
    assert [(clause.text, clause.joiner) for clause in clauses] == [("Translate the text into German", " "), ("translate it into Spanish", ", and ")]


def test_a_request_of_no_words_has_no_clauses(verbs):
    assert read_request("  ...  ", verbs) == []


def test_a_long_run_of_spaces_is_read_in_one_pass(verbs):
    """800 spaces took 80 s before the cuts were anchored after a word (the cost grew with the cube
    of the run); 9,000 now read like any other text."""
    for spaces in (" " * 9_000, "\u00a0" * 9_000, " ," * 4_000):
        clauses = read_request(f"describe the table{spaces}quickly", verbs)
        assert clauses[0].text.startswith("describe the table") and clauses[-1].text.endswith("quickly")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # An order with a verb no catalog starts with is an order, never a fact.
        ("1. caption 'a.png' 2. translate it", [("action", "caption 'a.png'"), ("action", "translate it")]),
        # A verb with a quoted object is no lone verb: the object is its own.
        ("Load 'people.csv' and describe it", [("action", "Load 'people.csv'"), ("action", "describe it")]),
    ],
)
def test_an_order_on_a_value_is_an_action(text, expected, verbs):
    assert kinds(text, verbs) == expected


def test_a_value_after_to_as_or_into_is_a_destination_never_a_source():
    from toolpath.planner.tasks.clauses import names_destination, source_values

    assert source_values("Save the image to '/etc/passwd'") == []
    assert source_values("Download the image at https://example.com/a.png to '~/.bashrc'") == ["https://example.com/a.png"]
    assert source_values("The result should be saved as 'b.png'") == []
    assert source_values("Translate 'Bonjour' into English") == ["Bonjour"]
    assert names_destination("The output file is 'out.csv'") and not names_destination("I have a CSV file 'people.csv'")


@pytest.mark.parametrize("piece", ["—", "🎉", "你好", "???"])
def test_a_piece_without_latin_words_is_kept_not_a_crash(piece, verbs):
    """Before: an IndexError for any such piece after a comma or "and" (words were ASCII only)."""
    texts = [clause.text for clause in read_request(f"book a flight, {piece}", verbs)]
    assert texts[0] == "book a flight" and "".join(texts[1:]).replace(" ", "") in (piece, piece.rstrip("?") + "?")


@pytest.mark.parametrize(
    ("text", "searched"),
    [
        ("write a report of compounds.csv to report.md", "write a report of a file to a file"),
        ("summarise 'data/people.csv'", "summarise 'a file'"),
        ("fetch https://example.org/page.html and describe it", "fetch https://example.org/page.html and describe it"),
        ("e.g. at 8 a.m. in the U.S. with Python 3.11", "e.g. at 8 a.m. in the U.S. with Python 3.11"),
    ],
)
def test_skill_search_reads_a_file_name_as_a_file_and_leaves_urls_abbreviations_and_numbers(text, searched):
    assert without_file_names(text) == searched
