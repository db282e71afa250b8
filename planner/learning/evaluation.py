"""``toolpath learn --evaluate``: learn from part of the examples and measure, on the part held
back, how search (and planning) did before and after.

The held-back part is chosen by a hash of each example's text (its request, or its steps) and a
seed, so the same examples are held back on every run and whatever their order. Measured:

* for each held-back phrasing (a step, or a request served by one tool): where its tool ranks among
  the tools ``Workspace.search`` returns: R@1, R@5 and MRR@10 (reciprocal rank, 0 past 10);
* for each held-back request: node F1 of the tools ``Workspace.plan_task`` plans against the
  example's tools, with every input state held (as if the user gave the files and values it
  needs: an example names no inputs); a refused request plans none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolpath.errors import ToolpathError
from toolpath.planner.learning.examples import LabelledExample
from toolpath.planner.learning.overlay_learning import LearnError, LearnReport, learn, resolved_chains
from toolpath.registry import load_checked

if TYPE_CHECKING:
    from toolpath.planner.search.embedding import Embedder
    from toolpath.planner.tasks.workspace import Workspace

ToolKey = tuple[str, str]
#: Hits looked at per phrasing (MRR@10).
SEARCH_DEPTH = 10


@dataclass(frozen=True)
class EvaluationReport:
    """Before/after figures on the held-back examples, and what was learned from the rest."""

    learned: LearnReport
    held_back: int
    phrasings: int
    before: dict[str, float]
    after: dict[str, float]
    requests: int
    node_f1_before: float | None
    node_f1_after: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "held_back_examples": self.held_back,
            "learned_from_examples": self.learned.examples,
            "phrasings_measured": self.phrasings,
            "search_before": self.before,
            "search_after": self.after,
            "requests_measured": self.requests,
            "node_f1_before": self.node_f1_before,
            "node_f1_after": self.node_f1_after,
            "learned": self.learned.to_dict(),
        }


def example_text(example: LabelledExample) -> str:
    return example.request if example.request is not None else "\n".join(example.steps)


def is_held_back(example: LabelledExample, fraction: float, seed: int = 0) -> bool:
    """Whether ``example`` is in the held-back ``fraction`` (by SHA-256 of ``seed`` and its text)."""
    digest = hashlib.sha256(f"{seed}\n{example_text(example)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def evaluate_learning(
    catalog_paths: Iterable[str | Path],
    examples: Sequence[LabelledExample],
    out: str | Path,
    *,
    fraction: float = 0.2,
    seed: int = 0,
    adapter: bool = True,
    embedder: Embedder | None = None,
    learned_from: str = "",
    node_f1: bool = True,
) -> EvaluationReport:
    """Hold back ``fraction`` of ``examples``, :func:`learn` from the rest into ``out``, and measure
    on the held-back part before (the catalogs) and after (with the overlay).

    Raises:
        LearnError: ``fraction`` is not within (0, 1), or the split leaves either side empty.
        and what :func:`learn` raises.
    """
    from toolpath.planner.tasks.workspace import Workspace

    if not 0 < fraction < 1:
        raise LearnError(f"the held-back fraction must be within (0, 1), got {fraction}")
    held = [example for example in examples if is_held_back(example, fraction, seed)]
    rest = [example for example in examples if not is_held_back(example, fraction, seed)]
    if not held or not rest:
        raise LearnError(
            f"holding back {fraction:.0%} of {len(examples)} examples leaves {len(rest)} to learn from and {len(held)} to measure on; give more examples"
        )
    out = Path(out)
    paths = [Path(path) for path in catalog_paths if Path(path).resolve() != out.resolve()]
    report = learn(
        paths,
        rest,
        out,
        adapter=adapter,
        seed=seed,
        embedder=embedder,
        learned_from=f"{learned_from or 'labelled examples'} ({len(rest)} of {len(examples)}; {len(held)} held back by --evaluate)",
    )
    before = Workspace(load_checked(paths), embedder)
    after = Workspace(load_checked([*paths, out]), embedder)
    chains = [[(tool.server_name or "", tool.name) for tool in chain] for chain in resolved_chains(before.loaded, held)]
    phrasings = [(text, chain[example.tools.index(written)]) for example, chain in zip(held, chains) for text, written in example.phrasings()]
    requests = [(example.request, set(chain)) for example, chain in zip(held, chains) if example.request is not None] if node_f1 else []
    return EvaluationReport(
        report,
        len(held),
        len(phrasings),
        _search_figures(before, phrasings),
        _search_figures(after, phrasings),
        len(requests),
        _node_f1(before, requests) if requests else None,
        _node_f1(after, requests) if requests else None,
    )


def _search_figures(workspace: Workspace, phrasings: Sequence[tuple[str, ToolKey]]) -> dict[str, float]:
    """R@1, R@5 and MRR@10 of each phrasing's tool among the tools searched for it."""
    ranks = []
    for text, key in phrasings:
        hits = workspace.search(text, k=SEARCH_DEPTH, kind="tool")
        found = [(hit.server or "", hit.name) for hit in hits]
        ranks.append(found.index(key) + 1 if key in found else None)
    count = max(len(ranks), 1)
    return {
        "r_at_1": round(sum(rank == 1 for rank in ranks) / count, 4),
        "r_at_5": round(sum(rank is not None and rank <= 5 for rank in ranks) / count, 4),
        "mrr_at_10": round(sum(1 / rank for rank in ranks if rank is not None) / count, 4),
    }


def _node_f1(workspace: Workspace, requests: Sequence[tuple[str, set[ToolKey]]]) -> float:
    """Mean node F1 of the tools planned for each request against its tools."""
    given = [token for token, state in workspace.loaded.states.items() if state.input]
    scores = []
    for request, gold in requests:
        try:
            task = workspace.plan_task(request, held=given, probe_directory=None)
            planned = {(step.tool.server_name or "", step.tool.name) for step in task.plan.steps}
        except ToolpathError:  # a refused request plans no tool
            planned = set()
        both = len(planned & gold)
        scores.append(0.0 if not both else 2 * both / (len(planned) + len(gold)))
    return round(sum(scores) / len(scores), 4)
