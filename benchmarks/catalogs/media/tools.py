"""The media tools: placeholders with the catalog's signatures (``benchmarks/catalogs/media/catalog.yaml``).

The benchmark only plans, so each tool returns a stand-in: a text that says what a real model would
have made of its input, or the output path a real tool would have written. Nothing is read or written.
"""

from __future__ import annotations

from pathlib import Path


def _made(what: str, source: str) -> str:
    return f"[{what} of {Path(source).name}]"


def image_captioning(image: str) -> str:
    """A one-sentence caption of the image at ``image`` (placeholder)."""
    return _made("caption", image)


def optical_character_recognition(image: str) -> str:
    """The text printed in the image at ``image`` (placeholder)."""
    return _made("text read", image)


def object_detection(image: str) -> str:
    """One line per object found in ``image``: label, confidence (0-1), box (placeholder)."""
    return _made("objects", image)


def visual_question_answering(image: str, question: str) -> str:
    """The answer to ``question`` about ``image`` (placeholder)."""
    return f"[answer to {question!r} about {Path(image).name}]"


def text_to_image(prompt: str, output_path: str = "generated.png") -> str:
    """The path a generated image of ``prompt`` would be written to."""
    return output_path


def image_search(query: str, output_path: str = "found.jpg") -> str:
    """The path a photo found for ``query`` would be written to."""
    return output_path


def download_image(url: str, output_path: str = "downloaded.jpg") -> str:
    """The path the image at ``url`` would be written to."""
    return output_path


def image_editing(image: str, instruction: str, output_path: str = "edited.png") -> str:
    """The path ``image`` changed as ``instruction`` says would be written to."""
    return output_path


def image_to_black_and_white(image: str, output_path: str = "greyscale.png") -> str:
    """The path a greyscale copy of ``image`` would be written to."""
    return output_path


def colorize_image(image: str, output_path: str = "colorized.png") -> str:
    """The path a coloured copy of the greyscale ``image`` would be written to."""
    return output_path


def speech_to_text(audio: str) -> str:
    """The words spoken in the recording at ``audio`` (placeholder)."""
    return _made("transcript", audio)


def text_to_speech(text: str, voice: str = "neutral", output_path: str = "speech.wav") -> str:
    """The path ``text`` read aloud in ``voice`` would be written to."""
    return output_path


def combine_audio(audio: str, other_audio: str, output_path: str = "combined.wav") -> str:
    """The path ``audio`` followed by ``other_audio`` would be written to."""
    return output_path


def video_to_audio(video: str, output_path: str = "soundtrack.wav") -> str:
    """The path the soundtrack of ``video`` would be written to."""
    return output_path


def text_to_video(prompt: str, output_path: str = "generated.mp4") -> str:
    """The path a generated clip of ``prompt`` would be written to."""
    return output_path


def web_search(query: str) -> str:
    """The address of the best page for ``query`` (placeholder)."""
    return "https://example.org/search?q=" + "+".join(query.split())


def fetch_webpage_text(url: str) -> str:
    """The main text of the page at ``url`` (placeholder)."""
    return f"[text of {url}]"


def text_generation(prompt: str) -> str:
    """A new text written for ``prompt`` (placeholder)."""
    return f"[text written for {prompt!r}]"


def translate_text(text: str, language: str) -> str:
    """``text`` in ``language`` (placeholder)."""
    return f"[{language}] {text}"


def summarize_text(text: str) -> str:
    """A summary of ``text`` (placeholder: its first sentence)."""
    return text.split(". ")[0]


def rewrite_text(text: str, style: str = "") -> str:
    """``text`` in other words, in ``style`` when given (placeholder)."""
    return f"[rewritten{' ' + style if style else ''}] {text}"


def expand_text(text: str) -> str:
    """``text`` with more detail (placeholder)."""
    return f"{text} [more detail]"


def simplify_text(text: str) -> str:
    """``text`` in plain language (placeholder)."""
    return f"[simple] {text}"


def question_answering(text: str, question: str) -> str:
    """The answer to ``question`` from ``text`` (placeholder)."""
    return f"[answer to {question!r}]"


def sentiment_analysis(text: str) -> str:
    """``positive``, ``negative`` or ``neutral`` with a confidence (placeholder: always neutral)."""
    return "neutral (0.50)"
