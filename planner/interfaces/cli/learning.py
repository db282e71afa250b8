"""Learning from use on the command line: ``toolpath learn`` (labelled examples, or the record of
use, → a catalog overlay; ``--evaluate`` measures it on a held-back part first)."""

from __future__ import annotations

import argparse
from pathlib import Path

from toolpath.planner.interfaces.cli.shared import CommandLineError, add_command, catalog_paths, emit_json, prepare_embedding_model

LEARN_EXAMPLES = """examples:
  toolpath learn --from-file examples.jsonl --out learned.yaml
  toolpath learn --from-file examples.jsonl --out learned.yaml --evaluate --json
  toolpath search "spread of the prices" --add-catalog learned.yaml
Each line of the file is {"request": TEXT, "tools": [NAME, ...]} or {"steps": [TEXT, ...], "tools": [...]}.
Undo: delete the overlay (and the .npz files beside it)."""


def held_back_fraction(text: str) -> float:
    """argparse type: a fraction strictly between 0 and 1."""
    try:
        fraction = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < fraction < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction between 0 and 1 (e.g. 0.2)")
    return fraction


def add_learn_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``toolpath learn`` to ``commands``, run by :func:`command_learn`."""
    learn = add_command(
        commands,
        "learn",
        "Learn a catalog overlay (phrasings per tool and state, prerequisite habits, a query adapter) from labelled examples or the record of use.",
        command_learn,
        LEARN_EXAMPLES,
    )
    source = learn.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-file", metavar="FILE.jsonl", type=Path, help="labelled examples, one JSON object a line")
    source.add_argument("--from-record", action="store_true", help="what your record of use labels (runs you accepted or corrected)")
    learn.add_argument("--out", required=True, metavar="OVERLAY.yaml", type=Path, help="the overlay to write (its .npz files go beside it)")
    learn.add_argument("--no-adapter", dest="adapter", action="store_false", help="fit no query adapter")
    learn.add_argument("--evaluate", action="store_true", help="hold back part of the examples, learn from the rest, and report search before/after on them")
    learn.add_argument(
        "--held-back", type=held_back_fraction, default=0.2, metavar="FRACTION", help="the fraction --evaluate holds back (default 0.2), by a hash of the text"
    )
    learn.add_argument("--seed", type=int, default=0, help="changes which examples are held back (default 0)")


def _examples(arguments: argparse.Namespace) -> tuple[list, str]:
    from toolpath.planner.learning.examples import read_examples
    from toolpath.planner.learning.record_examples import labelled_examples
    from toolpath.planner.tasks.record_of_use import local_user

    if arguments.from_file is not None:
        return read_examples(arguments.from_file), str(arguments.from_file)
    return labelled_examples(None, local_user()), "the record of use"


def command_learn(arguments: argparse.Namespace) -> int:
    from toolpath.planner.learning.evaluation import evaluate_learning
    from toolpath.planner.learning.overlay_learning import learn

    examples, source = _examples(arguments)
    if not examples:
        raise CommandLineError(f"{source} holds no labelled examples; nothing to learn")
    prepare_embedding_model()
    paths = catalog_paths(arguments)
    if arguments.evaluate:
        evaluation = evaluate_learning(
            paths, examples, arguments.out, fraction=arguments.held_back, seed=arguments.seed, adapter=arguments.adapter, learned_from=source
        )
        report = evaluation.learned
        payload = evaluation.to_dict()
    else:
        evaluation = None
        report = learn(paths, examples, arguments.out, adapter=arguments.adapter, seed=arguments.seed, learned_from=source)
        payload = report.to_dict()
    if arguments.json:
        emit_json(payload)
        return 0
    print(f"wrote {report.overlay}: {report.phrasings} phrasings for {len(report.tools)} tools and {len(report.states)} states from {report.examples} examples")
    for item in report.prerequisites:
        print(f"  prerequisite: {item['tool']} requires {item['state']} ({item['before']} came first in {item['share']:.0%} of {item['uses']} uses)")
    for item in report.left_out:
        print(f"  left out: {item['before']} before {item['tool']}: {item['why']}")
    print(f"  query adapter: {report.adapter_note}")
    if evaluation is not None:
        print(f"measured on {evaluation.held_back} held-back examples ({evaluation.phrasings} phrasings), learned from the other {report.examples}:")
        for name, label in (("r_at_1", "R@1"), ("r_at_5", "R@5"), ("mrr_at_10", "MRR@10")):
            print(f"  {label}: {evaluation.before[name]:.3f} -> {evaluation.after[name]:.3f}")
        if evaluation.node_f1_before is not None:
            print(f"  node F1 over {evaluation.requests} requests: {evaluation.node_f1_before:.3f} -> {evaluation.node_f1_after:.3f}")
        print("  the overlay written is the one measured; run again without --evaluate to learn from every example")
    print(f"use it: --add-catalog {report.overlay} (or add it to $TOOLPATH_CATALOGS); undo: delete it")
    return 0
