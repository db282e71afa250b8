"""The textflow tools: deterministic, pure-Python text transforms, a text file reader and writer, and
a text-to-speech stand-in that writes a short WAV file with the standard library's ``wave`` module.

Every function is a tool of ``benchmarks/textflow/catalog.yaml`` (``module: textflow.tools``).
"""

from __future__ import annotations

import math
import re
import struct
import wave
from pathlib import Path

#: The sentence expand_text appends.
EXPANSION = "This matters because it shapes what comes next."

#: Long words simplify_text replaces.
SIMPLER_WORDS = {
    "utilize": "use",
    "additional": "more",
    "commence": "start",
    "obtain": "get",
    "information": "facts",
    "approximately": "about",
    "construction": "building",
    "residents": "people",
}

#: The words translate_text knows, per language; other words are kept as they are.
DICTIONARIES = {
    "fr": {
        "the": "le",
        "text": "texte",
        "this": "ceci",
        "is": "est",
        "and": "et",
        "budget": "budget",
        "will": "va",
        "use": "utiliser",
        "matters": "compte",
        "because": "parce que",
        "hello": "bonjour",
        "world": "monde",
    },
    "de": {"the": "die", "text": "Text", "this": "dies", "is": "ist", "and": "und", "will": "wird", "use": "nutzen", "hello": "hallo", "world": "Welt"},
    "es": {"the": "el", "text": "texto", "this": "esto", "is": "es", "and": "y", "will": "va a", "use": "usar", "hello": "hola", "world": "mundo"},
}

_WORD = re.compile(r"[A-Za-z]+")

# Files read as data in this process: save_text and text_to_speech never write over them.
_read_as_data: set[Path] = set()


def _replace_words(text: str, words: dict[str, str]) -> str:
    def replace(match: re.Match) -> str:
        word = match.group(0)
        return words.get(word.lower(), word)

    return _WORD.sub(replace, text)


def _checked_output(path: str, tool_name: str, suffix: str) -> Path:
    output = Path(path)
    if output.resolve() in _read_as_data:
        raise ValueError(f"{tool_name} refuses to write over {output.resolve()}: it was read as data; pass another path, such as out{suffix}")
    if output.suffix.lower() != suffix:
        raise ValueError(f"{tool_name} writes {suffix} files; pass a path ending in {suffix}, not {output.name}")
    return output


def read_text_file(path: str) -> str:
    """The text of the UTF-8 file at ``path``, without its trailing newline.

    Raises:
        FileNotFoundError: no such file.
    """
    source = Path(path)
    text = source.read_text(encoding="utf-8").rstrip("\n")
    _read_as_data.add(source.resolve())
    return text


def expand_text(text: str) -> str:
    """``text`` followed by one more sentence (:data:`EXPANSION`)."""
    return f"{text.rstrip()} {EXPANSION}"


def simplify_text(text: str, max_words: int = 40) -> str:
    """``text`` lowercased, long words replaced by short ones (:data:`SIMPLER_WORDS`), cut to ``max_words`` words."""
    words = _replace_words(text.lower(), SIMPLER_WORDS).split()
    return " ".join(words[:max_words])


def translate_text(text: str, language: str) -> str:
    """``text`` with the words of :data:`DICTIONARIES` ``[language]`` translated, prefixed ``[language]``.

    Raises:
        ValueError: a language other than fr, de and es.
    """
    code = language.strip().lower()[:2]
    if code not in DICTIONARIES:
        raise ValueError(f"translate_text knows {', '.join(DICTIONARIES)}, not {language!r}")
    return f"[{code}] {_replace_words(text, DICTIONARIES[code])}"


def summarize_text(text: str, max_sentences: int = 1) -> str:
    """The first ``max_sentences`` sentences of ``text``, prefixed ``Summary:``."""
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    return "Summary: " + " ".join(sentences[:max_sentences])


def suggest_title(text: str) -> str:
    """A title for ``text``: its first five words, capitalised, without punctuation."""
    return " ".join(word.capitalize() for word in _WORD.findall(text)[:5])


def save_text(text: str, path: str, title: str | None = None) -> str:
    """Write ``text`` to the ``.txt`` file ``path`` (never over a file read as data), after a line
    ``# title`` when ``title`` is given; return the path."""
    output = _checked_output(path, "save_text", ".txt")
    heading = f"# {title}\n\n" if title else ""
    output.write_text(heading + text + "\n", encoding="utf-8")
    return str(output)


def text_to_speech(text: str, output_path: str = "speech.wav") -> dict:
    """Read ``text`` aloud, as far as a stand-in can: one short tone per word (pitch by word length),
    8 kHz mono 16-bit PCM, written to the ``.wav`` file ``output_path``.

    Returns:
        ``{"path": output_path, "transcript": text, "seconds": duration in seconds}``.
    """
    output = _checked_output(output_path, "text_to_speech", ".wav")
    rate, tone = 8000, 0.08
    frames = bytearray()
    for word in text.split():
        frequency = 200 + 40 * min(len(word), 12)
        for index in range(int(rate * tone)):
            frames += struct.pack("<h", int(8000 * math.sin(2 * math.pi * frequency * index / rate)))
        frames += b"\x00\x00" * int(rate * 0.02)  # a pause between words
    with wave.open(str(output), "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(rate)
        audio.writeframes(bytes(frames))
    return {"path": str(output), "transcript": text, "seconds": round(len(frames) / 2 / rate, 3)}
