"""Retries and injected failures of tool calls (this module is imported *in the kernel process*).

Every call of a tool handle, bound in the kernel or on the host, goes through
:func:`toolpath.kernel.inside.handles.awaitable`, which runs its tries with :func:`call_with_retries`:

- a try that fails with an exception its tool's policy names (:class:`RetrySpec`, from the
  catalog's ``retry`` or its default, :func:`toolpath.registry.retry_policy.effective_retry`) is
  tried again after the policy's wait, up to its ``attempts``; each retry writes one line to the
  cell's stderr (``retrying chemistry.parse_molecule (try 2 of 3) after TimeoutError: ... in 0.5 s``);
- a denied or unanswered approval, a paused tool, a host tool's ``SystemExit``/``KeyboardInterrupt``
  (``ToolExitError``) and an interrupt (``KeyboardInterrupt``, cancellation) end the call at once;
- the last failure is raised with a note saying how many tries were made.

Approval is asked once, before the first try (the handle does it), never again for a retry.

Injected failures (:class:`FailureInjection`, CodeMode's ``inject_failures``) make chosen tools fail
on purpose, with a probability (seeded) or on chosen calls, to try a plan's or an agent's handling
of failure: each injected failure raises :class:`InjectedFailure` before the tool runs, and counts as
a lost connection (``connection``) for retry policies.

Only the standard library and toolpath's light modules are imported here.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolpath.errors import ToolpathError
from toolpath.kernel.inside import call_traces
from toolpath.kernel.inside.approval_policy import ApprovalDenied, ApprovalPending, ApprovalTimeout
from toolpath.kernel.inside.tool_calls import ToolExitError, ToolPausedError
from toolpath.registry.retry_conditions import CONNECTION, TIMEOUT, check_condition, failure_kind, matches

#: Failures never tried again, whatever a policy says: a person's no (or no answer), a tool that
#: cannot run in a cell, and a host tool that tried to stop its process.
NEVER_RETRIED: tuple[type[BaseException], ...] = (ApprovalDenied, ApprovalTimeout, ApprovalPending, ToolPausedError, ToolExitError)
#: Characters of a failure's message shown in a retry line.
SHOWN_MESSAGE_CHARS = 200


class InjectedFailure(ToolpathError, ConnectionError):
    """A failure injected on purpose (:class:`FailureInjection`); the tool did not run. It is a
    ``ConnectionError``, so retry policies that retry ``connection`` retry it."""


@dataclass(frozen=True)
class RetrySpec:
    """A retry policy as the kernel runs it (:class:`toolpath.registry.retry_policy.RetryPolicy`).

    Attributes:
        attempts: tries in all (≥ 1).
        backoff: seconds before the second try, doubled before each further one.
        max_backoff: the longest wait, in seconds.
        on: the conditions a failure must meet to be tried again (:mod:`toolpath.registry.retry_conditions`).
    """

    attempts: int
    backoff: float
    max_backoff: float
    on: tuple[str, ...]

    @classmethod
    def of(cls, spec: Mapping[str, Any] | None) -> RetrySpec | None:
        """The spec of ``{"attempts", "backoff", "max_backoff", "on"}`` (``RetryPolicy.to_spec()``;
        a missing field takes ``RetryPolicy``'s default: 0.5 s, 30 s, timeout and connection);
        ``None`` for ``None``.

        Raises:
            ValueError: a value out of range or a condition that is not one.
        """
        if spec is None:
            return None
        attempts, backoff, max_backoff = spec["attempts"], float(spec.get("backoff", 0.5)), float(spec.get("max_backoff", 30.0))
        if type(attempts) is not int or attempts < 1 or not (0 <= backoff <= max_backoff) or not math.isfinite(max_backoff):
            raise ValueError(f"retry spec {dict(spec)!r}: attempts is a whole number ≥ 1 and 0 ≤ backoff ≤ max_backoff seconds")
        return cls(attempts, backoff, max_backoff, tuple(check_condition(condition) for condition in spec.get("on", (TIMEOUT, CONNECTION))))

    def wait(self, retry: int) -> float:
        """Seconds before retry number ``retry`` (1: the second try)."""
        return min(self.backoff * 2 ** (retry - 1), self.max_backoff)


@dataclass(frozen=True)
class FailureInjection:
    """Make one tool's calls fail on purpose: each try raises :class:`InjectedFailure` before the
    tool runs, with probability ``probability`` (drawn from a generator seeded with ``seed``, one per
    tool, so a run repeats), and on each try whose number is in ``on_calls`` (1: the tool's first try
    in the kernel, retries counted).

    Attributes:
        tool: ``server.tool`` (the catalog's server, a toolkit's name, or the handle a cell calls,
            such as ``chemistry.parse_molecule``) or the tool's name alone (any handle's tool of
            that name). Names are matched as the kernel binds them; nothing checks here that such a
            tool exists (CodeMode does, against the tools it is given:
            :mod:`toolpath.kernel.codemode.injection_targets`).
        probability: chance, from 0 to 1, that a try fails.
        on_calls: try numbers that fail whatever ``probability`` says.
        seed: the seed of the tool's generator.

    Raises:
        ValueError: an empty tool name, a probability outside [0, 1], a try number under 1, or
            neither a probability above 0 nor any ``on_calls`` (nothing would fail).
        TypeError: a value of the wrong type.
    """

    tool: str
    probability: float = 0.0
    on_calls: tuple[int, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool.strip():
            raise ValueError(f"FailureInjection.tool is a tool's name (server.tool or tool), got {self.tool!r}")
        if isinstance(self.probability, bool) or not isinstance(self.probability, (int, float)):
            raise TypeError(f"FailureInjection.probability is a number from 0 to 1, got {self.probability!r}")
        if not 0 <= self.probability <= 1:
            raise ValueError(f"FailureInjection.probability is a chance from 0 to 1, got {self.probability!r}")
        object.__setattr__(self, "on_calls", tuple(self.on_calls))
        if any(isinstance(number, bool) or not isinstance(number, int) or number < 1 for number in self.on_calls):
            raise ValueError(f"FailureInjection.on_calls are try numbers, 1 for the first, got {self.on_calls!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"FailureInjection.seed is a whole number, got {self.seed!r}")
        if self.probability == 0 and not self.on_calls:
            raise ValueError(f"FailureInjection for {self.tool!r} would fail nothing: give a probability above 0 or on_calls")

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "probability": self.probability, "on_calls": list(self.on_calls), "seed": self.seed}

    def settings(self) -> str:
        """``p=0.2, seed 0``, ``on try 2``: when a try fails, for messages."""
        parts = [f"p={self.probability:g}, seed {self.seed}"] if self.probability else []
        if self.on_calls:
            parts.append(f"on try {', '.join(map(str, self.on_calls))}")
        return "; ".join(parts)

    def describe(self) -> str:
        """``chemistry.parse_molecule (p=0.2, seed 0)``: for a run's output."""
        return f"{self.tool} ({self.settings()})"


@dataclass
class _Injector:
    injection: FailureInjection
    generator: random.Random = field(init=False)
    tries: int = 0

    def __post_init__(self) -> None:
        self.generator = random.Random(self.injection.seed)

    def fails(self) -> bool:
        self.tries += 1
        drawn = self.generator.random() < self.injection.probability if self.injection.probability else False
        return drawn or self.tries in self.injection.on_calls


#: The kernel's injected failures, by the tool name they were given for; their generators and try
#: counts live as long as the kernel (a repeated install of the same injections keeps them).
_injectors: dict[str, _Injector] = {}


def inject_failures(injections: str) -> None:
    """Install the injected failures described by ``injections``, JSON of a list of
    :meth:`FailureInjection.to_dict` (CodeMode sends it when it binds handles); replaces earlier
    ones, keeping the state of those that did not change. ``"[]"`` removes them all."""
    wanted = [FailureInjection(item["tool"], item["probability"], tuple(item["on_calls"]), item["seed"]) for item in json.loads(injections)]
    kept = {
        injection.tool: _injectors[injection.tool] for injection in wanted if injection.tool in _injectors and _injectors[injection.tool].injection == injection
    }
    _injectors.clear()
    _injectors.update({injection.tool: kept.get(injection.tool) or _Injector(injection) for injection in wanted})


def _injector(names: Iterable[str]) -> _Injector | None:
    return next((_injectors[name] for name in names if name in _injectors), None) if _injectors else None


async def call_with_retries(
    call: Callable[[], Awaitable[Any]],
    label: str,
    retry: RetrySpec | None,
    names: Iterable[str] = (),
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    counted: Callable[[str], None] = lambda kind: None,
    failed: Callable[[str], None] = lambda kind: None,
) -> Any:
    """Await ``call()`` under ``retry`` (``None``: one try) and return its value (module docstring).

    Args:
        call: makes one try.
        label: the tool as the cell calls it (``chemistry.parse_molecule``), for messages.
        retry: the tool's policy.
        names: the names an injected failure may be given for (``handle.tool``, ``server.tool``, ``tool``).
        sleep: awaits the wait before a retry (the handle's is interruptible).
        counted: told ``"retry"`` for each retry and ``"injected"`` for each injected failure, for
            the cell's report.
        failed: told ``"timeout"`` or ``"connection"`` when the call fails for good with such a
            failure (:func:`toolpath.registry.retry_conditions.failure_kind`, read from its class
            hierarchy, which the cell's error report does not carry), for the cell's report.

    Raises:
        InjectedFailure: an injected failure on the last try (or one not retried).
        Exception: the last try's failure, noting the number of tries when there were several.
    """
    __tracebackhide__ = True
    attempts = retry.attempts if retry is not None else 1
    injector = _injector(names)
    for attempt in range(1, attempts + 1):
        try:
            if injector is not None and injector.fails():
                counted("injected")
                raise InjectedFailure(f"failure injected into {label} on its try {injector.tries} in this kernel ({injector.injection.settings()})")
            return await call_traces.numbered(call, attempt)
        except NEVER_RETRIED:
            raise
        except Exception as error:
            if retry is None or attempt == attempts or not matches(retry.on, error):
                kind = failure_kind(error)
                if kind:
                    failed(kind)
                if attempt > 1:
                    error.add_note(f"{label} failed on each of its {attempt} tries")
                    print(f"{label} failed on each of its {attempt} tries; the last failure follows", file=sys.stderr, flush=True)
                raise
            wait = retry.wait(attempt)
            message = " ".join(str(error).split())
            shown = (
                f"{type(error).__name__}: {message[:SHOWN_MESSAGE_CHARS]}{'...' if len(message) > SHOWN_MESSAGE_CHARS else ''}"
                if message
                else type(error).__name__
            )
            print(f"retrying {label} (try {attempt + 1} of {attempts}) after {shown} in {wait:g} s", file=sys.stderr, flush=True)
            counted("retry")
        await sleep(wait)
    raise AssertionError("the last try either returns or raises")  # pragma: no cover
