"""Near-duplicate tools: two tools a plan could use in each other's place whose texts say the same.

Two tools are near-duplicates when

- their **signatures** are equal (:func:`tool_signature`): the same required states, the same
  produced states, the same parameters (name, type, role, the state each carries), the same return
  type and the same effects. A produced state that no other tool produces and no tool requires is
  the tool's *own result* (catalogs written from an API list each endpoint's result as a state of
  its own: ``ultratool.result.book_flight``); own results count by number, not by token, since no
  later step can tell them apart;
- their **texts** say nearly the same: of the sets of terms of their names, descriptions and
  affordances (lower-cased words, English stop words removed, Snowball-stemmed, as skill search's
  BM25 reads them), one holds the other (the one says nothing the other does not), and their
  Jaccard similarity reaches :data:`NEAR_DUPLICATE_SIMILARITY`. Two tools each with a word of its
  own ("Conference Room Reservation Query Tool", "... Change Tool") do different work a request can
  name; of a pair where only one has words of its own, a request in their shared words cannot choose.

Search then cannot tell them apart, and which one a task gets is a coin toss. The comparison is
lexical (the registry does not embed texts): a pair that says the same in other words
(UltraTool's ``book_ticket``, "Complete the ticket booking process", and ``book_flight``, "Flight
booking tool": Jaccard similarity 0.33, and each has words of its own) is not found.

Pairs are found without comparing every two tools: tools are bucketed by signature, and within a
bucket a tool is compared only with the tools whose terms hold its rarest term (:func:`nested_pairs`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from toolpath.registry.tools import ToolDefinition

#: The Jaccard similarity of two tools' terms from which, with equal signatures and one's terms
#: holding the other's, they are near-duplicates. Measured with ``benchmarks/bench_near_duplicates.py``
#: on the UltraTool catalog of ``benchmarks/taskplan_catalogs.py`` (260 tools, one signature), where
#: the pairs whose terms nest are: 1.0 ``check_flight_seats_availability``/``check_flight_availability``
#: (one description), 0.83 ``cruise_ticket_search``/``cruise_search``, ``table_booking_api``/``book_table``,
#: ``search_repair_provider``/``search_authorized_service_provider`` and ``share_calendar``/
#: ``create_shared_calendar``, 0.86 and 0.75 ``foreign_currency_exchange`` inside
#: ``foreign_currency_purchase`` and ``foreign_currency_sale``, 0.75 ``manage_schedule``/
#: ``schedule_planner`` (the same work, or a general tool whose every word a specific one has); then
#: 0.67 ``travel_camera_rental`` inside ``travel_camera_suggestion`` and ``travel_camera_info``,
#: ``login_equipment`` inside ``login_equipment_check`` (different work). 0.7 lies between. The shipped
#: tabular, chemistry and media catalogs and the TMDB catalog have no such pair (their closest pairs
#: of equal signatures, ``plot_bar``/``plot_line`` 0.54 and ``MovieRecommendation``/``GetSimilarMovie``
#: 0.75, each have words of their own). Without the nesting test, 0.7 would also flag 9 UltraTool
#: pairs, 6 of them of different work (``conference_room_query``/``conference_room_changing`` 0.75).
NEAR_DUPLICATE_SIMILARITY = 0.7


@dataclass(frozen=True)
class NearDuplicate:
    """Two tools with equal signatures whose terms nest and whose Jaccard similarity reaches the threshold;
    ``first`` comes before ``second`` in the order the tools were given."""

    first: ToolDefinition
    second: ToolDefinition
    similarity: float


def own_results(tools: Iterable[ToolDefinition]) -> frozenset[str]:
    """The states exactly one of ``tools`` produces and none requires (each tool's own result)."""
    tools = list(tools)
    producers = Counter(token for tool in tools for token in tool.state_transition.produces)
    required = {token for tool in tools for token in tool.state_transition.requires}
    return frozenset(token for token, count in producers.items() if count == 1 and token not in required)


def tool_signature(tool: ToolDefinition, results: frozenset[str]) -> Hashable:
    """What a plan sees of ``tool``: requires, produces (each of ``results``, the own results of
    :func:`own_results`, counted rather than named), parameters, return type and effects."""
    produces = tool.state_transition.produces
    parameters = frozenset(
        (parameter.python_name, parameter.type, parameter.role, parameter.state, position < len(tool.required_parameters))
        for position, parameter in enumerate(tool.parameters)
    )
    returns = None if tool.return_spec is None else (tool.return_spec.type, tool.return_spec.state in results or tool.return_spec.state)
    return (tool.state_transition.requires, produces - results, len(produces & results), parameters, returns, tool.side_effect)


def _name_words(name: str) -> str:
    """``book_flight`` → ``book flight``, ``getWeather`` → ``get Weather``: a name's words, as
    skill search splits it (``toolpath.kernel.inside.tool_search.name_words``, which the registry may
    not import)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    return re.sub(r"[._\-&/]+", " ", spaced)


def tool_terms(tools: Sequence[ToolDefinition]) -> list[frozenset[str]]:
    """Each tool's terms: the words of its name, description and affordances, lower-cased, English
    stop words removed and Snowball-stemmed (bm25s and PyStemmer, as skill search reads texts)."""
    import bm25s  # 0.4 s to import: only when two tools share a signature
    import Stemmer

    texts = [" ".join([_name_words(tool.name), tool.description, *tool.affordances]) for tool in tools]
    tokenized = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False)
    return [frozenset(terms) for terms in tokenized]


def jaccard(first: frozenset[str], second: frozenset[str]) -> float:
    """``|first ∩ second| / |first ∪ second|``; 0.0 when both are empty."""
    union = len(first | second)
    return len(first & second) / union if union else 0.0


def nested_pairs(term_sets: Sequence[frozenset[str]], threshold: float) -> list[tuple[int, int, float]]:
    """``(i, j, similarity)`` for every ``i < j`` whose sets nest (one holds the other) and whose
    Jaccard similarity (for nested sets, the smaller's size over the larger's) reaches
    ``threshold``; empty sets match nothing.

    A set holding another holds its rarest term, so each set is compared only with the sets holding
    its rarest term: on 10,000 tools of one signature this takes well under a second
    (``benchmarks/bench_near_duplicates.py``), where comparing every two would take minutes."""
    frequency = Counter(term for terms in term_sets for term in terms)
    holders: dict[str, list[int]] = defaultdict(list)
    for index, terms in enumerate(term_sets):
        for term in terms:
            holders[term].append(index)
    pairs = []
    for smaller, terms in enumerate(term_sets):
        if not terms:
            continue
        rarest = min(terms, key=lambda term: (frequency[term], term))
        for larger in holders[rarest]:
            size = len(term_sets[larger])
            # Equal sets are met from both sides: keep the pair once.
            if larger == smaller or size < len(terms) or (size == len(terms) and larger < smaller):
                continue
            if len(terms) >= threshold * size and terms <= term_sets[larger]:
                pairs.append((min(smaller, larger), max(smaller, larger), len(terms) / size))
    return pairs


def near_duplicates(tools: Sequence[ToolDefinition], threshold: float = NEAR_DUPLICATE_SIMILARITY) -> list[NearDuplicate]:
    """Every pair of ``tools`` (the tools loaded together: own results are those of all of them)
    with equal signatures whose terms nest and reach ``threshold`` in Jaccard similarity (see the
    module docstring), in the order of their first tool, then their second."""
    results = own_results(tools)
    buckets: dict[Hashable, list[int]] = defaultdict(list)
    for index, tool in enumerate(tools):
        buckets[tool_signature(tool, results)].append(index)
    shared = [bucket for bucket in buckets.values() if len(bucket) > 1]
    if not shared:
        return []
    members = [index for bucket in shared for index in bucket]
    terms = dict(zip(members, tool_terms([tools[index] for index in members]), strict=True))
    found = []
    for bucket in shared:
        for first, second, similarity in nested_pairs([terms[index] for index in bucket], threshold):
            found.append((bucket[first], bucket[second], similarity))
    return [NearDuplicate(tools[first], tools[second], similarity) for first, second, similarity in sorted(found)]
