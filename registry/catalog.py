"""Catalog files: the serialised form of a domain's states and tools, in YAML or JSON.

A catalog file has the top-level keys ``domain``, optional ``package``, ``states`` and ``tools``::

    domain: chemistry
    package: catalogs.chemistry          # tool X is imported as catalogs.chemistry.X.X
    states:
      - token: chemistry.molecule_parsed
        description: A SMILES string has been parsed into a validated molecule.
        affordances: [inspect a molecule's formula and weight]
    tools:
      - name: parse_molecule
        required_parameters: [{name: smiles, type: str}]
        return_spec: {name: molecule, type: dict, state: chemistry.molecule_parsed}
        state_transition: {requires: [], produces: [chemistry.molecule_parsed]}

A tool's ``server_name`` defaults to the catalog's ``domain``. Tools implemented by an MCP server name
it with ``mcp_server``, and the catalog declares it under ``mcp_servers`` (see
:mod:`toolpath.registry.mcp_servers`). The JSON Schema of this format is
:func:`catalog_json_schema` (``toolpath schema``).

The catalog JSON that agora-workbench serves — ``{server_name, tools: [...], skills: [...]}`` with
types written ``"builtins.str"`` — is read too (see :func:`from_agora_workbench`).

Loading is atomic: a file (or a set of files) with any error registers nothing, and
:class:`CatalogError` lists every problem with its file, line, column, field path and rule code.

Reading is bounded: a catalog must be a regular file of at most :data:`DEFAULT_MAX_CATALOG_BYTES`
(16 MiB) unless ``max_bytes=`` or the environment variable ``TOOLPATH_MAX_CATALOG_BYTES`` says
otherwise; pipes, devices and directories are refused without waiting on them. YAML is parsed by
libyaml when PyYAML has it (``yaml.__with_libyaml__``), else by PyYAML's pure-Python parser; both
give the same data, errors and positions. PyYAML reads YAML 1.1, where an unquoted ``yes``, ``no``,
``on`` or ``off`` is a boolean: as a mapping key it is refused (TP101, "quote it"), and where text was
expected the problem says so.
"""

from __future__ import annotations

import dataclasses
import difflib
import gc
import glob
import importlib.util
import json
import os
import re
import stat
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from toolpath.errors import Refusal
from toolpath.registry.mcp_servers import MCPServerConfig
from toolpath.registry.names import function_names, require_printable
from toolpath.registry.states import State, StateTransition
from toolpath.registry.tool_registry import ToolRegistry
from toolpath.registry.tools import ReturnSpec, ToolDefinition, ToolParameter

#: Rule codes of problems that stop a catalog from loading (the linter adds its own, TP0xx).
UNREADABLE = "TP100"
INVALID_FIELD = "TP101"
DUPLICATE_STATE = "TP102"
DUPLICATE_TOOL = "TP103"
NO_MODULE = "TP104"
SHARED_FUNCTION = "TP105"
UNKNOWN_MCP_SERVER = "TP106"
#: Every catalog of a load was skipped: the modules they need are missing (one skipped is only a warning).
NOTHING_LOADABLE = "TP107"


@dataclass(frozen=True)
class CatalogProblem:
    """One thing wrong with a catalog file; ``line`` and ``column`` are 1-based, or ``None`` if unknown."""

    path: str
    field: str
    message: str
    line: int | None = None
    column: int | None = None
    code: str = INVALID_FIELD

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}:{self.column or 1}"
        field_path = f" {self.field}:" if self.field else ""
        return f"{where}: {self.code}{field_path} {self.message}"

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "severity": "error",
            "field": self.field,
            "message": self.message,
        }


class CatalogError(Refusal, ValueError):
    """A catalog could not be loaded; ``problems`` says where and why. Nothing was registered.

    ``partial`` is the part of a single file that did validate (for the linter's further checks),
    or ``None``.
    """

    def __init__(self, problems: Sequence[CatalogProblem], partial: Catalog | None = None):
        self.problems = list(problems)
        self.partial = partial
        count = len(self.problems)
        files = len({problem.path for problem in self.problems})
        header = f"{count} problem{'s' if count != 1 else ''} in " + ("catalog" if files <= 1 else f"{files} catalogs")
        super().__init__(header + ":\n" + "\n".join(f"  {problem}" for problem in self.problems))


class WorkflowSkill(BaseModel):
    """A workflow skill, as agora-workbench serves them: a named kind of task and the states it
    works with (not a state itself)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The skill's name, e.g. `chemistry-rdkit`.")
    description: str = Field(default="", description="What kinds of task the skill serves.")
    domain: str | None = Field(default=None, description="The domain it belongs to.")
    states: list[str] = Field(default_factory=list, description="Tokens of the states the skill works with.")


def _importable(module: str) -> bool:
    """Whether top-level ``module`` is imported or can be found (without importing it)."""
    if sys.modules.get(module) is not None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules, or without a spec
        return False


class CatalogRequirements(BaseModel):
    """Python modules a catalog's tools import that an environment may lack (e.g. ``rdkit``), and
    how to install them. A catalog whose modules are missing is skipped when loaded, with that advice."""

    model_config = ConfigDict(extra="forbid")

    modules: list[str] = Field(min_length=1, description="Top-level modules the tools import, e.g. `rdkit`, `pandas`.")
    install: str = Field(default="", description="How to install them, e.g. `pip install 'toolpath[chemistry]'`.")

    @field_validator("modules")
    @classmethod
    def _module_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(f"{name!r} is not a module name (e.g. `rdkit`, `pandas`)")
        return value


class CatalogFile(BaseModel):
    """A toolpath catalog file: a domain's states and tools."""

    model_config = ConfigDict(extra="forbid", title="toolpath catalog")

    domain: str = Field(min_length=1, description="The domain, used as the server of tools that name none.")
    package: str | None = Field(default=None, description="Package whose module `{package}.{name}` implements tool `name`.")
    states: list[State] = Field(default_factory=list, description="The states tools require and produce.")
    tools: list[ToolDefinition] = Field(default_factory=list, description="The tools of the domain.")
    mcp_servers: dict[str, MCPServerConfig] = Field(
        default_factory=dict, description="MCP servers that implement tools (a tool names one with `mcp_server`), by name."
    )
    skills: list[WorkflowSkill] = Field(
        default_factory=list, description="Workflow skills (agora-workbench): named kinds of task and the states they work with."
    )
    requirements: CatalogRequirements | None = Field(
        default=None, description="Python modules the tools need that may be missing; without them the catalog is skipped, with this advice."
    )
    package_data: list[str] = Field(
        default_factory=list,
        description="Files in the tools' package directory that the tools read (globs relative to it, like `data/*.csv`): a sandboxed kernel sees the tools' Python modules and these, nothing else of that directory.",
    )

    @field_validator("package_data")
    @classmethod
    def _inside_the_package(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            parts = pattern.replace("\\", "/").split("/")
            if not pattern or pattern.startswith("/") or ".." in parts:
                raise ValueError(f"{pattern!r} is not a file pattern inside the package directory: give a relative glob like data/*.csv, without '..'")
        return patterns

    @field_validator("domain", "package")
    @classmethod
    def _printable(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The domain becomes a server name and the package a module path: both reach generated code.
        return value if value is None else require_printable(value, info.field_name)


def catalog_json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of catalog files, for editors and validators."""
    schema = CatalogFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


_pause_lock = threading.Lock()
_pauses = 0
_collector_was_enabled = False


@contextmanager
def garbage_collection_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the body runs (re-entrant, thread-safe).

    Parsing and validating a large catalog creates millions of objects that all stay alive; each
    collection the allocations trigger walks them again, which made a 25,000-tool catalog load
    several times slower. Nothing built here forms cycles that need collecting before the end.
    """
    global _pauses, _collector_was_enabled
    with _pause_lock:
        if _pauses == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _collector_was_enabled:
                # What was built is long-lived (a catalog lives as long as its registry): move it
                # straight to the oldest generation, as freeze() then unfreeze() does, instead of
                # having the young generations walk all of it (0.5 s each at 25,000 tools) before
                # it gets there. Not when someone froze objects on purpose: that would undo theirs.
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


class SourceLocator:
    """Maps field paths of one file to line/column, using YAML's node marks (JSON is valid YAML).

    The file's text is composed into nodes when a position is first asked for, then kept: a
    catalog without problems never needs one, and the nodes of a large catalog take several times
    the memory of its data.

    ``aliases`` renames top-level keys of a translated format back to the file's own
    (agora-workbench's ``server_name`` is this format's ``domain``).
    """

    def __init__(self, path: Path, text: str, *, is_json: bool = False):
        self.path = str(path)
        self._text: str | None = text
        self._is_json = is_json
        self._root: yaml.Node | None = None
        self._composing = threading.Lock()  # a second thread waits for the nodes, not sees none
        self.aliases: dict[str, str] = {}
        #: ``{(line, column): (text, value)}`` of each unquoted ``yes``/``no``/``on``/``off`` value
        #: YAML 1.1 read as a boolean (see :func:`boolean_word_advice`).
        self.boolean_words: dict[tuple[int, int], tuple[str, bool]] = {}

    @property
    def root(self) -> yaml.Node | None:
        """The document's root node (``None`` for an empty document or text YAML cannot compose)."""
        with self._composing:
            if self._text is not None:
                text = self._text
                if self._is_json:
                    # Raw tabs can only be whitespace in valid JSON, and YAML refuses them as
                    # indentation, so they become spaces (columns do not move).
                    text = text.replace("\t", " ")
                try:
                    with garbage_collection_paused():
                        self._root = yaml.compose(text, Loader=_YAML_LOADER)
                except (yaml.YAMLError, RecursionError):
                    self._root = None
                self._text = None
        return self._root

    def scalar_position(self, value: str) -> tuple[int | None, int | None]:
        """Position of the first scalar written as ``value`` (for JSON numbers, which have no marks)."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.ScalarNode) and node.value == value:
                return node.start_mark.line + 1, node.start_mark.column + 1
            if isinstance(node, yaml.MappingNode):
                stack.extend(child for pair in reversed(node.value) for child in reversed(pair))
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(reversed(node.value))
        return None, None

    def first_duplicate_key(self) -> tuple[int | None, int | None]:
        """Position of the first key that repeats within one mapping (for JSON, which has no marks)."""
        stack = [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode):
                        if key.value in seen:
                            return key.start_mark.line + 1, key.start_mark.column + 1
                        seen.add(key.value)
                    stack.append(value)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
        return None, None

    def _aliased(self, location: Sequence[str | int]) -> list[str | int]:
        if location and isinstance(location[0], str):
            return [self.aliases.get(location[0], location[0]), *location[1:]]
        return list(location)

    def _walk(self, location: Sequence[str | int]) -> tuple[yaml.Node | None, bool]:
        """The deepest node along ``location`` and whether the whole location was found."""
        node = self.root
        for key in self._aliased(location):
            if isinstance(node, yaml.MappingNode):
                child = next((value for name, value in node.value if getattr(name, "value", None) == key), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
                child = node.value[key]
            else:
                child = None
            if child is None:
                return node, False
            node = child
        return node, True

    def position(self, location: Sequence[str | int]) -> tuple[int | None, int | None]:
        """1-based (line, column) of the deepest node along ``location`` that exists."""
        node, _ = self._walk(location)
        if node is None:
            return None, None
        return node.start_mark.line + 1, node.start_mark.column + 1

    def item_index(self, location: Sequence[str | int], value: str) -> int | None:
        """Index of the scalar ``value`` in the list at ``location``, to point at one list item."""
        node, found = self._walk(location)
        if found and isinstance(node, yaml.SequenceNode):
            return next((index for index, child in enumerate(node.value) if isinstance(child, yaml.ScalarNode) and child.value == value), None)
        return None

    def boolean_words_at(self, location: Sequence[str | int]) -> list[tuple[str, bool]]:
        """``(text, value)`` of each unquoted ``yes``/``no``/``on``/``off`` read as a boolean that is
        the value at ``location`` or an item or value directly in it."""
        if not self.boolean_words:  # spares composing the nodes of a file that has none
            return []
        node, found = self._walk(location)
        if not found or node is None:
            return []
        if isinstance(node, yaml.SequenceNode):
            nodes = [node, *node.value]
        elif isinstance(node, yaml.MappingNode):
            nodes = [node, *(value for _, value in node.value)]
        else:
            nodes = [node]
        positions = [(each.start_mark.line + 1, each.start_mark.column + 1) for each in nodes]
        return [self.boolean_words[position] for position in positions if position in self.boolean_words]

    def problem(self, location: Sequence[str | int], message: str, code: str = INVALID_FIELD) -> CatalogProblem:
        location = self._aliased(location)
        line, column = self.position(location)
        return CatalogProblem(self.path, field_path(location), message, line, column, code)


@dataclass(frozen=True)
class Catalog:
    """A validated catalog file: its states and its tools (server and module already resolved).

    ``locator`` gives the line of any field (``catalog.locator.position(["tools", 0, "name"])``).
    """

    path: Path
    domain: str
    package: str | None
    states: tuple[State, ...]
    tools: tuple[ToolDefinition, ...]
    locator: SourceLocator = field(repr=False, compare=False)
    mcp_servers: dict[str, MCPServerConfig] = field(default_factory=dict)
    #: Index in the file's ``states``/``tools`` list of each item kept (items that failed validation
    #: are left out of a partial catalog); empty when every item was kept.
    state_indexes: tuple[int, ...] = ()
    tool_indexes: tuple[int, ...] = ()
    #: What items left out for a problem of their own would have declared or produced (as far as it
    #: can be read), so the linter does not report their absence as further problems.
    dropped_states: frozenset[str] = frozenset()
    dropped_produces: frozenset[str] = frozenset()
    skills: tuple[WorkflowSkill, ...] = ()
    requirements: CatalogRequirements | None = None
    package_data: tuple[str, ...] = ()

    def missing_modules(self) -> list[str]:
        """The :attr:`requirements` modules this environment cannot import (found without importing them)."""
        if self.requirements is None:
            return []
        return [name for name in self.requirements.modules if not _importable(name.split(".")[0])]

    def file_location(self, location: Sequence[str | int]) -> list[str | int]:
        """``location`` in the file: ``["tools", i, ...]`` and ``["states", i, ...]`` count this
        catalog's kept items (``self.tools[i]``); the file's list may hold others before them."""
        location = list(location)
        indexes = {"tools": self.tool_indexes, "states": self.state_indexes}.get(location[0]) if location else None
        if indexes and len(location) > 1 and isinstance(location[1], int):
            location[1] = indexes[location[1]]
        return location

    def problem(self, location: Sequence[str | int], message: str, code: str = INVALID_FIELD) -> CatalogProblem:
        """A problem at :meth:`file_location` of ``location``."""
        return self.locator.problem(self.file_location(location), message, code)


@dataclass(frozen=True)
class LoadedCatalogs:
    """Several catalogs loaded together: one registry holding every tool, and every state by token;
    ``skipped`` lists the catalogs left out because modules they need are missing."""

    catalogs: tuple[Catalog, ...]
    registry: ToolRegistry
    states: dict[str, State]
    skipped: tuple[SkippedCatalog, ...] = ()


class CatalogSkippedWarning(UserWarning):
    """A catalog was left out because Python modules its tools need are missing (the message says which and how to install them)."""


@dataclass(frozen=True)
class SkippedCatalog:
    """A catalog left out of a load: its file, domain, the modules it lacks, and how to install them."""

    path: Path
    domain: str
    missing: tuple[str, ...]
    install: str

    def reason(self) -> str:
        """Why it was skipped, and how to install what it lacks."""
        advice = f": {self.install}" if self.install else ""
        return f"it needs {', '.join(self.missing)}, which cannot be imported here{advice}"

    def __str__(self) -> str:
        return f"catalog {self.domain!r} ({self.path}) is skipped: {self.reason()}"


def field_path(location: Sequence[str | int]) -> str:
    """``["tools", 0, "name"]`` → ``"tools[0].name"``."""
    path = ""
    for key in location:
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else str(key))
    return path


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Largest catalog file read by default, in bytes (16 MiB: a 25,000-tool catalog is about 10 MiB of YAML).
DEFAULT_MAX_CATALOG_BYTES = 16 * 2**20
#: Environment variable that raises (or lowers) the limit for every read, e.g. from the CLI.
MAX_CATALOG_BYTES_VARIABLE = "TOOLPATH_MAX_CATALOG_BYTES"


def _unreadable(path: Path, message: str) -> CatalogError:
    return CatalogError([CatalogProblem(str(path), "", message, code=UNREADABLE)])


def _size_limit(path: Path, max_bytes: int | None) -> int:
    """``max_bytes``, else the environment variable, else the default; an unusable variable is the catalog's error."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
        return max_bytes
    configured = os.environ.get(MAX_CATALOG_BYTES_VARIABLE)
    if configured is None or not configured.strip():
        return DEFAULT_MAX_CATALOG_BYTES
    try:
        limit = int(configured)
    except ValueError:
        limit = 0
    if limit < 1:
        raise _unreadable(
            path,
            f"the environment variable {MAX_CATALOG_BYTES_VARIABLE}={configured!r} is not a positive number of bytes; set it to one (e.g. {4 * DEFAULT_MAX_CATALOG_BYTES} for 64 MiB) or unset it",
        )
    return limit


def _file_kind(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


def _byte_count(count: int) -> str:
    """``16,777,216 bytes (16 MiB)``: exact, and readable when large."""
    return f"{count:,} bytes" + (f" ({count / 2**20:.4g} MiB)" if count >= 2**20 else "")


def _too_large(size: int | None, limit: int) -> str:
    found = f"the file is {_byte_count(size)}," if size is not None else "the file is"
    # Twice what the file needs, rounded up to whole MiB.
    suggested = -(-2 * max(size or 0, limit + 1) // 2**20) * 2**20
    return (
        f"{found} over the limit of {_byte_count(limit)} for a catalog; if it really is one, raise the limit: "
        f"set the environment variable {MAX_CATALOG_BYTES_VARIABLE}={suggested} ({suggested // 2**20} MiB), or pass max_bytes= from Python"
    )


def _read_text(path: Path, limit: int) -> str:
    """The text of ``path``, which must be a regular file of at most ``limit`` bytes.

    The file is opened once and checked through its descriptor, so it cannot be swapped for a pipe
    or a device between the check and the read; at most ``limit + 1`` bytes are ever read.

    Raises:
        CatalogError: TP100 for a file that cannot be opened, is not a regular file, is larger than
            ``limit`` bytes, or is not UTF-8.
    """
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. Regular
    # files, the only kind read, ignore it.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise _unreadable(path, f"cannot read catalog file: it does not exist (looked for {os.path.abspath(path)}); check the path") from None
    except PermissionError:
        raise _unreadable(path, "cannot read catalog file: permission denied; make it readable, or give a copy you can read") from None
    except OSError as error:
        raise _unreadable(path, f"cannot read catalog file: {error.strerror or error}") from None
    chunks: list[bytes] = []
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _unreadable(path, f"cannot read catalog file: it is {_file_kind(status.st_mode)}, not a regular file")
        if status.st_size > limit:
            raise _unreadable(path, _too_large(status.st_size, limit))
        # The size can be wrong (a file still growing, /proc): read one byte past the limit to know.
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, 2**20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as error:
        raise _unreadable(path, f"cannot read catalog file: {error}") from None
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > limit:
        raise _unreadable(path, _too_large(None, limit))
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is not content
    except UnicodeDecodeError as error:
        raise _unreadable(path, f"cannot read catalog file: {error}") from None
    # Line ends as Path.read_text gives them, so positions and values are what they always were.
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


#: Aliases let a few bytes of YAML expand into billions of nodes; no real catalog needs more than
#: this many nodes added by them (a catalog without anchors adds none).
MAX_ALIAS_EXPANSION = 1_000_000

#: The longest integer a catalog may write, in digits: Python's default limit for converting an
#: integer to or from text (``sys.int_info.default_max_str_digits``). Past it, reading the number
#: and printing it (in a message, a signature) raise ``ValueError``.
MAX_INTEGER_DIGITS = sys.int_info.default_max_str_digits

_STR_TAG = "tag:yaml.org,2002:str"
_BOOL_TAG = "tag:yaml.org,2002:bool"
#: What YAML 1.1 (PyYAML) reads as a boolean besides ``true``/``false``, when written unquoted
#: (``y``/``n`` stay strings in PyYAML).
_BOOLEAN_WORDS = frozenset({"yes", "no", "on", "off"})


def boolean_word_advice(text: str, value: bool) -> str:
    """Why an unquoted ``yes``/``no``/``on``/``off`` became a boolean, and what to do."""
    return f"`{text}` unquoted is YAML 1.1's boolean {value}, not the text {text!r}: quote it ('{text}')"


_SEQUENCE_TAG = "tag:yaml.org,2002:seq"
_MAPPING_TAG = "tag:yaml.org,2002:map"


class _CatalogConstructor(yaml.constructor.SafeConstructor):
    """PyYAML's safe constructor with a catalog's rules.

    A mapping that repeats a key is an error instead of last-one-wins; an integer longer than
    :data:`MAX_INTEGER_DIGITS` and a date or time that does not exist are errors at their position
    instead of a ``ValueError`` from deep inside PyYAML.

    Every unquoted ``yes``/``no``/``on``/``off`` read as a boolean is kept in ``boolean_words``,
    by node id, with whether it is a mapping key: a key can only be a mistake, and a value may be.
    """

    def __init__(self) -> None:
        super().__init__()
        self.boolean_words: dict[int, tuple[yaml.ScalarNode, bool]] = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if _is_boolean_word(key_node):
                self.boolean_words[id(key_node)] = (key_node, True)
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key_node.value!r}", key_node.start_mark)
                seen.add(key_node.value)
        return super().construct_mapping(node, deep)

    def construct_bounded_int(self, node: yaml.ScalarNode) -> int:
        problem = f"this integer has more than {MAX_INTEGER_DIGITS:,} digits, more than Python reads or prints; quote it if it is text, or use a float"
        # Checked on the text first: sexagesimal (1:30:00) and binary integers are built digit by
        # digit, and a megabyte of them would take minutes before the value could be checked.
        if len(node.value) > MAX_INTEGER_DIGITS:
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        try:
            value = super().construct_yaml_int(node)
            str(value)  # a short hexadecimal literal can still be too long in decimal
        except ValueError:
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None
        return value

    def construct_recorded_bool(self, node: yaml.ScalarNode) -> bool:
        if _is_boolean_word(node):
            self.boolean_words.setdefault(id(node), (node, False))  # a key was recorded as one already
        return super().construct_yaml_bool(node)

    def construct_checked_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as error:
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a valid date or time ({error}); quote it if it is text", node.start_mark
            ) from None

    def construct_tree(self, root: yaml.Node) -> tuple[Any, bool]:
        """The data of a document, built without PyYAML's per-node generators.

        Plain strings, lists and mappings with string keys, which make up nearly all of a catalog,
        are built here, iteratively (a document nested a thousand deep needs no recursion); every
        other node (numbers, ``!!set``, merge keys ``<<``, non-string keys) goes through
        :meth:`construct_object`, so the result equals PyYAML's. A collection reached again
        through an alias is built once and shared, as PyYAML does, so even one that contains
        itself ends.

        Returns:
            ``(data, shared)``: ``shared`` is true when a collection was reached twice, or was built
            by PyYAML (which may have reached one twice, unseen here); the caller then bounds what
            aliases expand to before anything walks the data.
        """
        scalar, sequence, mapping_node = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode
        holder: list[Any] = [None]
        built: dict[int, Any] = {}
        shared = False
        # (node, container, slot): build node into container[slot]. Plain strings are filled in as
        # their container is built, so mostly collections pass through here.
        pending: list[tuple[yaml.Node, Any, Any]] = [(root, holder, 0)]
        while pending:
            node, parent, slot = pending.pop()
            if type(node) is scalar:
                parent[slot] = node.value if node.tag == _STR_TAG else self.construct_object(node, deep=True)
                continue
            if id(node) in built:
                parent[slot] = built[id(node)]
                shared = True
                continue
            value: Any = None
            deferred: list[tuple[yaml.Node, Any, Any]] = []
            if node.tag == _SEQUENCE_TAG and type(node) is sequence:
                value = []
                for child in node.value:
                    if child.tag == _STR_TAG and type(child) is scalar:
                        value.append(child.value)
                    else:
                        deferred.append((child, value, len(value)))
                        value.append(None)
            elif node.tag == _MAPPING_TAG and type(node) is mapping_node:
                value = {}
                for key_node, value_node in node.value:
                    if key_node.tag != _STR_TAG or type(key_node) is not scalar:
                        value = None  # a merge key `<<` or a key that is not a string
                        break
                    key = key_node.value
                    if key in value:
                        raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                    if value_node.tag == _STR_TAG and type(value_node) is scalar:
                        value[key] = value_node.value
                    else:
                        value[key] = None  # keeps the file's key order
                        deferred.append((value_node, value, key))
            if value is None:
                value = self.construct_object(node, deep=True)
                shared = True
            else:
                pending.extend(deferred)
            built[id(node)] = parent[slot] = value
        return holder[0], shared


_CatalogConstructor.add_constructor("tag:yaml.org,2002:int", _CatalogConstructor.construct_bounded_int)
_CatalogConstructor.add_constructor("tag:yaml.org,2002:timestamp", _CatalogConstructor.construct_checked_timestamp)
_CatalogConstructor.add_constructor(_BOOL_TAG, _CatalogConstructor.construct_recorded_bool)


def _is_boolean_word(node: yaml.Node) -> bool:
    """Whether ``node`` is an unquoted ``yes``/``no``/``on``/``off`` that YAML 1.1 reads as a boolean."""
    return isinstance(node, yaml.ScalarNode) and node.tag == _BOOL_TAG and not node.style and node.value.lower() in _BOOLEAN_WORDS


class _PurePythonLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer, _CatalogConstructor, yaml.resolver.Resolver):
    """PyYAML's pure-Python parser with the catalog constructor (what ``yaml.SafeLoader`` is, with ours)."""

    def __init__(self, stream: str):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _CatalogConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


def _libyaml_refuses_deep_nesting() -> bool:
    """Whether PyYAML has libyaml, and one that refuses documents nested over 1,000 levels deep
    (``exceeded maximum nesting depth``, as the libyaml 0.2.6 in PyYAML 6.0.4's wheels does).

    PyYAML composes the nodes libyaml parses by recursing in C: without that limit, a hostile file
    could overflow the stack and kill the process, so an older libyaml is not used.
    """
    if not getattr(yaml, "__with_libyaml__", False):
        return False
    try:
        yaml.compose("[" * 2000, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as error:
        return "nesting depth" in str(error)
    return False


if _libyaml_refuses_deep_nesting():

    class _LibyamlLoader(yaml.cyaml.CParser, _CatalogConstructor, yaml.resolver.Resolver):
        """libyaml's parser with the catalog constructor (what ``yaml.CSafeLoader`` is, with ours)."""

        def __init__(self, stream: str):
            yaml.cyaml.CParser.__init__(self, stream)
            _CatalogConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _YAML_LOADER: type = _LibyamlLoader
else:
    _YAML_LOADER = _PurePythonLoader


def yaml_parser() -> str:
    """``"libyaml"`` when catalogs are parsed by libyaml (several times faster), else ``"pure-python"``."""
    return "pure-python" if _YAML_LOADER is _PurePythonLoader else "libyaml"


def _alias_expansion(root: yaml.Node) -> tuple[int, int]:
    """``(nodes once aliases are expanded, nodes written)``; raises ``ValueError`` on a recursive alias."""
    sizes: dict[int, int] = {}
    expanding: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            expanding.discard(id(node))
            continue
        if id(node) in sizes:
            continue
        if id(node) in expanding:
            raise ValueError("an alias refers to a node that contains it")
        expanding.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)], len(sizes)


def _node_locations(root: yaml.Node, wanted: set[int]) -> dict[int, list[str | int]]:
    """The field path (``["mcp_servers", "on"]``) of each node whose id is in ``wanted``; a key's
    path ends with its own text."""
    found: dict[int, list[str | int]] = {}
    stack: list[tuple[yaml.Node, list[str | int]]] = [(root, [])]
    visited: set[int] = set()
    while stack and len(found) < len(wanted):
        node, location = stack.pop()
        if id(node) in visited:  # an alias reaches a node twice
            continue
        visited.add(id(node))
        if id(node) in wanted:
            found[id(node)] = location
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, [*location, index]) for index, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                step = key.value if isinstance(key, yaml.ScalarNode) else "?"
                if id(key) in wanted:
                    found[id(key)] = [*location, step]
                stack.append((value, [*location, step]))
    return found


def _load_yaml(path: Path, text: str) -> tuple[Any, dict[tuple[int, int], tuple[str, bool]]]:
    """The document, and each unquoted ``yes``/``no``/``on``/``off`` value read as a boolean:
    ``{(line, column): (its text, its value)}``, 1-based.

    Raises:
        CatalogError: a mapping key written ``yes``/``no``/``on``/``off`` unquoted (YAML 1.1 makes
            it a boolean, which no catalog field or name can be), each with its line; an alias bomb.
        yaml.YAMLError: the text is not YAML.
    """
    loader = _YAML_LOADER(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, {}
        document, shared = loader.construct_tree(root)
        boolean_keys = [node for node, is_key in loader.boolean_words.values() if is_key]
        if boolean_keys:
            locations = _node_locations(root, {id(node) for node in boolean_keys})
            raise CatalogError(
                [
                    CatalogProblem(
                        str(path),
                        field_path(locations.get(id(node), [])),
                        boolean_word_advice(node.value, loader.construct_yaml_bool(node)),
                        node.start_mark.line + 1,
                        node.start_mark.column + 1,
                    )
                    for node in sorted(boolean_keys, key=lambda node: node.start_mark.index)
                ]
            )
        boolean_values = {
            (node.start_mark.line + 1, node.start_mark.column + 1): (node.value, loader.construct_yaml_bool(node))
            for node, is_key in loader.boolean_words.values()
            if not is_key
        }
        # An alias is written `*name`: without one, nothing is shared, and nothing to bound.
        if shared and "*" in text:
            try:
                expanded, written = _alias_expansion(root)
            except ValueError as error:
                raise CatalogError(
                    [CatalogProblem(str(path), "", f"invalid YAML: {error}", root.start_mark.line + 1, root.start_mark.column + 1, UNREADABLE)]
                ) from None
            if expanded - written > MAX_ALIAS_EXPANSION:
                message = f"the document expands to {expanded:,} nodes through aliases, {expanded - written:,} more than it holds (limit {MAX_ALIAS_EXPANSION:,}); write it out without anchors"
                raise CatalogError([CatalogProblem(str(path), "", message, code=UNREADABLE)])
        return document, boolean_values
    finally:
        loader.dispose()


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


class _IntegerTooLong(Exception):
    """Raised from inside ``json.loads`` for an integer literal over :data:`MAX_INTEGER_DIGITS` digits."""

    def __init__(self, literal: str):
        super().__init__(literal)
        self.literal = literal


def _json_integer(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _IntegerTooLong(literal)
    return int(literal)


def parse_document(path: Path, text: str) -> tuple[Any, SourceLocator]:
    """Parse JSON (``.json``) or YAML (anything else) into data and a locator for its positions.

    Raises:
        CatalogError: with the position of a syntax error, a duplicate key, an integer longer than
            :data:`MAX_INTEGER_DIGITS`, an impossible date, or an alias bomb.
    """
    try:
        if path.suffix.lower() == ".json":
            locator = SourceLocator(path, text, is_json=True)
            try:
                document = json.loads(text, object_pairs_hook=_reject_duplicate_keys, parse_int=_json_integer)
            except json.JSONDecodeError as error:
                raise CatalogError([CatalogProblem(str(path), "", f"invalid JSON: {error.msg}", error.lineno, error.colno, UNREADABLE)]) from None
            except _IntegerTooLong as error:
                line, column = locator.scalar_position(error.literal)
                message = f"invalid JSON: this integer has more than {MAX_INTEGER_DIGITS:,} digits, more than Python reads or prints; write it as a string if it is text, or as a float"
                raise CatalogError([CatalogProblem(str(path), "", message, line, column, UNREADABLE)]) from None
            except ValueError as error:
                line, column = locator.first_duplicate_key()
                raise CatalogError([CatalogProblem(str(path), "", f"invalid JSON: {error}", line, column, UNREADABLE)]) from None
            return document, locator
        try:
            document, boolean_values = _load_yaml(path, text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            reason = getattr(error, "problem", None) or str(error)
            line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
            raise CatalogError([CatalogProblem(str(path), "", f"invalid YAML: {reason}", line, column, UNREADABLE)]) from None
        locator = SourceLocator(path, text)
        locator.boolean_words = boolean_values
        return document, locator
    except RecursionError:
        raise CatalogError([CatalogProblem(str(path), "", "the document is nested too deeply to read", code=UNREADABLE)]) from None


_BUILTINS_PREFIX = re.compile(r"\bbuiltins\.")


def _plain_type(value: Any) -> Any:
    """``"builtins.list[builtins.str]"`` → ``"list[str]"``; anything else unchanged (validation reports it)."""
    return _BUILTINS_PREFIX.sub("", value) if isinstance(value, str) else value


def from_agora_workbench(document: dict) -> dict:
    """Translate the catalog an agora-workbench tool server serves (``GET /catalog``) into this
    module's format.

    The payload (agora-workbench 0.2, ``code_execution/server.py``) is ``{"server_name", "tools",
    "skills"}``. Tools carry this format's fields, except that types are qualified names
    (``"builtins.str"``), ``return_spec`` is a list of named values (``{name, type, description}``),
    ``server_name`` is ``null`` and each has an ``id`` (its position on that server). ``skills`` are
    workflow skills (``{name, description, domain, states}``), not states; the payload declares no
    states at all, only tokens in ``state_transition`` and in skills. So:

    - the server name becomes the domain, and each tool's server;
    - every token becomes a declared state, described by the tools that produce it (their
      descriptions and affordances are what search can match);
    - one named return keeps its name and type; several become one ``dict`` named after the state
      the tool produces, each field listed in its description; either carries that state when the
      tool produces exactly one;
    - ``id`` is dropped (toolpath numbers tools itself) and skills are kept as workflow skills.

    Nothing from agora-workbench is imported; fields this format does not know are kept, so
    validation reports them.
    """
    server_name = document.get("server_name")
    translated: dict[str, Any] = {key: value for key, value in document.items() if key != "server_name"}
    translated["domain"] = server_name
    tools = document.get("tools")
    if isinstance(tools, list):
        translated["tools"] = [_agora_tool(tool, server_name) for tool in tools]
        translated.setdefault("states", _agora_states(translated["tools"], _listed(document.get("skills"))))
    return translated


def _agora_states(tools: list, skills: list) -> list[dict]:
    """A state for each token the tools and skills use, described by the tools that produce it."""
    tokens: dict[str, dict[str, Any]] = {}
    for tool in tools:
        transition = _listed_mapping(tool.get("state_transition")) if isinstance(tool, dict) else {}
        for token in [*_listed(transition.get("requires")), *_listed(transition.get("produces"))]:
            if isinstance(token, str):
                tokens.setdefault(token, {"token": token, "description": "", "affordances": []})
        for token in _listed(transition.get("produces")):
            if isinstance(token, str) and isinstance(tool.get("name"), str):
                state = tokens[token]
                made_by = f"{tool['name']}: {tool.get('description') or 'no description'}"
                state["description"] = f"{state['description']} {made_by}".strip() if state["description"] else f"Reached by {made_by}"
                state["affordances"] += [
                    phrase for phrase in _listed(tool.get("affordances")) if isinstance(phrase, str) and phrase not in state["affordances"]
                ]
    for skill in skills:
        for token in _listed(_listed_mapping(skill).get("states")):
            if isinstance(token, str):
                tokens.setdefault(token, {"token": token, "description": f"A state of the {skill.get('name')} skill.", "affordances": []})
    return list(tokens.values())


def _agora_tool(tool: Any, server_name: Any) -> Any:
    if not isinstance(tool, dict):
        return tool
    tool = {key: value for key, value in tool.items() if key != "id"}
    if tool.get("server_name") is None:
        tool["server_name"] = server_name
    for key in ("required_parameters", "optional_parameters"):
        if isinstance(tool.get(key), list):
            tool[key] = [{**parameter, "type": _plain_type(parameter.get("type"))} if isinstance(parameter, dict) else parameter for parameter in tool[key]]
    returns = tool.get("return_spec")
    if isinstance(returns, list):
        produced = [token for token in _listed(_listed_mapping(tool.get("state_transition")).get("produces")) if isinstance(token, str)]
        carried = produced[0] if len(produced) == 1 else None
        if not returns:
            tool["return_spec"] = None
        elif len(returns) == 1 and isinstance(returns[0], dict):
            tool["return_spec"] = {**returns[0], "type": _plain_type(returns[0].get("type")), "state": carried}
        else:
            fields = [entry for entry in returns if isinstance(entry, dict)]
            listed = "; ".join(f"{entry.get('name')} ({_plain_type(entry.get('type'))}): {entry.get('description') or ''}".rstrip(": ") for entry in fields)
            name = carried.rsplit(".", 1)[-1] if carried else f"{tool.get('name')}_result"
            tool["return_spec"] = {"name": name, "type": "dict", "description": f"a dict of {listed}", "state": carried}
    elif isinstance(returns, dict):
        tool["return_spec"] = {**returns, "type": _plain_type(returns.get("type"))}
    return tool


def _is_agora_workbench(document: dict) -> bool:
    return "server_name" in document and "domain" not in document


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else []


def _listed_mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _dropped_tokens(items: Any, kept: set[int], tokens_of: Callable[[dict], list]) -> frozenset[str]:
    """The string tokens ``tokens_of`` reads from the raw ``items`` (a file's list) not ``kept``."""
    return frozenset(
        token
        for index, item in enumerate(_listed(items))
        if index not in kept and isinstance(item, dict)
        for token in tokens_of(item)
        if isinstance(token, str)
    )


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` did you mean 'x'?`` for the known name closest to ``name`` (difflib's ratio ≥ 0.6), else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" did you mean {close[0]!r}?" if close else ""


def _field_names_at(location: Sequence[str | int]) -> list[str]:
    """The fields allowed where the unknown field at ``location`` (its last key) was written."""
    keys = [key for key in location[:-1] if isinstance(key, str)]
    if "mcp_servers" in keys or "mcp_server" in keys:
        model: type[BaseModel] = MCPServerConfig
    else:
        models = {
            "states": State,
            "tools": ToolDefinition,
            "required_parameters": ToolParameter,
            "optional_parameters": ToolParameter,
            "return_spec": ReturnSpec,
            "state_transition": StateTransition,
        }
        model = models.get(keys[-1], CatalogFile) if keys else CatalogFile
    return list(model.model_fields)


#: A step pydantic adds to an error's location for a validator (``function-after[_check(), str]``).
_VALIDATOR_STEP = re.compile(r"[a-z-]+\[.*\]")


def _validation_problems(locator: SourceLocator, error: ValidationError, prefix: Sequence[str | int] = ()) -> list[CatalogProblem]:
    problems = []
    for detail in error.errors(include_url=False):
        # Pydantic appends the validator's kind ("function-after[...]") to some locations; drop it.
        location = [*prefix, *(key for key in detail["loc"] if not (isinstance(key, str) and _VALIDATOR_STEP.fullmatch(key)))]
        message = detail["msg"]
        if detail["type"] == "extra_forbidden":
            suggestion = did_you_mean(str(location[-1]), _field_names_at(location)) if location else ""
            message = f"unknown field;{suggestion} check its spelling (the catalog format is in docs/catalogs.md of toolpath's source, the schema in `toolpath schema`)"
        elif detail["type"] != "missing" and "input" in detail:
            message += f" (found {_short_repr(detail['input'])})"
            message += "".join(f"; {boolean_word_advice(*word)}" for word in locator.boolean_words_at(location))
        problems.append(locator.problem(location, message))
    return problems


@garbage_collection_paused()
def read_catalog(path: str | Path, *, max_bytes: int | None = None) -> Catalog:
    """Read and validate one catalog file (toolpath or agora-workbench format).

    Args:
        path: a ``.yaml``/``.yml`` or ``.json`` file; it must be a regular file (not a pipe, a
            device or a directory).
        max_bytes: the largest file accepted, in bytes; ``None`` takes the environment variable
            ``TOOLPATH_MAX_CATALOG_BYTES``, else :data:`DEFAULT_MAX_CATALOG_BYTES` (16 MiB).

    Returns:
        The :class:`Catalog`; each tool's ``server_name`` defaults to the domain and its ``module``
        is resolved (``module_override`` > ``module`` > ``{package}.{name}``).

    Raises:
        CatalogError: listing every problem with file, line, column, field path and code. No other
            exception escapes for any file content. A file too large, not regular, or not UTF-8 is
            TP100, found without reading more than ``max_bytes + 1`` bytes or waiting on a pipe.
        ValueError: ``max_bytes`` is not a positive integer.
    """
    path = Path(path)
    text = _read_text(path, _size_limit(path, max_bytes))
    document, locator = parse_document(path, text)
    if not isinstance(document, dict):
        found = "an empty file" if document is None else f"a {type(document).__name__}"
        raise CatalogError([locator.problem([], f"a catalog is a mapping with keys domain, package, states, tools; found {found}", UNREADABLE)])
    if _is_agora_workbench(document):
        document = from_agora_workbench(document)
        locator.aliases = {"domain": "server_name"}
    try:
        header, states, tools, servers, problems = _validate_items(document, locator)
    except RecursionError:
        raise CatalogError([locator.problem([], "the document is nested too deeply to validate", UNREADABLE)]) from None

    seen_tokens: set[str] = set()
    for index, state in states:
        if state.token in seen_tokens:
            problems.append(locator.problem(["states", index, "token"], f"state {state.token!r} is declared twice", DUPLICATE_STATE))
        seen_tokens.add(state.token)

    resolved: list[tuple[int, ToolDefinition]] = []
    if header is not None:
        resolver = ToolRegistry(package=header.package)
        seen_tools: set[tuple[str | None, str]] = set()
        for index, tool in tools:
            server_name = tool.server_name or header.domain
            if (server_name, tool.name) in seen_tools:
                problems.append(locator.problem(["tools", index, "name"], f"server {server_name!r} already has a tool named {tool.name!r}", DUPLICATE_TOOL))
            seen_tools.add((server_name, tool.name))
            if isinstance(tool.mcp_server, str):
                server = servers.get(tool.mcp_server)
                if server is None:
                    if not servers.has_problem(tool.mcp_server):  # else that entry's own problem says enough
                        declared = ", ".join(sorted(servers)) or "none"
                        problems.append(
                            locator.problem(
                                ["tools", index, "mcp_server"],
                                f"tool {tool.name!r} names MCP server {tool.mcp_server!r}, which this catalog does not declare under `mcp_servers` (declared: {declared})",
                                UNKNOWN_MCP_SERVER,
                            )
                        )
                    continue
                resolved.append((index, tool.model_copy(update={"server_name": server_name, "mcp_server": server})))
                continue
            if tool.mcp_server is not None:  # a server written inline
                resolved.append((index, tool.model_copy(update={"server_name": server_name})))
                continue
            try:
                module = resolver.resolve_module(tool)
            except ValueError as error:
                problems.append(locator.problem(["tools", index], str(error).replace("ToolRegistry(package=...)", "a top-level `package:`"), NO_MODULE))
                continue
            resolved.append((index, tool.model_copy(update={"server_name": server_name, "module": module})))
    catalog = None
    if header is not None:
        catalog = Catalog(
            path,
            header.domain,
            header.package,
            tuple(state for _, state in states),
            tuple(tool for _, tool in resolved),
            locator,
            dict(servers),
            state_indexes=tuple(index for index, _ in states),
            tool_indexes=tuple(index for index, _ in resolved),
            dropped_states=_dropped_tokens(document.get("states"), {index for index, _ in states}, lambda item: [item.get("token")]),
            dropped_produces=_dropped_tokens(
                document.get("tools"), {index for index, _ in resolved}, lambda item: _listed(_listed_mapping(item.get("state_transition")).get("produces"))
            ),
            skills=tuple(header.skills),
            requirements=header.requirements,
            package_data=tuple(header.package_data),
        )
    if problems:
        raise CatalogError(problems, partial=catalog)
    assert catalog is not None
    return catalog


class _Servers(dict[str, MCPServerConfig]):
    """The valid ``mcp_servers`` entries by name. ``invalid`` names those that had problems, and
    ``unusable`` is set when ``mcp_servers`` itself was malformed: a tool naming one of those gets
    no second problem."""

    def __init__(self) -> None:
        super().__init__()
        self.invalid: set[str] = set()
        self.unusable = False

    def has_problem(self, name: str) -> bool:
        return self.unusable or name in self.invalid


def _validate_servers(value: Any, locator: SourceLocator, directory: Path) -> tuple[_Servers, list[CatalogProblem]]:
    """Each ``mcp_servers`` entry on its own, named from its key; a relative ``cwd`` is taken from
    the catalog's ``directory``."""
    servers, problems = _Servers(), []
    if not isinstance(value, dict):
        servers.unusable = True
        problems.append(
            locator.problem(["mcp_servers"], f"expected a mapping of server names to {{command, args}} or {{url, headers}}, found {_short_repr(value)}")
        )
        return servers, problems
    for name, entry in value.items():
        try:
            if not isinstance(name, str) or not name:
                raise ValueError(f"server names are non-empty strings, not {_short_repr(name)}")
            if isinstance(entry, dict) and entry.get("name", name) != name:
                raise ValueError(f"`name` {_short_repr(entry['name'])} differs from the key {name!r}; the key names the server, so remove `name`")
            server = MCPServerConfig.model_validate(entry)
            cwd = server.cwd if server.cwd is None or os.path.isabs(server.cwd) else str(directory / server.cwd)
            servers[name] = server.model_copy(update={"name": name, "cwd": cwd})
        except ValidationError as error:
            servers.invalid.add(name)
            problems.extend(_validation_problems(locator, error, prefix=["mcp_servers", name]))
        except ValueError as error:
            servers.invalid.add(str(name))
            problems.append(locator.problem(["mcp_servers", str(name)], str(error)))
    return servers, problems


def _validate_items(
    document: dict, locator: SourceLocator
) -> tuple[CatalogFile | None, list[tuple[int, State]], list[tuple[int, ToolDefinition]], _Servers, list[CatalogProblem]]:
    """Validate the header, then each state, tool and MCP server on its own, so one bad item does
    not hide the problems of the others; returns what is valid, with its index, and every problem."""
    problems: list[CatalogProblem] = []
    items: dict[str, list] = {"states": [], "tools": []}
    header_fields = dict(document)
    declared = header_fields.pop("mcp_servers", None)
    servers, server_problems = _validate_servers({} if declared is None else declared, locator, Path(locator.path).resolve().parent)
    problems.extend(server_problems)
    for key, model in (("states", State), ("tools", ToolDefinition)):
        value = header_fields.pop(key, None)
        if value is None:
            continue
        if not isinstance(value, list):
            problems.append(locator.problem([key], f"expected a list, found {_short_repr(value)}"))
            continue
        for index, entry in enumerate(value):
            # State's own __init__ takes the fields as keywords, so a key that is not text would
            # raise TypeError from inside pydantic rather than a validation error.
            names = [name for name in entry if not isinstance(name, str)] if isinstance(entry, dict) else []
            if names:
                problems.extend(locator.problem([key, index], f"field names are text, not {_short_repr(name)}; quote it") for name in names)
                continue
            try:
                items[key].append((index, model.model_validate(entry)))
            except ValidationError as error:
                problems.extend(_validation_problems(locator, error, prefix=[key, index]))
    header = None
    try:
        header = CatalogFile.model_validate(header_fields)
    except ValidationError as error:
        problems[:0] = _validation_problems(locator, error)
    return header, items["states"], items["tools"], servers, problems


@garbage_collection_paused()
def load_catalogs(paths: Iterable[str | Path], *, max_bytes: int | None = None) -> LoadedCatalogs:
    """Load several catalog files into one :class:`ToolRegistry` and one state table.

    All files are read and cross-checked before anything is registered: a state token declared
    differently in two files, or a (server, tool name) pair in two files, is an error.
    ``max_bytes`` limits the size of each file, as in :func:`read_catalog`. A catalog whose
    ``requirements`` modules cannot be imported here is left out, with a
    :class:`CatalogSkippedWarning`, and listed in :attr:`LoadedCatalogs.skipped`.

    Raises:
        CatalogError: with every problem found, in file order. Nothing is registered.
        ValueError: ``max_bytes`` is not a positive integer.
    """
    catalogs: list[Catalog] = []
    problems: list[CatalogProblem] = []
    # The same file named twice (`--catalog a.yaml --catalog ./a.yaml`) is loaded once.
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(Path(path).resolve(), Path(path))
    for path in unique.values():
        try:
            catalogs.append(read_catalog(path, max_bytes=max_bytes))
        except CatalogError as error:
            problems.extend(error.problems)
    if problems:
        raise CatalogError(problems)
    catalogs, skipped = without_missing_modules(catalogs)
    return dataclasses.replace(combine_catalogs(catalogs), skipped=tuple(skipped))


def without_missing_modules(catalogs: Iterable[Catalog]) -> tuple[list[Catalog], list[SkippedCatalog]]:
    """``catalogs`` split into those whose ``requirements`` modules can be imported here, and the
    others as :class:`SkippedCatalog` (each also warned of, with a :class:`CatalogSkippedWarning`).

    Raises:
        CatalogError: every catalog would be skipped (TP107, one problem per catalog saying what to
            install): there would be nothing to plan over.
    """
    usable: list[Catalog] = []
    skipped: list[SkippedCatalog] = []
    for catalog in catalogs:
        missing = catalog.missing_modules()
        if not missing:
            usable.append(catalog)
            continue
        skipped.append(SkippedCatalog(catalog.path, catalog.domain, tuple(missing), catalog.requirements.install if catalog.requirements else ""))
    if skipped and not usable:
        raise CatalogError([CatalogProblem(str(entry.path), "requirements.modules", entry.reason(), code=NOTHING_LOADABLE) for entry in skipped])
    for entry in skipped:
        warnings.warn(str(entry), CatalogSkippedWarning, stacklevel=3)
    return usable, skipped


def _shared_functions(catalogs: Sequence[Catalog]) -> list[CatalogProblem]:
    """Two differently named tools that one module would implement with the same function.

    ``get-forecast`` is implemented by ``get_forecast`` when its module has no function of its own
    name; if a tool ``get_forecast`` lives in the same module, both would call one function. Tools
    served by MCP servers have no module and are called by their own names.
    """
    names_by_module: dict[str, set[str]] = {}
    for catalog in catalogs:
        for tool in catalog.tools:
            if tool.module:
                names_by_module.setdefault(tool.module, set()).add(tool.name)
    problems = []
    for catalog in catalogs:
        for index, tool in enumerate(catalog.tools):
            fallback = function_names(tool.name)[1:]
            if fallback and tool.module and fallback[0] in names_by_module.get(tool.module, set()):
                message = (
                    f"tools {tool.name!r} and {fallback[0]!r} would both be implemented by function {fallback[0]!r} of module "
                    f"{tool.module!r}; give {tool.name!r} its own module (`module:`) or a distinct name"
                )
                problems.append(catalog.problem(["tools", index, "name"], message, SHARED_FUNCTION))
    return problems


def import_roots(catalogs: Iterable[Catalog]) -> list[str]:
    """Directories to put on an import path so each catalog's tools import, from any working directory.

    Two layouts work: the catalog inside its package (``root/a/b/catalog.yaml`` with ``package: a.b``
    needs ``root``), and the catalog beside it (``dir/catalog.yaml`` next to ``dir/a/`` or
    ``dir/a.py``, for ``package: a`` or a tool's ``module: a.x``, needs ``dir``).
    """
    roots: list[str] = []
    for catalog in catalogs:
        directory = catalog.path.resolve().parent
        if catalog.package:
            parts = catalog.package.split(".")
            if directory.parts[-len(parts) :] == tuple(parts):
                roots.append(str(directory.parents[len(parts) - 1]))
        modules = [catalog.package, *(tool.module_override or tool.module for tool in catalog.tools)]
        tops = {module.split(".")[0] for module in modules if module}
        if any((directory / top).is_dir() or (directory / f"{top}.py").is_file() for top in tops):
            roots.append(str(directory))
    return list(dict.fromkeys(roots))


def module_paths(catalogs: Iterable[Catalog]) -> list[str]:
    """The files a sandboxed kernel must see of the packages the catalogs' tools import (under
    :func:`import_roots`): for each module a tool names (and the catalog's ``package``), the
    ``__init__.py`` of each package above it, and the ``.py`` files (with their ``__pycache__``
    directories) of the package holding it; and the regular files its catalog's ``package_data``
    globs match there (not the catalog file). Nothing else: a package directory may hold a catalog
    file with an MCP server's credentials, or other data, and a package's root may be a whole
    checkout (``toolpath/catalogs/...`` in a clone named ``toolpath``)."""
    paths: list[str] = []
    for catalog in catalogs:
        roots = import_roots([catalog])
        for module in {catalog.package, *(tool.module_override or tool.module for tool in catalog.tools)} - {None}:
            parts = module.split(".")
            for root in roots:
                for depth in range(1, len(parts)):
                    paths.append(os.path.join(root, *parts[:depth], "__init__.py"))
                module_file = os.path.join(root, *parts) + ".py"
                package = os.path.join(root, *parts) if os.path.isdir(os.path.join(root, *parts)) else os.path.dirname(module_file)
                if package != root:  # a top-level module file has no package of its own to show
                    paths += _python_files(package)
                    paths += _package_data(package, catalog)
                paths.append(module_file)
    return list(dict.fromkeys(path for path in paths if os.path.lexists(path)))


def _python_files(directory: str) -> list[str]:
    """The ``.py`` files and ``__pycache__`` directories in ``directory`` and its subpackages
    (directories with an ``__init__.py``; links not followed)."""
    found = []
    for folder, subfolders, files in os.walk(directory):
        subfolders[:] = [name for name in subfolders if os.path.isfile(os.path.join(folder, name, "__init__.py"))] + (
            ["__pycache__"] if "__pycache__" in subfolders else []
        )
        if "__pycache__" in subfolders:
            subfolders.remove("__pycache__")
            found.append(os.path.join(folder, "__pycache__"))
        found += [os.path.join(folder, name) for name in sorted(files) if name.endswith(".py")]
    return found


def _package_data(package: str, catalog: Catalog) -> list[str]:
    """The regular files (not links, not the catalog file) ``catalog.package_data`` matches in ``package``."""
    itself = str(catalog.path.resolve())
    matches = (match for pattern in catalog.package_data for match in glob.glob(os.path.join(glob.escape(package), pattern), recursive=True))
    return sorted(match for match in matches if os.path.isfile(match) and not os.path.islink(match) and os.path.realpath(match) != itself)


@garbage_collection_paused()
def combine_catalogs(catalogs: Sequence[Catalog]) -> LoadedCatalogs:
    """Cross-check catalogs already read, then register all their tools into one registry.

    Raises:
        CatalogError: a state token declared differently in two files, or a (server, tool name)
            pair defined in two files. Nothing is registered.
    """
    problems: list[CatalogProblem] = []
    states: dict[str, State] = {}
    state_origin: dict[str, Path] = {}
    tool_origin: dict[tuple[str | None, str], Path] = {}
    for catalog in catalogs:
        for index, state in enumerate(catalog.states):
            known = states.get(state.token)
            if known is not None and known.model_dump() != state.model_dump():
                problems.append(
                    catalog.problem(
                        ["states", index, "token"], f"state {state.token!r} is also declared, differently, in {state_origin[state.token]}", DUPLICATE_STATE
                    )
                )
            states.setdefault(state.token, state)
            state_origin.setdefault(state.token, catalog.path)
        for index, tool in enumerate(catalog.tools):
            key = (tool.server_name, tool.name)
            if key in tool_origin:
                problems.append(
                    catalog.problem(
                        ["tools", index, "name"], f"tool {tool.name!r} of server {tool.server_name!r} is also defined in {tool_origin[key]}", DUPLICATE_TOOL
                    )
                )
            tool_origin.setdefault(key, catalog.path)
    problems.extend(_shared_functions(catalogs))
    if problems:
        raise CatalogError(problems)

    registry = ToolRegistry()
    for catalog in catalogs:
        for tool in catalog.tools:
            registry.register_tool(tool)
    return LoadedCatalogs(tuple(catalogs), registry, states)
