"""Matching one request's parts: each action's goal by skill search, facts read, neighbours joined.

"identify the functional groups of this molecule and check Lipinski's rule of five" has two parts.
Free text is read into clauses once (:class:`toolpath.planner.tasks.request.TaskRequest`): actions,
facts and context. A **fact** ("I have an image file 'a.jpg'") runs nothing: when it names an input
state of the catalogs, that state is held, and a single value it quotes ("'a.jpg'") is the input of
the one parameter that carries the state. **Context** ("after booking the flight") runs nothing
either. Each **action** is a part, searched on its own; an action cut off weakly (a bare "and" or
comma before words that need not start a clause) is a part of its own only if it matches a skill by
:data:`FRAGMENT_MIN_SCORE`, and is otherwise words of its neighbour ("donors *and acceptors*", "in the
city center"); neighbours that chose the same goal are one part. An agent that already decomposed its
task passes its steps instead, and they are taken as they are.

Each part gets its goal from :func:`toolpath.planner.tasks.goals.choose_goal`: a state to reach, or a
tool that must run (a tool hit, or a tool the part names). The matched parts are then planned jointly
(:mod:`toolpath.planner.tasks.joint_planning`).

Parts are matched in order, and a value one action names is the user's for the parts after it: "load
sales.csv and plot revenue by month" plots the table of sales.csv, and "... and describe it" describes
it (:attr:`PartMatcher.carried`). A part that names a value of its own works on that one instead.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolpath.planner.planning.graph import StateGraph
from toolpath.planner.planning.inputs import InputError, input_for
from toolpath.planner.planning.plans import NoPlanError, qualified_name
from toolpath.planner.search.skills import SkillHit
from toolpath.planner.tasks.arguments import free_text_parameters
from toolpath.planner.tasks.clauses import (
    Clause,
    is_file_name,
    joined_reasons,
    leading_verb,
    names_destination,
    quoted_values,
    source_file_names,
    source_values,
    without_file_names,
    without_file_phrases,
    without_names,
    without_quotes,
)
from toolpath.planner.tasks.direction import named_file_kind
from toolpath.planner.tasks.goals import (
    MIN_SCORE,
    WORK_MARGIN,
    GoalChoice,
    GoalSearch,
    NeitherMeantError,
    NoMatchingSkillError,
    UnclearEffectError,
    UnservedWordsError,
    choose_goal,
    unreachable_because,
)
from toolpath.planner.tasks.named_kinds import read_name_kind
from toolpath.planner.tasks.parts import Overridden, PartMatch, inputs_with_facts, refuse_competing_values
from toolpath.planner.tasks.probes import readable_file, run_probe
from toolpath.planner.tasks.request import TaskRequest
from toolpath.planner.tasks.sources import read_source
from toolpath.planner.tasks.task_spans import traced_parts
from toolpath.registry import ToolDefinition, ToolParameter

#: The cosine similarity a fragment of free text cut off at a bare comma needs to be a part of its
#: own; a weaker one ("in the city center") belongs to the part before it. Set on the UltraTool requests outside
#: the paper's test ids (``benchmarks/bench_taskplan.py``); a whole task needs only ``MIN_SCORE``.
FRAGMENT_MIN_SCORE = 0.6

#: Characters past which a part is not matched again as fragments join it: it keeps its goal. The
#: embedding model reads the first 256 word pieces of a text (about 1,000 characters of English), so
#: matching a longer part again would mostly repeat its first answer, while costing a full-length
#: embedding for every fragment that joins (issue 30: "check Lipinski's rule of five and " x 50).
LONG_PART_CHARS = 1_000


class PartMatcher:
    """The parts of one request, matched: one per planning, holding what every part's match reads.

    On creation the request's facts are read: the input states they name are held, and their values
    are inputs (the caller's own inputs win). ``session_held`` states (what an agent session holds
    from earlier tasks) stay held unless the inputs replace them (:func:`held_unless_replaced`); the
    request's own held states always stay; input states the inputs give
    (:meth:`toolpath.planner.planning.graph.StateGraph.input_states_given`) are held.

    Args:
        search: the graph, index, cell writer and budget of the planning
            (:class:`toolpath.planner.tasks.goals.GoalSearch`).
        request: the checked request with its clauses.
        session_held: states an agent session holds from earlier tasks.

    Attributes:
        facts: the facts' parts by clause position.
        inputs: the request's inputs with the values its facts give.
        held: the states every part is planned from (less, once a part names a value of its own,
            the session's states that value replaces: :meth:`_choose_with`).
        session_held: those of ``held`` that only the session holds (not the request, its facts or
            its inputs).
        carried: the values the actions matched so far named (their own value, as inputs), for the
            parts after them that name none; the request's inputs and facts win over them.
        carried_held: the input states those values hold.

    Raises:
        InputError: two facts give different values for one input (:func:`toolpath.planner.tasks.parts.refuse_competing_values`).
    """

    def __init__(self, search: GoalSearch, request: TaskRequest, session_held: Collection[str] = ()):
        self.search = search
        self.graph: StateGraph = search.graph
        self.request = request
        self.facts = {position: self._fact(clause) for position, clause in enumerate(request.clauses) if clause.kind == "fact"}
        refuse_competing_values(list(self.facts.values()), request.inputs)
        self.inputs = inputs_with_facts(self.facts.values(), request.inputs)
        held = request.held.union(*(fact.holds for fact in self.facts.values())) | self.graph.input_states_given(self.inputs)
        kept = held_unless_replaced(self.graph, session_held, self.inputs)
        self.held = held | kept
        self.session_held = kept - held
        self.carried: dict[str, str] = {}
        self.carried_held: frozenset[str] = frozenset()
        self._found: dict[tuple, PartMatch] = {}

    @traced_parts
    def match(self) -> tuple[PartMatch, ...]:
        """A goal for each action, in order; a text said again ("take a nap, take a nap") is matched once.

        An agent's own steps are kept as given. Free text is merged: a weak action (cut off by a
        bare "and" or comma before words that need not start a clause) is a part of its own only
        when it matches a skill by :data:`FRAGMENT_MIN_SCORE`; otherwise its words belong to the
        action before it: an argument after a comma ("book a room for two nights, in the city
        center") leaves that action's goal as it was, and the rest of a noun phrase after "and"
        ("make a black *and white image*") is matched again with it. Neighbouring actions that
        chose the same goal are one part. Every other action is a part, and one that matches
        nothing is reported as unmatched, never dropped; a fact or context clause is a part that
        runs nothing, and no action joins across it. When no action matches, the whole text is
        tried as one part.

        Raises:
            NoMatchingSkillError, NoPlanError: a one-part task (or the whole text) matches nothing.
            InputError: two parts give different values for one input.
            PlanningTimeout, PlanningCancelled: from the search's budget, checked before each match.
        """
        clauses = self.request.clauses
        if len(clauses) == 1:
            matches = [self.choose(clauses[0].text)]
        elif self.request.free_text:
            matches = self._merged()
        else:
            matches = [self._matched(clause.text) for clause in clauses]
        if self.request.free_text:
            matches = [self._sourced(match) for match in matches]
        if all(match.choice is None for match in matches if match.kind == "action"):
            matches = [self.choose(self.request.text)]  # raises when nothing serves it
        refuse_competing_values(matches, self.request.inputs)
        return tuple(matches)

    def _sourced(self, match: PartMatch) -> PartMatch:
        """``match``, or, when its words ask for something of a thing they name by how it is found
        ("who directed the film that is most popular right now"), the part read so: the head's goal,
        planned from what the source's plan gives (:func:`toolpath.planner.tasks.sources.read_source`);
        or, when it names a thing whose kind its words give ("pictures of Tilda Swinton"), its goal
        chosen among what that kind's lookup leads to (:func:`toolpath.planner.tasks.named_kinds.read_name_kind`)."""
        if match.kind != "action":
            return match
        return read_source(self.search, match, self.inputs, self.held, self.choose) or read_name_kind(self.search, match, self.inputs, self.held) or match

    def _matched(self, text: str, min_score: float = MIN_SCORE, why: str = "", query: str = "") -> PartMatch:
        """:meth:`choose`, once per text, query, score and values carried; what matches nothing is an
        unmatched part, with its closest candidates. A value the part names is carried to the parts after it."""
        self.search.budget.check()
        key = (text, query, min_score, self.held, self.carried_held, tuple(sorted(self.carried.items())))
        if key not in self._found:
            try:
                self._found[key] = self.choose(text, min_score, query)
            except (NoMatchingSkillError, NoPlanError) as error:
                # Its reason, in no interface's options: a part's problem is reported to every interface alike.
                self._found[key] = PartMatch(
                    text, None, error.reason, unclear=error if isinstance(error, UnclearEffectError) else None, closest=_closest(error)
                )
        match = self._found[key]
        self._carry(match)
        return replace(match, why=joined_reasons(why, match.why))

    def _carry(self, match: PartMatch) -> None:
        """Keep the values an action names (and the input states they hold) for the parts after it."""
        if match.kind != "action" or match.choice is None:
            return
        self.carried_held |= match.holds
        for name, value in match.values:
            if name not in self.inputs:
                self.carried.setdefault(name, value)

    def _merged(self) -> list[PartMatch]:
        """The free text's clauses as parts, neighbours joined (see :meth:`match`)."""
        threshold = FRAGMENT_MIN_SCORE  # read at each planning: benchmarks/bench_taskplan.py --tune sets it
        matches: list[PartMatch] = []
        last: Clause | None = None  # the clause the last action part ends with
        for position, clause in enumerate(self.request.clauses):
            if clause.kind != "action":
                matches.append(self.facts.get(position) or PartMatch(clause.text, None, kind=clause.kind, why=clause.why))
                continue
            previous = matches[-1] if matches and matches[-1].kind == "action" else None
            weak = clause.weak and previous is not None
            choice_named = _choice_named(previous, clause.text) if weak and previous is not None else None
            if choice_named is None and not weak and previous is not None:
                choice_named = _completes(previous, clause)
            if choice_named is not None and previous is not None:
                # "merge them on region, keeping all rows of both": the words choose a value of the
                # part before's tool (join's how), an argument of that part, not a part of their own.
                why = joined_reasons(previous.why, f"{clause.text!r} joined it: it names a choice of its {choice_named}")
                matches[-1] = replace(previous, text=f"{previous.text}{clause.joiner}{clause.text}", why=why)
                last = clause
                continue
            match = self._matched(clause.text, threshold if weak else MIN_SCORE, clause.why, clause.query)
            if match.choice is None and weak and previous is not None:
                glued_text = f"{previous.text}{clause.joiner}{clause.text}"
                why = joined_reasons(
                    previous.why, f"{clause.text!r} joined it: cut off by {clause.joiner.strip() or 'a space'!r}, it matches no skill by {threshold} on its own"
                )
                if previous.choice is not None and len(previous.text) < LONG_PART_CHARS:
                    glued = self._matched(glued_text, why=why)
                    # The rest of a noun phrase completes the action's words: its goal is the whole's.
                    # An argument after a comma leaves the goal as it was (see LONG_PART_CHARS too).
                    noun_phrase = clause.joiner.strip(" ,").lower() == "and"
                    keep = glued.choice is not None and (noun_phrase or (glued.goal == previous.goal and glued.tool == previous.tool))
                    matches[-1] = _absorbing(glued, previous) if keep else replace(previous, text=glued_text, why=why)
                else:
                    matches[-1] = replace(previous, text=glued_text, why=why)
                last = clause
                continue
            # The same verb again with other words asks for the operation twice ("translate it into
            # German, and translate it into Spanish"): two parts, even with one goal.
            repeated = last is not None and not clause.weak and leading_verb(last.text) == leading_verb(clause.text) != "" and last.text != clause.text
            if (
                match.choice is not None
                and previous is not None
                and not repeated
                and (previous.goal, previous.tool) != (match.goal, match.tool)
                and _serves(previous, match)
            ):
                # "an audio version of this story, narrated with a deep voice": what these words ask
                # for, the action before them already does.
                why = joined_reasons(previous.why, f"{clause.text!r} joined it: its goal is on that part's plan")
                matches[-1] = replace(previous, text=f"{previous.text}{clause.joiner}{clause.text}", why=why)
                last = clause
                continue
            if match.choice is not None and previous is not None and previous.goal == match.goal and previous.tool == match.tool and not repeated:
                # The same goal said twice ("is it drug-like? check Lipinski's rule"), or two verbs
                # that share an object and do one thing ("find and summarize the news"): one part.
                why = joined_reasons(previous.why, f"{clause.text!r} chose the same goal: one part")
                together = last.together if last is not None and last.together else f"{previous.text}{clause.joiner}{clause.text}"
                if len(previous.text) >= LONG_PART_CHARS or previous.text.endswith(clause.text):
                    # Long (see LONG_PART_CHARS), or the same words again ("X and X"): nothing new to match.
                    matches[-1] = replace(previous, text=together, why=why)
                else:
                    joined = self._matched(together, why=why)
                    kept = joined if joined.goal == previous.goal and joined.tool == previous.tool else max(previous, match, key=_similarity)
                    # Whichever goal wins, the part keeps both clauses' words ("…, highest first"): the
                    # readings of its arguments must find them.
                    matches[-1] = replace(_absorbing(kept, previous, match), text=together, why=kept.why if kept is joined else why)
                last = clause
                continue
            matches.append(match)
            last = clause
        return matches

    def _fact(self, clause: Clause) -> PartMatch:
        """A fact as a part: the input state it names (the best state hit by ``MIN_SCORE`` that is an
        input state, ``State.input``), held; and its value, when it quotes or names exactly one
        (``'a.jpg'``, ``https://…``, ``people.csv``), as the input of the parameters that carry that
        state (``_value_inputs``), unless the request's inputs already give one.

        A fact that names no input state holds nothing: what a tool made ("I booked the flight") is
        not held by saying so, because no artifact of it exists for a step to take.
        """
        graph = self.graph
        if names_destination(clause.text):
            return PartMatch(clause.text, None, kind="fact", why=joined_reasons(clause.why, "it names where to write, not what the user holds"))
        hits = [hit for hit in self.search.index.search(without_quotes(clause.text), k=5, kind="state") if hit.matches(MIN_SCORE) and hit.states]
        held = [hit for hit in hits if all(graph.states[token].input for token in hit.states if token in graph.states)]
        if not held:
            return PartMatch(clause.text, None, kind="fact", why=joined_reasons(clause.why, "it names no input state, so it holds nothing"))
        hit = held[0]
        why = joined_reasons(clause.why, f"it holds {', '.join(sorted(hit.states))} (state {hit.name}, {_strength(hit)})")
        values = source_values(clause.text)
        given = _value_inputs(graph, hit.states, values[0]) if len(values) == 1 else ()
        given_inputs = self.request.inputs or {}
        if given and not any(input_for(tool, parameter, given_inputs) for tool, parameter in _carriers(graph, hit.states)):
            return PartMatch(clause.text, None, kind="fact", why=f"{why}; its value {values[0]!r} is their input", holds=hit.states, values=given)
        # "I have a file 'a.csv'" with another path given as an input: the input is used, and said to be.
        names = dict.fromkeys(input_for(tool, parameter, given_inputs) for tool, parameter in _carriers(graph, hit.states))
        overridden = (
            tuple(Overridden(name, values[0], given_inputs[name]) for name in names if name is not None and given_inputs[name] != values[0]) if given else ()
        )
        return PartMatch(clause.text, None, kind="fact", why=why, holds=hit.states, overridden=overridden)

    def choose(self, text: str, min_score: float = MIN_SCORE, query: str = "") -> PartMatch:
        """An action's goal (:func:`toolpath.planner.tasks.goals.choose_goal`), searched on ``query``
        (default ``text``; :attr:`toolpath.planner.tasks.clauses.Clause.query`) without the words it
        quotes: quoted text is data, and a long quote would otherwise be all the search reads ("Say
        '…' in a calm voice"). When nothing matches, it is searched once more without the names it
        mentions (:func:`toolpath.planner.tasks.clauses.named_entities`).

        A value the action gives (its one quoted value, URL or file name) is the user's: when the
        chosen plan would make an input state that nothing holds ("translate 'Bonjour' into English"
        would generate a text first), that state is held instead and the value is its input
        (``_value_inputs``), and the goal is chosen again from there.

        A part that names no value works on the values the parts before it named
        (:attr:`carried`), and says so in its ``why``.

        A part that brings something from one file into another ("add each region's manager from
        regions.csv to sales.csv") works on the file it extends (:func:`extending_values`): that
        file is the one its plan reads first, and the other is left to the plan's further file
        parameter, when its plan writes nothing and takes a further file; otherwise a file after
        "to" stays a destination, never read. A part naming no other value whose one file after
        "to" is there to read ("add descriptors to molecules.csv": :func:`added_to_file`) works on
        that file when its plan reads it and writes nothing; a plan that writes keeps it where to
        write (an existing file is then overwritten, as asked).

        Raises:
            NoMatchingSkillError, NoPlanError, InputError, PlanningTimeout, PlanningCancelled: as
                :func:`toolpath.planner.tasks.goals.choose_goal` raises them.
            NothingToDoError: its goal is only an input state the user gives (its own value).
        """
        extending = extending_values(text)
        if extending:
            try:
                match = self._choose_with(text, extending, min_score, query)
            except (NoMatchingSkillError, NoPlanError, InputError):
                match = None  # that reading serves nothing: the words are read as they stand
            if match is not None and _extends_a_table(match):
                return replace(match, why=joined_reasons(match.why, f"it brings data from {extending[1]!r} into {extending[0]!r}, which its plan reads first"))
        sources = source_values(text)
        added_to = added_to_file(text, self.search.probe_directory) if not sources else None
        if added_to is not None:
            try:
                match = self._choose_with(text, [added_to], min_score, query)
            except (NoMatchingSkillError, NoPlanError, InputError):
                match = None  # that reading serves nothing: the file stays where to write
            if match is not None and _reads_and_writes_nothing(match, added_to):
                why = f"{added_to!r}, after 'to', is a file there to read, and its plan reads it and writes nothing: the table it adds to, not where to write"
                return replace(match, why=joined_reasons(match.why, why))
        return self._choose_with(text, sources, min_score, query)

    def _choose_with(self, text: str, values: Sequence[str], min_score: float, query: str) -> PartMatch:
        """:meth:`choose` with ``values`` as the values the part names, first the one its plan reads.

        A value the part names is the user's, as an input is (:func:`held_unless_replaced`): when a
        plan from the session's held states would leave it unread ("keep only the name column of
        compounds.csv" with a table of another file held would select from that table) and, planned
        without them, it is the input state its plan needs, the session's states made from it are
        planned again (:meth:`_replaced_by_value`), for this part and those after it."""
        match = self._choose_from(text, values, min_score, query, self.held)
        replaced = self._replaced_by_value(text, values, min_score, query, match)
        if not replaced:
            return match
        self.held -= replaced
        self.session_held -= replaced
        again = self._choose_from(text, values, min_score, query, self.held)
        made_again = ", ".join(sorted(replaced))
        return replace(
            again, why=joined_reasons(again.why, f"the value it names is new, so what the session holds of it ({made_again}) is made again, not used")
        )

    def _replaced_by_value(self, text: str, values: Sequence[str], min_score: float, query: str, match: PartMatch) -> frozenset[str]:
        """The session's held states that the part's own value replaces: matched without the
        session's held states, those made from the input state the value stands for, or from the one
        text parameter its one quoted value fills (:func:`free_text_parameters`) when ``match`` has
        none. Empty when the part names no value, its ``match`` already reads it (holds the state it
        stands for), the session holds nothing of its own, or that match reads the value neither way."""
        if not values or match.holds or not self.session_held:
            return frozenset()
        try:
            fresh = self._choose_from(text, values, min_score, query, self.held - self.session_held)
        except (NoMatchingSkillError, NoPlanError, InputError):
            return frozenset()  # without the session's states the words serve nothing: they stay as matched
        if fresh.holds and fresh.values:
            return self.session_held - held_unless_replaced(self.graph, self.session_held, dict(fresh.values))
        # "the descriptors of the molecule 'CCO'" with a molecule held: planned without it, the one
        # quoted value is the one text its plan needs (parse_molecule's smiles), as bind_arguments
        # will read it; from the held molecule it would be dropped and the held one described.
        quoted = [value for value in values if not is_file_name(value)]
        free = self._free_texts(fresh)
        if len(quoted) != 1 or len(free) != 1 or self._free_texts(match):
            return frozenset()
        _, _, parameter = free[0]
        return self.session_held - held_unless_replaced(self.graph, self.session_held, {parameter.python_name: quoted[0]})

    def _free_texts(self, match: PartMatch) -> list[tuple[int, ToolDefinition, ToolParameter]]:
        """The text parameters of ``match``'s plan a quoted value would fill (:func:`free_text_parameters`)."""
        plan = match.choice.chosen.plan if match.choice is not None else None
        return free_text_parameters(plan, range(len(plan.steps)), self.inputs) if plan is not None else []

    def _choose_from(self, text: str, values: Sequence[str], min_score: float, query: str, held_before: frozenset[str]) -> PartMatch:
        """:meth:`_choose_with` from the states ``held_before``."""
        graph = self.graph
        # A part that names no value works on what the parts before it named ("... and describe it").
        held, inputs = (held_before, self.inputs) if values else (held_before | self.carried_held, {**self.carried, **self.inputs})
        # A single-word value (a file name, a URL, an id) is what the goal's own step reads
        # ("transcribe 'b.wav'": the audio, not the text a longer plan would make the audio from); a
        # value of several words is content, the first thing the plan would make ("say 'Doors close!'").
        names_only = not any(character.isspace() for value in values for character in value)

        def choose(words: str, holding: str | None = None, value: str | None = None) -> tuple[GoalChoice, tuple[tuple[str, str], ...]]:
            """The goal for ``words``, with ``holding`` held and ``value`` (default: the first value) as its input.

            Raises:
                NothingToDoError: the goal is only an input state the user gives (see :class:`NothingToDoError`).
            """
            given = _value_inputs(graph, frozenset({holding}), values[0] if value is None else value) if holding is not None else ()
            held_now = {*held, holding} if holding is not None else held
            choice = choose_goal(self.search, words, {**dict(given), **inputs}, held_now, min_score)
            if not choice.chosen.needs_work and all(token in graph.states and graph.states[token].input for token in choice.chosen.goal):
                raise NothingToDoError(text, choice)
            return choice, given

        def choose_from_value(words: str) -> tuple[GoalChoice, PartMatch | None]:
            """The goal for ``words``, from the kind of the part's one file when the catalogs tell it
            (:func:`toolpath.planner.tasks.direction.named_file_kind`: "extract the text from
            talk.mp3" starts from the audio); when no plan reaches it, the part's value as the input
            state its plan needs, and the part so matched."""
            kind = named_file_kind(graph, values[0]) if len(values) == 1 and values[0] not in inputs.values() else None
            if kind is not None and kind not in held:
                # When nothing is planned from that kind, the value is read without it, as any other.
                with contextlib.suppress(NoMatchingSkillError, NoPlanError, NothingToDoError):
                    choice, given = choose(words, kind)
                    return choice, PartMatch(text, choice, why=f"its value {values[0]!r} is a file of {kind}", holds=frozenset({kind}), values=given)
            try:
                return choose(words)[0], None
            except NoPlanError as error:
                # "describe 'people.csv'": no tool makes the file the plan needs; the value is that file.
                # "join sales.csv with regions.csv": the first of several names is that file; the others
                # are left to the plan's further parameters (a file to join: toolpath.planner.tasks.arguments).
                state = _given_state(graph, error, names_only)
                value = _value_for(graph, state, text, values) if state is not None else None
                if not values or (len(values) > 1 and not names_only) or value is None:
                    raise
                choice, given = choose(words, state, value)
                return choice, PartMatch(text, choice, why=f"its value {value!r} is the {state} its plan needs", holds=frozenset({state}), values=given)

        query = without_quotes(query or text, words_too=False)
        try:
            choice, valued = choose_from_value(query)
        except (UnclearEffectError, UnservedWordsError, NeitherMeantError, NothingToDoError):
            raise  # it matched, unclearly, in words no catalog uses, not as the person meant, or only what is held: searching without names would hide that
        except NoMatchingSkillError as error:
            # Names no catalog knows can be all the search reads ("the Wikipedia article about Ada
            # Lovelace"): search once more without them (and, as above, with the part's value as the
            # input its plan needs: "filter sales.csv to the Widget sales in the West region"). The
            # refusal quotes the user's words.
            unnamed = without_names(query)
            try:
                if unnamed == query:
                    raise
                choice, valued = choose_from_value(unnamed)
            except NothingToDoError:
                raise
            except NoMatchingSkillError:
                raise NoMatchingSkillError(text, error.hits, min_score) from None
            # The names taken out may say where a tool with effects would write or send ("upload
            # sales.csv to Google Drive"): a goal found only without them runs no such tool.
            if any(step.tool.side_effect != "none" for step in choice.chosen.plan.steps if choice.chosen.plan is not None):
                raise NoMatchingSkillError(text, error.hits, min_score) from None
            query = unnamed
        if valued is not None:
            return valued
        if values and names_only:
            probed = self._probed_value_choice(choice, values[0], held, query, choose)
            if probed is not None:
                better, given, state, why = probed
                return PartMatch(text, better, why=why, holds=frozenset({state}), values=given)
        steps = choice.chosen.plan.steps if choice.chosen.plan is not None else ()
        made = [token for step in steps for token in sorted(step.produces) if token in graph.states and graph.states[token].input and token not in held]
        if names_only:
            last_reads = steps[-1].requires if steps else frozenset()
            made.sort(key=lambda token: token not in last_reads)
        if not values or (len(values) > 1 and not names_only) or not made:
            return PartMatch(text, choice, why=self._carried_why(choice, values), overridden=self._overridden(choice, values))
        if any(input_for(tool, parameter, inputs) for tool, parameter in _carriers(graph, frozenset(made[:1]))):
            return PartMatch(text, choice, overridden=self._overridden(choice, values))
        value = _value_for(graph, made[0], text, values)
        if value is None:
            return PartMatch(text, choice)
        values = [value, *(other for other in values if other != value)]
        try:
            better, given = choose(query, made[0])
        except (NoMatchingSkillError, NoPlanError):
            return PartMatch(text, choice)
        # "Combine 'intro.wav' and 'outro.wav'": the first name is the state, the others the goal
        # step's further parameters, in the order the tool takes them.
        rest = _in_order(better, values[1:], inputs)
        if rest is None:
            return PartMatch(text, choice)
        why = f"its value {values[0]!r} is the {made[0]} the plan would otherwise make"
        if rest:
            why += "; " + ", ".join(f"{value!r} is {name}" for name, value in rest)
        return PartMatch(text, better, why=why, holds=frozenset({made[0]}), values=given + rest)

    def _probed_value_choice(
        self, choice: GoalChoice, value: str, held: Collection[str], query: str, choose: Callable[[str, str], tuple[GoalChoice, tuple[tuple[str, str], ...]]]
    ) -> tuple[GoalChoice, tuple[tuple[str, str], ...], str, str] | None:
        """``(choice, inputs, state, why)`` with the part's named ``value`` held as an input state
        that its probe reads, when a candidate as close as the chosen one lacked just that state:
        "compute descriptors for every molecule in molecules.csv" matches tabulating a table file's
        descriptors best, but with no file held only one molecule's descriptors are reachable, and
        that plan would ask for a SMILES and leave the named file unread. ``choose(query, state)``
        chooses again with the state held; its choice is taken when its plan reads the state.

        ``None`` (the first choice stands) when no close candidate lacks exactly one input state
        the chosen plan does not read, that state declares no probe, its probe cannot read the value
        (nothing then shows the value is of that state: a quoted SMILES is no table file), or the
        words match a goal the new plan does not reach about as well by meaning and better by their
        words (:meth:`_rival_reading`): "which molecules in molecules.csv are most similar to '…'"
        matches ranking by similarity 0.62 (BM25 2.9) and tabulating descriptors 0.59 (BM25 1.1), and
        "plot a histogram of the molecular weights of the molecules in molecules.csv" matches
        plotting a histogram 0.59 (BM25 2.8) and tabulating descriptors 0.65 (BM25 2.7): a table of
        descriptors would drop what they ask for. The reading the file replaces is no rival when the
        words favour the table's ("compute descriptors for molecules.csv": one molecule's
        descriptors 0.79, BM25 2.2; the table's 0.77, BM25 2.5).

        When that choice does not read the state, or has such a rival, the goal is chosen once more
        with the state held on the words without the phrase naming the file
        (:func:`toolpath.planner.tasks.clauses.without_file_phrases`), and taken on the same terms:
        "count the compounds in each category of compounds.csv" is searched as "... of a file",
        which matches tabulating a file's descriptors 0.62 (its plan drops the column 'category'),
        parsing one molecule 0.49 and counting per group 0.47: parsing, whose plan reads no file
        and so drops nothing the words name of it, wins, and the file is left unread. Without "of a
        file" counting per group matches 0.54, binds every parameter, and reads the file.
        """
        graph = self.graph
        for candidate in choice.passed_over:
            if candidate.plan is not None:
                continue
            state = _missing_input_state(graph, candidate.hit, held)
            function = graph.states[state].probe if state is not None else None
            if state is None or not function or state in _states_read(choice):
                continue
            probe = run_probe("the value the words name", value, state, function, self.search.probe_directory)
            if probe.problem:
                continue
            # With the file held, what the words ask of it may show only once they no longer name
            # it: "of a file" draws the search to the states of reading files (see the docstring).
            worded = without_file_phrases(query)
            for words in [query, *([worded] if worded.strip() and worded != without_file_names(query) else [])]:
                try:
                    better, given = choose(words, state)
                except (NoMatchingSkillError, NoPlanError):
                    return None
                # A plan through a tool that adds a column the words name reads the file for what they ask of it.
                if state in _states_read(better) and (better.chosen.through or self._rival_reading(better, query, {*held, state}) is None):
                    why = (
                        f"its value {value!r} is the {state} that {candidate.hit.kind} {candidate.hit.name} needs "
                        f"(its probe reads it: {len(probe.columns)} columns), a match as close as {choice.chosen.hit.name}'s, which would leave it unread"
                    )
                    if words != query:
                        why += f"; with it held, {words!r} asks for {better.chosen.hit.name}"
                    return better, given, state, why
            return None
        return None

    def _rival_reading(self, choice: GoalChoice, query: str, held: Collection[str]) -> SkillHit | None:
        """A hit of a goal ``choice``'s plan does not reach that ``query`` matches about as well by
        meaning (cosine similarity within ``WORK_MARGIN`` of the best hit the plan reaches, or above)
        and better by its words (a higher BM25 score than any hit the plan reaches); ``None`` when
        there is none. With a BM25-only index, a higher BM25 score alone makes a rival."""
        reached = frozenset().union(*(step.produces for step in choice.chosen.plan.steps)) if choice.chosen.plan is not None else frozenset()
        hits = self.search.index.search(without_file_names(query), k=self.search.k, held=held)
        own = [hit for hit in hits if hit.states and hit.states <= reached] or [choice.chosen.hit]
        similarities = [hit.similarity for hit in own if hit.similarity is not None]
        best_similarity = max(similarities) if similarities else None
        best_lexical = max(hit.lexical for hit in own)
        for hit in hits:
            if not hit.states or hit.states <= reached or hit.lexical <= best_lexical:
                continue
            if best_similarity is None or hit.similarity is None or hit.similarity >= best_similarity - WORK_MARGIN:
                return hit
        return None

    def _carried_why(self, choice: GoalChoice, values: Sequence[str]) -> str:
        """Why a part that names no value works on values an earlier part named: when its plan reads their states."""
        steps = choice.chosen.plan.steps if choice.chosen.plan is not None else ()
        read = frozenset().union(*(step.requires for step in steps)) & (self.carried_held - self.held)
        if values or not read:
            return ""
        named = ", ".join(repr(value) for value in dict.fromkeys(self.carried.values()))
        return f"it works on {named}, which an earlier part names ({', '.join(sorted(read))})"

    def _overridden(self, choice: GoalChoice, values: Sequence[str]) -> tuple[Overridden, ...]:
        """The caller's inputs that replace a value the words name: for each input state the
        caller's inputs give and ``choice``'s plan reads, the input meant for a step's parameter
        that carries it, when its value is none of ``values``. ("load sales.csv" with the input
        path='other.csv' loads other.csv, and says so.)"""
        given_inputs = self.request.inputs or {}
        if not values or not given_inputs:
            return ()
        steps = choice.chosen.plan.steps if choice.chosen.plan is not None else ()
        read = frozenset().union(*(step.requires for step in steps)) & self.graph.input_states_given(given_inputs)
        found: dict[str, Overridden] = {}
        for step in steps:
            for parameter in step.tool.parameters:
                name = input_for(step.tool, parameter, given_inputs) if parameter.state in read and parameter.role == "input" else None
                if name is not None and given_inputs[name] not in values:
                    found.setdefault(name, Overridden(name, values[0] if len(values) == 1 else ", ".join(values), given_inputs[name]))
        return tuple(found.values())


#: Words before a file that something is brought into ("to sales.csv", "into the table sales.csv")
#: and from ("from regions.csv"): a pair of them in one part extends the first file with the second.
_INTO_FILE = re.compile(r"\b(?:to|into|onto)\s+(?:(?:the|my|our)\s+(?:file|table|spreadsheet|sheet|data)\s+)?[\"'\u2018\u201c]?$", flags=re.IGNORECASE)
_FROM_FILE = re.compile(r"\bfrom\s+(?:(?:the|my|our)\s+(?:file|table|spreadsheet|sheet|data)\s+)?[\"'\u2018\u201c]?$", flags=re.IGNORECASE)


def extending_values(text: str) -> list[str]:
    """The files of words that bring something from one file into another, the file extended first:
    "add each region's manager from regions.csv to sales.csv" → ``["sales.csv", "regions.csv"]``;
    "merge regions.csv into sales.csv" (no "from": the file before "into" is brought) gives the
    same. Empty unless exactly one file follows "to", "into" or "onto" and at least one other is
    named (after "from", or before the "into" one).

    Whether the first is read, not written, is its plan's to say (:func:`_extends_a_table`): "save
    sales.csv to out.csv" names a destination, and a plan that writes keeps it one."""
    values = list(dict.fromkeys(quoted_values(text)))
    if len(values) < 2:
        return []
    into, brought = [], []
    for value in values:
        start = text.find(value)
        before = text[:start]
        if _INTO_FILE.search(before):
            into.append(value)
        elif _FROM_FILE.search(before) or not into:
            brought.append(value)
    if len(into) != 1 or not brought:
        return []
    return [into[0], *brought]


def added_to_file(text: str, directory: str | os.PathLike[str] | None) -> str | None:
    """The one file ``text`` names, when it follows "to", "into" or "onto" and is a file in
    ``directory`` (:func:`toolpath.planner.tasks.probes.readable_file`): "add descriptors to
    molecules.csv" may mean the table to extend rather than where to write. ``None`` when the words
    name another file or value, or the file is not there (then it can only be written).

    Whether it is read is its plan's to say (:func:`_reads_and_writes_nothing`): "save the table to
    out.csv" writes, so an existing out.csv stays a destination (it is overwritten, as asked)."""
    values = list(dict.fromkeys(quoted_values(text)))
    if len(values) != 1 or not is_file_name(values[0]) or not _INTO_FILE.search(text[: text.find(values[0])]):
        return None
    found, _ = readable_file(values[0], directory)
    return values[0] if found is not None else None


def _reads_and_writes_nothing(match: PartMatch, value: str) -> bool:
    """Whether ``match``'s plan takes ``value`` as an input (the state it holds) and no step writes
    (a side effect, or an output parameter)."""
    steps = match.choice.chosen.plan.steps if match.choice is not None and match.choice.chosen.plan is not None else ()
    writes = any(step.tool.side_effect != "none" or any(parameter.role == "output" for parameter in step.tool.parameters) for step in steps)
    reads = bool(match.holds) and any(given == value for _, given in match.values)
    return bool(steps) and reads and not writes


def _extends_a_table(match: PartMatch) -> bool:
    """Whether ``match``'s plan reads a further file (a ``meaning: file`` parameter its words fill)
    and writes nothing: then a file after "to" is what it extends, not a destination."""
    steps = match.choice.chosen.plan.steps if match.choice is not None and match.choice.chosen.plan is not None else ()
    further = any(parameter.meaning == "file" and parameter.role == "input" and parameter.state is None for step in steps for parameter in step.tool.parameters)
    writes = any(step.tool.side_effect != "none" or any(parameter.role == "output" for parameter in step.tool.parameters) for step in steps)
    return bool(steps) and further and not writes


def _states_read(choice: GoalChoice) -> frozenset[str]:
    """The states the steps of ``choice``'s plan require."""
    steps = choice.chosen.plan.steps if choice.chosen.plan is not None else ()
    return frozenset().union(*(step.requires for step in steps))


def _missing_input_state(graph: StateGraph, hit: SkillHit, held: Collection[str]) -> str | None:
    """The one input state (``State.input``) that no plan to ``hit`` from ``held`` has, when that is
    what keeps it unreachable (:func:`_given_state` of the planner's explanation, as for a name);
    ``None`` when it is reachable, or lacks something else or several things."""
    error = unreachable_because(graph, hit, held)
    if error is None:
        return None
    state = _given_state(graph, error, names_only=True)
    return state if state is not None and state not in held else None


def _serves(previous: PartMatch, match: PartMatch) -> bool:
    """Whether ``previous``'s plan already does what ``match`` asks: runs its tool, or reaches its goal."""
    steps = previous.choice.chosen.plan.steps if previous.choice is not None and previous.choice.chosen.plan is not None else ()
    if match.tool is not None:
        return any(step.tool.id == match.tool.id for step in steps)
    return bool(match.goal) and match.goal <= frozenset().union(*(step.produces for step in steps))


class NothingToDoError(NoMatchingSkillError):
    """An action whose words match only an input state the user gives, so no tool would run for it:
    "how many rows are in sales.xlsx", with no tool that counts rows, matches the state "a data file
    is given" that its own file name holds. Taken as done, the task would run nothing and pass
    as answered; it is not understood instead, with the other candidates named."""

    def __init__(self, task: str, choice: GoalChoice):
        self.task = task
        self.hits = [choice.chosen.hit, *(candidate.hit for candidate in choice.passed_over)]
        others = [candidate.hit for candidate in choice.passed_over if candidate.needs_work]
        closest = f"; closest that does something: {', '.join(_hit_text(hit) for hit in others)}" if others else ""
        goal = ", ".join(sorted(choice.chosen.goal))
        self.reason = f"{task!r} matches only {goal}, which the user gives (its own value), so no tool would do anything for it{closest}"
        LookupError.__init__(self, self.message())


def _hit_text(hit: SkillHit) -> str:
    """``"tool tabular.count_rows (similarity 0.31)"``."""
    return f"{hit.kind} {hit.qualified_name} ({_strength(hit)})"


#: Candidates a part not understood names, best first.
CLOSEST_SHOWN = 3


def _closest(error: NoMatchingSkillError | NoPlanError) -> tuple[str, ...]:
    """The closest candidates of a part not understood: the search's best hits, or the goal no plan reaches."""
    if isinstance(error, NoPlanError):
        return tuple(f"state {token} (no plan reaches it)" for token in error.unreachable)
    return tuple(_hit_text(hit) for hit in error.hits[:CLOSEST_SHOWN])


def _given_state(graph: StateGraph, error: NoPlanError, names_only: bool) -> str | None:
    """The input state a part's one value stands for, when no plan reaches its goal without it.

    A name (a file, a URL, an id: ``names_only``) is what the goal's own step reads: "reduce the
    noise of the audio 'b.wav'" gives the audio that noise reduction reads, not the video the audio
    could be extracted from. Content (several words) is where the plan starts: the one input state
    behind the goal that nothing produces (``error.given_by``). ``None`` when that is not one state.
    """
    if names_only:
        read = set()
        for token in error.unreachable:
            if token in graph.states and graph.states[token].input:
                read.add(token)  # a tool to run: its own required state
            else:
                read |= {
                    state for tool in graph.tools_for(token) for state in tool.state_transition.requires if state in graph.states and graph.states[state].input
                }
        if len(read) == 1:
            return next(iter(read))
    return next(iter(error.given_by)) if len(error.given_by) == 1 else None


def _choice_named(part: PartMatch, text: str) -> str | None:
    """``TOOL.PARAMETER`` of a step of ``part``'s plan whose ``choices`` ``text`` names ("keeping all
    rows of both": join_tables.how), or ``None``."""
    steps = part.choice.chosen.plan.steps if part.choice is not None and part.choice.chosen.plan is not None else ()
    for step in steps:
        for parameter in step.tool.parameters:
            phrases = [phrase for value, words in (parameter.choices or {}).items() for phrase in (value, *words)]
            if any(re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text, flags=re.IGNORECASE) for phrase in phrases):
                return f"{step.tool.name}.{parameter.python_name}"
    return None


def _completes(part: PartMatch, clause: Clause) -> str | None:
    """``TOOL.PARAMETER`` of the choice ``clause`` names of a step of ``part``'s plan, when ``part``'s own
    words leave some of its plan's parameters unbound and ``clause`` follows it after a bare "and" or
    comma: "a pivot table with regions as rows, months as columns and total revenue in the cells" — the
    pivot lacks the column its cells hold, and "total" is its aggregate, so the clause is the rest of its
    arguments, not a grouping of its own. ``None`` otherwise (a part its own words complete keeps the
    clause as a part: "plot revenue per region and average units per product")."""
    chosen = part.choice.chosen if part.choice is not None else None
    if chosen is None or chosen.cell is None or not chosen.cell.unbound or clause.joiner.strip(" ,").lower() not in ("", "and"):
        return None
    return _choice_named(part, clause.text)


def _absorbing(kept: PartMatch, *others: PartMatch) -> PartMatch:
    """``kept`` with the input states and values of the parts joined into it (their words are in its text)."""
    names = {name for name, _ in kept.values}
    values = [*kept.values]
    for other in others:
        values += [(name, value) for name, value in other.values if name not in names]
        names |= {name for name, _ in other.values}
    return replace(kept, holds=kept.holds.union(*(other.holds for other in others)), values=tuple(values))


def _similarity(match: PartMatch) -> float:
    hit = match.choice.chosen.hit if match.choice is not None else None
    return (hit.similarity if hit.similarity is not None else hit.lexical) if hit is not None else float("-inf")


def _strength(hit: Any) -> str:
    return f"similarity {hit.similarity:.2f}" if hit.similarity is not None else f"lexical score {hit.lexical:.2f}"


def _carriers(graph: StateGraph, states: frozenset[str]) -> list[tuple[ToolDefinition, Any]]:
    """``(tool, parameter)`` for every parameter that reads one of ``states`` (``role: input``)."""
    return [(tool, parameter) for tool in graph.registry for parameter in tool.parameters if parameter.state in states and parameter.role == "input"]


def _value_inputs(graph: StateGraph, states: frozenset[str], value: str) -> tuple[tuple[str, str], ...]:
    """``value`` as the input of every parameter that reads ``states``: under the parameter's plain
    name when all of them share it and no other parameter of that name exists (a plain input also
    reaches every required parameter so named), else under ``TOOL.PARAMETER`` for each. So a value
    the user holds never lands in a destination a tool writes to (``role: output``)."""
    carriers = _carriers(graph, states)
    names = {parameter.python_name for _, parameter in carriers}
    if len(names) == 1:
        name, reading = next(iter(names)), {id(parameter) for _, parameter in carriers}
        if all(id(parameter) in reading for tool in graph.registry for parameter in tool.parameters if parameter.python_name == name):
            return ((name, value),)
    return tuple((f"{qualified_name(tool)}.{parameter.python_name}", value) for tool, parameter in carriers)


#: Parameter names that say their value is a file's path (``path``, ``csv_path``); with ``meaning: file``.
_PATH_NAME = re.compile(r"(?:^|_)(?:path|file|filename)$")


def _value_for(graph: StateGraph, state: str, text: str, values: Sequence[str]) -> str | None:
    """The value of ``text`` that stands for ``state``: the first of ``values``, unless the
    parameters carrying ``state`` take a file's path (:data:`_PATH_NAME`, ``meaning: file``); then
    the first value that is a file name or path, of ``values`` or else named outside quotes
    ("rows of sales.csv whose date contains '2024-03'": the file is sales.csv, and '2024-03' a value
    to compare). ``None`` when no value is a file name: words that name none are never a path."""
    carriers = _carriers(graph, frozenset({state}))
    if not any(_PATH_NAME.search(parameter.python_name) or parameter.meaning == "file" for _, parameter in carriers):
        return values[0] if values else None
    files = [value for value in (*values, *source_file_names(text)) if is_file_name(value)]
    return files[0] if files else None


def _in_order(choice: GoalChoice, values: Sequence[str], inputs: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    """``values`` as the inputs (``TOOL.PARAMETER``) of the goal step's required parameters that
    read no state and have no input yet, in the tool's order; ``None`` when there are more values
    than such parameters (then nothing tells where they go)."""
    steps = choice.chosen.plan.steps if choice.chosen.plan is not None else ()
    if not values:
        return ()
    if not steps:
        return None
    tool = steps[-1].tool
    free = [
        parameter for parameter in tool.required_parameters if parameter.state is None and parameter.role == "input" and not input_for(tool, parameter, inputs)
    ]
    if len(values) > len(free):
        return None
    return tuple((f"{qualified_name(tool)}.{parameter.python_name}", value) for parameter, value in zip(free, values))


def held_unless_replaced(graph: StateGraph, held: Collection[str], inputs: Mapping[str, Any]) -> frozenset[str]:
    """The states a session holds that a task's inputs do not replace. An input meant for a
    parameter of a tool (:func:`toolpath.planner.planning.inputs.input_for`) means "use this value", so the states
    that tool produces, and everything produced from them, are planned again rather than taken as
    held (a new ``smiles`` re-parses the molecule instead of analysing the one parsed before). A
    state an input itself carries stays held: the input is its value."""
    held = frozenset(held)
    if not inputs or not held:
        return held
    carried = graph.states_carried(inputs)
    replaced = {
        state
        for tool in graph.registry
        if any(input_for(tool, parameter, inputs) is not None for parameter in tool.parameters)
        for state in tool.state_transition.produces
    }
    grown = True
    while grown:  # downstream: what tools make from a replaced state is replaced too
        grown = False
        for tool in graph.registry:
            if tool.state_transition.requires & replaced and not tool.state_transition.produces <= replaced:
                replaced |= tool.state_transition.produces
                grown = True
    return held - (replaced - carried)
