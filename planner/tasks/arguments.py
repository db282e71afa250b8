"""Argument values from a task's words: what the words say, bound to the parameters the chosen plan needs.

After the joint plan is chosen (:func:`toolpath.planner.tasks.pipeline.plan_request`), each step's
parameters that nothing feeds yet (no state, no input given) are read from the words of the part that
asked for the step (the whole task's when no part did, or when its own part says nothing of a
required one), by what the catalog says they are:

- ``choices`` (a ``Literal``): the value whose words the part uses ("total" → ``sum``, "largest
  first" → ``descending``); two values named → left unbound, saying so;
- ``meaning: column`` / ``columns``: the columns of the table the task names, from its probe
  (:mod:`toolpath.planner.tasks.probes`), matched to the words case-insensitively, with ``_`` or
  spaces, singular or plural. A role the words name gives its parameter ("units on the x axis",
  "regions as rows", "one column per month", "revenue in the cells"); "Y by X" (also per, over,
  against, vs, versus, across) gives the axes ``y`` and ``x``, else the one column after a grouping
  word or named by an adjective of time ("for each month", "monthly") is ``x``, "over time" the
  table's one date column, and of two columns named a date or text column is ``x`` against one of
  numbers; a pivot's ``rows`` and ``columns`` are "by A and B", or "A by B"; "by X", "per X", "for
  each X", "on X" (or "monthly") give the grouping column (``by``, ``on``); the rest of the columns
  named go to the one parameter left, or a list. "number of units" names the column ``units`` when
  it holds numbers (not a count of rows), and a count per group with no column named counts the
  grouping column. A name not in the probe is never bound; two candidates and nothing to tell them
  apart → unbound, saying so;
- ``meaning: conditions``: ``[[column, operator, value], ...]`` from "where region is North",
  "revenue over 1000", "at least", "between 10 and 20", "not South" (a value the probe saw in one
  column), "with missing revenue", "without missing values". Operators come from a fixed set
  (:data:`OPERATORS`), values are literals (numbers as numbers); nothing the user wrote is run as code;
- ``meaning: count``: "top 5", "first 3 rows", "20 bins", "10 largest", "the 3 sales with the lowest units";
- a whole-number parameter named after a thing that is numbered (``season_number``, ``episode``,
  ``page_no``, ``chapter_index``): the number the words give that thing, "season 2", "episode #4",
  "the second season", "the 3rd episode" (:func:`_numbered`); two numbers for it → unbound, saying so;
- ``meaning: file``: a further file the part (or an earlier one) names that no input gives yet;
- ``role: output``: "to report.md", "as sales.xlsx", "save it in totals.csv", "called overview.html", when the suffix suits
  the parameter (its description's suffixes); a file the task reads is never a destination.

A value the caller also gives as an input stays the caller's, and the result says so. Bound values go
into the request's inputs as ``SERVER.TOOL.PARAMETER`` (:func:`toolpath.planner.planning.inputs.input_for`
reads them), so the cell's wiring shows them as inputs; :class:`Arguments` keeps why each was read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from toolpath.planner.planning.graph import kinds_of
from toolpath.planner.planning.inputs import input_for
from toolpath.planner.planning.plans import Plan, qualified_name
from toolpath.planner.tasks.clauses import masked_quotes, quoted_values, source_values, without_file_names
from toolpath.planner.tasks.probes import Probe, probe_inputs

if TYPE_CHECKING:
    from toolpath.planner.planning.graph import StateGraph
    from toolpath.planner.tasks.cell import PlannedCell
    from toolpath.planner.tasks.parts import PartMatch
    from toolpath.registry import ToolDefinition, ToolParameter

#: The operators a condition may have (the tabular catalog's ``filter_rows`` takes exactly these).
OPERATORS = ("==", "!=", ">", ">=", "<", "<=", "between", "in", "not in", "contains", "is missing", "is not missing")


@dataclass(frozen=True)
class ArgumentReading:
    """What the words said (or did not say) for one parameter of one step.

    Attributes:
        step: the step's index (0-based) in the plan.
        tool: the step's tool name.
        parameter: the parameter's Python name.
        value: the value read (``None`` when none was).
        words: the words that gave it, or that were read.
        why: how the value was read, or why none was bound.
        input: for a bound value, the input it became (``tabular.plot_line.x``); ``""`` otherwise.
        conflicting: the words name several values for it ("smallest number": min and count), so
            neither its default nor a guess is right: its part is not understood.
        spans: for conditions, the ``(start, end)`` of each condition's words in
            ``without_file_names(words)`` (:func:`toolpath.planner.tasks.clauses.without_file_names`).
    """

    step: int
    tool: str
    parameter: str
    value: Any
    words: str
    why: str
    input: str = ""
    conflicting: bool = False
    spans: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "parameter": self.parameter, "value": self.value, "words": self.words, "why": self.why}


@dataclass(frozen=True)
class Arguments:
    """The values a task's words gave its plan's parameters (:func:`bind_arguments`).

    Attributes:
        bound: the values bound, each with its words and reason.
        not_bound: parameters the words were read for but gave no value (or whose caller's input won), with why.
        probes: the inputs probed (or refused), with what was found.
        unbound_meanings: the meanings (``column``, ``count``, ...) of the plan's parameters that
            neither the words nor the inputs fill: a question to the user, which the words they
            name may answer.
        brought_columns: the columns only a further file of the plan has (one a ``meaning: file``
            parameter reads, :func:`_brought_columns`): the step that reads it brings them in whole,
            so words naming them ("add each region's *manager* from regions.csv") ask for that step.
        added_columns: ``{column: kind}`` the plan's steps add to the table they read
            (``ReturnSpec.adds_columns``): the words may name them as they name the probed ones.
    """

    bound: tuple[ArgumentReading, ...] = ()
    not_bound: tuple[ArgumentReading, ...] = ()
    probes: tuple[Probe, ...] = ()
    unbound_meanings: frozenset[str] = frozenset()
    brought_columns: frozenset[str] = frozenset()
    added_columns: Mapping[str, str] = field(default_factory=dict)

    def inputs(self, inputs: Mapping[str, Any] | None) -> dict[str, Any]:
        """``inputs`` with the bound values as ``SERVER.TOOL.PARAMETER`` inputs (the caller's own stay first)."""
        return {**(inputs or {}), **{reading.input: reading.value for reading in self.bound}}

    def explained(self, cell: PlannedCell) -> PlannedCell:
        """``cell`` with each unbound parameter saying why the words did not give it."""
        reasons = {(reading.step, reading.parameter): reading.why for reading in self.not_bound}
        unbound = tuple(replace(parameter, why=reasons.get((parameter.step, parameter.parameter), parameter.why)) for parameter in cell.unbound)
        return replace(cell, unbound=unbound)

    def unused_words(self, text: str, inputs: Mapping[str, Any] | None, accounted: Sequence[Any] = ()) -> list[str]:
        """What ``text`` names of the data that no bound value and no input of the caller's holds: a
        column, a value the probe saw in a column, or a number ("the rows with revenue over 1000"
        planned as a row count drops ``revenue`` and 1000); ``accounted`` are further values said
        for (a file the caller's input replaced). Empty when no file was probed: then no word is
        known as data."""
        table = _Table.of([probe for probe in self.probes if not probe.problem])
        if not table.columns:
            return []
        table = table.with_added(self.added_columns)
        if not table.columns:
            return []
        used = _flattened([reading.value for reading in self.bound] + list((inputs or {}).values()) + list(accounted))
        used_text = {str(item).casefold() for item in used}
        plain = without_file_names(masked_quotes(text))
        mentions = sorted([*_mentions(plain, list(table.columns)), *(mention for mention, _ in _asserted(plain, table))], key=lambda mention: mention.start)
        masked = _masked(plain, mentions)
        named: list[str] = []
        # Words a parameter left to ask for may answer are not dropped: the question comes first.
        # "the suppliers file" names the file suppliers.csv, not its column supplier.
        stems = {os.path.splitext(os.path.basename(item))[0] for item in used_text if _FILE_NAME.match(item)}
        file_words = {form for stem in stems for form in _variants(stem)}
        if not self.unbound_meanings & {"column", "columns", "conditions"}:
            named += [
                f"the column {mention.column!r}"
                for mention in mentions
                if mention.column.casefold() not in used_text
                and plain[mention.start : mention.end].casefold() not in file_words
                and not _brought(mention, plain, table, self.brought_columns)
            ]
            for column, seen in table.values.items():
                for value in seen:
                    if str(value).casefold() not in used_text and re.search(rf"(?<![\w]){re.escape(str(value))}(?![\w])", masked, flags=re.IGNORECASE):
                        named.append(f"{value!r} (a value of {column!r})")
        if not self.unbound_meanings & {"count", "conditions"}:
            for number in _NUMBERS_SAID.finditer(masked):
                if not any(_same_number(number.group().replace(",", ""), item) for item in used):
                    named.append(f"the number {number.group()}")
        # A file named by its name alone is the input given by its path ("compounds.csv", data/compounds.csv).
        used_names = used_text | {os.path.basename(item) for item in used_text}
        # Quoted names read whole ("staff list.tsv", not its last word).
        file_names = [match.group() for match in _FILE_NAMES.finditer(masked_quotes(text))] + [
            value for value in quoted_values(text) if _FILE_NAME.match(value)
        ]
        for file_name in file_names:
            if file_name.casefold() not in used_names and os.path.basename(file_name.casefold()) not in used_names:
                named.append(f"the file {file_name!r}")
        return list(dict.fromkeys(named))

    def unread_phrases(self, text: str) -> list[str]:
        """Why phrases of ``text`` that state something of the data cannot be read, whatever the plan: a
        comparison of a column with no value after it ("salary above the average"), conditions joined by
        "or" (:func:`_either`), a "where"/"whose" clause (or "with X is …") from which no condition is
        read ("where revenue is quantity times unit price"), a grouping ("per year", "for each team")
        by something that is no column, value or time adjective of the probed tables. Planned anyway,
        each would be dropped in silence. Empty when no file was probed."""
        table = _Table.of([probe for probe in self.probes if not probe.problem])
        if not table.columns:
            return []
        table = table.with_added(self.added_columns)
        plain = without_file_names(text)
        reasons: list[str] = []
        # "for every molecule" of molecules.csv, "per row": each row of the file, no grouping.
        rows = {"row", "record", "entry", "line"} | {
            os.path.splitext(os.path.basename(str(probe.value)))[0].lower() for probe in self.probes if not probe.problem
        }
        row_words = {form.lower() for stem in rows for form in _variants(stem)}
        for mention in _mentions(plain, list(table.columns)):
            read = _comparison(plain, mention, table)
            if read is not None and read[2] and not _axis_after(plain, mention, table) and re.match(_ORDERING, plain[mention.end :], flags=re.IGNORECASE):
                reasons.append(read[2])
        either = _conditions(plain, text, "", table)
        if either.conflicting:
            reasons.append(either.why)
        for clause in _CONDITION_CLAUSE.finditer(plain):
            read = _conditions(clause.group(), clause.group().strip(), "", table)
            if not read.found and not read.conflicting:
                reasons.append(read.why)
        for grouping in _GROUPED_BY_WORD.finditer(without_file_names(masked_quotes(text))):
            word = grouping.group("word")
            if not _mentions(word, list(table.columns)) and _known_values(word, table) is None and word.lower() not in row_words:
                reasons.append(
                    f"'{grouping.group().strip()}' groups by {word!r}, which is no column of the data ({table.listed()}) nor a value in one: "
                    "name the column to group by"
                )
        return list(dict.fromkeys(reasons))

    def unaccounted(self, parts: Sequence[PartMatch], inputs: Mapping[str, Any] | None) -> dict[int, str]:
        """The matched parts whose words name data that no step takes (:meth:`unused_words`), or
        several values for one parameter, by their index, with why: such a part is not understood,
        never planned with its words dropped or a value guessed."""
        unaccounted: dict[int, str] = {}
        for index, part in enumerate(parts):
            conflicts = [reading.why for reading in self.not_bound if reading.conflicting and reading.words == part.text]
            if conflicts and part.status == "matched":
                unaccounted[index] = f"{part.text!r}: " + "; ".join(conflicts)
                continue
            unread = self.unread_phrases(part.text) if part.status in ("matched", "held") else []
            if unread:
                unaccounted[index] = f"{part.text!r}: " + "; ".join(unread)
                continue
            # A value the words name that the caller's input replaced is accounted for: the input wins, said so.
            replaced = [override.named for override in part.overridden]
            named = self.unused_words(part.text, inputs, replaced) if part.status in ("matched", "held") else []
            if named:
                steps = ", ".join(step.tool.name for step in part.choice.chosen.plan.steps) if part.choice and part.choice.chosen.plan else "nothing"
                unaccounted[index] = (
                    f"{part.text!r} names {', '.join(named)}, which its plan ({steps}) does not use; "
                    "say what to do with it as its own step (e.g. 'keep the rows where …, then …')"
                )
        return unaccounted

    def to_dict(self) -> dict[str, Any]:
        return {
            "bound": [reading.to_dict() for reading in self.bound],
            "not_bound": [reading.to_dict() for reading in self.not_bound],
            "probes": [probe.to_dict() for probe in self.probes],
        }


def _brought(mention: _Mention, plain: str, table: _Table, brought_columns: frozenset[str]) -> bool:
    """Whether ``mention`` names a column a further file brings in (:attr:`Arguments.brought_columns`)
    as something to have ("add each region's *manager*"), not to group, rank or compare by ("per
    *country*", "*country* is France"): only the first is what the step reading that file does."""
    return mention.column in brought_columns and not _GROUPING.search(plain[: mention.start]) and _comparison(plain, mention, table) is None


def _flattened(values: Sequence[Any]) -> list[Any]:
    """Every scalar inside ``values`` (lists of columns, conditions and their operands)."""
    flat: list[Any] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            flat += _flattened(list(value))
        elif isinstance(value, dict):
            flat += _flattened(list(value.values()))
        else:
            flat.append(value)
    return flat


#: A number in words: "60,000" and "1,200.50" are one number each (groups of three digits after a comma, no space), as
#: :func:`_literal` reads them; "3,4" or "3, 4" are two.
_NUMBERS_SAID = re.compile(r"(?<![\w.\-])(?:\d{1,3}(?:,\d{3})+(?![,\d])|\d+)(?:\.\d+)?(?![\w.\-]*\w)")


def _same_number(text: str, value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        return float(text) == float(value)
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class _Read:
    """One parameter's reading: a value (``found``) or why there is none."""

    value: Any = None
    words: str = ""
    why: str = ""
    found: bool = False
    conflicting: bool = False
    spans: tuple[tuple[int, int], ...] = ()  # see ArgumentReading.spans


def bind_arguments(
    graph: StateGraph,
    text: str,
    parts: Sequence[PartMatch],
    plan: Plan,
    inputs: Mapping[str, Any] | None,
    probe_directory: str | os.PathLike[str] | None,
) -> Arguments:
    """Read the values ``plan``'s steps need from the words (see the module docstring).

    Args:
        graph: the graph planned over (its states' probes).
        text: the whole task as one text.
        parts: the task's parts; a step's words are those of the part that asked for it.
        plan: the chosen plan.
        inputs: the request's inputs (the caller's and those its words give as values).
        probe_directory: where files may be probed (:func:`toolpath.planner.tasks.probes.readable_file`); ``None``: nowhere.

    Returns:
        The :class:`Arguments`; ``inputs(...)`` of it are the request's inputs with the values bound.
    """
    given = dict(inputs or {})
    step_words = [_words_for(step.tool, position, plan, parts, text) for position, step in enumerate(plan.steps)]
    bound: dict[str, ArgumentReading] = {}
    not_bound: list[ArgumentReading] = []

    def settle(position: int, tool: ToolDefinition, parameter: ToolParameter, read: _Read) -> None:
        name = f"{qualified_name(tool)}.{parameter.python_name}"
        caller = input_for(tool, parameter, given)
        if caller is not None:
            if read.found and read.value != given[caller]:
                why = f"the input {caller!r} gives {given[caller]!r}, and the caller's input wins over the words' {read.value!r} ({read.why})"
                not_bound.append(ArgumentReading(position, tool.name, parameter.python_name, read.value, read.words, why))
            return
        if read.found:
            earlier = bound.get(name)
            if earlier is not None and earlier.value != read.value:
                why = f"{tool.name} runs twice and its words give two values ({earlier.value!r}, {read.value!r}) for one input; give {name} as an input"
                not_bound.append(ArgumentReading(position, tool.name, parameter.python_name, read.value, read.words, why))
            elif earlier is None:
                bound[name] = ArgumentReading(position, tool.name, parameter.python_name, read.value, read.words, read.why, name, spans=read.spans)
        elif read.why and (parameter in tool.required_parameters or read.words):
            not_bound.append(ArgumentReading(position, tool.name, parameter.python_name, None, read.words, read.why, conflicting=read.conflicting))

    # Files first: a further file the words name is probed with the rest.
    for position, step in enumerate(plan.steps):
        for parameter in step.tool.parameters:
            if parameter.meaning == "file" and parameter.role == "input" and parameter.state is None:
                settle(position, step.tool, parameter, _file(step_words[position], parts, given, bound))
    probes = probe_inputs(graph, plan, {**given, **{name: reading.value for name, reading in bound.items()}}, probe_directory)
    data_files = {str(value) for value in given.values() if isinstance(value, str)} | {str(reading.value) for reading in bound.values()}
    for position, step in enumerate(plan.steps):
        tool, (words, whose) = step.tool, step_words[position]
        table = _Table.of(_probes_seen(tool, probes))
        if table.columns:
            table = table.with_added(added_columns(plan.steps[:position]))
        reads = _read_tool(tool, words, whose, table, data_files)
        if whose != "the whole task":
            whole = _read_tool(tool, text, "the whole task", table, data_files)
            for parameter in tool.required_parameters:
                if not reads.get(parameter.python_name, _Read()).found and whole.get(parameter.python_name, _Read()).found:
                    fallback = whole[parameter.python_name]
                    own = reads.get(parameter.python_name, _Read()).why
                    reads[parameter.python_name] = replace(
                        fallback, why=f"{fallback.why} (read from the whole task: {own or 'its own part says nothing of it'})"
                    )
        for parameter in tool.parameters:
            if parameter.python_name in reads:
                settle(position, tool, parameter, reads[parameter.python_name])
    for position, parameter, read in _earlier_results_meant(graph, plan, step_words):
        settle(position, plan.steps[position].tool, parameter, read)
    # "the molecular weight of 'CCO'": a part's one quoted value is the one text its plan lacks (a
    # file's name is no such text: it is read, or written).
    asking = [(part.text, _own_steps(part, plan)) for part in parts if part.status == "matched"] if parts else [(text, range(len(plan.steps)))]
    for words, positions in asking:
        taken = {str(value) for value in _flattened([*given.values(), *(reading.value for reading in bound.values())])}
        values = [value for value in quoted_values(words) if value not in taken and not _FILE_NAME.match(value)]
        filled = {**given, **{name: reading.value for name, reading in bound.items()}}
        free = free_text_parameters(plan, positions, filled)
        if len(values) == 1 and len(free) == 1:
            position, tool, parameter = free[0]
            why = f"the one value {words!r} quotes, for the one text parameter its plan has no value for"
            settle(position, tool, parameter, _Read(values[0], values[0], why, found=True))
    filled = {**given, **{name: reading.value for name, reading in bound.items()}}
    unbound_meanings = frozenset(
        parameter.meaning
        for step in plan.steps
        for parameter in step.tool.required_parameters
        if parameter.meaning is not None and parameter.state is None and input_for(step.tool, parameter, filled) is None
    )
    return Arguments(tuple(bound.values()), tuple(not_bound), probes, unbound_meanings, _brought_columns(plan, probes, filled), added_columns(plan.steps))


def free_text_parameters(plan: Plan, positions: Iterable[int], filled: Mapping[str, Any]) -> list[tuple[int, ToolDefinition, ToolParameter]]:
    """The required text parameters of the steps of ``plan`` at ``positions`` that ``filled`` (the
    values known so far, ``{name: value}``) gives nothing and that no state, meaning or role marks, as
    ``(position, tool, parameter)``: where a part's one quoted value goes when there is exactly one
    ("the molecular weight of 'CCO'" fills parse_molecule's ``smiles``)."""
    return [
        (position, plan.steps[position].tool, parameter)
        for position in positions
        for parameter in plan.steps[position].tool.required_parameters
        if parameter.state is None
        and parameter.meaning is None
        and parameter.role == "input"
        and parameter.type == "str"
        and input_for(plan.steps[position].tool, parameter, filled) is None
    ]


def tools_adding_named_columns(graph: StateGraph, plan: Plan, arguments: Arguments, text: str) -> list[ToolDefinition]:
    """The tools of ``graph`` not on ``plan`` that add a column ``text`` names (``ReturnSpec.adds_columns``)
    which neither the probed table (``arguments.probes``) nor a step of ``plan`` has: "a histogram of the
    molecular weights in molecules.csv" names ``molecular_weight``, which molecules.csv lacks and chemistry's
    tabulate_descriptors adds. Only a tool whose result a step of ``plan`` can take counts (it produces a
    state a step requires). Empty when no file was probed: then no column is known to be missing."""
    table = _Table.of([probe for probe in arguments.probes if not probe.problem])
    if not table.columns:
        return []
    known = {**table.columns, **added_columns(plan.steps)}
    on_plan = {step.tool.id for step in plan.steps}
    required = frozenset().union(*(step.requires for step in plan.steps)) if plan.steps else frozenset()
    plain = without_file_names(masked_quotes(text))
    found: list[ToolDefinition] = []
    for tool in graph.registry:
        adds = tool.return_spec.adds_columns if tool.return_spec is not None else None
        if not adds or tool.id in on_plan or not tool.state_transition.produces & required:
            continue
        missing = {column: kind for column, kind in adds.items() if column not in known}
        candidate = _Table(missing, {}, "", 0, ())
        if _mentions(plain, list(missing)) or _asserted(plain, candidate):
            found.append(tool)
    return found


def added_columns(steps: Sequence[Any]) -> dict[str, str]:
    """``{column: kind}`` the tools of ``steps`` (plan steps) add to the table they read, in order
    (``ReturnSpec.adds_columns``): the columns a later step's table has besides the probed ones."""
    added: dict[str, str] = {}
    for step in steps:
        if step.tool.return_spec is not None and step.tool.return_spec.adds_columns:
            added.update(step.tool.return_spec.adds_columns)
    return added


def _brought_columns(plan: Plan, probes: Sequence[Probe], filled: Mapping[str, Any]) -> frozenset[str]:
    """The columns that only the further files of ``plan`` have: files ``filled`` gives to a
    ``meaning: file`` parameter (join_tables' ``other_path``), less the columns every other probed
    file has. A column both files have (the key joined on) is not brought: it is the first table's."""
    further = {
        str(filled[name])
        for step in plan.steps
        for parameter in step.tool.parameters
        if parameter.meaning == "file" and parameter.role == "input" and parameter.state is None
        for name in [input_for(step.tool, parameter, filled)]
        if name is not None
    }
    theirs = {column for probe in probes if not probe.problem and str(probe.value) in further for column in probe.columns}
    others = {column for probe in probes if not probe.problem and str(probe.value) not in further for column in probe.columns}
    return frozenset(theirs - others)


def _probes_seen(tool: ToolDefinition, probes: Sequence[Probe]) -> list[Probe]:
    """The probes whose table ``tool``'s words speak of: those of its own domain, and those of a state
    one of its parameters reads (chemistry's tabulate_descriptors reads the tabular file its
    ``smiles_column`` names a column of)."""
    read = {parameter.state for parameter in tool.parameters if parameter.state is not None and parameter.role == "input"}
    return [probe for probe in probes if probe.state.split(".")[0] == (tool.server_name or probe.state.split(".")[0]) or probe.state in read]


#: Words that point back at what the previous part made ("save it", "plot the result").
_BACK_REFERENCE = re.compile(r"\b(?:it|them|the\s+(?:result|results|output|outcome))\b", flags=re.IGNORECASE)
#: Words of a part that name any table, so they point at no one result in particular.
_GENERIC_WORDS = frozenset({"table", "tables", "data", "dataset", "file", "files", "rows", "columns", "column", "values", "value", "every", "their"})
#: Value types a step's result is told apart by: a text or number names no result of its own.
_SCALAR_TYPES = frozenset({"str", "int", "float", "bool"})


def _earlier_results_meant(graph: StateGraph, plan: Plan, step_words: Sequence[tuple[str, str]]) -> list[tuple[int, ToolParameter, _Read]]:
    """``(position, parameter, reading)`` for each step whose words point back at the previous part's result
    ("describe orders.csv and save *it* to desc.csv", "… save *the description*") when that result is a
    value of the parameter's type (a table) but not of its state or a refinement of it: the step would
    read an older value (the loaded table, not the statistics), so its part is not understood, never run
    on the other table. Pointing back is a pronoun or "the result", or a word sharing its first five
    letters with the previous step's tool, its result's name or its part's words ("description", describe)."""
    meant = []
    for position, step in enumerate(plan.steps):
        words, whose = step_words[position]
        if whose == "the whole task":
            continue
        earlier = [other for other in range(position) if step_words[other][0] != words]
        for parameter in step.tool.required_parameters:
            if parameter.state is None or parameter.type in _SCALAR_TYPES:
                continue
            previous = next(
                (other for other in reversed(earlier) if plan.steps[other].tool.return_spec and plan.steps[other].tool.return_spec.type == parameter.type), None
            )
            if previous is None:
                continue
            tool = plan.steps[previous].tool
            if tool.return_spec.state in kinds_of(parameter.state, graph.refinements):
                continue
            stems = {
                word[:5]
                for word in re.findall(
                    r"[a-z]{5,}", " ".join([tool.name.replace("_", " "), tool.return_spec.name.replace("_", " "), step_words[previous][0]]).lower()
                )
            }
            own = [word for word in re.findall(r"[a-z]{5,}", without_file_names(words).lower()) if word not in _GENERIC_WORDS]
            pointer = _BACK_REFERENCE.search(words) or next((word for word in own if word[:5] in stems), None)
            if pointer is None:
                continue
            said = pointer.group() if isinstance(pointer, re.Match) else pointer
            why = (
                f"'{said}' points at what {tool.name} made ({tool.return_spec.name}), but {step.tool.name} takes a {parameter.state} as {parameter.python_name}, "
                f"not a {tool.return_spec.state}: it would read another value; say which table to use, or give {parameter.python_name} as an input"
            )
            meant.append((position, parameter, _Read(words=words, why=why, conflicting=True)))
    return meant


def _own_steps(part: PartMatch, plan: Plan) -> list[int]:
    """The positions in ``plan`` of the steps ``part``'s own plan runs."""
    own = {step.tool.id for step in part.choice.chosen.plan.steps} if part.choice is not None and part.choice.chosen.plan is not None else set()
    return [position for position, step in enumerate(plan.steps) if step.tool.id in own]


def _words_for(tool: ToolDefinition, position: int, plan: Plan, parts: Sequence[PartMatch], text: str) -> tuple[str, str]:
    """``(words, whose)``: the words of the part that asked for step ``position`` (its tool, a state
    of its goal, or a step of its own plan), else the whole task's."""
    step = plan.steps[position]
    matched = [part for part in parts if part.status == "matched"]
    for asks in (
        lambda part: part.tool is not None and part.tool.id == tool.id,
        lambda part: part.tool is None and bool(step.produces & part.goal),
        lambda part: part.choice is not None and part.choice.chosen.plan is not None and any(own.tool.id == tool.id for own in part.choice.chosen.plan.steps),
    ):
        asking = [part for part in matched if asks(part)]
        if asking:
            return asking[0].text, f"the part {asking[0].text!r}"
    return text, "the whole task"


# -- the table the words speak of ------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    """The columns (and text values) the probes of a step's domain found, with where from."""

    columns: dict[str, str]
    values: dict[str, list[Any]]
    source: str
    rows_read: int
    problems: tuple[str, ...]

    @classmethod
    def of(cls, probes: Sequence[Probe]) -> _Table:
        columns: dict[str, str] = {}
        values: dict[str, list[Any]] = {}
        for probe in probes:
            columns.update(probe.columns)
            for column, seen in probe.values.items():
                values.setdefault(column, []).extend(value for value in seen if value not in values.get(column, []))
        source = " and ".join(repr(str(probe.value)) for probe in probes if not probe.problem) or "no file"
        rows = sum(int((probe.found or {}).get("rows_read") or 0) for probe in probes)
        return cls(columns, values, source, rows, tuple(f"{probe.value!r}: {probe.problem}" for probe in probes if probe.problem))

    def with_added(self, added: Mapping[str, str]) -> _Table:
        """This table with the columns ``added`` by earlier steps (``{column: kind}``); a probed column keeps its kind."""
        if not added:
            return self
        columns = {**self.columns, **{column: kind for column, kind in added.items() if column not in self.columns}}
        new = [column for column in added if column not in self.columns]
        source = f"{self.source} (with {', '.join(map(repr, new))} added by the plan's steps)" if new else self.source
        return replace(self, columns=columns, source=source)

    def missing(self) -> str:
        """Why no column can be named: no file probed, and why."""
        if self.problems:
            return "the table's columns are unknown (" + "; ".join(self.problems) + ")"
        return "the table's columns are unknown: no file of the task was probed (give the file in the task or as an input)"

    def listed(self) -> str:
        return ", ".join(self.columns)


@dataclass(frozen=True)
class _Mention:
    column: str
    start: int
    end: int


def _variants(token: str) -> list[str]:
    """A word's singular and plural forms (regular English ones: the columns' own names)."""
    forms = {token, token + "s", token + "es"}
    if token.endswith("s"):
        forms.add(token[:-1])
    if token.endswith("y"):
        forms.add(token[:-1] + "ies")
    if token.endswith("ies"):
        forms.add(token[:-3] + "y")
    return sorted(forms, key=len, reverse=True)


def _mentions(text: str, columns: Sequence[str]) -> list[_Mention]:
    """The columns ``text`` names, in order: case-insensitive, ``_``/``-``/spaces alike, singular or
    plural; the longest name wins where two overlap ("unit price" over "price")."""
    found: list[_Mention] = []
    for column in columns:
        tokens = [token for token in re.split(r"[\s_\-]+", column.lower()) if token]
        if not tokens:
            continue
        last = "(?:" + "|".join(map(re.escape, _variants(tokens[-1]))) + ")"
        pattern = r"(?<![\w])" + "".join(re.escape(token) + r"[\s_\-]+" for token in tokens[:-1]) + last + r"(?![\w])"
        found += [_Mention(column, match.start(), match.end()) for match in re.finditer(pattern, text, flags=re.IGNORECASE)]
    chosen: list[_Mention] = []
    for mention in sorted(found, key=lambda mention: (-(mention.end - mention.start), mention.start)):
        if all(mention.end <= other.start or mention.start >= other.end for other in chosen):
            chosen.append(mention)
    return sorted(chosen, key=lambda mention: mention.start)


#: Words before a predicate that say it does not hold ("that do not pass", "which are not").
_NOT = r"(?:(?:do|does|did)\s+not\s+|(?:don't|doesn't|didn't)\s+|not\s+)"


def _asserted(text: str, table: _Table) -> list[tuple[_Mention, bool]]:
    """``(mention, holds)`` for each phrase of ``text`` that says rows are, or are not, what a bool column
    of ``table`` records, read from the column's own name: a column ``SUBJECT_VERBs`` (or ``VERBs_SUBJECT``)
    by "(that) VERB SUBJECT" ("molecules that pass Lipinski's rule" → ``lipinski_passes``; "passing
    Lipinski's", "that do not pass Lipinski's" → false), a column ``X`` or ``is_X`` by "that are X" ("which
    are not drug-like" → ``drug_like`` false). The verb is the name's first or last word when it ends in
    "s" (a verb's third person); the other words must all follow it, so a name says what it records."""
    found: list[tuple[_Mention, bool]] = []
    for column, kind in table.columns.items():
        if kind != "bool":
            continue
        tokens = [token for token in re.split(r"[\s_\-]+", column.lower()) if token]
        patterns: list[str] = []
        for verb, rest in ((tokens[-1], tokens[:-1]), (tokens[0], tokens[1:])):
            if rest and len(verb) > 3 and verb.endswith("s") and verb not in ("is", "has"):
                stems = {verb[:-1], verb[:-2] if verb.endswith("es") else verb[:-1]}
                forms = sorted({verb, *stems, *(stem + "ing" for stem in stems), *(stem + "ed" for stem in stems)}, key=len, reverse=True)
                subject = r"[\s_\-]+".join(map(re.escape, rest))
                patterns.append(rf"(?:(?:that|which|who)\s+)?(?P<not>{_NOT})?(?:{'|'.join(forms)})\s+(?:the\s+)?{subject}(?:'s|s)?")
        adjective = tokens[1:] if tokens[0] in ("is", "has") and len(tokens) > 1 else tokens
        patterns.append(r"(?:that|which|who)\s+(?:are|is)\s+(?P<not>not\s+)?" + r"[\s_\-]+".join(map(re.escape, adjective)))
        for pattern in patterns:
            for match in re.finditer(rf"(?<![\w]){pattern}(?![\w])", text, flags=re.IGNORECASE):
                found.append((_Mention(column, match.start(), match.end()), match.group("not") is None))
    return sorted(found, key=lambda item: item[0].start)


_PAIR_LINK = re.compile(r"\s+(?:by|per|over|against|vs\.?|versus|across)\s+(?:(?:each|every|the)\s+)?", flags=re.IGNORECASE)
_GROUPING = re.compile(
    r"(?:\b(?:group(?:ed)?\s+by|sort(?:ed)?\s+by|order(?:ed)?\s+by|rank(?:ed)?\s+by|by|per|for\s+(?:each|every)|each|on)\s+(?:(?:the|each|every)\s+)?)$",
    flags=re.IGNORECASE,
)


def _read_tool(tool: ToolDefinition, words: str, whose: str, table: _Table, data_files: set[str]) -> dict[str, _Read]:
    """What ``words`` (of ``whose``) give each parameter of ``tool`` that the catalog says how to read."""
    plain = without_file_names(words)
    reads: dict[str, _Read] = {}
    column_parameters = [parameter for parameter in tool.parameters if parameter.meaning in ("column", "columns") and parameter.state is None]
    if column_parameters:
        reads.update(_columns(column_parameters, plain, words, whose, table))
    mentions = _mentions(plain, list(table.columns))
    quantities = _quantities(plain, mentions, table)
    masked = _masked(plain, [*mentions, *(mention for mention, _ in quantities)])
    for parameter in tool.parameters:
        if parameter.state is not None:
            continue
        if parameter.choices:
            reads[parameter.python_name] = _choice(parameter, masked, words, whose)
            if not reads[parameter.python_name].found and quantities and "count" in parameter.choices:
                reads[parameter.python_name] = _no_aggregate_said(parameter, quantities, words)
        elif parameter.meaning == "conditions":
            reads[parameter.python_name] = _conditions(plain, words, whose, table)
        elif parameter.meaning == "count":
            reads[parameter.python_name] = _count(parameter, [other for other in tool.parameters if other.meaning == "count"], masked, words, whose)
        elif parameter.role == "output":
            reads[parameter.python_name] = _output(parameter, words, whose, data_files)
        elif parameter.type == "int" and parameter.meaning is None:
            reads[parameter.python_name] = _numbered(parameter, masked, words, whose)
    counted = _counted_rows(tool, reads, whose, table)
    if counted is not None:
        reads[counted[0]] = counted[1]
    return reads


#: Words before a column that name the column's own quantity ("the number of units"): when the column holds
#: numbers, they say which column, not to count rows (only "number of rows", "number of sales", a noun
#: that is no column of numbers, asks for a count).
_QUANTITY_OF = re.compile(r"\bnumber\s+of\s+(?:the\s+)?$", flags=re.IGNORECASE)


def _quantities(plain: str, mentions: Sequence[_Mention], table: _Table) -> list[tuple[_Mention, str]]:
    """``(span, phrase)`` of each "number of COL" where COL holds numbers (:data:`_QUANTITY_OF`): the
    span of "number of", which is then no word of an aggregate, and the whole phrase."""
    found: list[tuple[_Mention, str]] = []
    for mention in mentions:
        quantity = _QUANTITY_OF.search(plain[: mention.start])
        if quantity is not None and table.columns.get(mention.column) == "number":
            found.append((_Mention(mention.column, quantity.start(), mention.start), plain[quantity.start() : mention.end]))
    return found


def _no_aggregate_said(parameter: ToolParameter, quantities: Sequence[tuple[_Mention, str]], words: str) -> _Read:
    """The reading of an aggregate when the only word of one was "number of" before a column of numbers:
    it names that column, and no aggregate of it is said, so its default would be a guess (the person may
    mean the total or the average): a question, not a value."""
    phrases = ", ".join(f"'{phrase}'" for _, phrase in quantities)
    columns = ", ".join(repr(mention.column) for mention, _ in quantities)
    why = (
        f"{phrases} names the column {columns}, which holds numbers, not a count of rows; the words say no aggregate of it: "
        f"say which (e.g. total, average, median, smallest, largest) or give {parameter.python_name} as an input"
    )
    return _Read(words=words, why=why, conflicting=True)


def _counted_rows(tool: ToolDefinition, reads: Mapping[str, _Read], whose: str, table: _Table) -> tuple[str, _Read] | None:
    """``(parameter, reading)`` for the columns a count of rows per group aggregates when the words name
    none ("count the sales per region"): the grouping column itself. ``count`` counts each group's rows
    whichever column it is given (the tabular catalog's aggregates, ``_common.AGGREGATES``), so no column
    measured is needed and none is guessed. ``None`` when the aggregate read is not ``count``, a column
    was named, or no grouping column was read."""
    counts = any(
        read.found and read.value == "count"
        for name, read in reads.items()
        if name in {parameter.python_name for parameter in tool.parameters if parameter.choices}
    )
    grouping = reads.get("by")
    if not counts or grouping is None or not grouping.found or not isinstance(grouping.value, str):
        return None
    for parameter in tool.required_parameters:
        if parameter.meaning == "columns" and parameter.state is None and not reads.get(parameter.python_name, _Read()).found:
            why = f"'count' counts the rows of each group, so no column to measure is needed: the grouping column {grouping.value!r} is counted, a column of {table.source} (in {whose})"
            return parameter.python_name, _Read([grouping.value], grouping.words, why, True)
    return None


def _masked(text: str, mentions: Sequence[_Mention]) -> str:
    """``text`` with the column names blanked: a column called "total" is no choice of "sum"."""
    for mention in mentions:
        text = text[: mention.start] + " " * (mention.end - mention.start) + text[mention.end :]
    return text


# -- columns -----------------------------------------------------------------------------------------


def _columns(parameters: Sequence[ToolParameter], plain: str, words: str, whose: str, table: _Table) -> dict[str, _Read]:
    """Columns for ``parameters`` (all of one tool): axes from "Y by X", grouping columns after
    by/per/for each/on, then the columns named that no other parameter took."""
    if not table.columns:
        return {parameter.python_name: _Read(words=words, why=table.missing()) for parameter in parameters}
    mentions = _mentions(plain, list(table.columns))
    # A column a comparison follows ("revenue between 800 and 1200") is a condition's, not one to keep,
    # drop or plot (one that words of comparison follow without a value, "units over time", is not); so is
    # one said to have no value ("rows with a missing revenue"), unless the words remove rows: "drop the
    # rows where revenue is missing" names the column whose gaps remove a row.
    removing = _REMOVING.search(plain) is not None
    # "molecules that are drug-like": a bool column said to hold is a condition's, not one to act on.
    asserted = [mention for mention, _ in _asserted(plain, table)]
    mentions = [mention for mention in mentions if not any(other.start < mention.end and mention.start < other.end for other in asserted)]
    named = list(dict.fromkeys(mention.column for mention in mentions if _names_column(plain, mention, table, removing)))
    pair = next(
        (
            (first.column, second.column, plain[first.start : second.end])
            for first, second in zip(mentions, mentions[1:])
            if _PAIR_LINK.fullmatch(plain[first.end : second.start])
        ),
        None,
    )
    grouped: list[str] = []
    for number, mention in enumerate(mentions):
        before = plain[: mention.start]
        chained = (
            number > 0 and mentions[number - 1].column in grouped and re.fullmatch(r"\s*(?:,|and|,\s*and)\s*", plain[mentions[number - 1].end : mention.start])
        )
        if _GROUPING.search(before) or chained:
            grouped.append(mention.column)
    grouped = list(dict.fromkeys(grouped))
    reads: dict[str, _Read] = {}
    claimed: set[str] = set()
    source = f"a column of {table.source}"

    def take(parameter: ToolParameter, value: Any, why: str) -> None:
        reads[parameter.python_name] = _Read(value, words, f"{why}, {source} (in {whose})", True)
        claimed.update(value if isinstance(value, list) else [value])

    singles = [parameter for parameter in parameters if parameter.meaning == "column"]
    # Which column goes where: a role the words name ("units on the x axis", "regions as rows") first,
    # then "Y by X" for a chart's axes, then what groups or kinds of columns decide (_axes, _two_way).
    for name, (column, phrase) in _roles(singles, plain, mentions).items():
        take(next(parameter for parameter in singles if parameter.python_name == name), column, f"'{phrase}' gives {name} the column {column!r}")
    axes = {parameter.python_name: parameter for parameter in singles if parameter.python_name in ("x", "y")}
    free_pair = pair if pair is not None and not {pair[0], pair[1]} & claimed else None
    if free_pair is not None and len(axes) == 2 and not set(axes) & set(reads):
        take(axes["y"], free_pair[0], f"'{free_pair[2]}' (Y by X) puts {free_pair[0]!r} on the vertical axis")
        take(axes["x"], free_pair[1], f"'{free_pair[2]}' (Y by X) puts {free_pair[1]!r} on the horizontal axis")
    timed = _time_columns(plain, table)
    if len(axes) == 2:
        free_named, free_grouped = [column for column in named if column not in claimed], [column for column in grouped if column not in claimed]
        for name, column, why in _axes(plain, free_named, free_grouped, timed, set(reads), table):
            take(axes[name], column, why)
    two_way = {parameter.python_name: parameter for parameter in singles if parameter.python_name in ("rows", "columns")}
    if len(two_way) == 2 and not set(two_way) & set(reads):
        for name, column, why in _two_way([column for column in grouped if column not in claimed], free_pair, table):
            take(two_way[name], column, why)
    grouping_words = set(grouped)
    grouped = list(dict.fromkeys(grouped + [column for _, column, _ in timed if column not in grouped]))
    for parameter in singles:
        if parameter.python_name in reads or parameter.python_name in axes:
            continue
        if parameter.python_name in ("by", "on") and len(grouping_words) > 1:
            reads[parameter.python_name] = _several_for_one(parameter, [column for column in grouped if column in grouping_words], words)
            claimed.update(grouping_words)
        elif parameter.python_name in ("by", "on") and grouped:
            adjective = next((word for _, column, word in timed if column == grouped[0]), "")
            said = f"'{adjective}' names the column {grouped[0]!r}, by which to group" if adjective and grouped[0] not in grouping_words else ""
            take(parameter, grouped[0], said or f"{grouped[0]!r} follows a word that groups or ranks by a column ('by', 'per', 'for each', 'on')")
    # A column the table has as a parameter's default keeps it: the words that name another column
    # ("every compound in compounds.csv", a table with a 'compound' column) speak of its rows.
    open_singles = [
        parameter
        for parameter in singles
        if parameter.python_name not in reads and not (isinstance(parameter.default, str) and parameter.default in table.columns)
    ]
    unclaimed = [column for column in named if column not in claimed]
    # A parameter whose default names a column the table lacks takes the one column named only when the
    # words call it a column ("the structure column"): in "translate the product names" the column
    # 'product' is what the words are about, not the molecules' column, and guessing would run the tool on it.
    guessed = len(open_singles) == 1 and isinstance(open_singles[0].default, str) and len(unclaimed) == 1
    if len(open_singles) == 1 and len(unclaimed) == 1 and not (guessed and not _called_a_column(plain, mentions, unclaimed[0])):
        take(open_singles[0], unclaimed[0], f"{unclaimed[0]!r} is the one column named that no other parameter took")
    elif open_singles:
        for parameter in open_singles:
            if isinstance(parameter.default, str):
                reads[parameter.python_name] = _missing_default_column(parameter, words, table)
                continue
            if not unclaimed:
                why = f"the words name no column of {table.source} for it (its columns: {table.listed()})"
            elif parameter.python_name in axes:
                why = f"the words name {', '.join(map(repr, unclaimed))} but do not say which is on which axis: say 'Y by X' (e.g. '{unclaimed[0]} by {unclaimed[-1]}')"
            else:
                why = f"the words name {', '.join(map(repr, unclaimed))} and nothing says which is {parameter.python_name}"
            reads[parameter.python_name] = _Read(words=words, why=why)
    for parameter in (parameter for parameter in parameters if parameter.meaning == "columns"):
        chosen = (
            [column for column in grouped if column not in claimed]
            if parameter.python_name == "by" and grouped
            else [column for column in named if column not in claimed]
        )
        if chosen:
            take(parameter, chosen, f"the columns the words name{' after by' if parameter.python_name == 'by' and grouped else ''}")
        else:
            reads[parameter.python_name] = _Read(words=words, why=f"the words name no column of {table.source} for it (its columns: {table.listed()})")
    return reads


def _several_for_one(parameter: ToolParameter, columns: Sequence[str], words: str) -> _Read:
    """The reading of a one-column grouping parameter when the words group by several ("per product and
    customer"): taking the first would aggregate the others as measures, so its part is not understood."""
    why = (
        f"the words group by several columns ({', '.join(map(repr, columns))}), and {parameter.python_name} takes one column: "
        f"group by one of them, or give {parameter.python_name} as an input"
    )
    return _Read(words=words, why=why, conflicting=True)


def _names_column(plain: str, mention: _Mention, table: _Table, removing: bool) -> bool:
    """Whether ``mention`` names a column to act on rather than one a condition is about (see :func:`_columns`)."""
    before = plain[: mention.start]
    comparison = _compared(plain, mention, table)
    missing_check = (comparison is not None and comparison[0][1:2] == ["is missing"]) or bool(_MISSING_BEFORE.search(before) or _NO_VALUE_BEFORE.search(before))
    if missing_check:
        return removing
    return comparison is None


def _called_a_column(plain: str, mentions: Sequence[_Mention], column: str) -> bool:
    """Whether the words call ``column`` a column where they name it: "the structure column", "column
    structure", "the column named structure"."""
    for mention in mentions:
        if mention.column != column:
            continue
        if re.match(r"['\"\u2019\u201d]?\s+columns?\b", plain[mention.end :], flags=re.IGNORECASE):
            return True
        if re.search(r"\bcolumns?\s+(?:(?:named|called)\s+)?['\"\u2018\u201c]?$", plain[: mention.start], flags=re.IGNORECASE):
            return True
    return False


def _missing_default_column(parameter: ToolParameter, words: str, table: _Table) -> _Read:
    """The reading of a column parameter the words leave to its default when the table has no column
    of that name: neither the default nor a guess is right (the tool would fail on the file), so
    its part is not understood, naming the table's columns ("compute descriptors for every molecule
    in sales.csv": sales.csv has no column 'smiles')."""
    why = (
        f"{table.source} has no column {parameter.default!r} (the default of {parameter.python_name}), and the words name no one "
        f"of its columns ({table.listed()}) for it: name the column, or give {parameter.python_name} as an input"
    )
    return _Read(words=words, why=why, conflicting=True)


#: The nouns a person names a column parameter's role with, by the parameter's name: the axes of a chart
#: ("units on the x axis", "y axis: revenue") and the parts of a pivot table ("regions as rows", "one
#: column per month", "revenue in the cells"). These are the conventional names of chart axes and pivot parts.
_ROLE_NOUNS = {
    "x": r"x[\s-]*axis|horizontal(?:\s+axis)?",
    "y": r"y[\s-]*axis|vertical(?:\s+axis)?",
    "rows": r"rows?",
    "columns": r"columns?",
    "values": r"values?|cells?",
}


def _roles(singles: Sequence[ToolParameter], plain: str, mentions: Sequence[_Mention]) -> dict[str, tuple[str, str]]:
    """``{parameter: (column, phrase)}`` for each single-column parameter whose role (:data:`_ROLE_NOUNS`)
    the words give exactly one column: "COL as/on/in/along/across the ROLE", "one ROLE per COL", "ROLE: COL"."""
    roles: dict[str, tuple[str, str]] = {}
    for parameter in singles:
        noun = _ROLE_NOUNS.get(parameter.python_name)
        if noun is None:
            continue
        found: dict[str, str] = {}
        for mention in mentions:
            after = re.match(rf"\s+(?:as|on|in|along|across|down|for)\s+(?:the\s+)?(?:{noun})(?![\w])", plain[mention.end :], flags=re.IGNORECASE)
            before = re.search(
                rf"(?:\b(?:one|a|an|each)\s+(?:{noun})\s+(?:per|for\s+each|for\s+every|for|by)\s+|\b(?:{noun})\s*(?:[:=]|\s(?:is|are|shows?|showing|holds?)\b)\s*)(?:(?:the|each|every)\s+)?$",
                plain[: mention.start],
                flags=re.IGNORECASE,
            )
            if after is not None:
                found.setdefault(mention.column, plain[mention.start : mention.end + after.end()].strip())
            elif before is not None:
                found.setdefault(mention.column, plain[before.start() : mention.end].strip())
        if len(found) == 1 and next(iter(found)) not in {column for column, _ in roles.values()}:
            roles[parameter.python_name] = next(iter(found.items()))
    return roles


#: Adjectives of time and the nouns of the columns they name ("monthly revenue": the column ``month``);
#: "daily" also names a column of dates.
_TIME_ADJECTIVES = {
    "hourly": ("hour",),
    "daily": ("day", "date"),
    "weekly": ("week",),
    "monthly": ("month",),
    "quarterly": ("quarter",),
    "yearly": ("year",),
    "annual": ("year",),
    "annually": ("year",),
}
_TIME_ADJECTIVE = re.compile(r"\b(" + "|".join(_TIME_ADJECTIVES) + r")\b", flags=re.IGNORECASE)
#: Words that put time on the horizontal axis without naming its column ("units over time").
_OVER_TIME = re.compile(r"\b(?:over|through|across|against)\s+time\b|\bas\s+a\s+time\s+series\b", flags=re.IGNORECASE)


def _time_columns(plain: str, table: _Table) -> list[tuple[int, str, str]]:
    """``(position, column, adjective)`` for each adjective of time (:data:`_TIME_ADJECTIVES`) whose noun
    names exactly one column of ``table``: "monthly revenue" groups (or plots) by the column ``month``."""
    found: list[tuple[int, str, str]] = []
    for match in _TIME_ADJECTIVE.finditer(plain):
        for noun in _TIME_ADJECTIVES[match.group(1).lower()]:
            columns = {mention.column for mention in _mentions(noun, list(table.columns)) if mention.end - mention.start == len(noun)}
            if len(columns) == 1:
                found.append((match.start(), columns.pop(), match.group(1)))
                break
    return found


def _axes(
    plain: str, named: Sequence[str], grouped: Sequence[str], timed: Sequence[tuple[int, str, str]], taken: set[str], table: _Table
) -> list[tuple[str, str, str]]:
    """``(axis, column, why)`` for the axes ``x`` and ``y`` that no role phrase or "Y by X" gave, when the
    words decide them: the one column after a grouping word ("revenue for each month") or named by an
    adjective of time ("monthly revenue") is the horizontal axis; "over time" puts there the table's one
    date column; of two columns named with nothing else to say, a date column goes on the horizontal axis
    against one of numbers, and a column of numbers on the vertical axis against one of text. (The column
    left for the vertical axis is then the one named that nothing took.) Nothing when the words do not decide."""
    if "x" in taken:
        return []
    along = list(dict.fromkeys([*grouped, *(column for _, column, _ in timed)]))
    if len(along) == 1:
        adjective = next((word for _, column, word in timed if column == along[0]), "")
        said = f"'{adjective}'" if adjective and along[0] not in grouped else "a word that groups by it ('for each', 'per', 'by')"
        return [("x", along[0], f"{along[0]!r} follows {said}: the values along the horizontal axis")]
    if along:
        return []
    dates = [column for column, kind in table.columns.items() if kind == "date"]
    if _OVER_TIME.search(plain) and len(dates) == 1:
        return [("x", dates[0], f"'{_OVER_TIME.search(plain).group()}' puts time on the horizontal axis, and {dates[0]!r} is the table's one date column")]  # type: ignore[union-attr]
    if "y" in taken or len(named) != 2:
        return []
    kinds = {column: table.columns.get(column) for column in named}
    numbers = [column for column in named if kinds[column] == "number"]
    other = [column for column in named if column not in numbers]
    if len(numbers) == 1 and kinds[other[0]] == "date":
        why = f"of the two columns named, {other[0]!r} holds dates (horizontal axis) and {numbers[0]!r} numbers (vertical axis)"
        return [("x", other[0], why), ("y", numbers[0], why)]
    if len(numbers) == 1 and kinds[other[0]] == "text":
        why = f"of the two columns named, {numbers[0]!r} holds the numbers measured (vertical axis) and {other[0]!r} the text they are measured for (horizontal axis)"
        return [("x", other[0], why), ("y", numbers[0], why)]
    return []


def _two_way(grouped: Sequence[str], pair: tuple[str, str, str] | None, table: _Table) -> list[tuple[str, str, str]]:
    """``(parameter, column, why)`` for a pivot's ``rows`` and ``columns`` that no role phrase gave: the two
    columns after a grouping word, in order ("median units by product and region": rows ``product``,
    columns ``region``), else "A by B" of two columns that do not hold numbers ("region by month"; in
    "revenue by region", revenue is what the cells hold). Nothing when the words do not decide."""
    if len(grouped) == 2:
        why = f"{grouped[0]!r} and {grouped[1]!r} follow a word that groups by columns: the first gives the rows, the second the columns"
        return [("rows", grouped[0], why), ("columns", grouped[1], why)]
    if pair is not None and not grouped[1:] and all(table.columns.get(column) != "number" for column in pair[:2]):
        why = f"'{pair[2]}' (A by B) crosses {pair[0]!r} (rows) with {pair[1]!r} (columns)"
        return [("rows", pair[0], why), ("columns", pair[1], why)]
    return []


# -- choices and counts -------------------------------------------------------------------------------


def _phrase(words: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])" + r"\s+".join(map(re.escape, words.lower().split())) + r"(?![\w])", flags=re.IGNORECASE)


def _choice(parameter: ToolParameter, masked: str, words: str, whose: str) -> _Read:
    """The one choice whose words (or value) the text uses; longer phrases first, so "largest first" is not "first"."""
    text = masked_quotes(masked)
    phrases = sorted(((phrase, value) for value, said in (parameter.choices or {}).items() for phrase in {value, *said}), key=lambda item: -len(item[0]))
    named: dict[str, str] = {}
    taken: list[tuple[int, int]] = []
    for phrase, value in phrases:
        for match in _phrase(phrase).finditer(text):
            if all(match.end() <= start or match.start() >= end for start, end in taken):
                taken.append((match.start(), match.end()))
                named.setdefault(value, phrase)
    if len(named) == 1:
        value, phrase = next(iter(named.items()))
        return _Read(value, words, f"'{phrase}' asks for {value!r} (in {whose})", True)
    if len(named) > 1:
        listed = ", ".join(f"{value!r} ('{phrase}')" for value, phrase in named.items())
        return _Read(
            words=words, why=f"the words name several choices for {parameter.python_name}: {listed}; give {parameter.python_name} as an input", conflicting=True
        )
    return _Read(words=words)


_NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
    "twenty": 20,
    "fifty": 50,
    "hundred": 100,
}
_AMOUNT = r"(\d+|" + "|".join(_NUMBER_WORDS) + r")"
_RANKS = r"top|first|last|bottom|largest|biggest|highest|smallest|lowest|best|worst"
_COUNT_BEFORE = re.compile(rf"\b(?:{_RANKS})\s+{_AMOUNT}\b", flags=re.IGNORECASE)
#: "the 3 sales with the lowest units", "the five products having the most revenue": a number of things
#: ranked by a column, within a few words.
_COUNT_RANKED = re.compile(
    rf"\bthe\s+{_AMOUNT}\s+[A-Za-z]+(?:\s+[\w.]+){{0,5}}?\s+(?:with|having|by|of)\s+(?:the\s+)?(?:{_RANKS}|most|least|fewest)\b", flags=re.IGNORECASE
)
_COUNT_AFTER = re.compile(rf"\b{_AMOUNT}\s+(rows?|records?|entries|entry|lines?|items?|results?|values?|bins?|buckets?|{_RANKS})\b", flags=re.IGNORECASE)


def _count(parameter: ToolParameter, counts: Sequence[ToolParameter], masked: str, words: str, whose: str) -> _Read:
    """A whole number the words give next to a word that counts ("top 5", "20 bins"); with several
    count parameters, only one whose name is the counted word."""
    found: list[tuple[int, str, str]] = []
    for match in _COUNT_BEFORE.finditer(masked):
        found.append((_amount(match.group(1)), "", match.group()))
    for match in _COUNT_AFTER.finditer(masked):
        found.append((_amount(match.group(1)), match.group(2).lower().rstrip("s"), match.group()))
    for match in _COUNT_RANKED.finditer(masked):
        found.append((_amount(match.group(1)), "", re.sub(r"\s+", " ", match.group())))
    if len(counts) > 1:
        found = [item for item in found if item[1] and parameter.python_name.lower().rstrip("s") == item[1]]
    amounts = list(dict.fromkeys(amount for amount, _, _ in found))
    if len(amounts) == 1:
        return _Read(amounts[0], words, f"'{found[0][2]}' gives {amounts[0]} (in {whose})", True)
    if len(amounts) > 1:
        return _Read(words=words, why=f"the words give several counts ({', '.join(map(str, amounts))}); give {parameter.python_name} as an input")
    return _Read(words=words)


def _amount(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBER_WORDS[text.lower()]


_ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
}
_ORDINAL = r"(\d+(?:st|nd|rd|th)|" + "|".join(_ORDINALS) + r")"
#: What a parameter's name adds to the thing it numbers: ``season_number`` numbers seasons.
_NUMBERING_SUFFIX = re.compile(r"_(?:number|num|no|index|nr)$")


def _numbered(parameter: ToolParameter, masked: str, words: str, whose: str) -> _Read:
    """The number the words give the thing ``parameter`` numbers (its name, less ``_number`` and the
    like): "season 2", "season #2", "season no. 2", "season two", "the second season", "the 2nd
    season". Only a name that is such a thing reads anything (``season_number``, ``episode``); one
    number said twice is one value, two different ones leave it unbound."""
    thing = _NUMBERING_SUFFIX.sub("", parameter.python_name.lower()).replace("_", " ").strip()
    if not thing or not thing.replace(" ", "").isalpha():
        return _Read(words=words)
    noun = re.escape(thing).replace(r"\ ", r"\s+") + r"s?"
    after = re.compile(rf"\b{noun}\s+(?:#\s*|no\.?\s*|number\s+)?{_AMOUNT}\b", flags=re.IGNORECASE)
    before = re.compile(rf"\b{_ORDINAL}\s+{noun}\b", flags=re.IGNORECASE)
    found = [(_amount(match.group(1)), match.group()) for match in after.finditer(masked)]
    found += [(_ordinal(match.group(1)), match.group()) for match in before.finditer(masked)]
    numbers = list(dict.fromkeys(number for number, _ in found))
    if len(numbers) == 1:
        return _Read(numbers[0], words, f"'{found[0][1]}' gives {parameter.python_name} {numbers[0]} (in {whose})", True)
    if len(numbers) > 1:
        listed = ", ".join(map(str, numbers))
        return _Read(words=words, why=f"the words give several numbers for {thing} ({listed}); give {parameter.python_name} as an input", conflicting=True)
    return _Read(words=words)


def _ordinal(text: str) -> int:
    return int(text[:-2]) if text[:-2].isdigit() else _ORDINALS[text.lower()]


# -- files ----------------------------------------------------------------------------------------------

_FILE_NAME = re.compile(r"^[\w./~-]*(?: [\w./~-]+)*\w\.[A-Za-z][A-Za-z0-9]{1,6}$")  # spaces only in a quoted value: "staff list.tsv"
#: File names inside a text ("sales.parquet", "out/report.md"), as :data:`_FILE_NAME` reads one alone.
_FILE_NAMES = re.compile(r"(?<![\w./~-])[\w./~-]*\w\.[A-Za-z][A-Za-z0-9]{1,6}(?![\w/-])")


def _file(words_and_whose: tuple[str, str], parts: Sequence[PartMatch], given: Mapping[str, Any], bound: Mapping[str, ArgumentReading]) -> _Read:
    """The one file the part names (else an earlier part) that no input gives yet."""
    words, whose = words_and_whose
    used = {str(value) for value in given.values()} | {str(reading.value) for reading in bound.values()}
    earlier: list[str] = []
    for part in parts:
        if part.text == words:
            break
        earlier += source_values(part.text)
    for texts, where in (([words], whose), (earlier, "an earlier part")):
        files = [value for text in texts for value in (source_values(text) if text is words else [text]) if _FILE_NAME.match(value) and value not in used]
        files = list(dict.fromkeys(files))
        if len(files) == 1:
            return _Read(files[0], words, f"{files[0]!r} is the file {where} names that no input gives yet", True)
        if len(files) > 1:
            return _Read(words=words, why=f"{where} names several files no input gives ({', '.join(map(repr, files))}); give the one meant as an input")
    return _Read(words=words, why="the words name no further file")


_DESTINATION = re.compile(
    r"\b(to|as|into|in|called|named)\s+(?:(?:a|the)\s+file\s+(?:called\s+|named\s+)?)?([\"'\u2018\u201c]?)([\w./~-]*\w\.[A-Za-z][A-Za-z0-9]{0,6})\2(?![\w/-])",
    flags=re.IGNORECASE,
)
_WRITING = re.compile(r"\b(?:save|saved|saving|write|written|writing|export|exported|store|stored|put|keep it)\b", flags=re.IGNORECASE)


def _output(parameter: ToolParameter, words: str, whose: str, data_files: set[str]) -> _Read:
    """A destination after "to", "as", "into", "called" or "named" (or "in", next to a verb of writing) whose suffix
    suits the parameter ("an Excel file called sales_copy.xlsx"); a file the task reads is none ("the file named sales.csv")."""
    suffixes = output_suffixes(parameter)
    suiting: list[str] = []
    for match in _DESTINATION.finditer(words):
        path = match.group(3)
        if match.group(1).lower() == "in" and not _WRITING.search(words):
            continue
        if path in data_files:
            if _written_over(words, match):
                why = (
                    f"the words name {path!r}, the file the task reads, as where to write ({match.group().strip()!r}): "
                    "writing there would replace the data it reads; name another file"
                )
                return _Read(words=words, why=why, conflicting=True)
            continue  # the task reads it ("the file named sales.csv"): no destination
        if not suffixes or os.path.splitext(path)[1].lower() in suffixes:
            suiting.append(path)
    suiting = list(dict.fromkeys(suiting))
    if len(suiting) == 1:
        return _Read(suiting[0], words, f"the words name {suiting[0]!r} as where to write (in {whose})", True)
    if len(suiting) > 1:
        return _Read(words=words, why=f"the words name several files to write ({', '.join(map(repr, suiting))}); give {parameter.python_name} as an input")
    return _Read(words=words)


#: A verb of writing and at most three words before a destination: "save it as", "write the sorted rows to".
_WRITING_BEFORE = re.compile(_WRITING.pattern + r"(?:\s+[\w'-]+){0,3}\s*$", flags=re.IGNORECASE)


def _written_over(words: str, destination: re.Match[str]) -> bool:
    """Whether ``destination`` (a :data:`_DESTINATION` match) is where a verb of writing just before it
    writes ("save it as employees.csv"), not a file the words identify ("the file named employees.csv")."""
    return destination.group(1).lower() in ("to", "as", "into", "in") and _WRITING_BEFORE.search(words[: destination.start()]) is not None


def output_suffixes(parameter: ToolParameter) -> set[str]:
    """The suffixes an output parameter takes: those its description lists ("(.md or .html)"), and its default's."""
    listed = {suffix.lower() for suffix in re.findall(r"(?<![\w])\.[A-Za-z][A-Za-z0-9]{1,6}\b", parameter.description)}
    if isinstance(parameter.default, str) and os.path.splitext(parameter.default)[1]:
        listed.add(os.path.splitext(parameter.default)[1].lower())
    return listed


# -- conditions ----------------------------------------------------------------------------------------

#: Operator phrases after a column, longest first within each; each maps to one of :data:`OPERATORS`.
_COMPARISONS: tuple[tuple[str, str], ...] = (
    (r"is\s+not\s+(?:missing|empty|blank|null)|is\s+(?:present|known|filled(?:\s+in)?)", "is not missing"),
    (r"is\s+(?:missing|empty|blank|null|unknown)", "is missing"),
    (r"(?:is\s+)?between", "between"),
    (
        r"(?:is\s+)?(?:at\s+least|(?:no|not)\s+(?:less|fewer|lower|smaller)\s+than|not\s+(?:below|under))|>=|of\s+at\s+least",
        ">=",
    ),
    (
        r"(?:is\s+)?(?:at\s+most|(?:no|not)\s+(?:more|greater|higher|bigger|larger)\s+than|not\s+(?:above|over))|<=|of\s+at\s+most",
        "<=",
    ),
    (r"(?:is\s+)?(?:over|above|more\s+than|greater\s+than|higher\s+than|bigger\s+than|larger\s+than|after)|exceeds|>", ">"),
    (r"(?:is\s+)?(?:below|under|less\s+than|lower\s+than|smaller\s+than|fewer\s+than|before)|<", "<"),
    (r"(?:is\s+)?since", ">="),
    (r"contains|includes|(?:is\s+)?containing", "contains"),
    (r"is\s+not|isn't|is\s+other\s+than|does\s+not\s+equal|doesn't\s+equal|not\s+equal\s+to|!=|<>", "!="),
    (r"is\s+equal\s+to|equals|is|==|=", "=="),
)
#: Words after a value that make it a bound: "40 or more" (>=), "65000 and under" (<=); dates too ("2021 or later").
_TRAILING_BOUND = re.compile(
    r"\s*,?\s*(?:or|and)\s+(?:(?P<up>more|greater|higher|larger|bigger|above|over|up|older|later|after)"
    r"|(?P<down>less|fewer|lower|smaller|below|under|younger|earlier|before))\b",
    flags=re.IGNORECASE,
)
_QUOTED_VALUE = r"\"[^\"]*\"|'[^']*'|\u2018[^\u2019]*\u2019|\u201c[^\u201d]*\u201d"
_NUMBER = r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+(?![,\d])|\d+)(?:\.\d+)?"
_STOP = r"(?:and|or|then|but|where|with|while|to|as|into|so|if|plot|show|sort|group|save|write|keep)\b"
_VALUE = rf"(?:{_QUOTED_VALUE}|{_NUMBER}(?![\w-])|\d{{4}}-\d{{2}}(?:-\d{{2}})?|(?!{_STOP})[^\s,;.!?]+(?:\s+(?!{_STOP})[^\s,;.!?]+){{0,2}})"
_NEGATED = re.compile(r"\b(?:not|except(?:\s+for)?|excluding|other\s+than|apart\s+from|but\s+not)\s+(?:the\s+)?", flags=re.IGNORECASE)
_MISSING_BEFORE = re.compile(
    r"\b(with(?:out)?|having|(?:that\s+|which\s+)?(?:have|has))\s+(?:(a|an|no|any)\s+)?(?:missing|empty|blank|null)\s+(?:values?\s+(?:in|for|of)\s+)?$",
    flags=re.IGNORECASE,
)
#: "rows without revenue", "rows that have no revenue": the column right after has no value in them.
_NO_VALUE_BEFORE = re.compile(r"\b(?:without(?:\s+(?:a|an|any))?|with\s+no|(?:have|has|having)\s+no)\s+$", flags=re.IGNORECASE)
#: Words that ask to remove rows ("drop the rows where revenue is missing"): conditions after them say
#: which rows go, the opposite of what a filter's conditions say (which rows stay).
_REMOVING = re.compile(
    r"\b(?:drop(?:s|ped|ping)?|remov(?:e|es|ed|ing)|delet(?:e|es|ed|ing)|discard(?:s|ed|ing)?|get\s+rid\s+of|throw\s+(?:away|out)|(?:filter|strip|take)\s+out)\b",
    flags=re.IGNORECASE,
)
_NO_MISSING = re.compile(
    r"\b(?:without|with\s+no|no)\s+(?:any\s+)?(?:missing|empty|blank|null)\s+(?:values?|cells?|entries)\b|\bwithout\s+(?:blanks|gaps)\b", flags=re.IGNORECASE
)
_ANY_MISSING = re.compile(r"\bwith\s+(?:a\s+|any\s+)?(?:missing|empty|blank|null)\s+(?:values?|cells?|entries)\b", flags=re.IGNORECASE)
_ASKS_CONDITION = re.compile(r"\b(?:where|whose|if|which|that\s+have|with|only|except|excluding|not)\b", flags=re.IGNORECASE)


def _conditions(plain: str, words: str, whose: str, table: _Table) -> _Read:
    """``[[column, operator, value], ...]`` the words state (see the module docstring)."""
    if not table.columns:
        return _Read(words=words, why=table.missing())
    conditions: list[list[Any]] = []
    reasons: list[str] = []
    consumed: list[tuple[int, int]] = []
    problems: list[str] = []
    condition_spans: list[tuple[int, int]] = []

    def held(span: tuple[int, int]) -> None:
        consumed.append(span)
        condition_spans.append(span)

    mentions = _mentions(plain, list(table.columns))
    removing = _REMOVING.search(plain)
    if removing is not None:
        return _Read(
            words=words,
            why=f"'{removing.group()}' says which rows to remove, while the conditions say which rows to keep: say which rows to keep ('keep the rows where …')",
        )
    for mention, holds in _asserted(plain, table):
        if any(start < mention.end and mention.start < end for start, end in consumed):
            continue
        conditions.append([mention.column, "==", holds])
        reasons.append(f"'{plain[mention.start : mention.end].strip()}' (the bool column {mention.column!r} {'holds' if holds else 'does not hold'})")
        held((mention.start, mention.end))
    mentions = [mention for mention in mentions if not any(start < mention.end and mention.start < end for start, end in consumed)]
    for mention in mentions:
        missing = _MISSING_BEFORE.search(plain[: mention.start])
        if missing is not None:
            negated = missing.group(1).lower() == "without" or (missing.group(2) or "").lower() == "no"
            operator = "is not missing" if negated else "is missing"
            conditions.append([mention.column, operator, None])
            reasons.append(f"'{plain[missing.start() : mention.end].strip()}'")
            held((missing.start(), mention.end))
            continue
        no_value = _NO_VALUE_BEFORE.search(plain[: mention.start])
        if no_value is not None and _comparison(plain, mention, table) is None:
            conditions.append([mention.column, "is missing", None])
            reasons.append(f"'{plain[no_value.start() : mention.end].strip()}'")
            held((no_value.start(), mention.end))
            continue
        read = _comparison(plain, mention, table)
        if read is None:
            continue
        condition, end, problem = read
        if problem:
            problems.append(problem)
            consumed.append((mention.start, end))
            continue
        conditions.append(condition)
        reasons.append(f"'{plain[mention.start : end].strip()}'")
        held((mention.start, end))
    for match in _NEGATED.finditer(plain):
        if any(start <= match.start() < end for start, end in consumed):
            continue
        values = _known_values(plain[match.end() :], table)
        if values is None:
            continue
        column, seen, length = values
        conditions.append([column, "!=", seen[0]] if len(seen) == 1 else [column, "not in", seen])
        reasons.append(f"'{plain[match.start() : match.end() + length].strip()}' ({', '.join(map(repr, seen))} seen in column {column!r})")
        held((match.start(), match.end() + length))
    constrained = {condition[0] for condition in conditions}
    for position in range(len(plain)):
        if any(start <= position < end for start, end in consumed) or (position and plain[position - 1].isalnum()):
            continue
        values = _known_values(plain[position:], table, only_start=True)
        if values is None or values[0] in constrained:
            continue
        column, seen, length = values
        conditions.append([column, "==", seen[0]] if len(seen) == 1 else [column, "in", seen])
        reasons.append(f"'{plain[position : position + length]}' ({', '.join(map(repr, seen))} seen in column {column!r})")
        held((position, position + length))
        constrained.add(column)
    either = _either(plain, conditions, condition_spans)
    if isinstance(either, str):
        return _Read(words=words, why=either, conflicting=True)
    conditions = either
    if _NO_MISSING.search(plain) and not any(condition[1] == "is not missing" for condition in conditions):
        conditions += [[column, "is not missing", None] for column in table.columns]
        every = _NO_MISSING.search(plain)
        reasons.append(f"'{every.group()}' (every column of {table.source})")  # type: ignore[union-attr]
        consumed.append(every.span())  # type: ignore[union-attr]
    elif _ANY_MISSING.search(plain) and not conditions:
        problems.append("'a missing value in any column' is not a condition that every row must meet; name the column ('with missing revenue')")
    if problems:
        return _Read(words=words, why="; ".join(problems))
    if conditions:
        return _Read(conditions, words, f"read {', '.join(reasons)} as conditions on {table.source} (in {whose})", True, spans=tuple(sorted(consumed)))
    if _ASKS_CONDITION.search(plain):
        return _Read(
            words=words,
            why=f"no condition could be read from {words!r}: name a column of {table.source} ({table.listed()}) and a comparison, e.g. 'where region is North', 'revenue over 1000'",
        )
    return _Read(words=words, why=f"the words state no condition on the rows (columns: {table.listed()})")


#: The words between two conditions that join them by "or": "city is Boston or city is Austin", "age under 30, or where salary is over 100000".
_OR_BETWEEN = re.compile(r"\s*,?\s*or\s+(?:(?:else|where|whose|if|with|the|rows?|ones?|those|that|which|have|has|is|are)\s+)*", flags=re.IGNORECASE)


def _either(plain: str, conditions: list[list[Any]], spans: Sequence[tuple[int, int]]) -> list[list[Any]] | str:
    """``conditions`` with those joined by "or" that are one column's equalities made one ``in``
    ("city is Boston or city is Austin"); why not, when other conditions are joined by "or": the
    filter keeps the rows that meet all of its conditions (``filter_rows``' docstring), so reading
    "or" as "and" would return the wrong rows."""
    order = sorted(range(len(conditions)), key=lambda index: spans[index])
    merged: list[list[Any]] = []
    last_end = -1
    for index in order:
        condition, (start, end) = conditions[index], spans[index]
        if merged and last_end <= start and _OR_BETWEEN.fullmatch(plain[last_end:start]):
            previous = merged[-1]
            if previous[0] == condition[0] and previous[1] in ("==", "in") and condition[1] in ("==", "in"):
                values = (previous[2] if previous[1] == "in" else [previous[2]]) + (condition[2] if condition[1] == "in" else [condition[2]])
                merged[-1] = [condition[0], "in", list(dict.fromkeys(values))]
                last_end = end
                continue
            return (
                f"'{plain[spans[order[order.index(index) - 1]][0] : end].strip()}' asks for the rows meeting either condition, while the filter keeps "
                "the rows meeting all of its conditions: say each as its own step, or compare one column ('where city is Boston or Austin')"
            )
        merged.append(condition)
        last_end = end
    return merged


def _comparison(plain: str, mention: _Mention, table: _Table) -> tuple[list[Any], int, str] | None:
    """``(condition, end, problem)`` for a comparison right after ``mention``, or ``None`` when none follows."""
    rest = plain[mention.end :]
    for phrase, operator in _COMPARISONS:
        # A phrase of words ends at a word's end; one of symbols (">=") may touch its value (">1000").
        match = re.match(rf"\s*(?:{phrase})(?:(?<=[A-Za-z'])(?![\w])|(?<=[=<>!]))", rest, flags=re.IGNORECASE)
        if match is None:
            continue
        start = mention.end + match.end()
        kind = table.columns[mention.column]
        if operator in ("is missing", "is not missing"):
            return [mention.column, operator, None], start, ""
        if operator == "between":
            between = re.match(rf"\s*({_VALUE})\s+and\s+({_VALUE})", plain[start:], flags=re.IGNORECASE)
            if between is None:
                return [], start, f"'{plain[mention.start : start].strip()}' is not followed by 'LOW and HIGH'"
            low, high = (_literal(between.group(1), kind), _literal(between.group(2), kind))
            if low is None or high is None:
                return [], start, f"{mention.column!r} holds {kind}s; '{between.group().strip()}' are not two of them"
            return [mention.column, "between", [low, high]], start + between.end(), ""
        first = re.match(rf"\s*({_VALUE})", plain[start:], flags=re.IGNORECASE)
        if first is None:
            return [], start, f"'{plain[mention.start : start].strip()}' is followed by no value"
        literals = [_matched_value(first.group(1), mention.column, kind, table)]
        end = start + first.end()
        if literals[0] is None:
            return [], start, f"{mention.column!r} holds {kind}s; {first.group(1)!r} is not one (in '{plain[mention.start : end].strip()}')"
        # "North or South", "North, South": further values only while they are values of the column.
        while (more := re.match(rf"(?:\s*,\s*or\s+|\s*,\s*|\s+or\s+)({_VALUE})", plain[end:], flags=re.IGNORECASE)) is not None:
            literal = _matched_value(more.group(1), mention.column, kind, table)
            if literal is None or (kind == "text" and literal not in table.values.get(mention.column, [])):
                break
            literals.append(literal)
            end += more.end()
        if len(literals) > 1 and operator in ("==", "!="):
            return [mention.column, "in" if operator == "==" else "not in", literals], end, ""
        if len(literals) > 1:
            return [], start, f"'{plain[mention.start : end].strip()}' compares with several values; give one"
        # "40 or more", "65000 and under": the words after the value turn "is 40" into a bound.
        bound = _TRAILING_BOUND.match(plain[end:])
        if bound is not None:
            trailing = ">=" if bound.group("up") else "<="
            if operator not in ("==", trailing, trailing[0]):
                return [], start, f"'{plain[mention.start : end + bound.end()].strip()}' says both {operator} and {trailing}; give one comparison"
            operator = trailing if operator == "==" else operator
            end += bound.end()
        if operator in (">", ">=", "<", "<=") and kind == "text":
            return [], start, f"{mention.column!r} holds text, which '{plain[mention.start : start].strip()}' does not compare"
        return [mention.column, operator, literals[0]], end, ""
    return None


#: The comparison phrases that order values (over, at least, between, ...): after a column, a value must follow.
_ORDERING = r"\s*(?:" + "|".join(phrase for phrase, operator in _COMPARISONS if operator in (">", ">=", "<", "<=", "between")) + r")(?![\w])"
#: "where …", "whose …", "with X is …": a clause that states conditions, up to the end of its sentence or the next step.
_CONDITION_CLAUSE = re.compile(
    r"\b(?:where|whose|with\s+(?:the\s+)?\w+(?:\s+\w+)?\s+(?:is|are)\b)[^;.!?]*?(?=\s*(?:[;.!?]|,?\s*(?:and\s+)?then\b)|\s*$)",
    flags=re.IGNORECASE,
)
#: A grouping by one word: "per year", "for each team", "for every city", "in each month" ("as per" is no grouping).
_GROUPED_BY_WORD = re.compile(r"(?<!\bas\s)\b(?:per|for\s+(?:each|every)|in\s+each)\s+(?:the\s+)?(?P<word>[A-Za-z][\w-]*)", flags=re.IGNORECASE)
#: Words after "over" that say an axis, not a bound: "units over time", "revenue over the months".
_AXIS_WORDS = re.compile(r"\s*(?:over|through|across|against)\s+(?:(?:the|each|every|a)\s+)?(?P<word>[\w-]+)", flags=re.IGNORECASE)


def _axis_after(plain: str, mention: _Mention, table: _Table) -> bool:
    """Whether "over …" after ``mention`` names an axis ("units over time", "revenue over month"), not a bound."""
    axis = _AXIS_WORDS.match(plain[mention.end :])
    return axis is not None and (axis.group("word").lower() in ("time", "period", "periods") or bool(_mentions(axis.group("word"), list(table.columns))))


def _compared(plain: str, mention: _Mention, table: _Table) -> tuple[list[Any], int, str] | None:
    """:func:`_comparison` when it reads a condition, ``None`` when it reads none or only a problem: "units
    over time" names the column ``units``, no comparison of it."""
    read = _comparison(plain, mention, table)
    return None if read is None or read[2] else read


def _matched_value(item: str, column: str, kind: str, table: _Table) -> Any:
    """A value for ``column``: a number for a number column, a date's text for a date column, the
    probe's spelling of a text value it saw (else the words as written, unquoted); ``None`` when it does not fit."""
    literal = _literal(item, kind)
    if kind == "text" and isinstance(literal, str):
        seen = [value for value in table.values.get(column, []) if str(value).lower() == literal.lower()]
        if seen:
            return seen[0]
        words = literal.split()
        for length in range(len(words) - 1, 0, -1):  # "North in 2024": the longest start the data has
            seen = [value for value in table.values.get(column, []) if str(value).lower() == " ".join(words[:length]).lower()]
            if seen:
                return seen[0]
    return literal


def _literal(text: str, kind: str) -> Any:
    """``text`` as a literal of a column of ``kind``: a number (``1,000`` → 1000), a bool, or text
    (quotes taken off); ``None`` when it is no value of that kind."""
    text = text.strip()
    if re.fullmatch(_QUOTED_VALUE, text):
        text = text[1:-1]
    if kind == "number":
        number = text.lstrip("$")
        if re.fullmatch(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?", number):  # "60,000", "1,200.50"; "3,4" is no one number
            number = number.replace(",", "")
        if re.fullmatch(r"[-+]?\d+", number):
            return int(number)
        if re.fullmatch(r"[-+]?\d*\.\d+", number):
            return float(number)
        return None
    if kind == "bool":
        return {"true": True, "yes": True, "false": False, "no": False}.get(text.lower())
    if kind == "date":
        return text if re.fullmatch(r"\d{4}(?:-\d{2}){0,2}(?:[ T][\d:]+)?", text) else None
    return text


def _known_values(text: str, table: _Table, only_start: bool = False) -> tuple[str, list[Any], int] | None:
    """``(column, values, length)`` when ``text`` starts with values the probe saw in one text column
    ("South", "South and East"); ``None`` when it does not, or when they are seen in several columns."""
    best: tuple[str, list[Any], int] | None = None
    for column, seen in table.values.items():
        found: list[Any] = []
        position = 0
        while True:
            value = next(
                (
                    value
                    for value in sorted(seen, key=lambda value: -len(str(value)))
                    if re.match(rf"{re.escape(str(value))}(?![\w])", text[position:], flags=re.IGNORECASE)
                ),
                None,
            )
            if value is None:
                break
            found.append(value)
            position += len(str(value))
            joiner = re.match(r"\s*(?:,\s*(?:or\s+|and\s+)?|or\s+|and\s+)(?:the\s+)?", text[position:], flags=re.IGNORECASE)
            if joiner is None or not any(re.match(rf"{re.escape(str(other))}(?![\w])", text[position + joiner.end() :], flags=re.IGNORECASE) for other in seen):
                break
            position += joiner.end()
        if found:
            if best is not None:
                return None  # seen in two columns: which one is meant is not said
            best = (column, found, position)
    return best
