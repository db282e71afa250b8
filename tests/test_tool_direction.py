"""Direction and modality in tool choice (issue 53): the kinds a request names as what it starts
from and what it asks for pick between tools of opposite direction, read from the catalog's own
state words, file types and grammar words, and the reason is in the plan's JSON.

The catalog is the type-level media catalog of ``benchmarks/catalogs/media`` (states are kinds of
media); the requests are paraphrases of those in ``benchmarks/requests_cases.yaml``, in other words.
"""

from pathlib import Path

import pytest

from toolpath.catalogs import default_catalog_paths
from toolpath.planner import Workspace
from toolpath.planner.search.skills import SkillHit
from toolpath.planner.tasks.direction import DIRECTION_MARGIN, kinds_named, named_file_kind, read_direction

MEDIA = Path(__file__).resolve().parent.parent / "benchmarks" / "catalogs" / "media" / "catalog.yaml"


@pytest.fixture(scope="module")
def media():
    workspace = Workspace.open([MEDIA])
    workspace.search("warm up", k=1)
    return workspace


@pytest.mark.parametrize(
    ("words", "starts_from", "asks_for"),
    [
        ("Turn the photo into text", {"media.image"}, {"media.text"}),
        ("Show me the text in the picture", {"media.image"}, {"media.text"}),  # "the text in the image": from the image
        ("Draw an image of the text", {"media.text"}, {"media.image"}),  # "an image of the text": an image is asked for
        ("Say it in a calm voice", set(), set()),  # "in a ..." says how, not from what
        ("Pull the words out of lecture.mp3", {"media.audio"}, set()),  # audio/mpeg: the catalog's audio
        ("Convert clip.mp4 into a recording", {"media.video"}, {"media.audio"}),
        ("Read the text of the article aloud", {"media.text"}, set()),  # one kind named as both tells no direction
    ],
)
def test_the_kinds_a_request_names_come_from_the_catalogs_own_words(media, words, starts_from, asks_for):
    named = kinds_named(media.graph, words)
    assert (set(named.inputs), set(named.outputs)) == (starts_from, asks_for)


def test_a_files_kind_comes_from_the_suffixes_the_catalog_writes_or_its_media_type(media):
    assert named_file_kind(media.graph, "greeting.wav") == "media.audio"  # text_to_speech writes speech.wav
    assert named_file_kind(media.graph, "holiday.mov") == "media.video"  # video/quicktime
    assert named_file_kind(media.graph, "notes.txt") == "media.text"  # text/plain
    assert named_file_kind(media.graph, "data.parquet") is None  # no media type, no tool writes one


def test_a_catalog_with_one_kind_of_input_reads_no_direction():
    tabular = Workspace.open(default_catalog_paths())
    assert not kinds_named(tabular.graph, "turn sales.csv into a chart of revenue")
    assert named_file_kind(tabular.graph, "sales.csv") is None


@pytest.mark.parametrize(
    ("request_text", "inputs", "tools", "held"),
    [
        ("Could you turn this snapshot into text?", {"image": "shot.png"}, ["optical_character_recognition"], {"media.image"}),
        ("Change my scanned letter into text.", {"image": "letter.png"}, ["optical_character_recognition"], {"media.image"}),
        ("Get me the spoken words from standup.mp3.", {}, ["speech_to_text"], {"media.audio"}),
        ("I'd like a voice recording made from this note.", {"text": "Back in five minutes."}, ["text_to_speech"], {"media.text"}),
        ("Make a sound file out of this paragraph.", {"text": "Welcome to the museum."}, ["text_to_speech"], {"media.text"}),
        ("Grab the audio track of match.mp4.", {}, ["video_to_audio"], {"media.video"}),
        ("Please convert the clip from wedding.mp4 into sound.", {}, ["video_to_audio"], {"media.video"}),
        ("Turn this description into an image.", {"text": "an owl reading a book"}, ["text_to_image"], {"media.text"}),
    ],
)
def test_the_forward_tool_is_chosen(media, request_text, inputs, tools, held):
    planned = media.plan_task(request_text, inputs=inputs)
    assert [step.tool.name for step in planned.plan.steps] == tools
    assert set(planned.plan.held) == held


def test_the_plans_json_says_which_kinds_the_words_name_and_why_the_reverse_tool_lost(media):
    part = media.plan_task("Turn this photo into text.", inputs={"image": "board.jpg"}).to_dict()["parts"][0]
    assert part["matched"]["name"] == "optical_character_recognition"
    assert part["direction"].startswith("the words start from media.image ('photo') and ask for media.text ('text'); the chosen goal agrees")
    reverse = {alternative["hit"]["name"]: alternative["reason"] for alternative in part["alternatives"]}
    # text_to_image matches these words better than OCR, but makes an image.
    assert reverse["text_to_image"] == "its direction contradicts the words: it makes media.image, and the words ask for media.text"


def test_a_request_that_names_no_kind_has_no_direction_in_its_json(media):
    part = media.plan_task("Summarize this.", inputs={"text": "A long text about rivers."}).to_dict()["parts"][0]
    assert part["direction"] is None


def _tool_hit(name: str, similarity: float, makes: str) -> SkillHit:
    return SkillHit("tool", name, "media", similarity, similarity, 0.0, "", frozenset({makes}), True, None)


def test_a_reverse_tool_is_never_pushed_past_a_clearly_better_match(media):
    """The reverse tool loses only to a forward one within DIRECTION_MARGIN of it."""
    reverse = _tool_hit("text_to_image", 0.80, "media.image")
    near = _tool_hit("optical_character_recognition", 0.80 - DIRECTION_MARGIN + 0.01, "media.text")
    far = _tool_hit("optical_character_recognition", 0.80 - DIRECTION_MARGIN - 0.01, "media.text")
    words = "turn the image into text"
    assert read_direction(media.graph, words, [reverse, near], [reverse, near], 0.1).is_demoted(reverse)
    kept = read_direction(media.graph, words, [reverse, far], [reverse, far], 0.1)
    assert not kept.is_demoted(reverse)
    assert "no candidate that agrees matches within 0.25" in kept.explanation(reverse)
