"""Catalog overlays: what ``toolpath learn`` learned from use, in a YAML file a catalog author can
read, loaded beside the catalogs it refines (any path given as a catalog whose document has a
top-level ``overlay:`` key).

An overlay adds no tool and no state. It gives, per tool (and per state), the phrasings people used
for it, whose embeddings are kept in a ``.npz`` file beside it (search data, read with
``allow_pickle=False``), optionally a linear query adapter (another ``.npz``), and prerequisite
habits: states a tool was, in practice, always given first, added to its ``requires`` at load.
Removing the overlay file undoes all of it.

The format (version 1)::

    overlay:
      format: 1
      learned_from: examples.jsonl (40 examples)     # free text, for the reader
      examples: 40
      embedding_model: sentence-transformers/all-MiniLM-L6-v2
      dimension: 384
      vectors_sha256: 9f2c...                         # of the vectors file
      adapter_sha256: 51ab...                         # of the adapter file, when there is one
      prerequisite_thresholds: {min_share: 0.9, min_uses: 3}   # free, for the reader
    vectors: learned.vectors.npz                      # beside the overlay
    adapter: learned.adapter.npz                      # optional
    tools:
      - server: tabular
        name: plot_histogram
        examples: 12
        phrasings: [show how the prices are spread, ...]
        prerequisites: [{state: tabular.table_described, share: 0.93, uses: 14}]
    states:
      - token: tabular.histogram_plotted
        examples: 3
        phrasings: [...]

The vectors file holds ``vectors`` (one float row per phrasing: every tool's phrasings in file
order, then every state's), ``model`` (the embedding model id) and ``phrasings_sha256``
(:func:`phrasings_digest` of the phrasings the rows were computed from); the adapter file holds
``adapter`` (a ``(d, d)`` float matrix) and ``model``.

Problems stop the load (all files, as for catalogs) and name the file, line and field:
TP108 a tool or state the loaded catalogs do not have; TP109 a prerequisite that only the tool
itself could reach (a cycle); TP110 a vectors or adapter file missing, of the wrong shape, of
another model than the overlay says, changed since it was written (hash), or older than the
phrasings. The linter adds TP111 (learned with another embedding model than the one in use).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolpath.registry.catalog_documents import SourceLocator
from toolpath.registry.catalog_problems import INVALID_FIELD, CatalogError, CatalogProblem, did_you_mean, short_repr
from toolpath.registry.states import State
from toolpath.registry.tools import ToolDefinition, reachable_states

#: The overlay format this module reads and writes.
OVERLAY_FORMAT = 1

#: Rule codes of overlay problems (they stop a load, like the catalogs' TP1xx).
UNKNOWN_NAME = "TP108"
PREREQUISITE_CYCLE = "TP109"
BAD_VECTORS = "TP110"
#: Lint only: the overlay's vectors come from another embedding model than the one searching.
OTHER_MODEL = "TP111"

RELEARN = "re-run `toolpath learn` to write the overlay and its vectors again"

EntryKind = Literal["tool", "state"]
#: One row of the vectors: ``(kind, server, name)``; ``server`` is ``None`` for a state.
Entry = tuple[EntryKind, str | None, str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OverlayHeader(_Strict):
    """The ``overlay:`` mapping: what the overlay was learned from and with."""

    format: Literal[1]
    learned_from: str = ""
    examples: int = Field(ge=0)
    embedding_model: str = Field(min_length=1)
    dimension: int = Field(ge=1, le=4096)  # embedding models give hundreds; a bound keeps a hostile file from sizing memory
    vectors_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    adapter_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    prerequisite_thresholds: dict[str, float | int | str] = Field(default_factory=dict)


class Prerequisite(_Strict):
    """A state the tool was given first in ``share`` of its ``uses`` (added to its ``requires``)."""

    state: str = Field(min_length=1)
    share: float = Field(ge=0, le=1)
    uses: int = Field(ge=1)


class OverlayTool(_Strict):
    """A tool's learned phrasings (``examples``: how many examples named it) and prerequisites."""

    server: str = Field(min_length=1)
    name: str = Field(min_length=1)
    examples: int = Field(ge=0)
    phrasings: list[str] = Field(default_factory=list)
    prerequisites: list[Prerequisite] = Field(default_factory=list)


class OverlayState(_Strict):
    """A state's learned phrasings (requests whose chains ended by reaching it)."""

    token: str = Field(min_length=1)
    examples: int = Field(ge=0)
    phrasings: list[str] = Field(default_factory=list)


class OverlayFile(_Strict):
    """The whole document of an overlay file."""

    overlay: OverlayHeader
    vectors: str = Field(min_length=1)
    adapter: str | None = None
    tools: list[OverlayTool] = Field(default_factory=list)
    states: list[OverlayState] = Field(default_factory=list)

    @field_validator("vectors", "adapter")
    @classmethod
    def _beside_the_overlay(cls, name: str | None) -> str | None:
        # The files are written beside the overlay; a path elsewhere (/etc/..., ../x.npz) is no file of it.
        if name is not None and (name in (".", "..") or "/" in name or "\\" in name):
            raise ValueError("must be the name of a file beside the overlay (NAME.vectors.npz), not a path")
        return name


@dataclass(frozen=True)
class Overlay:
    """An overlay file read and checked on its own (names are checked against catalogs by
    :func:`apply_overlays`).

    Attributes:
        vectors: ``(len(entries), dimension)`` float32 unit rows, one per phrasing.
        entries: the ``(kind, server, name)`` each row belongs to (:data:`Entry`).
        adapter: the ``(dimension, dimension)`` query adapter, or ``None``.
    """

    path: Path
    document: OverlayFile
    vectors: np.ndarray = field(repr=False, compare=False)
    entries: tuple[Entry, ...]
    adapter: np.ndarray | None = field(repr=False, compare=False)
    locator: SourceLocator = field(repr=False, compare=False)

    @property
    def model(self) -> str:
        return self.document.overlay.embedding_model

    @property
    def phrasings(self) -> tuple[str, ...]:
        """The phrasing of each vector row, in row order (as :attr:`entries`)."""
        document = self.document
        return tuple(phrasing for item in (*document.tools, *document.states) for phrasing in item.phrasings)

    def problem(self, location: Sequence[str | int], message: str, code: str = INVALID_FIELD) -> CatalogProblem:
        return self.locator.problem(location, message, code)


def phrasings_digest(tools: Iterable[OverlayTool], states: Iterable[OverlayState]) -> str:
    """SHA-256 of the phrasings, in row order: the vectors file records the one it was computed from."""
    rows = [phrasing for tool in tools for phrasing in tool.phrasings] + [phrasing for state in states for phrasing in state.phrasings]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(2**20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def overlay_entries(document: OverlayFile) -> tuple[Entry, ...]:
    """The entry of each vector row: every tool's phrasings, then every state's."""
    rows: list[Entry] = [("tool", tool.server, tool.name) for tool in document.tools for _ in tool.phrasings]
    rows += [("state", None, state.token) for state in document.states for _ in state.phrasings]
    return tuple(rows)


def read_overlay(path: Path, document: dict, locator: SourceLocator) -> Overlay:
    """Validate an overlay document and load its vectors (and adapter) from beside it.

    Raises:
        CatalogError: every problem, with file, line and field: TP101 for the document's fields,
            TP110 for the vectors and adapter files.
    """
    try:
        parsed = OverlayFile.model_validate(document)
    except ValidationError as error:
        problems = []
        for detail in error.errors(include_url=False):
            location = list(detail["loc"])
            message = detail["msg"]
            if detail["type"] == "extra_forbidden":
                message = f"unknown field of an overlay; the format is in docs/learning.md of toolpath's source{did_you_mean(str(location[-1]), _fields_at(location))}"
            elif detail["type"] != "missing" and "input" in detail:
                message += f" (found {short_repr(detail['input'])})"
            problems.append(locator.problem(location, message))
        raise CatalogError(problems) from None
    problems = _duplicates(parsed, locator)
    entries = overlay_entries(parsed)
    directory = Path(path).resolve().parent
    vectors, vector_problems = _read_vectors(parsed, directory, locator, len(entries))
    adapter, adapter_problems = _read_adapter(parsed, directory, locator)
    problems += vector_problems + adapter_problems
    if problems:
        raise CatalogError(problems)
    assert vectors is not None
    return Overlay(Path(path), parsed, vectors, entries, adapter, locator)


def _fields_at(location: Sequence[str | int]) -> list[str]:
    keys = [key for key in location[:-1] if isinstance(key, str)]
    models: dict[str, type[BaseModel]] = {"overlay": OverlayHeader, "tools": OverlayTool, "states": OverlayState, "prerequisites": Prerequisite}
    return list(models.get(keys[-1], OverlayFile).model_fields) if keys else list(OverlayFile.model_fields)


def _duplicates(parsed: OverlayFile, locator: SourceLocator) -> list[CatalogProblem]:
    problems = []
    seen_tools: set[tuple[str, str]] = set()
    for index, tool in enumerate(parsed.tools):
        if (tool.server, tool.name) in seen_tools:
            problems.append(locator.problem(["tools", index, "name"], f"tool {tool.server}/{tool.name} has two entries; merge them into one"))
        seen_tools.add((tool.server, tool.name))
    seen_states: set[str] = set()
    for index, state in enumerate(parsed.states):
        if state.token in seen_states:
            problems.append(locator.problem(["states", index, "token"], f"state {state.token!r} has two entries; merge them into one"))
        seen_states.add(state.token)
    return problems


#: Bytes of a ``.npy`` member's header (numpy writes 128, or a multiple of 64 for long shapes).
_NPY_HEADER_BYTES = 4096
#: Characters of the longest text member (a model id, a SHA-256 digest).
_LONGEST_TEXT = 1024


def _load_npz(
    path: Path, expected_sha256: str, locator: SourceLocator, location: list[str | int], members: Mapping[str, int]
) -> tuple[dict[str, np.ndarray] | None, list[CatalogProblem]]:
    """The arrays ``members`` names (``{name: most bytes it may take}``) of an ``.npz`` whose SHA-256
    must be ``expected_sha256``; never unpickled, and no member is read beyond its size (whoever
    writes the file writes its hash too: the hash proves no origin, so a small file that inflates to
    gigabytes must not be inflated)."""
    if not path.is_file():
        return None, [locator.problem(location, f"the file {path} does not exist (it is written beside the overlay); {RELEARN}", BAD_VECTORS)]
    try:
        found = file_sha256(path)
    except OSError as error:
        return None, [locator.problem(location, f"cannot read {path}: {error.strerror or error}", BAD_VECTORS)]
    if found != expected_sha256:
        return None, [
            locator.problem(
                location,
                f"{path} has SHA-256 {found[:12]}…, not the {expected_sha256[:12]}… the overlay was written with: the file changed or was replaced; {RELEARN}",
                BAD_VECTORS,
            )
        ]
    try:
        with zipfile.ZipFile(path) as archive:
            sizes = {info.filename.removesuffix(".npy"): info.file_size for info in archive.infolist()}
        too_large = sorted(name for name, size in sizes.items() if name in members and size > members[name])
        if too_large:
            message = f"{path} holds an array `{too_large[0]}` of {sizes[too_large[0]]:,} bytes, more than the overlay's size allows; {RELEARN}"
            return None, [locator.problem(location, message, BAD_VECTORS)]
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in members if name in archive.files}, []
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        return None, [locator.problem(location, f"{path} is not a numpy .npz file of plain arrays ({error}); {RELEARN}", BAD_VECTORS)]


def _text(arrays: Mapping[str, np.ndarray], name: str) -> str | None:
    value = arrays.get(name)
    return str(value) if value is not None and value.ndim == 0 and value.dtype.kind == "U" else None


def _read_vectors(parsed: OverlayFile, directory: Path, locator: SourceLocator, rows: int) -> tuple[np.ndarray | None, list[CatalogProblem]]:
    header = parsed.overlay
    path = directory / parsed.vectors
    text_bytes = _NPY_HEADER_BYTES + 4 * _LONGEST_TEXT
    members = {"vectors": _NPY_HEADER_BYTES + 8 * rows * header.dimension, "model": text_bytes, "phrasings_sha256": text_bytes}
    arrays, problems = _load_npz(path, header.vectors_sha256, locator, ["vectors"], members)
    if arrays is None:
        return None, problems
    vectors = arrays.get("vectors")
    if vectors is None or vectors.dtype.kind != "f" or vectors.ndim != 2:
        found = "no array `vectors`" if vectors is None else f"`vectors` of shape {vectors.shape} and type {vectors.dtype}"
        return None, [locator.problem(["vectors"], f"{path} holds {found}; it must hold a 2-D float array `vectors`; {RELEARN}", BAD_VECTORS)]
    if vectors.shape != (rows, header.dimension):
        return None, [
            locator.problem(
                ["vectors"],
                f"{path} holds {vectors.shape[0]} vectors of {vectors.shape[1]} dimensions, but the overlay has {rows} phrasings and says dimension {header.dimension}; {RELEARN}",
                BAD_VECTORS,
            )
        ]
    if not np.isfinite(vectors).all():
        return None, [locator.problem(["vectors"], f"{path} holds NaN or infinite values; {RELEARN}", BAD_VECTORS)]
    model = _text(arrays, "model")
    if model != header.embedding_model:
        return None, [
            locator.problem(
                ["overlay", "embedding_model"],
                f"the overlay says its vectors come from {header.embedding_model!r}, but {path} says {model!r}; {RELEARN}",
                BAD_VECTORS,
            )
        ]
    if _text(arrays, "phrasings_sha256") != phrasings_digest(parsed.tools, parsed.states):
        return None, [
            locator.problem(
                ["vectors"],
                f"the phrasings of the overlay are not those {path} was computed from (a phrasing was edited, added or removed); {RELEARN}, or undo the edit",
                BAD_VECTORS,
            )
        ]
    vectors = vectors.astype(np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms), []


def _read_adapter(parsed: OverlayFile, directory: Path, locator: SourceLocator) -> tuple[np.ndarray | None, list[CatalogProblem]]:
    header = parsed.overlay
    if parsed.adapter is None:
        if header.adapter_sha256 is not None:
            return None, [
                locator.problem(["overlay", "adapter_sha256"], "the overlay gives an adapter hash but no `adapter` file; remove the hash or name the file")
            ]
        return None, []
    if header.adapter_sha256 is None:
        return None, [locator.problem(["overlay"], f"the overlay names an adapter file but gives no `adapter_sha256` for it; {RELEARN}", BAD_VECTORS)]
    path = directory / parsed.adapter
    members = {"adapter": _NPY_HEADER_BYTES + 8 * header.dimension**2, "model": _NPY_HEADER_BYTES + 4 * _LONGEST_TEXT}
    arrays, problems = _load_npz(path, header.adapter_sha256, locator, ["adapter"], members)
    if arrays is None:
        return None, problems
    adapter = arrays.get("adapter")
    dimension = header.dimension
    if adapter is None or adapter.dtype.kind != "f" or adapter.shape != (dimension, dimension) or not np.isfinite(adapter).all():
        found = "no array `adapter`" if adapter is None else f"`adapter` of shape {adapter.shape}"
        return None, [
            locator.problem(["adapter"], f"{path} holds {found}; it must hold a finite {dimension}×{dimension} float array `adapter`; {RELEARN}", BAD_VECTORS)
        ]
    if _text(arrays, "model") != header.embedding_model:
        return None, [locator.problem(["adapter"], f"{path} was fitted for {_text(arrays, 'model')!r}, not {header.embedding_model!r}; {RELEARN}", BAD_VECTORS)]
    return adapter.astype(np.float32), []


def apply_overlays(
    overlays: Sequence[Overlay], tools: Sequence[ToolDefinition], states: Mapping[str, State], skipped_domains: Collection[str] = ()
) -> tuple[list[ToolDefinition], list[CatalogProblem]]:
    """The tools with each overlay's prerequisites added to their ``requires``, and the problems.

    Problems: TP108 for a tool (server, name), state token or prerequisite state no catalog has;
    TP109 for a prerequisite no tool but the one requiring it can reach, from the states a user can
    hold (``input: true``, or produced by no tool): requiring it would make the tool unusable.
    Entries of ``skipped_domains`` (catalogs left out for missing modules, which were warned of
    already) are passed over: their tools and states (``domain.…``) are simply not there.
    """

    def skipped(name: str) -> bool:
        return name in skipped_domains or name.split(".", 1)[0] in skipped_domains

    problems: list[CatalogProblem] = []
    by_key = {(tool.server_name, tool.name): tool for tool in tools}
    added: dict[tuple[str | None, str], set[str]] = {}
    where: dict[tuple[tuple[str | None, str], str], tuple[Overlay, list[str | int]]] = {}
    for overlay in overlays:
        for index, entry in enumerate(overlay.document.tools):
            key = (entry.server, entry.name)
            if key not in by_key and skipped(entry.server):
                continue
            if key not in by_key:
                names = [f"{server}/{name}" for server, name in by_key]
                problems.append(
                    overlay.problem(
                        ["tools", index, "name"],
                        f"no loaded catalog has tool {entry.server}/{entry.name};{did_you_mean(f'{entry.server}/{entry.name}', names)} load its catalog with the overlay, or {RELEARN} over the catalogs in use",
                        UNKNOWN_NAME,
                    )
                )
                continue
            for position, prerequisite in enumerate(entry.prerequisites):
                location: list[str | int] = ["tools", index, "prerequisites", position, "state"]
                if prerequisite.state not in states and skipped(prerequisite.state):
                    continue
                if prerequisite.state not in states:
                    problems.append(
                        overlay.problem(
                            location,
                            f"tool {entry.name!r} is given prerequisite {prerequisite.state!r}, which no loaded catalog declares;{did_you_mean(prerequisite.state, states)} fix or remove it",
                            UNKNOWN_NAME,
                        )
                    )
                    continue
                added.setdefault(key, set()).add(prerequisite.state)
                where[(key, prerequisite.state)] = (overlay, location)
        for index, state in enumerate(overlay.document.states):
            if state.token not in states and not skipped(state.token):
                problems.append(
                    overlay.problem(
                        ["states", index, "token"],
                        f"no loaded catalog declares state {state.token!r};{did_you_mean(state.token, states)} load its catalog with the overlay, or {RELEARN}",
                        UNKNOWN_NAME,
                    )
                )
    updated = [_with_requires(tool, added.get((tool.server_name, tool.name), set())) for tool in tools]
    produced = {token for tool in tools for token in tool.state_transition.produces}
    holdable = {token for token, state in states.items() if state.input or token not in produced}
    for key, prerequisites in added.items():
        others = [tool for tool in updated if (tool.server_name, tool.name) != key]
        reachable = reachable_states(others, holdable)
        for token in sorted(prerequisites - reachable):
            overlay, location = where[(key, token)]
            problems.append(
                overlay.problem(
                    location,
                    f"prerequisite {token!r} of tool {key[1]!r} can only be reached through {key[1]!r} itself (a cycle): requiring it would make the tool unusable; remove it",
                    PREREQUISITE_CYCLE,
                )
            )
    return updated, problems


def _with_requires(tool: ToolDefinition, extra: set[str]) -> ToolDefinition:
    if not extra - tool.state_transition.requires:
        return tool
    transition = tool.state_transition.model_copy(update={"requires": tool.state_transition.requires | extra})
    return tool.model_copy(update={"state_transition": transition})


def render_overlay(document: OverlayFile, comments: Sequence[str]) -> str:
    """The YAML text of an overlay: ``comments`` as a header (``# ...`` lines), then the document
    in the field order of the format, one phrasing a line."""
    import yaml

    header = "".join(f"# {line}\n" if line else "#\n" for line in comments)
    data = document.model_dump(exclude_none=True)
    if not data["overlay"].get("prerequisite_thresholds"):
        data["overlay"].pop("prerequisite_thresholds", None)
    for tool in data["tools"]:
        if not tool["prerequisites"]:
            del tool["prerequisites"]
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000, default_flow_style=False)
    return header + body
