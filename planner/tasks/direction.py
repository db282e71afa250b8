"""Direction and modality in goal choice (issue 53): the kinds a part names as what it starts from
and what it asks for, weighed against each candidate's ``requires`` and ``produces``.

Skill search is blind to direction: "turn the image into text" and "turn text into an image" embed
almost alike, so a tool of the reverse direction (text to image) can outscore the forward one (OCR)
by 0.2. The words say the direction, in the catalog's own terms:

- **Kinds** are the graph's input states (``State.input``: what a user can hold and give, a
  medium such as ``media.image``), when it has at least two: one kind tells no direction. A word
  names a kind when it is a word of that state's token ("image" of ``media.image``) or, failing
  that, of that state's description and affordances and of no other kind's ("photo", "recording",
  "transcript"); a word several kinds use ("file", "page") names none. Words are compared as skill
  search compares them (Snowball stems, :func:`toolpath.kernel.inside.tool_search.bm25_terms`).
- **A file name** is of the kind whose tools write files with its suffix (an output parameter's
  suffix, :func:`toolpath.planner.tasks.arguments.output_suffixes`, of a tool producing that one
  kind: ``speech.wav`` → ``media.audio``), else of the kind its media type names (IANA media types,
  Python's built-in :mod:`mimetypes` table, not the machine's: ``talk.mp3`` is ``audio/mpeg``, so
  the kind whose words hold "mpeg" or else "audio"). A URL reads as the word "url".
- **Roles** come from grammar words, not a domain's: a kind after "from", "of", "out of" (or "in",
  "on" before a definite determiner or a file: "the text in the image", not "in a calm voice") is
  what the part starts from; after "into", "as" (or "to" before a determiner, a file or a kind:
  "convert the text to speech", not "I need to") what it asks for. The kinds of the part's head
  (its verb's object, before any of those words) are what it starts from when it names what it
  asks for ("turn *the image* into text"), what it asks for when it names what it starts from
  ("extract *the text* from the image"), and otherwise what the verb's use in the catalog's own
  affordances and descriptions says: a verb whose object there is always a kind the tool makes
  ("make a voice recording of a text", "create a clip") makes its object; one whose object is
  always a kind the tool reads ("transcribe a recording") reads it; any other verb says nothing.

A candidate **contradicts** the words when it makes a kind and none of the kinds they ask for, or
when its tool (for a state, the tool its plan makes it with) reads kinds of which none is named
nor can be made from a named one (through tools that read something: a generator reading nothing
makes anything from anything); it **agrees** when it contradicts nothing and makes a kind asked
for, or reads a kind named (or what one tool makes of one: speech_to_text for a video), and how well
is its :attr:`Direction.strength`. A candidate loses to every other when one with a plan that serves
the named kinds better matches within :data:`DIRECTION_MARGIN` of it: a reverse-direction tool loses
to the forward one at similar similarity ("extract the text from talk.mp3": OCR reads an image, which
nothing makes from audio), and a tool that only makes the kind asked for loses to one that also reads
the kind named (summarize_text to speech_to_text). Nothing is pushed past a clearly better match: with
no better-serving candidate near it, a candidate keeps its place.
:func:`toolpath.planner.tasks.goals.choose_goal` ranks by this right after the test for a tool the
task names, and reports the reading in its choice's ``direction`` (``--json``: a part's
``direction``; a candidate passed over says why it lost). A part whose one file is of a kind
(``talk.mp3``) is planned from that kind, held with the file as its input
(:meth:`toolpath.planner.tasks.matching.PartMatcher.choose`).
"""

from __future__ import annotations

import functools
import math
import mimetypes
import os
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from toolpath.kernel.inside.tool_search import bm25_terms, name_words
from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.search.skills import SkillHit
from toolpath.planner.tasks.clauses import action_words, head_words, is_file_name, masked_quotes
from toolpath.registry import ToolDefinition

#: How far (in cosine similarity) below a candidate an agreeing one that serves the named kinds better
#: may match and still win. Set by hand on the hand-written direction requests of
#: ``benchmarks/requests_cases.yaml`` and their paraphrases in ``tests/test_tool_direction.py``, over the
#: type-level media catalog, searched without held states: where the best hit was of the reverse
#: direction, the forward one matched 0.002 to 0.245 below it ("turn the image into text": text_to_image
#: 0.90, OCR 0.75; "extract the text from talk.mp3": OCR 0.73, speech_to_text 0.49), because a phrasing
#: and its reverse embed almost alike. One lay beyond, and keeps the reverse tool: "turn this caption
#: into a picture" (image_captioning 0.82, text_to_image 0.56: "caption" names the captioning tool, and
#: no kind). A wider margin would let the direction words overrule ever clearer matches.
DIRECTION_MARGIN = 0.25

Verdict = Literal["agrees", "contradicts", "neutral"]

# Grammar words (English prepositions), as clauses.py keeps its own: what follows them is a kind's role.
_STARTS_FROM = frozenset({"from", "of"})
_STARTS_FROM_DEFINITE = frozenset({"in", "on", "inside", "within"})
_ASKS_FOR = frozenset({"into", "as"})
_ASKS_FOR_BEFORE_OBJECT = frozenset({"to"})
#: Words after which what follows has no role here ("with a deep voice", "for a friend", "so I can ...").
_OTHER = frozenset(
    {"with", "for", "by", "about", "at", "using", "via", "like", "than", "without", "so", "because", "which", "who", "where", "when", "while"}
    | {"then", "but", "if", "after", "before", "until", "per", "through"}
)
_DEFINITE = frozenset({"the", "this", "that", "these", "those", "my", "our", "your", "his", "her", "their", "its"})
_DETERMINERS = _DEFINITE | frozenset({"a", "an", "some", "each", "every", "any"})
_TOKEN = re.compile(
    r"(?P<url>\b[a-z][a-z0-9+.-]*://\S+[^\s.,;:!?)])|(?P<file>[\w/.~-]*\w\.[A-Za-z][A-Za-z0-9]{1,6})(?![\w/-])|(?P<word>[^\W\d_]+(?:['-][^\W\d_]+)*)"
)
_QUOTED_SPAN = re.compile(r"(?P<open>[\"'\u201c\u2018\u00ab])(?P<inside>_+)[\"'\u201d\u2019\u00bb]")
#: Python's built-in media type table (not the machine's ``mime.types``: the same on every machine).
_MEDIA_TYPES = mimetypes.MimeTypes(filenames=())


@dataclass(frozen=True)
class KindVocabulary:
    """What the graph's own texts say about its kinds (see the module docstring).

    Attributes:
        kinds: the input states, when at least two; empty otherwise (then nothing is read).
        token_terms: a stemmed word of one kind's token → that kind.
        described_terms: a stemmed word of one kind's description or affordances, and of no other
            kind's → that kind.
        suffixes: a file suffix (lower case, with the dot) the tools producing one kind write → that kind.
        verbs: a stemmed verb → ``"makes"`` or ``"reads"``: the role of its object in the catalog's
            affordances and descriptions.
        upstream: for each kind, the kinds it can be made from through tools that read something.
        made_from: for each kind, the kinds one tool makes it from.
    """

    kinds: frozenset[str]
    token_terms: Mapping[str, str] = field(default_factory=dict)
    described_terms: Mapping[str, str] = field(default_factory=dict)
    suffixes: Mapping[str, str] = field(default_factory=dict)
    verbs: Mapping[str, str] = field(default_factory=dict)
    upstream: Mapping[str, frozenset[str]] = field(default_factory=dict)
    made_from: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class KindsNamed:
    """The kinds a part's words name: ``(kind, words)`` pairs of what it starts from and what it asks for."""

    starts_from: tuple[tuple[str, str], ...] = ()
    asks_for: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.starts_from or self.asks_for)

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(kind for kind, _ in self.starts_from)

    @property
    def outputs(self) -> frozenset[str]:
        return frozenset(kind for kind, _ in self.asks_for)

    def describe(self) -> str:
        """``"the words start from media.image ('the image') and ask for media.text ('into text')"``."""

        def listed(pairs: tuple[tuple[str, str], ...]) -> str:
            return ", ".join(f"{kind} ({words!r})" for kind, words in pairs)

        said = []
        if self.starts_from:
            said.append(f"start from {listed(self.starts_from)}")
        if self.asks_for:
            said.append(f"ask for {listed(self.asks_for)}")
        return "the words " + " and ".join(said)


@dataclass(frozen=True)
class Direction:
    """A candidate's direction against the kinds named: its verdict, why in words, and how well it
    serves them (``strength``: 2 when it makes a kind asked for, plus 2 when its tool reads a kind
    started from or 1 when it reads what one tool makes of one; -1 when it contradicts them)."""

    verdict: Verdict
    why: str = ""
    strength: int = 0


_VOCABULARIES: weakref.WeakKeyDictionary[StateGraph, KindVocabulary] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=1 << 16)
def _terms(text: str) -> tuple[str, ...]:
    """``text``'s BM25 terms; remembered, since a catalog's phrases repeat the same words in every
    tool (a 10,000-tool catalog's vocabulary asked for 72,000 words' terms, 1.4 s one by one)."""
    return tuple(bm25_terms([text])[0]) if text else ()


def _unique(owners: Mapping[str, set[str]]) -> dict[str, str]:
    return {term: next(iter(kinds)) for term, kinds in owners.items() if len(kinds) == 1}


def vocabulary(graph: StateGraph) -> KindVocabulary:
    """The graph's kinds and the words, suffixes and verbs that name them (module docstring); cached per graph."""
    if graph in _VOCABULARIES:
        return _VOCABULARIES[graph]
    kinds = frozenset(token for token, state in graph.states.items() if state.input)
    if len(kinds) < 2:
        _VOCABULARIES[graph] = KindVocabulary(frozenset())
        return _VOCABULARIES[graph]
    token_owners: dict[str, set[str]] = {}
    described_owners: dict[str, set[str]] = {}
    for kind in kinds:
        state = graph.states[kind]
        for term in _terms(name_words(kind.rpartition(".")[2])):
            token_owners.setdefault(term, set()).add(kind)
        for text in (state.description, *state.affordances):
            for term in _terms(text):
                described_owners.setdefault(term, set()).add(kind)
    token_terms = _unique(token_owners)
    described_terms = {term: kind for term, kind in _unique(described_owners).items() if term not in token_owners}
    partial = KindVocabulary(kinds, token_terms, described_terms)
    suffix_owners: dict[str, set[str]] = {}
    from toolpath.planner.tasks.arguments import output_suffixes  # arguments read parts, which read goals, which read this

    for tool in graph.registry:
        made = tool.state_transition.produces & kinds
        if len(made) == 1:
            for parameter in tool.output_parameters:
                for suffix in output_suffixes(parameter):
                    suffix_owners.setdefault(suffix, set()).add(next(iter(made)))
    partial = KindVocabulary(kinds, token_terms, described_terms, _unique(suffix_owners))
    votes: dict[str, set[str]] = {}
    for tool in graph.registry:
        for phrase in (*tool.affordances, tool.description):
            head = head_words(phrase)
            if len(head) < 2:
                continue
            verb = _terms(head[0])
            named = {kind for kind, _ in _phrase_kinds(partial, [(word, None) for word in head[1:]])}
            if not verb or not named:
                continue
            requires, produces = tool.state_transition.requires, tool.state_transition.produces
            role = "makes" if named <= produces - requires else "reads" if named <= requires - produces else "neither"
            votes.setdefault(verb[0], set()).add(role)
    verbs = {verb: next(iter(roles)) for verb, roles in votes.items() if len(roles) == 1 and roles != {"neither"}}
    sources: dict[str, set[str]] = {kind: set() for kind in kinds}
    for tool in graph.registry:  # one pass: a pass per kind took 6.9 s at 100,000 tools
        read = tool.state_transition.requires & kinds
        if read:
            for kind in tool.state_transition.produces & kinds:
                sources[kind] |= read
    made_from = {kind: frozenset(read) for kind, read in sources.items()}
    _VOCABULARIES[graph] = KindVocabulary(kinds, token_terms, described_terms, partial.suffixes, verbs, _upstream(graph, kinds), made_from)
    return _VOCABULARIES[graph]


def _upstream(graph: StateGraph, kinds: frozenset[str]) -> dict[str, frozenset[str]]:
    """For each kind, the kinds from which tools that read something can make it (itself included).

    Each kind's reach is the planner's relaxed reachability from it alone, tools that read nothing
    left out: one pass over the tools it reaches, where a fixpoint over every tool per kind took
    1.9 s at 10,000 tools."""
    task = graph.delete_free_task
    reading_nothing = frozenset(task.requiring_nothing)
    numbers = {kind: task.state_index.get(kind) for kind in kinds}
    reaches: dict[str, set[str]] = {}
    for start in kinds:
        if numbers[start] is None:  # no tool reads or makes it
            reaches[start] = {start}
            continue
        cost = task.relaxed_costs(frozenset([numbers[start]]), reading_nothing).value
        reaches[start] = {kind for kind, number in numbers.items() if kind == start or (number is not None and cost[number] < math.inf)}
    return {kind: frozenset(start for start in kinds if kind in reaches[start]) for kind in kinds}


def file_kind(words: KindVocabulary, name: str) -> str | None:
    """The kind of the file ``name`` (module docstring), or ``None`` when nothing tells."""
    suffix = os.path.splitext(name)[1].lower()
    if suffix in words.suffixes:
        return words.suffixes[suffix]
    media_type, _ = _MEDIA_TYPES.guess_type(f"file{suffix}")
    if media_type is None:
        return None
    major, _, minor = media_type.partition("/")
    for part in (minor, major):  # the subtype is the more specific ("text/csv": a kind named CSV first)
        kinds = _word_kinds(words, part)
        if len(kinds) == 1:
            return next(iter(kinds))
    return None


def named_file_kind(graph: StateGraph, name: str) -> str | None:
    """The kind (an input state) of the file ``name`` in ``graph`` (:func:`file_kind`): ``talk.mp3``
    → ``media.audio``; ``None`` when the graph has fewer than two kinds or nothing tells."""
    words = vocabulary(graph)
    return file_kind(words, name) if words.kinds and is_file_name(name) else None


def _word_kinds(words: KindVocabulary, text: str) -> set[str]:
    terms = _terms(text)
    named = {words.token_terms[term] for term in terms if term in words.token_terms}
    return named or {words.described_terms[term] for term in terms if term in words.described_terms}


def _phrase_kinds(words: KindVocabulary, phrase: Sequence[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """The kinds a phrase names, each with the words that named it: a file's own kind; otherwise the
    token words' kinds when it has any ("an audio clip": audio, though "clip" is a video's word),
    else the described words' kind when they name one."""
    found: list[tuple[str, str]] = [(kind, word) for word, kind in phrase if kind is not None]
    plain = [word for word, kind in phrase if kind is None]
    by_token = [(words.token_terms[term], word) for word in plain for term in _terms(word) if term in words.token_terms]
    if by_token:
        return found + by_token
    described = [(words.described_terms[term], word) for word in plain for term in _terms(word) if term in words.described_terms]
    if len({kind for kind, _ in described}) == 1:
        return found + described
    return found


def _tokens(words: KindVocabulary, text: str) -> list[tuple[str, str | None]]:
    """``(word, kind)`` for each word of ``text`` (lower case; a file or URL as its own words with the
    kind it is of); the inside of a quote is left out unless it is a file name."""
    masked = masked_quotes(text)
    tokens: list[tuple[str, str | None]] = []
    position = 0
    for quote in [*_QUOTED_SPAN.finditer(masked), None]:
        end = quote.start() if quote is not None else len(masked)
        for match in _TOKEN.finditer(masked, position, end):
            if match.group("url"):
                tokens.append((match.group(), _single(_word_kinds(words, "url"))))
            elif match.group("file") and is_file_name(match.group("file")):
                tokens.append((match.group(), file_kind(words, match.group())))
            elif match.group("word"):
                tokens.append((match.group().lower(), None))
        if quote is not None:
            inside = text[quote.start("inside") : quote.end("inside")]
            if is_file_name(inside):
                tokens.append((inside, file_kind(words, inside)))
            position = quote.end()
    return tokens


def _single(kinds: set[str]) -> str | None:
    return next(iter(kinds)) if len(kinds) == 1 else None


def kinds_named(graph: StateGraph, text: str) -> KindsNamed:
    """The kinds ``text`` (one part's words) names as what it starts from and what it asks for
    (module docstring); empty when the graph has fewer than two kinds or the words name none."""
    words = vocabulary(graph)
    if not words.kinds:
        return KindsNamed()
    tokens = _tokens(words, text)
    head = head_words(" ".join(word for word, kind in tokens if kind is None))
    start = next((position for position, (word, _) in enumerate(tokens) if head and word == head[0]), 0)
    role = "head"
    phrases: dict[str, list[tuple[str, str | None]]] = {"head": [], "from": [], "for": []}
    for position in range(start, len(tokens)):
        word, kind = tokens[position]
        following = tokens[position + 1] if position + 1 < len(tokens) else ("", None)
        if kind is None and word in _STARTS_FROM:
            role = "from"
        elif kind is None and word in _STARTS_FROM_DEFINITE and (following[0] in _DEFINITE or following[1] is not None):
            role = "from"
        elif kind is None and word in _ASKS_FOR:
            role = "for"
        elif (
            kind is None and word in _ASKS_FOR_BEFORE_OBJECT and (following[0] in _DETERMINERS or following[1] is not None or _word_kinds(words, following[0]))
        ):
            role = "for"
        elif kind is None and (word in _OTHER or word in _STARTS_FROM_DEFINITE or word in _ASKS_FOR_BEFORE_OBJECT):
            role = "other"
        else:
            if role != "other":
                phrases[role].append((word, kind))
            continue
        if role != "other":
            phrases[role].append(("", None))  # a phrase ends: its words are read apart from the next one's
    starts_from = _all_phrase_kinds(words, phrases["from"])
    asks_for = _all_phrase_kinds(words, phrases["for"])
    # A head after a determiner has no verb: it is what the words ask for ("I want an audio version of ...").
    noun_head = 0 < start and tokens[start - 1][0] in _DETERMINERS
    # The verb itself names no kind ("draw" is a word of media.image's description: "a drawing").
    object_words = phrases["head"][1:] if phrases["head"] and phrases["head"][0][0] in action_words(graph) else phrases["head"]
    head_kinds = _phrase_kinds(words, [token for token in object_words if token[0]])
    verb = _terms(head[0]) if head else ()
    verb_role = words.verbs.get(verb[0]) if verb else None
    if head_kinds:
        if verb_role == "reads":
            starts_from = head_kinds + starts_from
        elif verb_role == "makes" or noun_head:
            asks_for = head_kinds + asks_for
        elif asks_for:
            starts_from = head_kinds + starts_from
        elif starts_from:
            # "the text of the article": a kind named as both is no direction ("read the text of the article aloud").
            asks_for = [(kind, said) for kind, said in head_kinds if kind not in {started for started, _ in starts_from}]
    return KindsNamed(_first_each(starts_from), _first_each(asks_for))


def _all_phrase_kinds(words: KindVocabulary, tokens: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """The kinds of each phrase in ``tokens`` (phrases end at an empty word)."""
    found: list[tuple[str, str]] = []
    phrase: list[tuple[str, str | None]] = []
    for token in [*tokens, ("", None)]:
        if token[0]:
            phrase.append(token)
        elif phrase:
            found += _phrase_kinds(words, phrase)
            phrase = []
    return found


def _first_each(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    seen: dict[str, str] = {}
    for kind, words in pairs:
        seen.setdefault(kind, words)
    return tuple(seen.items())


def _goal_tool(graph: StateGraph, hit: SkillHit) -> ToolDefinition | None:
    """The tool a hit runs last: its own tool, or the one its plan makes its state with."""
    if hit.plan is not None and hit.plan.steps:
        return hit.plan.steps[-1].tool
    if hit.kind == "tool":
        try:
            return graph.resolve_tool(hit.qualified_name)
        except LookupError:
            return None
    return None


def direction_of(graph: StateGraph, named: KindsNamed, hit: SkillHit) -> Direction:
    """Whether ``hit`` agrees with, contradicts or says nothing of the kinds ``named`` (module docstring)."""
    words = vocabulary(graph)
    if not named or not words.kinds:
        return Direction("neutral")
    makes = hit.states & words.kinds
    tool = _goal_tool(graph, hit)
    reads = tool.state_transition.requires & words.kinds if tool is not None else frozenset()
    agrees: list[str] = []
    strength = 0
    if makes and named.outputs:
        if not makes & named.outputs:
            return Direction("contradicts", f"it makes {', '.join(sorted(makes))}, and the words ask for {', '.join(sorted(named.outputs))}", -1)
        agrees.append(f"it makes {', '.join(sorted(makes & named.outputs))}")
        strength += 2
    if reads and named.inputs:
        if reads & named.inputs:
            agrees.append(f"{tool.name} reads {', '.join(sorted(reads & named.inputs))}")
            strength += 2
        elif any(named.inputs & words.made_from[kind] for kind in reads):
            agrees.append(f"{tool.name} reads what one tool makes of {', '.join(sorted(named.inputs))}")
            strength += 1
        elif not any(named.inputs & words.upstream[kind] for kind in reads):
            why = f"{tool.name} reads {', '.join(sorted(reads))}, which cannot be made from {', '.join(sorted(named.inputs))} as the words start from"
            return Direction("contradicts", why, -1)
    return Direction("agrees", " and ".join(agrees), strength) if agrees else Direction("neutral")


def _key(hit: SkillHit) -> tuple[str, str | None, str]:
    return (hit.kind, hit.server, hit.name)


def _label(hit: SkillHit) -> str:
    return f"{hit.kind} {hit.qualified_name}"


@dataclass(frozen=True)
class DirectionReading:
    """The kinds one part names and what they decide among its candidates.

    Attributes:
        named: the kinds read from the words.
        verdicts: each hit's direction, by ``(kind, server, name)``.
        demoted: the hits (same keys) that lose to every other, each with why in words: a candidate
            with a plan serving more of the named kinds (:attr:`Direction.strength`) matches within
            :data:`DIRECTION_MARGIN` of them.
    """

    named: KindsNamed
    verdicts: Mapping[tuple[str, str | None, str], Direction] = field(default_factory=dict)
    demoted: Mapping[tuple[str, str | None, str], str] = field(default_factory=dict)

    def is_demoted(self, hit: SkillHit) -> bool:
        return _key(hit) in self.demoted

    def verdict(self, hit: SkillHit) -> Direction:
        return self.verdicts.get(_key(hit), Direction("neutral"))

    def lost_because(self, hit: SkillHit) -> str:
        """Why a demoted hit lost, in words (empty for one not demoted)."""
        return self.demoted.get(_key(hit), "")

    def explanation(self, chosen: SkillHit) -> str:
        """What the words name and how the chosen hit stands to it; empty when they name no kind."""
        if not self.named:
            return ""
        verdict = self.verdict(chosen)
        if verdict.verdict == "agrees":
            stands = f"the chosen goal agrees: {verdict.why}"
        elif verdict.verdict == "contradicts":
            stands = f"the chosen goal contradicts them ({verdict.why}), but no candidate that agrees matches within {DIRECTION_MARGIN:.2f} of it"
        else:
            stands = "the chosen goal neither makes nor reads the kinds named"
        passed = sorted(f"{hit_kind} {server}.{name}" if hit_kind == "tool" and server else f"{hit_kind} {name}" for hit_kind, server, name in self.demoted)
        demoted = f"; passed over for their direction: {', '.join(passed)}" if passed else ""
        return f"{self.named.describe()}; {stands}{demoted}"


def read_direction(graph: StateGraph, text: str, hits: Sequence[SkillHit], planned: Sequence[SkillHit], lexical_margin: float) -> DirectionReading:
    """The kinds ``text`` names, each hit's direction, and the hits demoted: one is demoted when a
    hit of ``planned`` (the candidate hits that have a plan) serves more of the named kinds and has a
    cosine similarity at most :data:`DIRECTION_MARGIN` below its own (with BM25 only: a BM25 score
    within ``lexical_margin`` of its own or above). Of those, the best served is named in the reason."""
    named = kinds_named(graph, text)
    if not named:
        return DirectionReading(named)
    verdicts = {_key(hit): direction_of(graph, named, hit) for hit in [*hits, *planned]}

    def near(forward: SkillHit, other: SkillHit) -> bool:
        if forward.similarity is not None and other.similarity is not None:
            return forward.similarity >= other.similarity - DIRECTION_MARGIN
        return forward.lexical >= (1 - lexical_margin) * other.lexical

    demoted: dict[tuple[str, str | None, str], str] = {}
    for hit in [*hits, *planned]:
        own = verdicts[_key(hit)]
        better = [forward for forward in planned if verdicts[_key(forward)].strength > own.strength and near(forward, hit)]
        if not better:
            continue
        best = max(better, key=lambda forward: verdicts[_key(forward)].strength)
        if own.verdict == "contradicts":
            demoted[_key(hit)] = f"its direction contradicts the words: {own.why}"
        else:
            served = f" ({own.why})" if own.why else ""
            demoted[_key(hit)] = f"{_label(best)} serves more of the kinds the words name{served}: {verdicts[_key(best)].why}"
    return DirectionReading(named, verdicts, demoted)
