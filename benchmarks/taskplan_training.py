"""What the learned variant of ``bench_taskplan.py`` learns from, as labelled examples
(:mod:`toolpath.planner.learning.examples`), the same a user would give ``toolpath learn``.

- **UltraTool**: the requests *outside* the paper's test ids (3,027 of 3,527). Each becomes one
  example with the request and, where the gold steps name the same tools as the gold chain, the
  steps: "Step 2 Call account_login to log into the online banking account" teaches
  ``account_login`` the words "log into the online banking account". Steps that call no tool ("Step 3
  Save the booking number securely") are left out; a request whose steps name other tools than its
  gold chain keeps the request and the chain only. The chain's links are the gold ``task_links``.
- **TMDB**: only our own development requests, ``tmdb_dev_requests.jsonl`` (see its ``.md``); none of
  RestBench's 100 requests teaches anything, so every one of them can be measured on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from toolpath.planner.learning.examples import LabelledExample, read_examples

#: Our own TMDB development requests (issue 53), with steps and gold chains.
TMDB_DEV_REQUESTS = Path(__file__).resolve().parent / "tmdb_dev_requests.jsonl"

#: A gold step that calls a tool: "Step 2 Call X to do this." / "Step 3: Call X again to do that".
_GOLD_STEP = re.compile(r"^\s*Step\s*\d+:?\s+Call\s+(\w+)\s+(?:again\s+)?to\s+(.+?)\.?\s*$", flags=re.IGNORECASE)


def request_example(request: dict[str, Any], source: str) -> LabelledExample:
    """One taskplan request (``user_request``, ``task_steps``, ``task_nodes``, ``task_links``) as a
    labelled example; ``source`` names it in reports (see the module docstring for what is kept)."""
    chain = [node["task"] for node in request["task_nodes"]]
    called = [(found.group(1), found.group(2)) for step in request["task_steps"] if (found := _GOLD_STEP.match(step))]
    steps_agree = bool(called) and {tool for tool, _ in called} == set(chain)
    tools = tuple(tool for tool, _ in called) if steps_agree else tuple(chain)
    links = tuple(dict.fromkeys((link["source"], link["target"]) for link in request["task_links"] if link["source"] in tools and link["target"] in tools))
    return LabelledExample(
        tools=tools,
        request=request["user_request"].strip(),
        steps=tuple(words for _, words in called) if steps_agree else (),
        links=links,
        identifier=str(request["id"]),
        source=source,
    )


def training_examples(name: str, requests: list[dict[str, Any]], test_ids: set[str], data: Path) -> list[LabelledExample]:
    """The examples the data set ``name`` learns from: never a request among ``test_ids``."""
    if name == "tmdb":
        return read_examples(TMDB_DEV_REQUESTS)
    source = data / name / "data.json"
    return [request_example(request, f"{source}:{request['id']}") for request in requests if str(request["id"]) not in test_ids]


def as_taskplan_request(example: LabelledExample) -> dict[str, Any]:
    """A labelled example in the taskplan data's form (``id``, ``user_request``, ``task_steps``,
    ``task_nodes``, ``task_links``), to score a planner on it as on the benchmark's requests.

    Raises:
        ValueError: the example has no request (only steps): there is nothing to plan from words.
    """
    if example.request is None:
        raise ValueError(f"{example.source}: the example gives steps only; a request in words is needed to score the request planner")
    return {
        "id": example.identifier,
        "user_request": example.request,
        "task_steps": [f"Step {number} Call {tool} to {text}" for number, (tool, text) in enumerate(zip(example.tools, example.steps), start=1)],
        "task_nodes": [{"task": tool} for tool in example.tools],
        "task_links": [{"source": source, "target": target} for source, target in example.links],
    }
