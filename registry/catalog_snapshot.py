"""Catalog snapshots: large catalogs loaded and checked once, then read back by every later process
without being parsed or validated again (issue 57).

A fresh process over 100,000 tools spent about 7 s parsing and validating their catalog (16 s with
the checks) before it could answer one search. Read from a snapshot, a registry
(:class:`StoredToolRegistry`) holds the tools' transitions as integers, which planning needs of every
tool, and reads a tool's definition only when it is first asked for (a search's hits, a plan's steps).

**When.** :func:`toolpath.registry.lint.load_checked` goes through a snapshot when its files together
hold at least :data:`SNAPSHOT_FROM_BYTES` (below that, parsing takes about as long as reading a
snapshot), and stores one after a load when every file is a catalog (no overlay) and none was
skipped for missing modules. The modules a catalog requires are checked at every load: a catalog
whose module went missing is loaded from its file, skipped as it would be without a snapshot.

**Where.** ``$TOOLPATH_HOME/catalogs/<key>/``, written whole and private, a damaged one warned of and
rebuilt, the :data:`KEEP_SNAPSHOTS` most recently used kept (:mod:`toolpath.registry.stored_directories`):

* ``manifest.json``: the format, the key, the number of tools and, per catalog, everything but its
  tools (domain, package, vocabulary, states, MCP servers, HTTP APIs, skills, requirements), the
  number of its tools, and its file's size and SHA-256 (for positions asked for later);
* ``tools.jsonl``: each registered definition as JSON (``model_dump_json(exclude_unset=True)``), one
  line per tool in id order;
* ``transitions.json``: the state tokens and servers of the registry's
  :class:`toolpath.registry.tool_registry.TransitionTable`;
* ``transitions.bin``: the rest of it as machine integers and floats (the stdlib's ``array``, laid
  out as the manifest's ``arrays`` says): each tool's required and produced states, cost and
  server, and where each tool's line starts in ``tools.jsonl``. Parsing them as JSON took 0.11 s
  of every process at 100,000 tools (with the type checks JSON needs), reading them 0.06 s;
* ``names.json``: each tool's name, read only for a lookup by name (a search reads its hits' names
  from their lines).

A snapshot holds what the catalog files hold, MCP servers' and HTTP APIs' settings included, readable
by its owner only, like the files it was made from should be.

**The key** is SHA-256 of :data:`FORMAT_VERSION`, toolpath's and pydantic's versions, the size and
modification time of the registry's own modules (the code that validated what is stored), and of
each file its resolved path and its bytes' SHA-256. Reading every byte cost about 50 ms at 100,000
tools, so a file's digest is reused while its device, inode, size and both times are those
recorded when it was hashed (:mod:`toolpath.registry.file_digests`, as Git trusts its index), and
recorded only for a file whose status changed two seconds or more before: a key of sizes and times
alone would miss a file rewritten within one timestamp tick.

**The content key** (:func:`content_key`, :attr:`toolpath.registry.ToolRegistry.content_key`) is
SHA-256 of the files' bytes alone and toolpath's version: a registry loaded through this module
carries it, stored or not, and a skill index is keyed by it without reading a text, so moving the
files or editing toolpath's own code keeps the index (the snapshot itself is stored again).

**Trust.** A definition is validated as it is read (``ToolDefinition.model_validate_json``), so a
stored line can only hold what the catalog format accepts. The manifest must match the key and the
counts, every file its recorded size, and the transitions their counts, types and ranges; anything
else warns and the catalogs load from their files (and a new snapshot is stored). A definition
found damaged later (a file changed in place while a process uses it, or states or a cost other
than its transitions give, which a plan through it would use) raises
:class:`DamagedSnapshotError` and the snapshot is removed, so the next run stores it anew. The files
are read through descriptors opened at load, so a process keeps working when another one's cleanup
removes its snapshot.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import json
import logging
import math
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pydantic

import toolpath
from toolpath.errors import ToolpathError
from toolpath.registry.catalog import Catalog, LoadedCatalogs
from toolpath.registry.catalog_documents import SourceLocator, garbage_collection_paused
from toolpath.registry.catalog_files import open_without_waiting, size_limit
from toolpath.registry.catalog_format import WorkflowSkill
from toolpath.registry.catalog_packages import CatalogRequirements
from toolpath.registry.catalog_problems import CatalogError
from toolpath.registry.file_digests import FileDigests
from toolpath.registry.http_apis import HttpApiConfig
from toolpath.registry.mcp_servers import MCPServerConfig
from toolpath.registry.states import State, StateTransition
from toolpath.registry.storage import default_home
from toolpath.registry.tool_registry import ToolRegistry, ToolsById, TransitionTable, share_fields_set
from toolpath.registry.tools import ToolDefinition

#: Version of the stored layout; part of the key (2: the transitions' numbers in ``transitions.bin``).
FORMAT_VERSION = 2
#: Catalog bytes (all files of one load together) from which a load goes through a snapshot: at
#: 1 MiB (about 1,400 tools of compact JSON) parsing and validating take about 0.1 s.
SNAPSHOT_FROM_BYTES = 1 << 20
#: Snapshots kept after storing a new one: the most recently used (one per catalog set in use).
KEEP_SNAPSHOTS = 4
#: Name of the directory of snapshots in ``$TOOLPATH_HOME``.
SNAPSHOTS_DIRECTORY = "catalogs"
#: The record of the files' digests in that directory (:mod:`toolpath.registry.file_digests`).
DIGESTS_FILE = "file_digests.json"

_TOOLS = "tools.jsonl"
_TRANSITIONS = "transitions.json"
_TRANSITION_ARRAYS = "transitions.bin"
#: The arrays of ``transitions.bin``, in file order, and their ``array`` type codes: 8-byte signed
#: integers and doubles on every platform Python runs on ("q", "d").
_ARRAY_TYPES = {
    "requires": "q",
    "requires_ends": "q",
    "produces": "q",
    "produces_ends": "q",
    "cost": "d",
    "server_of": "q",
    "offsets": "q",
}
_NAMES = "names.json"
logger = logging.getLogger(__name__)


def load_through_snapshot(paths: Sequence[Path], max_bytes: int | None, load: Callable[[], LoadedCatalogs]) -> LoadedCatalogs:
    """The catalogs of ``paths``: read from their snapshot when one is stored, else ``load()`` and,
    when they can be (see the module docstring), stored for the next process.

    Args:
        paths: the catalog files, in load order.
        max_bytes: the size limit of each file (:func:`toolpath.registry.catalog_files.size_limit`).
        load: loads them from their files, raising what that load raises.

    Raises:
        CatalogError, ValueError: as ``load`` does (a file a snapshot cannot be read for, e.g. one
            that is missing or too large, is left to ``load`` to refuse in its own words).
    """
    files = _files(paths, max_bytes)
    if files is None:
        return load()
    from toolpath.registry.stored_directories import KeyedDirectories

    store = KeyedDirectories(default_home() / SNAPSHOTS_DIRECTORY, "catalog snapshot", KEEP_SNAPSHOTS)
    key = snapshot_key(files)
    found = store.read(key, lambda directory, manifest: _read(directory, manifest, key, files))
    if found is not None and not any(catalog.missing_modules() for catalog in found.catalogs):
        return found
    loaded = load()
    # Stored only when the files still hold the bytes hashed for the key: one rewritten while it
    # was loaded must not be stored under its old content's key.
    if _storable(loaded) and [file.sha256 for file in _files(paths, max_bytes) or ()] == [file.sha256 for file in files]:
        loaded.registry.content_key = content_key(files)
        directory, stored, _ = store.write(key, lambda temporary: _write(temporary, loaded, key, files))
        if stored:
            logger.info("stored a snapshot of %d tools in %s, which later loads read", len(loaded.registry), directory)
    return loaded


class _File:
    """One catalog file of a load: its path as given, its bytes' size and SHA-256."""

    def __init__(self, path: Path, max_bytes: int | None, digests: FileDigests):
        self.path = path
        self.resolved = str(path.resolve())
        with os.fdopen(open_without_waiting(path), "rb", buffering=0) as stream:
            status = os.fstat(stream.fileno())
            # Only what a load would read: a regular file within the size limit (else the load says why).
            if not stat.S_ISREG(status.st_mode) or status.st_size > size_limit(path, max_bytes):
                raise _NotForSnapshot
            self.sha256 = digests.sha256(stream, status, self.resolved)
        self.size = status.st_size


class _NotForSnapshot(Exception):
    """A file a load reads only to refuse it: it is left to the load."""


def _files(paths: Sequence[Path], max_bytes: int | None) -> list[_File] | None:
    """The files of a load that goes through a snapshot, or ``None`` when it does not: together
    smaller than :data:`SNAPSHOT_FROM_BYTES`, or a file that cannot be read as a catalog is (its
    load says why)."""
    try:
        if sum(os.stat(path).st_size for path in paths) < SNAPSHOT_FROM_BYTES:
            return None
        digests = FileDigests(default_home() / SNAPSHOTS_DIRECTORY / DIGESTS_FILE)
        files = [_File(Path(path), max_bytes, digests) for path in paths]
    except (OSError, CatalogError, _NotForSnapshot):
        return None
    digests.save()
    return files


def content_key(files: Sequence[_File]) -> str:
    """SHA-256 (64 hex digits) of the files' bytes, in load order, and of toolpath's version: what
    the catalogs' tools and states are made of, wherever the files lie (a skill index stored for them
    is kept when they move; :attr:`toolpath.registry.ToolRegistry.content_key`)."""
    header = {"format": FORMAT_VERSION, "toolpath": toolpath.__version__, "files": [[file.size, file.sha256] for file in files]}
    return hashlib.sha256(json.dumps(header).encode("utf-8")).hexdigest()


def snapshot_key(files: Sequence[_File]) -> str:
    """The key (64 hex digits) of the snapshot of ``files`` (see the module docstring)."""
    registry_code = sorted(
        (entry.name, entry.stat().st_size, entry.stat().st_mtime_ns) for entry in os.scandir(Path(__file__).parent) if entry.name.endswith(".py")
    )
    header = {
        "format": FORMAT_VERSION,
        "toolpath": toolpath.__version__,
        "pydantic": pydantic.VERSION,
        "registry_code": registry_code,
        "files": [[file.resolved, file.size, file.sha256] for file in files],
    }
    return hashlib.sha256(json.dumps(header, sort_keys=True).encode("utf-8")).hexdigest()


def _storable(loaded: LoadedCatalogs) -> bool:
    """Whether ``loaded`` is what its files alone give, in the order a snapshot stores it: no
    overlay, nothing skipped, each catalog's tools registered in order with ids from 0."""
    if loaded.overlays or loaded.skipped:
        return False
    next_id = 0
    for catalog in loaded.catalogs:
        for tool in catalog.tools:
            if tool.id != next_id:
                return False
            next_id += 1
    return next_id == len(loaded.registry)


def _write(directory: Path, loaded: LoadedCatalogs, key: str, files: Sequence[_File]) -> dict[str, Any]:
    """Write the snapshot of ``loaded`` into ``directory``; its manifest."""
    offsets = [0]
    with open(directory / _TOOLS, "wb") as stream:
        for tool in loaded.registry:
            line = tool.model_dump_json(exclude_unset=True).encode("utf-8") + b"\n"
            stream.write(line)
            offsets.append(offsets[-1] + len(line))
    table = loaded.registry.transitions()
    servers = list(dict.fromkeys(table.servers))
    numbered = {server: number for number, server in enumerate(servers)}
    (directory / _TRANSITIONS).write_text(
        json.dumps({"tokens": list(table.tokens), "servers": servers}, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
    )
    values = {
        "requires": [number for numbers in table.requires for number in numbers],
        "requires_ends": list(itertools.accumulate(map(len, table.requires))),
        "produces": [number for numbers in table.produces for number in numbers],
        "produces_ends": list(itertools.accumulate(map(len, table.produces))),
        "cost": list(table.cost),
        "server_of": [numbered[server] for server in table.servers],
        "offsets": offsets,
    }
    layout = {}
    with open(directory / _TRANSITION_ARRAYS, "wb") as stream:
        for name, type_code in _ARRAY_TYPES.items():
            layout[name] = {"start": stream.tell(), "count": len(values[name])}
            stream.write(array.array(type_code, values[name]).tobytes())
    (directory / _NAMES).write_text(json.dumps(list(table.names), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    catalogs = [_catalog_fields(catalog, file) for catalog, file in zip(loaded.catalogs, files, strict=True)]
    return {
        "format": FORMAT_VERSION,
        "key": key,
        "content_key": content_key(files),
        "tools": len(loaded.registry),
        "catalogs": catalogs,
        "arrays": {"byte_order": sys.byteorder, **layout},
        "files": {name: {"bytes": (directory / name).stat().st_size} for name in (_TOOLS, _TRANSITIONS, _TRANSITION_ARRAYS, _NAMES)},
    }


def _catalog_fields(catalog: Catalog, file: _File) -> dict[str, Any]:
    def dumped(model: Any) -> Any:
        return model.model_dump(mode="json", exclude_unset=True)

    return {
        "domain": catalog.domain,
        "package": catalog.package,
        "vocabulary": catalog.vocabulary,
        "states": [dumped(state) for state in catalog.states],
        "tools": len(catalog.tools),
        "mcp_servers": {name: dumped(config) for name, config in catalog.mcp_servers.items()},
        "http_apis": {name: dumped(config) for name, config in catalog.http_apis.items()},
        "skills": [dumped(skill) for skill in catalog.skills],
        "requirements": None if catalog.requirements is None else dumped(catalog.requirements),
        "package_data": list(catalog.package_data),
        "top_modules": sorted(catalog.top_modules()),
        "host_tools": catalog.has_host_tools(),
        "is_json": catalog.locator.is_json,
        "aliases": catalog.locator.aliases,
        "bytes": file.size,
        "sha256": file.sha256,
    }


@garbage_collection_paused()
def _read(directory: Path, manifest: dict[str, Any], key: str, files: Sequence[_File]) -> LoadedCatalogs:
    """The catalogs stored in ``directory``, their paths as this load gives them.

    Raises:
        DamagedStoreError: a manifest or file that does not match (see the module docstring).
    """
    from toolpath.registry.stored_directories import DamagedStoreError, file_entry

    for field, value in {"format": FORMAT_VERSION, "key": key, "content_key": content_key(files)}.items():
        if manifest.get(field) != value:
            raise DamagedStoreError(f"its manifest's {field} is {manifest.get(field)!r}, not {value!r}")
    count = manifest["tools"]
    described = manifest["catalogs"]
    if not isinstance(count, int) or not isinstance(described, list) or len(described) != len(files):
        raise DamagedStoreError(f"its manifest describes {count!r} tools in {len(described)} catalog(s), this load has {len(files)}")
    tools_bytes = file_entry(directory, _TOOLS, manifest)["bytes"]
    file_entry(directory, _TRANSITIONS, manifest)
    stored = json.loads((directory / _TRANSITIONS).read_text(encoding="utf-8"))
    file_entry(directory, _NAMES, manifest)
    arrays = _arrays(directory, manifest)
    offsets = arrays["offsets"]
    if len(offsets) != count + 1 or offsets[0] != 0 or offsets[-1] != tools_bytes or offsets != sorted(offsets):
        raise DamagedStoreError(f"{_TRANSITION_ARRAYS}'s offsets do not run from 0 to the {tools_bytes} bytes of {_TOOLS}")
    lines = _ToolLines(directory, offsets)
    registry = StoredToolRegistry(lines, _checked_table(stored, arrays, count, lines), content_key(files))
    catalogs = []
    states: dict[str, State] = {}
    first = 0
    for fields, file in zip(described, files):
        catalog = _catalog(fields, file, registry, first)
        catalogs.append(catalog)
        first += len(catalog.tools)
        for state in catalog.states:
            states.setdefault(state.token, state)
    if first != count:
        raise DamagedStoreError(f"its catalogs hold {first} tools, its manifest says {count}")
    return LoadedCatalogs(tuple(catalogs), registry, states)


def _arrays(directory: Path, manifest: dict[str, Any]) -> dict[str, list[Any]]:
    """The arrays of ``transitions.bin`` as lists, as the manifest lays them out.

    Raises:
        DamagedStoreError: the layout is missing, of another byte order, or outside the file.
    """
    from toolpath.registry.stored_directories import DamagedStoreError, file_entry

    size = file_entry(directory, _TRANSITION_ARRAYS, manifest)["bytes"]
    layout = manifest.get("arrays")
    if not isinstance(layout, dict) or layout.get("byte_order") != sys.byteorder:
        raise DamagedStoreError(f"its manifest does not lay out {_TRANSITION_ARRAYS} in this machine's byte order")
    data = memoryview((directory / _TRANSITION_ARRAYS).read_bytes())
    if len(data) != size:
        raise DamagedStoreError(f"{_TRANSITION_ARRAYS} has {len(data)} bytes, its manifest says {size}")
    arrays = {}
    for name, type_code in _ARRAY_TYPES.items():
        place = layout.get(name)
        start, count = (place.get("start"), place.get("count")) if isinstance(place, dict) else (None, None)
        if type(start) is not int or type(count) is not int or start < 0 or count < 0:
            raise DamagedStoreError(f"its manifest does not place {name} in {_TRANSITION_ARRAYS}")
        end = start + count * array.array(type_code).itemsize
        if end > len(data):
            raise DamagedStoreError(f"its manifest places {name} past the {len(data)} bytes of {_TRANSITION_ARRAYS}")
        values = array.array(type_code)
        values.frombytes(data[start:end])  # the constructor would iterate a memoryview byte by byte
        arrays[name] = values.tolist()
    return arrays


def _checked_table(stored: Any, arrays: dict[str, list[Any]], count: int, lines: _ToolLines) -> TransitionTable:
    from toolpath.registry.stored_directories import DamagedStoreError

    tokens, servers = stored["tokens"], stored["servers"]
    if not isinstance(tokens, list) or not isinstance(servers, list):
        raise DamagedStoreError(f"{_TRANSITIONS} does not hold lists of tokens and servers")
    # The planner numbers states by token: a repeated or non-string token would name two states alike.
    if not all(type(token) is str for token in tokens) or len(set(tokens)) != len(tokens):
        raise DamagedStoreError(f"{_TRANSITIONS}'s tokens are not distinct strings")
    if not all(server is None or type(server) is str for server in servers):
        raise DamagedStoreError(f"{_TRANSITIONS}'s servers are not all strings or null")
    cost, server_of = arrays["cost"], arrays["server_of"]
    if len(cost) != count or len(server_of) != count:
        raise DamagedStoreError(f"{_TRANSITION_ARRAYS} does not hold {count} tools")
    if cost and (not _all_finite(cost) or min(cost) < 0):
        raise DamagedStoreError(f"{_TRANSITION_ARRAYS}'s costs are not all finite and at least 0")
    requires = _runs(arrays["requires"], arrays["requires_ends"], count, "requires")
    produces = _runs(arrays["produces"], arrays["produces_ends"], count, "produces")
    for what, numbers, bound in [
        ("states", arrays["requires"], len(tokens)),
        ("states", arrays["produces"], len(tokens)),
        ("servers", server_of, len(servers)),
    ]:
        if numbers and (min(numbers) < 0 or max(numbers) >= bound):
            raise DamagedStoreError(f"{_TRANSITION_ARRAYS} names {what} outside its {bound}")
    return TransitionTable(range(count), tokens, requires, produces, cost, [servers[number] for number in server_of], _StoredNames(lines))


def _all_finite(values: list[float]) -> bool:
    """Whether no value is a NaN or an infinity: one makes their exact sum one, and finite values
    (a catalog accepts any finite cost) can only overflow it, which ``math.fsum`` raises."""
    try:
        return math.isfinite(math.fsum(values))
    except OverflowError:
        return True


def _runs(values: list[int], ends: list[int], count: int, what: str) -> list[tuple[int, ...]]:
    """``values`` cut into ``count`` runs, the ``i``-th ending (exclusive) at ``ends[i]``.

    Raises:
        DamagedStoreError: ``ends`` are not ``count`` non-decreasing positions ending at ``len(values)``.
    """
    from toolpath.registry.stored_directories import DamagedStoreError

    if len(ends) != count or (ends and (ends[0] < 0 or ends[-1] != len(values) or ends != sorted(ends))) or (not ends and values):
        raise DamagedStoreError(f"{_TRANSITION_ARRAYS}'s {what} are not {count} runs of its states")
    return [tuple(values[start:end]) for start, end in zip(itertools.chain((0,), ends), ends)]


def _catalog(fields: dict[str, Any], file: _File, registry: StoredToolRegistry, first: int) -> Catalog:
    locator = SourceLocator.of_unread_file(file.path, fields["bytes"], fields["sha256"], is_json=fields["is_json"])
    locator.aliases = dict(fields["aliases"])
    requirements = fields["requirements"]
    return Catalog(
        path=file.path,
        domain=fields["domain"],
        package=fields["package"],
        states=tuple(State.model_validate(state) for state in fields["states"]),
        tools=ToolsById(registry, range(first, first + fields["tools"])),  # type: ignore[arg-type]  # a sequence read as asked for
        locator=locator,
        mcp_servers={name: MCPServerConfig.model_validate(config) for name, config in fields["mcp_servers"].items()},
        http_apis={name: HttpApiConfig.model_validate(config) for name, config in fields["http_apis"].items()},
        skills=tuple(WorkflowSkill.model_validate(skill) for skill in fields["skills"]),
        requirements=None if requirements is None else CatalogRequirements.model_validate(requirements),
        package_data=tuple(fields["package_data"]),
        vocabulary=fields["vocabulary"],
        known_top_modules=frozenset(fields["top_modules"]),
        known_host_tools=bool(fields["host_tools"]),
    )


class _ToolLines:
    """The definitions of a snapshot's ``tools.jsonl``, a line per tool, and its ``names.json``, read
    as asked for through descriptors opened at load: a process keeps reading them when a later
    cleanup removes the directory, and a file cut short by another program reads as damaged (a
    memory map of it would kill the process with SIGBUS)."""

    def __init__(self, directory: Path, offsets: list[int]):
        self.directory = directory
        self._offsets = offsets
        self._tools = open(directory / _TOOLS, "rb", buffering=0)  # noqa: SIM115  # open as long as the registry
        self._names = open(directory / _NAMES, "rb", buffering=0)  # noqa: SIM115

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def line(self, tool_id: int) -> bytes:
        start, end = self._offsets[tool_id], self._offsets[tool_id + 1]
        return os.pread(self._tools.fileno(), end - start, start)

    def names(self) -> Any:
        """``names.json``, parsed."""
        return json.loads(os.pread(self._names.fileno(), os.fstat(self._names.fileno()).st_size, 0))

    def damaged(self, problem: str) -> DamagedSnapshotError:
        """The error of a snapshot found damaged after it was loaded: it is removed, so the next
        process loads the catalogs from their files and stores them anew."""
        from toolpath.registry.stored_directories import remove_damaged

        removed = remove_damaged(self.directory)
        then = "it is removed: run again" if removed else "remove that directory and run again"
        return DamagedSnapshotError(
            f"the catalog snapshot {self.directory} is damaged: {problem}; {then}, and the catalogs load from their files and are stored anew"
        )


class _StoredNames(Sequence[str]):
    """Each tool's name, read from its line when asked for (a search names its hits only); the
    snapshot's ``names.json`` holds them all for lookups by name."""

    def __init__(self, lines: _ToolLines):
        self._lines = lines

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, tool_id):  # type: ignore[no-untyped-def]  # one name: no caller slices these
        if isinstance(tool_id, slice) or not 0 <= tool_id < len(self._lines):
            raise IndexError(f"tool {tool_id!r} of {len(self._lines)} (one name at a time)")
        try:
            name = json.loads(self._lines.line(tool_id))["name"]
        except (ValueError, TypeError, KeyError):
            raise self._lines.damaged(f"{_TOOLS} line {tool_id + 1} is not a definition") from None
        return name


class StoredToolRegistry(ToolRegistry):
    """A :class:`ToolRegistry` read from a catalog snapshot: each definition is read and validated
    when first asked for, its transitions are known from the start (:meth:`transitions`).

    It behaves as the registry it was stored from: lookups by id, name, or server and name, and
    iteration in id order (which reads every definition: about 4 s at 100,000 tools). Registering or
    removing a tool first reads every definition; from then on it is an ordinary registry.

    Its ``content_key`` is its files' (:func:`content_key`) until a tool is registered or removed.
    """

    def __init__(self, lines: _ToolLines, table: TransitionTable, content: str):
        super().__init__()
        self.content_key = content
        self._table: TransitionTable | None = table
        self._lines = lines
        self._count = len(table.ids)
        self._next_id = self._count
        self._lock = threading.Lock()
        self._names_indexed = False
        self._all_read = False

    def __len__(self) -> int:
        return self._count if self._table is not None else super().__len__()

    def __iter__(self) -> Iterator[ToolDefinition]:
        self._read_all()
        return super().__iter__()

    def transitions(self) -> TransitionTable:
        return self._table if self._table is not None else super().transitions()

    def _tool(self, tool_id: int) -> ToolDefinition:
        tool = self._by_id.get(tool_id)
        if tool is not None or self._table is None:
            return self._by_id[tool_id]
        if not isinstance(tool_id, int) or not 0 <= tool_id < self._count:
            raise KeyError(tool_id)
        with self._lock:
            tool = self._by_id.get(tool_id)
            if tool is None:
                tool = self._by_id[tool_id] = _definition(self._lines, tool_id, self._table)
        return tool

    def _index_names(self) -> None:
        """The name indexes, built when first used: planning a goal never needs them."""
        with self._lock:
            if self._names_indexed:
                return
            assert self._table is not None
            try:
                names = self._lines.names()
            except (OSError, ValueError, RecursionError) as error:  # json refuses deep nesting with RecursionError
                raise self._lines.damaged(f"{_NAMES} cannot be read ({error})") from None
            if not isinstance(names, list) or len(names) != self._count:
                raise self._lines.damaged(f"{_NAMES} does not hold {self._count} names")
            for tool_id, (server, name) in enumerate(zip(self._table.servers, names)):
                self._by_server_and_name[(server, name)] = tool_id
                self._ids_by_name.setdefault(name, {})[tool_id] = None
            self._names_indexed = True

    def _read_all(self) -> None:
        if self._table is None or self._all_read:
            return
        for tool_id in range(self._count):
            self._tool(tool_id)
        self._index_names()
        with self._lock:
            self._by_id = dict(sorted(self._by_id.items()))
            self._all_read = True

    def get_tool_by_server_and_name(self, server_name: str | None, name: str) -> ToolDefinition:
        self._index_names()
        return self._named(super().get_tool_by_server_and_name(server_name, name), name)

    def get_tool_by_name(self, name: str) -> ToolDefinition:
        return self._named(super().get_tool_by_name(name), name)

    def _named(self, tool: ToolDefinition, name: str) -> ToolDefinition:
        """``tool``, found under ``name`` in ``names.json``, if its definition has that name."""
        if tool.name != name:
            raise self._lines.damaged(f"{_TOOLS} line {tool.id + 1} holds tool {tool.name!r}, {_NAMES} names it {name!r}")
        return tool

    def get_id_by_name(self, name: str) -> int:
        self._index_names()
        return super().get_id_by_name(name)

    def register_tool(self, tool: ToolDefinition, *, detach: bool = True) -> int:
        self._becomes_own()
        return super().register_tool(tool, detach=detach)

    def remove_tool_by_id(self, tool_id: int) -> ToolDefinition:
        self._becomes_own()
        return super().remove_tool_by_id(tool_id)

    def _becomes_own(self) -> None:
        """Read every definition and drop the snapshot: the registry is about to differ from it."""
        self._read_all()
        self._table = None
        self.content_key = None


class DamagedSnapshotError(ToolpathError):
    """A definition in a catalog snapshot no longer validates or matches its transitions (a file
    changed in place after it was loaded): the snapshot is removed, and the message says to run again."""


def _definition(lines: _ToolLines, tool_id: int, table: TransitionTable) -> ToolDefinition:
    """Tool ``tool_id``'s stored definition, validated as it is read, sharing its fields-set objects
    as the loader's do.

    Raises:
        DamagedSnapshotError: the line does not validate, is not tool ``tool_id`` of its server in
            ``table``, or its states or cost are not the table's (a plan through it would be wrong).
    """
    try:
        tool = ToolDefinition.model_validate_json(lines.line(tool_id))
    except ValueError as error:
        raise lines.damaged(f"{_TOOLS} line {tool_id + 1} does not validate ({str(error).splitlines()[0]})") from None
    server = table.servers[tool_id]
    if (tool.id, tool.server_name) != (tool_id, server):
        raise lines.damaged(f"{_TOOLS} line {tool_id + 1} holds tool {tool.id} of server {tool.server_name!r}, not tool {tool_id} of {server!r}")
    stored = ([table.tokens[number] for number in table.requires[tool_id]], [table.tokens[number] for number in table.produces[tool_id]], table.cost[tool_id])
    if (sorted(tool.state_transition.requires), sorted(tool.state_transition.produces), tool.cost) != stored:
        raise lines.damaged(f"{_TRANSITION_ARRAYS} gives tool {tool.name!r} (line {tool_id + 1} of {_TOOLS}) other states or another cost than its definition")
    if type(tool.state_transition) is StateTransition:
        share_fields_set(tool.state_transition)
    share_fields_set(tool)
    return tool
