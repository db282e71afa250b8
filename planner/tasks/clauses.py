"""Reading a request in words: where it cuts into clauses, and what each clause is.

A request mixes three kinds of clause (:data:`Kind`):

- an **action** asks for work: "caption the image", "who directed Titanic?";
- a **fact** says what the user holds or has done: "I have an image file 'a.jpg'", "The URL is
  '…'", "I booked the wrong flight". It may hold an input state (see
  :mod:`toolpath.planner.tasks.matching`) and never runs a tool;
- **context** says when or why: "after booking the flight", "so that I know what to wear". It
  runs nothing either.

**Cuts**, outermost first: lines and semicolons; an enumeration ("1. … 2. …"); sentences (pysbd,
which knows that "Dr.", "No. 88" and "8 a.m." end no sentence); connectives that order clauses
("and then", "after that", "finally"); a bare "and"; a comma; "please" inside a sentence, which
starts the request; and a subordinating word inside a clause ("… before sending it", "… so that I
can …"), which starts context. **Quoted text is data**: no cut falls inside it ("'Bonjour, comment
ça va ?'" stays one value). Every cut starts right after a word, so reading takes one pass however
the spaces run.

A bare "and" or comma joins either two clauses or two pieces of one ("a black and white image",
"blood pressure and heart rate", "for two nights, in the city center"). It is a **strong** cut when
the words after it start a clause: a verb the loaded catalogs' affordances start with ("book",
"translate": :func:`action_words`), a subject pronoun, a request word ("need", "please"). Otherwise
it is **weak**: :meth:`toolpath.planner.tasks.matching.PartMatcher.match` keeps the piece as a part of its
own only when it matches a skill well.

Within a sentence, pieces that are not clauses on their own join one: a named value ("password
abc123", "'final.mp4'") the clause before it, a scene-setting phrase ("for now,", "in the morning,")
the clause after it, and a lone verb ("find and summarize the news") shares the next clause's object
("find the news", "summarize the news"; the two are one part again when they choose the same goal).
Sentences join only when one is nothing but a value ("Is it positive? 'Great battery…'"): a
sentence is otherwise the user's own unit.

The rules read grammar words (closed classes: pronouns, determiners, connectives, subordinators,
auxiliaries, a few request verbs such as "need" and "would"), and a few nouns that name where to
write ("output", "destination"); the one open class, verbs, comes from the catalogs themselves.
Values (:func:`source_values`) are what the user gives to read; one after "to", "as" or "into" is
where to write, never a source.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from toolpath.planner.planning.graph import StateGraph

Kind = Literal["action", "fact", "context"]


@dataclass(frozen=True)
class Clause:
    """One clause of a request.

    Attributes:
        text: its words as the user wrote them (quotes kept).
        kind: ``"action"``, ``"fact"`` or ``"context"`` (see the module docstring).
        weak: cut off by a bare "and" or comma whose words need not start a clause: a part of its
            own only if it matches a skill well on its own.
        why: why it is a fact or context, or how its words were put together; ``""`` for a plain action.
        together: for a lone verb given the next clause's object ("rewrite the text" out of
            "rewrite and simplify the text"), the two clauses as written: their text when both
            choose the same goal.
        joiner: the text between it and the clause before, as written (", ", " and ", ", then "),
            to glue them back; ``" "`` for the first clause of a sentence.
        query: the words a search reads when they are fewer than ``text``'s: the clause without
            the values and scene-setting phrases joined to it ("log in with ID 123456" of "log in
            with ID 123456 and password abc123"); ``""``: ``text``.
    """

    text: str
    kind: Kind = "action"
    weak: bool = False
    why: str = ""
    together: str = ""
    joiner: str = " "
    query: str = ""


# Quoted text, one literal value. An opening quote follows no letter ("Lipinski's" is no quote); an
# apostrophe between letters stays inside single quotes ("'Today's meeting'").
_QUOTED = re.compile(
    r"(?<!\w)(?:\"[^\"]*\"|\u201c[^\u201d]*\u201d|'(?:[^']|(?<=\w)'(?=\w))*'|\u2018(?:[^\u2019]|(?<=\w)\u2019(?=\w))*\u2019|\u00ab[^\u00bb]*\u00bb)(?!\w)"
)
_QUOTES = "\"'\u201c\u2018\u00ab"
_LINE_END = re.compile(r"[;\n]+")  # the spaces around are stripped with each piece
# (Patterns used with ``match(text, pos)`` have no "^": match anchors at ``pos``, "^" only at 0.)
# A bullet or a number at the start of a line ("- ", "2) ", "(3) ", "1. ").
_BULLET = re.compile(r"\s*(?:[-*\u2022]|\(?\d{1,2}[.)])\s+")
# Numbers inside a line ("1. parse ... 2. find ..."): an enumeration only when they count 1, 2, 3...
_INLINE_NUMBER = re.compile(r"(?:^|\s)\(?(\d{1,2})[.)]\s+")
# The cuts inside a sentence. Connectives that order clauses come first, so that "and then" is one
# cut; a subordinating word is cut before, and kept: it starts the context clause; so is "please"
# ("after logging in please check my balance" asks for the check).
# Every cut starts right after a word ("(?<=\S)") and its spaces are possessive: a long run of
# spaces is tried once, not at each of its positions (which took minutes for 800 spaces).
_CUT = re.compile(
    r"(?<=\S)(?:"
    r"(?P<sequence>(?:\s*+,)?\s++(?:and\s++then|and\s++after\s++that|and\s++afterwards|and\s++finally|and\s++also|after\s++that|afterwards|then|finally)\s++)"
    r"|(?P<conjunction>(?:\s*+,)?\s++and\s++)"
    r"|(?P<subordinate>(?:\s*+,)?\s++(?=(?:before|after|when|once|until)\s++\w+ing\b|(?:so\s++(?:that|i|we)|in\s++order\s++to|so\s++as\s++to|because|unless|as\s++soon\s++as)\b))"
    r"|(?P<request>(?:\s*+,)?\s++(?=please\b))"
    r"|(?P<comma>\s*+,\s++(?=\S)))",
    flags=re.IGNORECASE,
)
# Words that open a clause without being part of it: connectives, greetings, "please".
_OPENER = re.compile(
    r"(?:after\s+that|and\s+then|(?:first|second|third)(?:ly)?(?!\s+(?:\d|few|rows?|columns?|entries|records|lines|ones?)\b)|next|also|additionally|moreover|furthermore|please|kindly|then|finally|lastly|afterwards|"
    r"and|but|however|therefore|meanwhile|besides|so(?!\s+(?:that|as|i|we)\b)|now|hey|hi|hello|ok|okay|well)\b[,:!]?\s*",
    flags=re.IGNORECASE,
)

# Closed classes of English (grammar words), by their part in the rules below.
_SUBJECTS = frozenset({"i", "we"})
# What a subject says when it asks rather than tells ("I need", "we would like", "I'm looking for").
_REQUESTING = frozenset(
    {"want", "wanna", "need", "would", "wish", "hope", "plan", "intend", "must", "should", "shall", "will", "can", "could", "may", "might", "like"}
    | {"love", "wonder", "prefer", "require", "expect", "look", "ask", "please"}
)
_SEEKING = frozenset({"looking", "trying", "hoping", "planning", "going", "wondering", "searching", "interested", "wanting", "needing", "about"})
_ADVERBS = frozenset({"just", "already", "also", "recently", "previously", "currently", "now", "still", "really", "only", "today", "yesterday"})
_COPULAS = frozenset({"is", "are", "was", "were"})
_ASKED_AFTER_COPULA = frozenset({"to", "needed", "required", "wanted", "requested", "expected"})
_HAVE = frozenset({"have", "has", "had"})
_OBJECT_PRONOUNS = frozenset({"me", "it", "them", "him", "us"})
# Conjunctions and adverbs that may stand before a determiner without acting on it ("so the").
_NOT_VERBS = frozenset({"so", "but", "or", "yet", "even", "than", "as", "while", "where", "which", "who", "whose"})
_DETERMINERS = frozenset({"my", "our", "the", "this", "that", "these", "those", "its", "his", "her", "their", "your", "a", "an"})
_AUXILIARIES = frozenset({"is", "are", "was", "were", "do", "does", "did", "will", "can", "could", "should", "would", "has", "have", "had"})
# Words that start a subordinate clause: it says when, why or on what condition, not what to do.
_SUBORDINATORS = (
    *("after", "before", "when", "whenever", "once", "until", "till", "unless", "if", "because", "since", "although", "though"),
    *("so that", "so i", "so we", "in order to", "so as to", "as soon as", "in case"),
    *("due to", "owing to", "thanks to", "as a", "as an"),
)
# Words that say what not to do ("no need for SMS notifications", "don't call me"), except where
# the next word turns it into an order ("don't forget to book").
_NEGATIONS = frozenset({"no", "not", "never", "without", "don't", "dont", "doesn't"})
_NEGATION_UNDONE = frozenset({"forget", "fail", "hesitate"})
# "When is the film released?" is a question, not a clause saying when.
_QUESTION_CAN_START = frozenset({"when", "since", "once"})
_CONTRACTIONS = {
    "i'd": ("i", "would"),
    "i'm": ("i", "am"),
    "i've": ("i", "have"),
    "i'll": ("i", "will"),
    "we'd": ("we", "would"),
    "we're": ("we", "are"),
    "we've": ("we", "have"),
    "we'll": ("we", "will"),
}
# Words that open a clause whatever the catalogs' verbs: subject pronouns and requests.
# (Not "which" or "who": after a comma they start a relative clause, words about the noun before.)
_CLAUSE_OPENERS = _SUBJECTS | _REQUESTING | frozenset({"you", "let", "help"})
# Words of a request's preamble, before its verb ("I would like you to", "can you help me").
_PREAMBLE = _SUBJECTS | _REQUESTING | frozenset({"to", "you", "me", "us", "help", "am", "are", "going", "trying"})
# Words a value's name never starts with, and the verbs that join a name to its value.
_VALUE_LEAD = frozenset({"with", "using", "and", "my", "the", "your", "his", "her", "their", "our", "its", "a", "an"})
_VALUE_LINK = frozenset({"is", "are", "was", "of"})
_NAME_WORD = re.compile(r"[A-Za-z][\w'/-]*:?")
# A preposition inside the words before a value makes them an action's ("set the alarm to 7", "log in with ID 1").
_PREPOSITIONS = frozenset({"to", "for", "at", "on", "in", "into", "from", "by", "with", "until", "about", "as"})
_ONLY_VALUES = "it only states values"
# Words an imperative never starts with: a piece so starting continues the clause before it.
_CANNOT_START_ACTION = (
    _DETERMINERS | _PREPOSITIONS | frozenset({"now", "too", "later", "today", "tomorrow", "yesterday", "again", "each", "every", "both", "either"})
)
# Words that begin affordances without being verbs; never taken as a catalog's verb.
_FUNCTION_WORDS = _DETERMINERS | _PREPOSITIONS | _SUBJECTS | _AUXILIARIES | frozenset({"and", "or", "of", "all", "any", "some", "each", "every", "no", "not"})

# A word, with its inner apostrophe or hyphens ("check-out" is one word, not "check").
_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")  # letters of any script


def _words(text: str) -> list[str]:
    """Lower-case words, contractions opened ("I'm" → "i", "am")."""
    words: list[str] = []
    for word in _WORD.findall(text.lower().replace("\u2019", "'")):
        words += _CONTRACTIONS.get(word, (word,))
    return words


_ACTION_WORDS: weakref.WeakKeyDictionary[StateGraph, frozenset[str]] = weakref.WeakKeyDictionary()


def action_words(graph: StateGraph) -> frozenset[str]:
    """The verbs the graph's catalogs act with: the first word of every tool's and state's
    affordances and of every tool's description, less grammar words. Cached per graph.

    Returns:
        Lower-case words, e.g. ``{"book", "translate", "parse", "parses", ...}``.
    """
    if graph not in _ACTION_WORDS:
        phrases = [phrase for tool in graph.registry for phrase in (*tool.affordances, tool.description)]
        phrases += [phrase for state in graph.states.values() for phrase in state.affordances]
        firsts = {words[0] for words in map(_words, phrases) if words}
        _ACTION_WORDS[graph] = frozenset(firsts - _FUNCTION_WORDS)
    return _ACTION_WORDS[graph]


def masked_quotes(text: str) -> str:
    """``text`` with the inside of every quoted span replaced by ``_`` (same length, same offsets),
    so that no cut falls inside a quote and a quote reads as one word."""
    masked = list(text)
    for match in _QUOTED.finditer(text):
        masked[match.start() + 1 : match.end() - 1] = "_" * (match.end() - match.start() - 2)
    return "".join(masked)


# A value written without quotes: a URL, or a file name with an extension ("people.csv"; group 1).
_BARE_VALUE = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+[^\s.,;:!?)]|(?<![\w/.-])[\w/.-]*\w\.([A-Za-z][A-Za-z0-9]{0,6})\b(?![\w/-])")


def without_file_names(text: str) -> str:
    """``text`` with each file name read as "a file" (URLs stay): "a report of compounds.csv" → "a
    report of a file". A file's name is the user's choice, not what the task does: left in, its stem
    pulls skill search toward whatever it sounds like (a table named "compounds" toward chemistry),
    and its extension toward loading ("CSV"). Only extensions of two to seven characters count, so
    "e.g." and "a.m." stay; a quoted file name may hold spaces (:func:`is_file_name`)."""
    # A quoted name may hold spaces ("staff list.tsv"): read whole, not as its last word.
    text = _QUOTED.sub(lambda match: f"{match.group()[0]}a file{match.group()[-1]}" if is_file_name(match.group()[1:-1]) else match.group(), text)
    return _BARE_VALUE.sub(lambda match: "a file" if len(match.group(1) or "") >= 2 else match.group(), text)


#: A file named with the words that place it in the sentence, once read as "a file": a preposition,
#: then perhaps a determiner and a word for a file ("in the table a file").
_FILE_PHRASE = re.compile(
    r"\s*\b(?:of|in|from|for|inside|within)\s+(?:(?:the|this|that|my|our|your)\s+)?(?:(?:file|table|spreadsheet|sheet|csv|dataset|data\s+set)\s+)?a file\b",
    flags=re.IGNORECASE,
)


def without_file_phrases(text: str) -> str:
    """``text`` without the phrases that say which file it is about ("count the compounds in each
    category of compounds.csv" → "count the compounds in each category"): what the words ask of a
    file, once the file itself is held. A file named any other way stays, as "a file"
    (:func:`without_file_names`)."""
    return _FILE_PHRASE.sub("", without_file_names(text))


def quoted_values(text: str) -> list[str]:
    """The values ``text`` gives: the inside of each quoted span, or else each URL or file name.

    Example: ``"I have an image file 'example.jpg'"`` → ``["example.jpg"]``.
    """
    return _values(text, lambda start: True)


def _values(text: str, keep: Callable[[int], bool]) -> list[str]:
    """The insides of the quoted spans ``keep`` accepts (by their start), or else its URLs and
    file names (outside quotes) it accepts."""
    quoted = [match.group()[1:-1] for match in _QUOTED.finditer(text) if keep(match.start())]
    return quoted or [match.group() for match in _BARE_VALUE.finditer(masked_quotes(text)) if keep(match.start())]


_CAPITALISED = re.compile(r"(?<![\w'])[A-Z][\w'&.-]*(?:\s+(?:(?:of|the|and|de|la|von|van)\s+)*[A-Z0-9][\w'&.-]*)*")


def named_entities(text: str) -> list[str]:
    """The names a clause mentions: runs of capitalised words that do not start it ("the movie
    Titanic", "directed by Sofia Coppola", "The Lord of the Rings"), and quoted names of up to five
    words that are no file name or URL (``'Twilight'``). Words in capitals only (``CSV``, ``SMILES``,
    ``PM``) are no names: they are kinds, units and formats.

    Returns:
        The names in order, without a possessive "'s", each once.
    """
    masked = masked_quotes(text)
    found = [value for value in quoted_values(text) if len(value.split()) <= 5 and not _BARE_VALUE.fullmatch(value)]
    first = re.match(r"\W*\w+", masked)
    for match in _CAPITALISED.finditer(masked):
        name = re.sub(r"'s$", "", match.group().rstrip(".'"))
        if first is not None and match.start() < first.end():
            name = name.split(None, 1)[1] if " " in name else ""  # the clause's first word is capitalised anyway
        if name and not name.isupper() and name != "I":
            found.append(name)
    return list(dict.fromkeys(found))


# Words that make a fact name where to write, not what the user holds ("the output file is 'out.csv'").
# ("is saved as 'me.jpg'" says where the user's file is: no verb here, only the nouns of a destination.)
_DESTINATION = frozenset({"output", "outputs", "destination", "target"})


def names_destination(text: str) -> bool:
    """Whether a clause speaks of where to write (:data:`_DESTINATION` words)."""
    return bool(set(_words(text)) & _DESTINATION)


# Words before a value that make it a destination ("save it to 'b.png'", "as 'out.csv'").
_TOWARDS = frozenset({"to", "as", "into"})


def source_values(text: str) -> list[str]:
    """The values ``text`` gives to read (:func:`quoted_values` in the same preference), less those
    right after "to", "as" or "into": "save the image to '/etc/passwd'" names where to write, and
    such a value is never taken as something the user holds."""
    return _values(text, lambda start: not set(_words(text[:start])[-1:]) & _TOWARDS)


# Words joined by single spaces may name a file too, written in quotes ("staff list.tsv"); the suffix is
# up to seven characters (".parquet").
_FILE_NAME = re.compile(r"[\w/.~-]*(?: [\w/.~-]+)*\w\.[A-Za-z][A-Za-z0-9]{1,6}")


def is_file_name(value: str) -> bool:
    """Whether ``value`` is a file's name or path (``sales.csv``, ``data/out.parquet``): a name with a
    suffix of two characters or more. "2024-03", "North" and "e.g." are not."""
    return _FILE_NAME.fullmatch(value) is not None


def source_file_names(text: str) -> list[str]:
    """The file names ``text`` gives to read outside its quotes (as :func:`source_values` reads
    them, less those after "to", "as" or "into"): "rows of sales.csv whose date contains
    '2024-03'" → ``["sales.csv"]``."""
    masked = masked_quotes(text)
    return [match.group() for match in _BARE_VALUE.finditer(masked) if is_file_name(match.group()) and not set(_words(text[: match.start()])[-1:]) & _TOWARDS]


def without_names(text: str) -> str:
    """``text`` with each name :func:`named_entities` finds replaced by "…"."""
    for name in sorted(named_entities(text), key=len, reverse=True):
        text = text.replace(name, "\u2026")
    return text


def without_quotes(text: str, words_too: bool = True) -> str:
    """``text`` with the inside of each quoted span replaced by "…": the words a search reads.
    With ``words_too=False``, a quoted single word stays ("call 'SearchPeople'", "'intro.wav'"):
    it names a tool or a file rather than carrying prose."""

    def masked(match: re.Match[str]) -> str:
        quote = match.group()
        return quote if not words_too and not any(character.isspace() for character in quote) else f"{quote[0]}\u2026{quote[-1]}"

    return _QUOTED.sub(masked, text)


def _between(masked: str, start: int, end: int, pattern: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    """The spans of ``masked[start:end]`` between the matches of ``pattern``."""
    for match in pattern.finditer(masked, start, end):
        yield start, match.start()
        start = match.end()
    yield start, end


def _items(masked: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """A line's items: cut at inline numbers when they count up from 1; each without its bullet."""
    line = masked[start:end]
    markers = list(_INLINE_NUMBER.finditer(line))
    if len(markers) < 2 or [int(marker.group(1)) for marker in markers] != list(range(1, len(markers) + 1)):
        cuts = [(0, len(line))]
    else:
        cuts = [(0, markers[0].start())] + [
            (marker.end(), markers[number + 1].start() if number + 1 < len(markers) else len(line)) for number, marker in enumerate(markers)
        ]
    for item_start, item_end in cuts:
        bullet = _BULLET.match(line, item_start, item_end)
        yield start + (bullet.end() if bullet else item_start), start + item_end


def _sentences(masked: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    # Imported here: pysbd takes about 30 ms to import, which commands that read no request (toolpath
    # plan, graph, validate) should not pay. A new Segmenter per call: pysbd keeps the text being
    # segmented on the instance.
    import pysbd

    for span in pysbd.Segmenter(language="en", clean=False, char_span=True).segment(masked[start:end]):
        yield start + span.start, start + span.end


def _is_context(words: list[str], text: str) -> bool:
    """Whether a clause starts with a subordinating word and is not a question ("when is it out?"),
    tells what the user will do ("we will screen more analogues", not "I will need a car"), or
    says what not to do ("no need for SMS notifications", "I do not want a window seat"; not "No. 5
    Main Street" or "don't forget to book")."""
    if text.rstrip().endswith("?"):
        return False
    asked = _without_preamble(words)
    if asked[:1] == ["do"] or asked[:1] == ["does"]:
        asked = asked[1:]
    if asked[:1] and asked[0] in _NEGATIONS and not set(asked[1:2]) & _NEGATION_UNDONE and not re.match(r"\s*no\.?\s*\d", text, flags=re.IGNORECASE):
        return True
    if words[:1] and words[0] in _SUBJECTS:
        rest = [word for word in words[1:] if word not in _ADVERBS]
        return rest[:1] == ["will"] and rest[1:2] != [] and rest[1] not in _REQUESTING
    joined = " ".join(words[:4])
    for subordinator in _SUBORDINATORS:
        if joined == subordinator or joined.startswith(subordinator + " "):
            after = words[len(subordinator.split()) :]
            return not (subordinator in _QUESTION_CAN_START and after[:1] and after[0] in _AUXILIARIES)
    return False


def _is_fact(words: list[str], text: str) -> bool:
    """Whether a clause tells rather than asks: "I have …", "I booked …", "my name is …", "the URL
    is …", "here is …". A question, a request ("I need …", "I'd like …", "I'm looking for …") and
    an obligation ("I have to …") are not facts; nor is "my goal is to …"."""
    if not words or text.rstrip().endswith("?"):
        return False
    if words[0] in _SUBJECTS:
        rest = [word for word in words[1:] if word not in _ADVERBS]
        verb, following = (rest + ["", ""])[:2]
        if not verb or verb in _REQUESTING:
            return False
        if verb in _HAVE:
            return following != "to"
        if verb in ("am", "are"):
            # "I'm looking for …" asks; "I'm watching …" and "I am a teacher" tell
            return following not in _SEEKING
        return True
    if words[0] in ("here", "there") and words[1:2] and words[1] in _COPULAS:
        return True
    if words[0] in _DETERMINERS:
        for position, word in enumerate(words[:7]):
            if word in _COPULAS:
                # "my goal is to …", "a summary is needed": asked for, not told
                return not set(words[position + 1 : position + 2]) & _ASKED_AFTER_COPULA
    return False


def _is_value_word(word: str) -> bool:
    """A word with a digit or an "@", or a (masked) quote."""
    return word[0] in _QUOTES or any(character.isdigit() or character == "@" for character in word)


def _is_value(masked: str, verbs: Collection[str]) -> bool:
    """Whether a piece only states a value: up to four words naming it, then the value (words with
    a digit or an "@", or quoted text): "password abc123", "verification code: 7890", "'final.mp4'".
    That is an argument of the clause before it, not a clause."""
    words = masked.split()
    name_length = len(words)
    while name_length and _is_value_word(words[name_length - 1]):
        name_length -= 1
    name = words[:name_length]
    while name and name[0].lower() in _VALUE_LEAD:
        name = name[1:]
    if name and name[-1].lower() in _VALUE_LINK:
        name = name[:-1]
    if name and _starts_clause(_words(name[0]), verbs):
        return False  # "Combine 'a.wav'": an action on a value
    return name_length < len(words) and len(name) <= 4 and all(_NAME_WORD.fullmatch(word) and word.lower() not in _PREPOSITIONS for word in name)


def _without_preamble(words: list[str]) -> list[str]:
    """The words after a request's preamble ("I need to", "please help me", "can you")."""
    position = 0
    while position < len(words) and words[position] in _PREAMBLE:
        position += 1
    return words[position:]


def leading_verb(text: str) -> str:
    """The word a clause starts with after its request preamble, without a final "s" ("I need to book …" →
    ``"book"``); ``""`` for none. Two actions that start with the same verb ask for one operation
    twice ("translate it into German, and translate it into Spanish")."""
    words = _without_preamble(_words(text))
    return words[0].removesuffix("s") if words else ""


# Words that address the one who does the work before saying what it is ("give me", "tell us",
# "let me know", "show me"): part of the request's preamble, like "please" and "I need to".
_ADDRESSING = frozenset({"give", "tell", "show", "let", "get"})
_ADDRESSED = frozenset({"me", "us"})
_KNOWING = frozenset({"know", "see", "find", "out"})  # "I want to know …", "let me see …", "find out …"
# Words a request's head may hold that say how much or which, not what (closed classes: quantifiers,
# cardinal numerals, particles of phrasal verbs, pronouns).
_QUANTITIES = frozenset(
    {"all", "any", "some", "each", "every", "both", "few", "several", "many", "much", "more", "most", "less", "least", "only", "just", "how", "other"}
    | {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "fifteen", "twenty", "hundred", "thousand", "dozen"}
)
_PARTICLES = frozenset({"up", "out", "off", "down", "over", "away", "back"})
_POLITE = frozenset({"please", "kindly"})
_PRONOUNS = _OBJECT_PRONOUNS | _SUBJECTS | frozenset({"you", "them", "they", "i", "what", "which", "whose", "this", "that"})
# Words a head leaves out: united once (a catalog's kinds vocabulary reads the head of every tool's phrases).
_NOT_IN_HEAD = _DETERMINERS | _PRONOUNS | _QUANTITIES | _PARTICLES | _POLITE | _ADVERBS
# Words that end a request's head: its object is said before them ("draw a map *of* the regions").
_HEAD_ENDS = _PREPOSITIONS | frozenset(
    {
        "of",
        "per",
        "where",
        "whose",
        "which",
        "who",
        "that",
        "than",
        "between",
        "below",
        "above",
        "under",
        "or",
        "and",
        "so",
        "if",
        "using",
        "via",
        "through",
        "across",
        "against",
        "versus",
        "vs",
    }
)
# A question's first word: a question asks about its subject, it names no action of its own.
_QUESTION_WORDS = _AUXILIARIES | frozenset({"what", "who", "when", "where", "which", "why", "how", "am"})


def head_words(text: str) -> list[str]:
    """The words of a clause's head: its action word and object, after the request's preamble ("I
    need to", "please", "give me", "I want to know") and before the first preposition or relative
    word: "draw a map of the regions" → ``["draw", "map"]``, "give me the first rows of …" →
    ``["first", "rows"]``. Grammar words (determiners, pronouns, quantifiers, numerals, particles)
    and words with a digit are left out; a question ("how many rows …?", "is it drug-like?") has no
    head: ``[]``. Lower-case; quote values and name files before (:func:`without_quotes`,
    :func:`without_file_names`) to keep them out."""
    words = _without_preamble(_words(masked_quotes(text)))
    while True:
        if words[:1] and words[0] in _ADDRESSING and words[1:2] and words[1] in _ADDRESSED:
            words = words[2:]
        elif words[:1] and words[0] in _KNOWING:
            words = words[1:]
        else:
            break
    if not words or words[0] in _QUESTION_WORDS:
        return []
    head: list[str] = []
    for word in words:
        if word in _HEAD_ENDS:
            break
        if word not in _NOT_IN_HEAD and not any(character.isdigit() for character in word):
            head.append(word)
    return head


def _starts_clause(words: list[str], verbs: Collection[str]) -> bool:
    return bool(words) and (words[0] in _CLAUSE_OPENERS or _is_verb(words[0], verbs) or _acts_on_object(words))


def _acts_on_object(words: list[str]) -> bool:
    """Whether ``words`` start with a verb no catalog uses, told by its object: a word that is not
    a grammar word or a participle, followed by a determiner or an object pronoun ("rebook the
    flight", "simplify it"). A noun is rarely so followed, an adjective never ("and white image")."""
    first = words[0]
    participle = (len(first) > 5 and first.endswith("ing")) or (len(first) > 5 and first.endswith("ed"))
    return (
        len(words) > 1
        and (words[1] in _DETERMINERS or words[1] in _OBJECT_PRONOUNS)
        and first not in _FUNCTION_WORDS | _CANNOT_START_ACTION | _ADVERBS | _NOT_VERBS
        and not participle
    )


def _forms(word: str) -> tuple[str, ...]:
    """``word`` and what it may be without a third-person "s" or "es" ("translates", "finishes")."""
    return (word, word[:-1], word[:-2]) if word.endswith("es") else (word, word[:-1]) if word.endswith("s") else (word,)


def _is_verb(word: str, verbs: Collection[str]) -> bool:
    """Whether ``word`` is one of the catalogs' verbs as an imperative starts with it ("book",
    "books"). A participle ("changing", "booked") starts no clause: it says how or which."""
    return any(form in verbs for form in _forms(word))


@dataclass
class _Piece:
    text: str
    masked: str
    cut: str  # "sequence", "conjunction", "comma", "subordinate", or "" (starts its sentence)
    joiner: str  # the text between the piece before and this one, as written (" " for the first)


def _pieces(text: str, masked: str, start: int, end: int) -> list[_Piece]:
    """A sentence cut at connectives, "and", commas and subordinating words, openers removed."""
    pieces: list[_Piece] = []
    cut, position, previous_end = "", start, None
    for match in [*_CUT.finditer(masked, start, end), None]:
        stop = match.start() if match is not None else end
        piece_masked = masked[position:stop]
        # Strip the same characters from both texts, so their offsets stay aligned.
        left = len(piece_masked) - len(piece_masked.lstrip(" \t,.;:"))
        right = len(piece_masked.rstrip(" \t,.;:"))
        while True:
            opener = _OPENER.match(piece_masked, left, max(left, right))
            if not opener or opener.end() == left:
                break
            left = opener.end()
        if left < right:
            joiner = " " if previous_end is None else text[previous_end : position + left]
            pieces.append(_Piece(text[position + left : position + right], piece_masked[left:right], cut, joiner))
            previous_end = position + right
        if match is not None:
            cut = match.lastgroup or ""
            position = match.end()
    return pieces


def _sentence_clauses(pieces: list[_Piece], verbs: Collection[str]) -> list[Clause]:
    """Each piece of one sentence as a clause: its kind, its strength, values and lone verbs joined."""
    clauses: list[Clause] = []
    waiting: list[_Piece] = []  # values and scene-setting phrases waiting for the clause they belong to
    for number, piece in enumerate(pieces):
        words = _words(piece.masked)
        following = pieces[number + 1] if number + 1 < len(pieces) else None
        if _is_value(piece.masked, verbs):
            if clauses:
                last = clauses[-1]
                why = joined_reasons(last.why, f"the value {piece.text!r} is its argument")
                # Searched without it: a value's name ("password is …") is data, not the action.
                clauses[-1] = replace(last, text=f"{last.text}{piece.joiner}{piece.text}", why=why, query=last.query or last.text)
            else:
                waiting.append(piece)
            continue
        if following is not None and words and words[0] in _CANNOT_START_ACTION and not any(_is_verb(word, verbs) for word in words):
            # "For now, check …", "In the morning, book …": a phrase that sets the scene of the next clause
            waiting.append(piece)
            continue
        text, why, together, query = piece.text, "", "", ""
        if waiting:
            query = piece.text
            text = "".join(f"{value.text}{value_next.joiner}" for value, value_next in zip(waiting, [*waiting[1:], piece])) + text
            why, waiting = f"{', '.join(repr(value.text) for value in waiting)} belong to it", []
        if piece.cut == "subordinate" or _is_context(words, piece.text):
            clauses.append(
                Clause(text, "context", why=joined_reasons(why, "it says when or why, or what the user will do, not what to do now"), joiner=piece.joiner)
            )
            continue
        if _is_fact(words, piece.text):
            clauses.append(Clause(text, "fact", why=joined_reasons(why, "it tells what the user holds or has done; it asks for nothing"), joiner=piece.joiner))
            continue
        lone = _without_preamble(words)
        if (
            len(lone) == 1
            and not any(map(_is_value_word, piece.masked.split()))  # "load 'people.csv'" has its object
            and following is not None
            and (following.cut == "conjunction" or (following.cut == "comma" and _is_verb(lone[0], verbs)))
            and len(_words(following.masked)) > 1
        ):
            # "rewrite and simplify the text": both verbs act on the object of the second.
            text, together = f"{text} {following.text.split(None, 1)[1]}", f"{text}{following.joiner}{following.text}"
            why = joined_reasons(why, f"a lone verb: it acts on the object of {following.text!r}")
        weak = piece.cut in ("conjunction", "comma") and not _starts_clause(words, verbs)
        verb = _without_preamble(_words(clauses[-1].text))[:1] if clauses and clauses[-1].kind == "action" else []
        if weak and words[:1] and words[0] in _DETERMINERS and verb and _is_verb(verb[0], verbs):
            # "cancel the alarm and the reminder": the noun phrase is the object of the same verb
            query = f"{verb[0]} {query or text}"
            why = joined_reasons(why, f"it is an object of {verb[0]!r}, like the clause before")
        if (
            weak
            and clauses
            and clauses[-1].kind != "action"
            and words[:1]
            and words[0] in _CANNOT_START_ACTION
            and not any(_is_verb(word, verbs) for word in words)
        ):
            # "…, for now" after a fact or context: more words of it, not an action
            last = clauses[-1]
            clauses[-1] = replace(last, text=f"{last.text}{piece.joiner}{text}")
            continue
        clauses.append(Clause(text, "action", weak, why, together, piece.joiner, query))
    if waiting:  # values and nothing to give them to: the sentence states them
        text = "".join(f"{value.joiner if number else ''}{value.text}" for number, value in enumerate(waiting))
        masked = masked_quotes(text)
        words = _words(masked)
        if words and not set(words) & _COPULAS and not all(map(_is_value_word, masked.split())):
            # "caption 'a.png'" with a verb no catalog starts with: an order, never a fact
            clauses.append(Clause(text, "action", why="a word and a value: read as an order on the value"))
        else:
            clauses.append(Clause(text, "fact", why=_ONLY_VALUES))
    return clauses


def joined_reasons(first: str, second: str) -> str:
    """Two reasons as one ("first; second"), or the second alone."""
    return f"{first}; {second}" if first else second


def read_request(text: str, verbs: Collection[str] = ()) -> list[Clause]:
    """The clauses of a request, in order (see the module docstring).

    Parameters:
        text: the request.
        verbs: the verbs that start a clause after "and" or a comma
            (:func:`action_words` of the graph); without them every such cut is weak.

    Returns:
        The clauses, each stripped and non-empty; ``[]`` when the text has no words.
    """
    return list(_read(text, frozenset(verbs)))


# A task planned again with other inputs (task.input_options) is read once.
@functools.lru_cache(maxsize=32)
def _read(text: str, verbs: frozenset[str]) -> tuple[Clause, ...]:
    masked = masked_quotes(text)
    clauses: list[Clause] = []
    for line in _between(masked, 0, len(masked), _LINE_END):
        for item in _items(masked, *line):
            for sentence in _sentences(masked, *item):
                found = _sentence_clauses(_pieces(text, masked, *sentence), verbs)
                if clauses and len(found) == 1 and found[0].why == _ONLY_VALUES and all(map(_is_value_word, masked_quotes(found[0].text).split())):
                    # A sentence that is only a value ("Is it positive? 'Great battery…'") is the
                    # value of the clause before it.
                    last = clauses[-1]
                    clauses[-1] = replace(
                        last, text=f"{last.text} {found[0].text}", why=joined_reasons(last.why, f"the value {found[0].text!r} is its argument")
                    )
                else:
                    clauses += found
    return tuple(clauses)


def split_task(text: str, verbs: Collection[str] = ()) -> list[str]:
    """The texts of :func:`read_request`'s clauses; ``[text.strip()]`` when nothing cuts it."""
    return [clause.text for clause in read_request(text, verbs)] or [text.strip()]


# Words that open a noun phrase naming a thing by how it is found ("the film that is most popular",
# "whichever series tops the list"): articles and free relative determiners (a closed class).
_NOUN_PHRASE_OPENERS = frozenset({"the", "a", "an", "whichever", "whatever"})
# Words of a head that ask nothing by themselves: the request's preamble, addressing, question words,
# grammar words. A head of only these ("show me", "find") names nothing to get for the thing.
_EMPTY_HEAD_WORDS = (
    _PREAMBLE | _ADDRESSING | _ADDRESSED | _KNOWING | _QUESTION_WORDS | _DETERMINERS | _PREPOSITIONS | _QUANTITIES | _POLITE | _ADVERBS | _PRONOUNS
) | frozenset({"of", "behind", "like", "there", "which", "whose"})


def noun_phrase_cuts(text: str) -> list[tuple[str, str]]:
    """``(head, thing)`` for each noun phrase inside ``text`` that may name the thing its head asks
    about: the text cut before an article or a free relative determiner (:data:`_NOUN_PHRASE_OPENERS`)
    that is not its first word, when the words before it ask for something (a word that is no
    preamble, question or grammar word) and no quoted text is cut: "who directed the film that is most
    popular right now" → ``[("who directed", "the film that is most popular right now")]``; "show me
    the logo of the studio behind the top rated film" → ``("show me the logo of", "the studio behind
    the top rated film")`` and ``("show me the logo of the studio behind", "the top rated film")``.
    In order of the cut, left to right; the thing runs to the end of the text."""
    masked = masked_quotes(text)
    cuts: list[tuple[str, str]] = []
    for match in _WORD.finditer(masked):
        if match.start() == 0 or match.group().lower() not in _NOUN_PHRASE_OPENERS:
            continue
        head, thing = text[: match.start()].strip(" ,;:"), text[match.start() :].strip(" ,;:.?!")
        if thing and set(_words(masked_quotes(head))) - _EMPTY_HEAD_WORDS:
            cuts.append((head, thing))
    return cuts
