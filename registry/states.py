"""States and state transitions: the vocabulary of the state-transition graph.

A *state* is a fact an agent can hold ("a molecule has been parsed"), named by a dotted token such as
``chemistry.molecule_parsed``. A tool's :class:`StateTransition` says which states it ``requires``
(all of them: a conjunction) and which it ``produces``. States are never removed once held, so a plan
only ever adds states.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from toolpath.registry.names import require_printable

#: A function by its import path, ``package.module:function``.
#: Any character ``str.isspace`` calls whitespace (``\s`` of a str pattern is the same class), found
#: in C: checking character by character took 24 ms of a 100,000-tool catalog snapshot's load.
_WHITESPACE = re.compile(r"\s")
_FUNCTION_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


class State(BaseModel):
    """A state token with a description and the affordances reaching it gives.

    Immutable; two states are equal (and hash equally) when their tokens are equal, so a ``State``
    and its token can be used interchangeably as set members of a :class:`StateTransition`.

    Attributes:
        token: dotted identifier, e.g. ``"chemistry.molecule_parsed"``; must be non-empty, with no
            whitespace or control character.
        description: one sentence saying what holding the state means.
        affordances: phrases saying what reaching the state lets an agent do ("check drug-likeness");
            skill search matches task text against them.
        input: the user holds this state at the start by giving its value (a file path, a
            request): no tool need produce it, and an input named like a parameter that carries it
            (``state: TOKEN``) makes a task hold it.
        refines: the token of a more general state this one is a kind of (``tabular.rows_filtered``
            refines ``tabular.table_loaded``: filtered rows are a table). A parameter carrying the
            general state takes the most recent artifact of it *or* of a refinement, so "filter the
            rows, then plot them" plots the filtered rows. Refinements chain; a cycle is a lint error.
        probe: for an input state, ``"package.module:function"``: a function that reads a little of
            a value the user gives (a table file's header and column types), so that a task's words
            can be matched to what the data holds ("plot revenue by month" → the columns
            ``revenue`` and ``month``). It takes the value and returns ``{"columns": {name: type}}``
            (see :mod:`toolpath.planner.tasks.probes`); it must read a bounded amount and never
            change anything. Imported only when a task gives such a value.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    token: str = Field(min_length=1)
    description: str = ""
    affordances: tuple[str, ...] = ()
    input: bool = Field(
        default=False, description="The user holds this state at the start by giving its value (an input named like a parameter that carries it)."
    )
    refines: str | None = Field(
        default=None, description="A more general state this one is a kind of: parameters carrying that state also take this one's artifacts."
    )

    probe: str | None = Field(
        default=None,
        description="For an input state: 'package.module:function' that reads a little of a value the user gives (a table's header) so a task's words can name what it holds.",
    )

    def __init__(self, token: str | None = None, description: str = "", affordances: Iterable[str] | None = None, **data: Any):
        if token is not None:
            data["token"] = token
        # Pydantic also routes model_validate through this __init__: pass values on unconverted so
        # the validators see exactly what the catalog said.
        super().__init__(description=description, affordances=() if affordances is None else affordances, **data)

    @field_validator("affordances", mode="before")
    @classmethod
    def _affordances_are_a_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            # Pydantic would split a lone string into characters; it is surely a missing pair of brackets.
            raise ValueError(f"expected a list of phrases, got the single string {value!r}; write [{value!r}]")
        return value

    @field_validator("token", "refines")
    @classmethod
    def _token_has_no_whitespace(cls, token: str | None) -> str | None:
        if token is None:
            return None
        require_printable(token, "state token")
        if _WHITESPACE.search(token):
            raise ValueError(f"state token {token!r} contains whitespace; use dots and underscores")
        return token

    @field_validator("probe")
    @classmethod
    def _probe_is_a_function_path(cls, probe: str | None) -> str | None:
        if probe is not None and not _FUNCTION_PATH.fullmatch(probe):
            raise ValueError(f"probe {probe!r} is not a function's path; write 'package.module:function', e.g. 'toolpath.catalogs.tabular.probe:probe_table'")
        return probe

    def __hash__(self) -> int:
        return hash(self.token)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, State):
            return self.token == other.token
        return NotImplemented

    def __str__(self) -> str:
        return self.token


def state_token(item: State | str | Enum) -> str:
    """Return the token of a ``State``, a ``str`` or a str-valued ``Enum`` member.

    Raises:
        TypeError: for any other item, naming its type.
    """
    if isinstance(item, State):
        return item.token
    if isinstance(item, Enum):
        if not isinstance(item.value, str):
            raise TypeError(f"enum member {item!r} has a non-string value; state tokens are strings")
        return item.value
    if isinstance(item, str):
        return item
    raise TypeError(f"expected a State, str or str Enum as a state, got {type(item).__name__}: {item!r}")


class StateTransition(BaseModel):
    """What a tool needs and what it yields, as sets of state tokens.

    ``requires`` and ``produces`` accept any collection (set, list, tuple, frozenset) of ``State``,
    ``str`` or str-``Enum`` items and are normalised to ``frozenset[str]``; they serialise as sorted
    lists so catalog files and JSON output are stable.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    requires: frozenset[str] = frozenset()
    produces: frozenset[str] = frozenset()

    @field_validator("requires", "produces", mode="before")
    @classmethod
    def _normalise_tokens(cls, value: Any) -> frozenset[str]:
        if value is None:
            return frozenset()
        if isinstance(value, (str, State, Enum)):
            # A lone token is almost always a missing pair of brackets; say so instead of
            # silently turning "a.b" into {"a", ".", "b"}.
            raise ValueError(f"expected a list of state tokens, got a single {type(value).__name__} {str(value)!r}; write [{str(value)!r}]")
        if not isinstance(value, Iterable) or isinstance(value, (bytes, dict)):
            raise ValueError(f"expected a list of state tokens, got {type(value).__name__}")
        try:
            # Text, as a catalog file gives it, needs no conversion (half the time of a large load's transitions).
            tokens = frozenset(value) if type(value) is list and all(type(item) is str for item in value) else frozenset(state_token(item) for item in value)
        except TypeError as error:
            # Pydantic reports ValueError as a validation error; a TypeError would escape it.
            raise ValueError(str(error)) from None
        if "" in tokens:
            raise ValueError("state tokens must be non-empty")
        for token in tokens:
            require_printable(token, "state token")
        return tokens

    @field_serializer("requires", "produces")
    def _sorted(self, tokens: frozenset[str]) -> list[str]:
        return sorted(tokens)
