"""``toolpath learn``: labelled examples → a catalog overlay (:mod:`toolpath.registry.overlays`).

From the examples, over the catalogs they name tools of:

* every phrasing that names one tool (a step, or a request served by one tool) is kept, none
  dropped, and embedded into the overlay's vectors;
* a request served by several tools teaches the states its chain ends by reaching (what the last
  tools produce): the request's goal;
* prerequisite habits (:func:`toolpath.planner.learning.prerequisites.learn_prerequisites`) become
  prerequisite states: ``after`` requires what ``before`` produces that ``after`` neither needs nor
  makes; one that only ``after`` itself could reach (a cycle) is left out, and the report says so;
* optionally a query adapter, fitted on the phrasings and their tools only when it helps on
  phrasings held back from its fitting, at the ridge that helps most
  (:func:`toolpath.planner.search.learned.choose_query_adapter`); the overlay's comments and the
  report say what was chosen and the held-back figures.

Files are written whole or not at all: into a temporary directory beside ``out``, loaded there with
the catalogs (so an overlay that would not load is never written), then renamed into place,
vectors first and the overlay last.
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml
from filelock import FileLock, Timeout

from toolpath.errors import Refusal
from toolpath.planner.learning.examples import ExamplesError, LabelledExample, resolve_tool
from toolpath.registry import ToolDefinition, load_checked, reachable_states
from toolpath.registry.overlays import (
    OVERLAY_FORMAT,
    OverlayFile,
    OverlayHeader,
    OverlayState,
    OverlayTool,
    Prerequisite,
    file_sha256,
    phrasings_digest,
    render_overlay,
)

if TYPE_CHECKING:
    from toolpath.planner.learning.prerequisites import PrerequisiteHabits
    from toolpath.planner.search.embedding import Embedder
    from toolpath.registry import LoadedCatalogs

ToolKey = tuple[str, str]


class LearnError(Refusal, ValueError):
    """Learning cannot go on as asked (nothing was written); the message says what to do."""


@dataclass(frozen=True)
class LearnReport:
    """What :func:`learn` wrote and why.

    Attributes:
        overlay, vectors, adapter: the files written (``adapter`` ``None`` when none was fitted).
        examples: the examples learned from.
        tools, states: ``{"server/name" or token: phrasings learned}``.
        prerequisites: each prerequisite written: ``{tool, state, before, share, uses}``.
        left_out: each habit not written, with why.
        habits: the thresholds and held-back figures of the habits (from ``learn_prerequisites``).
        adapter_note: why an adapter was or was not fitted (with the held-back figures it was chosen by).
        adapter_check: :meth:`toolpath.planner.search.learned.AdapterChoice.to_dict` (``{}`` with
            ``adapter=False``): the ridge chosen and R@1/R@5/MRR@10 on held-back phrasings without an
            adapter and at each ridge tried.
    """

    overlay: Path
    vectors: Path
    adapter: Path | None
    examples: int
    tools: dict[str, int]
    states: dict[str, int]
    prerequisites: list[dict[str, Any]] = field(default_factory=list)
    left_out: list[dict[str, Any]] = field(default_factory=list)
    habits: dict[str, Any] = field(default_factory=dict)
    adapter_note: str = ""
    adapter_check: dict[str, Any] = field(default_factory=dict)

    @property
    def phrasings(self) -> int:
        return sum(self.tools.values()) + sum(self.states.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "overlay": str(self.overlay),
            "vectors": str(self.vectors),
            "adapter": None if self.adapter is None else str(self.adapter),
            "examples": self.examples,
            "phrasings": self.phrasings,
            "tools": self.tools,
            "states": self.states,
            "prerequisites": self.prerequisites,
            "prerequisites_left_out": self.left_out,
            "habits": self.habits,
            "adapter_note": self.adapter_note,
            "adapter_check": self.adapter_check,
            "undo": f"delete {self.overlay} (and the .npz files beside it)",
        }


#: Seconds a learner waits for another one writing the same overlay before it gives up.
WRITE_LOCK_WAIT_SECONDS = 60.0


def lock_path(out: Path) -> Path:
    """The lock file learners writing ``out`` take while they put their files in place: ``.NAME.lock``."""
    return out.with_name(f".{out.name}.lock")


def companion_paths(out: Path) -> tuple[Path, Path]:
    """The vectors and adapter files written beside the overlay ``out``: ``NAME.vectors.npz``, ``NAME.adapter.npz``."""
    return out.with_name(f"{out.stem}.vectors.npz"), out.with_name(f"{out.stem}.adapter.npz")


def resolved_chains(loaded: LoadedCatalogs, examples: Sequence[LabelledExample]) -> list[list[ToolDefinition]]:
    """Each example's tools, resolved in the loaded catalogs (:func:`toolpath.planner.learning.examples.resolve_tool`).

    Raises:
        ExamplesError: listing every example naming a tool no loaded catalog has (or an ambiguous
            one), with its file and line.
    """
    chains, problems = [], []
    for example in examples:
        chain = []
        for written in example.tools:
            try:
                chain.append(resolve_tool(loaded.registry, written, example.source))
            except ExamplesError as error:
                problems.append(str(error))
        chains.append(chain)
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise ExamplesError(f"{len(problems)} tool name(s) of the examples are not in the loaded catalogs:\n  {shown}")
    return chains


def learn(
    catalog_paths: Iterable[str | Path],
    examples: Sequence[LabelledExample],
    out: str | Path,
    *,
    adapter: bool = True,
    held_back: float = 0.2,
    seed: int = 0,
    embedder: Embedder | None = None,
    learned_from: str = "",
) -> LearnReport:
    """Learn an overlay from ``examples`` over the catalogs of ``catalog_paths`` and write it to
    ``out`` (with ``NAME.vectors.npz`` and, when ``adapter`` is asked for and helps on held-back
    phrasings, ``NAME.adapter.npz`` beside it).

    Args:
        catalog_paths: the catalogs (and overlays) in use; ``out`` itself, if listed, is left out
            (learning again replaces it).
        held_back: the fraction of chains :func:`learn_prerequisites` keeps out to check the habits.
        seed: for that choice.
        embedder: default: the shipped model (:func:`toolpath.planner.search.embedding.default_embedder`).
        learned_from: what the examples are (a file name), written in the overlay's header.

    Raises:
        ExamplesError: an example names a tool the catalogs do not have.
        LearnError: no example teaches anything, ``out`` is a file that is not an overlay, or the
            files cannot be written. Nothing is written then.
        CatalogError: the catalogs do not load.
    """
    from toolpath.planner.learning.prerequisites import learn_prerequisites
    from toolpath.planner.search.embedding import default_embedder
    from toolpath.planner.tasks.workspace import Workspace

    out = Path(out)
    _check_destination(out)
    paths = [Path(path) for path in catalog_paths if Path(path).resolve() != out.resolve()]
    loaded = load_checked(paths)
    embedder = embedder if embedder is not None else default_embedder()
    chains = resolved_chains(loaded, examples)
    tool_phrasings, state_phrasings, tool_counts, state_counts = _phrasings(examples, chains)
    if not tool_phrasings and not state_phrasings:
        raise LearnError(
            f"none of the {len(examples)} examples teaches a phrasing: give steps with their tools, or requests served by one tool (a request served by several teaches its goal states only when the chain's last tools produce a state)"
        )
    keys = [[(tool.server_name or "", tool.name) for tool in chain] for chain in chains]
    habits = learn_prerequisites([chain for chain in keys if len(chain) > 1], held_back, seed)
    prerequisites, left_out = _prerequisites(loaded, habits)
    vectors_path, adapter_path = companion_paths(out)
    document = OverlayFile(
        overlay=OverlayHeader(
            format=OVERLAY_FORMAT,
            learned_from=learned_from or f"{len(examples)} labelled examples",
            examples=len(examples),
            embedding_model=str(getattr(embedder, "model_id", None) or "unknown"),
            dimension=1,
            vectors_sha256="0" * 64,
            prerequisite_thresholds=dict(habits.thresholds),
        ),
        vectors=vectors_path.name,
        tools=[
            OverlayTool(
                server=key[0],
                name=key[1],
                examples=tool_counts.get(key, 0),
                phrasings=tool_phrasings.get(key, []),
                prerequisites=[Prerequisite(state=item["state"], share=item["share"], uses=item["uses"]) for item in prerequisites if item["key"] == key],
            )
            for key in sorted(set(tool_counts) | {item["key"] for item in prerequisites})
        ],
        states=[OverlayState(token=token, examples=state_counts[token], phrasings=phrasings) for token, phrasings in sorted(state_phrasings.items())],
    )
    rows = [(phrasing, ("tool", tool.server, tool.name)) for tool in document.tools for phrasing in tool.phrasings]
    rows += [(phrasing, ("state", None, state.token)) for state in document.states for phrasing in state.phrasings]
    from toolpath.planner.search.learned import LearnedSearch, choose_query_adapter

    learned = LearnedSearch.from_phrasings(embedder, rows)
    adapter_matrix, adapter_note, adapter_check = None, "not asked for (--no-adapter)", {}
    if adapter:
        choice = choose_query_adapter(Workspace(loaded, embedder).index, learned)
        adapter_matrix, adapter_note, adapter_check = choice.adapter, choice.note, choice.to_dict()
    report_habits = {"thresholds": dict(habits.thresholds), "validation": dict(habits.validation), "found": len(habits.habits)}
    _write(out, document, learned.vectors, adapter_matrix, paths, _comments(document, learned_from, report_habits, adapter_note))
    return LearnReport(
        overlay=out,
        vectors=vectors_path,
        adapter=adapter_path if adapter_matrix is not None else None,
        examples=len(examples),
        tools={f"{tool.server}/{tool.name}": len(tool.phrasings) for tool in document.tools},
        states={state.token: len(state.phrasings) for state in document.states},
        prerequisites=[{key: value for key, value in item.items() if key != "key"} for item in prerequisites],
        left_out=left_out,
        habits=report_habits,
        adapter_note=adapter_note,
        adapter_check=adapter_check,
    )


def _check_destination(out: Path) -> None:
    if out.suffix.lower() not in (".yaml", ".yml"):
        raise LearnError(f"--out {out}: an overlay is a YAML file; name it NAME.yaml")
    if not out.parent.is_dir():
        raise LearnError(f"--out {out}: the directory {out.parent} does not exist; create it first")
    if out.exists():
        try:
            head = out.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            raise LearnError(f"--out {out}: cannot read the file there ({error.strerror or error})") from None
        if not any(line.startswith("overlay:") for line in head.splitlines()):
            raise LearnError(f"--out {out} exists and is not an overlay (no top-level `overlay:`); learning would overwrite it: choose another file")
    # The .npz files beside it are replaced (and an adapter no longer fitted deleted) only when the
    # overlay there names them: a file of that name that is someone else's is left alone.
    named = _files_named(out) if out.exists() else set()
    for companion in companion_paths(out):
        if companion.exists() and companion.name not in named:
            raise LearnError(
                f"--out {out}: {companion} exists and is not a file of an overlay at {out}; learning would overwrite or delete it: move it, or choose another name"
            )


def _files_named(overlay: Path) -> set[str]:
    """The ``vectors`` and ``adapter`` file names the overlay at ``overlay`` gives (none when it does not parse)."""
    try:
        document = yaml.safe_load(overlay.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return set()
    if not isinstance(document, dict):
        return set()
    return {document[key] for key in ("vectors", "adapter") if isinstance(document.get(key), str)}


def _phrasings(
    examples: Sequence[LabelledExample], chains: Sequence[Sequence[ToolDefinition]]
) -> tuple[dict[ToolKey, list[str]], dict[str, list[str]], dict[ToolKey, int], dict[str, int]]:
    """Per tool and per state: the distinct phrasings in first-seen order, and how many examples taught each."""
    tool_phrasings: dict[ToolKey, list[str]] = {}
    state_phrasings: dict[str, list[str]] = {}
    tool_counts: dict[ToolKey, int] = {}
    state_counts: dict[str, int] = {}
    for example, chain in zip(examples, chains):
        by_written = dict(zip(example.tools, chain))
        for text, written in example.phrasings():
            tool = by_written[written]
            key = (tool.server_name or "", tool.name)
            tool_counts[key] = tool_counts.get(key, 0) + 1
            phrasings = tool_phrasings.setdefault(key, [])
            if text not in phrasings:
                phrasings.append(text)
        if example.request is not None and len({(tool.server_name, tool.name) for tool in chain}) > 1:
            sources = {source for source, _ in example.links}
            for token in sorted({token for written, tool in by_written.items() if written not in sources for token in tool.state_transition.produces}):
                state_counts[token] = state_counts.get(token, 0) + 1
                phrasings = state_phrasings.setdefault(token, [])
                if example.request not in phrasings:
                    phrasings.append(example.request)
    return tool_phrasings, state_phrasings, tool_counts, state_counts


def _prerequisites(loaded: LoadedCatalogs, habits: PrerequisiteHabits) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The states each habit adds to its later tool's ``requires`` (:meth:`PrerequisiteHabits.as_requires`
    says which), and the habits left out with why: nothing to add, or a state only the tool itself
    could reach (requiring it would make a cycle)."""
    tools = {(tool.server_name or "", tool.name): tool for tool in loaded.registry}
    produced = {token for tool in tools.values() for token in tool.state_transition.produces}
    holdable = {token for token, state in loaded.states.items() if state.input or token not in produced}
    kept: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    for requirement in habits.as_requires(loaded.registry):
        before, after, share, uses = requirement.habit
        names = {"tool": f"{after[0]}/{after[1]}", "before": f"{before[0]}/{before[1]}", "share": share, "uses": uses}
        if not requirement.states:
            left_out.append({**names, "why": requirement.reason})
            continue
        reachable = reachable_states([tool for key, tool in tools.items() if key != tuple(after)], holdable)
        for state in requirement.states:
            if state not in reachable:
                left_out.append({**names, "state": state, "why": f"{state} can only be reached through {after[1]} itself (requiring it would make a cycle)"})
            else:
                kept.append({"key": tuple(after), **names, "state": state})
    return kept, left_out


def _comments(document: OverlayFile, learned_from: str, habits: dict[str, Any], adapter_note: str) -> list[str]:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    phrasings = sum(len(tool.phrasings) for tool in document.tools) + sum(len(state.phrasings) for state in document.states)
    validation = ", ".join(f"{key} {value}" for key, value in habits["validation"].items()) or "none"
    return [
        f"Catalog overlay written by `toolpath learn` on {when}",
        f"from {learned_from or 'labelled examples'}: {document.overlay.examples} examples, {phrasings} phrasings",
        f"for {len(document.tools)} tools and {len(document.states)} states.",
        "Phrasings are search data (their vectors are in the .npz beside this file); prerequisites are",
        f"added to the tools' `requires` when this file is loaded. Habits found: {habits['found']}; held-back check: {validation}.",
        f"Query adapter: {adapter_note}.",
        "Load it like a catalog (--add-catalog FILE, TOOLPATH_CATALOGS); undo: delete this file.",
        "Editing a phrasing makes the vectors stale (the load says so): run `toolpath learn` again instead.",
        "",
    ]


def _save_npz(path: Path, **arrays: np.ndarray) -> None:
    with open(path, "wb") as file:  # a file object: numpy adds no second ".npz"
        np.savez(file, **arrays)
        file.flush()
        os.fsync(file.fileno())


def _write(out: Path, document: OverlayFile, vectors: np.ndarray, adapter: np.ndarray | None, catalog_paths: list[Path], comments: list[str]) -> None:
    """Write the overlay and its arrays into a temporary directory beside ``out``, load them with
    the catalogs, then rename them into place (the overlay last)."""
    vectors_path, adapter_path = companion_paths(out)
    model = np.array(document.overlay.embedding_model)
    try:
        staging = Path(tempfile.mkdtemp(prefix=".toolpath-learn-", dir=out.parent))
    except OSError as error:
        raise LearnError(f"cannot write beside {out}: {error.strerror or error}") from None
    try:
        _save_npz(
            staging / vectors_path.name,
            vectors=vectors.astype(np.float32),
            model=model,
            phrasings_sha256=np.array(phrasings_digest(document.tools, document.states)),
        )
        header = document.overlay.model_copy(update={"dimension": int(vectors.shape[1]), "vectors_sha256": file_sha256(staging / vectors_path.name)})
        if adapter is not None:
            _save_npz(staging / adapter_path.name, adapter=adapter.astype(np.float32), model=model)
            header = header.model_copy(update={"adapter_sha256": file_sha256(staging / adapter_path.name)})
        final = document.model_copy(update={"overlay": header, "vectors": vectors_path.name, "adapter": adapter_path.name if adapter is not None else None})
        with open(staging / out.name, "w", encoding="utf-8") as file:
            file.write(render_overlay(final, comments))
            file.flush()
            os.fsync(file.fileno())
        load_checked([*catalog_paths, staging / out.name])  # what would not load is not written
        # Two learners writing one overlay at once would otherwise leave one's vectors beside the
        # other's overlay (refused at load, TP110): the renames of one learner go together.
        with FileLock(lock_path(out), timeout=WRITE_LOCK_WAIT_SECONDS):
            os.replace(staging / vectors_path.name, vectors_path)
            if adapter is not None:
                os.replace(staging / adapter_path.name, adapter_path)
            os.replace(staging / out.name, out)
            if adapter is None and adapter_path.exists():
                adapter_path.unlink()  # an earlier learning's adapter, which the new overlay does not name
    except Timeout:
        raise LearnError(
            f"another toolpath learn has been writing {out} for {WRITE_LOCK_WAIT_SECONDS:g} s; try again when it is done (its lock: {lock_path(out)})"
        ) from None
    except OSError as error:
        raise LearnError(f"cannot write {out}: {error.strerror or error}; nothing was changed") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
