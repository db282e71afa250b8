"""A tool's retry policy (``retry:`` in a catalog): how many tries a call gets, how long it waits
between them, and which failures it tries again after.

::

    tools:
      - name: fetch_record
        retry: {attempts: 4, backoff: 1, on: [timeout, connection, "status 503"]}

The kernel runs the tries (:mod:`toolpath.kernel.inside.retries`), for tools bound in the kernel and
on the host alike; this module only says what a policy is and which tools get one by default
(:func:`effective_retry`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolpath.registry.retry_conditions import CONNECTION, TIMEOUT, check_condition

if TYPE_CHECKING:
    from toolpath.registry.tools import ToolDefinition

#: Most tries a policy may ask for: more would hold a cell for long behind a tool that is down, and
#: the HTTP APIs' own ``retries`` stop at 10 (:class:`toolpath.registry.http_apis.HttpApiConfig`).
MAX_ATTEMPTS = 10
#: Longest wait before a try, in seconds (the HTTP APIs' ``max_retry_wait_seconds`` default).
MAX_BACKOFF_SECONDS = 30.0


class RetryPolicy(BaseModel):
    """How a tool's call is tried again when it fails.

    Attributes:
        attempts: tries in all, at least 1 (1: no retry), at most :data:`MAX_ATTEMPTS`.
        backoff: seconds waited before the second try, doubled before each further one.
        max_backoff: the longest wait between two tries, in seconds (default and upper bound
            :data:`MAX_BACKOFF_SECONDS`).
        on: the failures tried again after (:mod:`toolpath.registry.retry_conditions`): ``timeout``,
            ``connection``, ``status 429``, ``status 5xx``, or an exception's class name. Any other
            failure ends the call at once. A call that was denied approval, interrupted, or raised
            ``SystemExit``/``KeyboardInterrupt`` inside a host tool (``ToolExitError``) is never
            tried again, whatever ``on`` says.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempts: int = Field(ge=1, le=MAX_ATTEMPTS, strict=True, description="Tries in all (1: no retry).")
    backoff: float = Field(default=0.5, ge=0, le=MAX_BACKOFF_SECONDS, allow_inf_nan=False, description="Seconds before the second try, doubled after.")
    max_backoff: float = Field(default=MAX_BACKOFF_SECONDS, ge=0, le=MAX_BACKOFF_SECONDS, allow_inf_nan=False, description="Longest wait between two tries.")
    on: tuple[str, ...] = Field(
        default=(TIMEOUT, CONNECTION),
        min_length=1,
        description="Failures tried again after: timeout, connection, 'status 429', 'status 5xx', or an exception's class name.",
    )

    @field_validator("on", mode="before")
    @classmethod
    def _listed(cls, conditions: Any) -> Any:
        if isinstance(conditions, str):
            raise ValueError(f"on is a list of conditions: write [{conditions}], not {conditions!r}")
        return conditions

    @field_validator("on")
    @classmethod
    def _conditions(cls, conditions: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(check_condition(condition) for condition in conditions))

    @model_validator(mode="after")
    def _waits_in_order(self) -> RetryPolicy:
        if self.max_backoff < self.backoff:
            raise ValueError(f"max_backoff ({self.max_backoff:g} s) is shorter than backoff ({self.backoff:g} s); raise max_backoff or lower backoff")
        return self

    def to_spec(self) -> dict[str, Any]:
        """The policy as the kernel reads it (:func:`toolpath.kernel.inside.retries.RetrySpec.of`):
        ``attempts``, and each other field only where it is not the default (a planned cell writes
        every tool's policy into its bindings, so the usual one stays short: ``{'attempts': 3}``)."""
        spec: dict[str, Any] = {"attempts": self.attempts}
        for name, value in (("backoff", self.backoff), ("max_backoff", self.max_backoff), ("on", self.on)):
            if value != type(self).model_fields[name].default:
                spec[name] = list(value) if name == "on" else value
        return spec


#: The policy of a read-only tool whose catalog gives none: one more try after each of two transient
#: failures (a timeout, a lost connection), 0.5 s then 1 s apart. Three tries make a failure that
#: strikes one call in ten fail the call one time in a thousand; the waits are the HTTP APIs'
#: (0.5 s doubled, :mod:`toolpath.kernel.tools.http_tools`). Nothing else is retried: a read-only
#: tool's ``ValueError`` on bad input fails the same way every time.
DEFAULT_READ_ONLY_RETRY = RetryPolicy(attempts=3)


def effective_retry(tool: ToolDefinition) -> RetryPolicy | None:
    """The retry policy a call of ``tool`` runs under: its own ``retry``; else
    :data:`DEFAULT_READ_ONLY_RETRY` for a read-only tool (``side_effect`` ``"none"``) that asks for
    no approval and is not called over HTTP; else ``None`` (one try).

    A tool with effects is tried once unless its catalog says otherwise: a call that failed may still
    have written or sent. An HTTP tool is retried by its API (``http_apis.<api>.retries``, which
    honours ``Retry-After`` and the method's idempotence) and takes no ``retry`` of its own."""
    if tool.retry is not None:
        return tool.retry
    if tool.side_effect == "none" and tool.approval == "never" and tool.http is None:
        return DEFAULT_READ_ONLY_RETRY
    return None
