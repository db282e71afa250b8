"""toolpath's spans, made through the OpenTelemetry API only, at the cost of a check when nothing traces.

Contract:

- Every span toolpath makes starts from :func:`tracer`, which is ``None`` unless a tracer provider
  of an OpenTelemetry SDK is set in this process: by
  :func:`toolpath.observability.tracing_setup.configure_tracing` (the standard ``OTEL_*``
  variables; the command line calls it), or by the program that embeds toolpath. No provider can
  be set before some code imports ``opentelemetry.trace``, so until then the check is one
  dictionary lookup, and nothing of OpenTelemetry is imported; after, it is a call and an
  ``isinstance``. Callers test for ``None`` first and work nothing out for a span that will not be
  made. Only API calls are made here, so spans go wherever the provider sends them.
- Values stay out of spans: a tool's arguments and result, a task's words, a cell's code and an
  exception's message are described by their kinds and sizes (a type name, a count of characters),
  unless the variable :data:`VALUES_VARIABLE` says to record them (:func:`records_values`), as the
  GenAI semantic conventions make ``gen_ai.tool.call.arguments`` opt-in.
- Work handed to another thread's event loop keeps its span as parent with nothing done here
  (``asyncio.run_coroutine_threadsafe`` runs it in a copy of the caller's context); a context
  crosses to a kernel and back in its bridge calls as W3C Trace Context strings (:func:`carrier`,
  :func:`remote_context`), the only propagation format a kernel reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

#: The instrumentation scope of toolpath's spans.
TRACER_NAME = "toolpath"
#: Set to ``1`` (or ``true``, ``yes``, ``on``) to record values in spans: tool arguments and
#: results, a task's words, a cell's code, exception messages. Off by default: they may hold
#: personal or secret data.
VALUES_VARIABLE = "TOOLPATH_TRACE_VALUES"
#: Characters of one recorded value; longer values are cut, saying so.
MAX_VALUE_CHARS = 4096
#: A W3C ``traceparent`` (version 00): the only form :func:`joined` accepts from a kernel.
TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: Longest ``tracestate`` accepted from a kernel (W3C allows 32 members of at most 256 characters).
MAX_TRACESTATE_CHARS = 8192

_cached: tuple[object, Tracer] | None = None
#: The last context :func:`remote_context` read, by its two fields: a cell's calls all send the same.
_last_remote: tuple[str, str, Context] | None = None


def tracer() -> Tracer | None:
    """toolpath's tracer, or ``None`` when no OpenTelemetry SDK provider is set in this process
    (nothing would record a span)."""
    global _cached
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    provider = api.get_tracer_provider()
    if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
        return None
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    made = provider.get_tracer(TRACER_NAME)
    _cached = (provider, made)
    return made


def current_span() -> Span | None:
    """The current span when it records (attributes set on it are kept), else ``None``."""
    if tracer() is None:
        return None
    from opentelemetry.trace import get_current_span

    span = get_current_span()
    return span if span.is_recording() else None


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span | None]:
    """A span named ``name``, current while the block runs; ``None`` when nothing traces or the
    sampler dropped it (then there is nothing to describe on it). An exception leaving the block
    marks it failed (:func:`failed`) and goes on."""
    made_by = tracer()
    if made_by is None:
        yield None
        return
    with made_by.start_as_current_span(name, attributes=attributes, record_exception=False, set_status_on_exception=False) as made:
        try:
            yield made if made.is_recording() else None
        except BaseException as error:
            failed(made, error)
            raise


def failed(span: Span, error: BaseException) -> None:
    """Mark ``span`` as ended by ``error``, as the OpenTelemetry conventions for recording errors
    say: status ``ERROR``, ``error.type`` the exception's class, and an ``exception`` event. The
    message and stack trace are recorded only with :data:`VALUES_VARIABLE` (a message may quote an
    argument)."""
    from opentelemetry.trace import StatusCode

    kind = error_type(error)
    span.set_attribute("error.type", kind)
    if records_values():
        span.record_exception(error)
        span.set_status(StatusCode.ERROR, shown(f"{kind}: {error}"))
    else:
        span.add_event("exception", {"exception.type": kind})
        span.set_status(StatusCode.ERROR, kind)


def failed_as(span: Span, kind: str, message: str = "", timestamp: int | None = None) -> None:
    """Mark ``span`` as failed with an error known by its type name ``kind`` (and ``message``,
    recorded only with :data:`VALUES_VARIABLE`): an error reported by a kernel, not raised here;
    ``timestamp`` (nanoseconds since the epoch) dates its event, default now."""
    from opentelemetry.trace import StatusCode

    span.set_attribute("error.type", kind)
    event = {"exception.type": kind}
    if message and records_values():
        event["exception.message"] = shown(message)
    span.add_event("exception", event, timestamp=timestamp)
    span.set_status(StatusCode.ERROR, shown(f"{kind}: {message}") if message and records_values() else kind)


def error_type(error: BaseException) -> str:
    """The ``error.type`` of ``error``: its class's qualified name (``ApprovalDenied``)."""
    return type(error).__qualname__


def records_values() -> bool:
    """Whether :data:`VALUES_VARIABLE` asks for values in spans (read each time: it can be set while
    a server runs tests, and reading it costs nothing next to making a span)."""
    return os.environ.get(VALUES_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def shown(value: Any) -> str:
    """``value`` as text for a span (JSON when it is JSON, else its ``repr``), cut to
    :data:`MAX_VALUE_CHARS` characters."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        except Exception:  # a repr that raises, a circular structure: say what it is, not what it holds
            text = f"<{kind_of(value)} that cannot be shown>"
    return text if len(text) <= MAX_VALUE_CHARS else f"{text[:MAX_VALUE_CHARS]}... ({len(text):,} characters in all)"


def kind_of(value: Any) -> str:
    """The kind of ``value`` a span may show: its type's name."""
    return type(value).__qualname__


def size_of(value: Any) -> int | None:
    """``len(value)`` for the built-in containers and text, else ``None`` (asking another object
    would run its code)."""
    return len(value) if isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset)) else None


def carrier() -> dict[str, str] | None:
    """The current span's context as W3C Trace Context fields (``traceparent`` and, when there is
    one, ``tracestate``), for a message to a kernel; ``None`` when no span records (the kernel then
    reports nothing)."""
    span = current_span()
    if span is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    fields: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(fields)
    return fields or None


def remote_context(fields: Any) -> Context | None:
    """The context a kernel sent (``{"traceparent", "tracestate"}``, as :func:`carrier` made it),
    or ``None`` when nothing traces here or the fields are not a valid W3C context (a kernel's code
    could have written anything)."""
    if tracer() is None or not isinstance(fields, Mapping):
        return None
    global _last_remote
    traceparent, tracestate = fields.get("traceparent"), fields.get("tracestate", "")
    last = _last_remote
    if last is not None and last[0] == traceparent and last[1] == tracestate:
        return last[2]
    if not isinstance(traceparent, str) or not TRACEPARENT.fullmatch(traceparent):
        return None
    received = {"traceparent": traceparent}
    if isinstance(tracestate, str) and tracestate and len(tracestate) <= MAX_TRACESTATE_CHARS:
        received["tracestate"] = tracestate
    from opentelemetry.trace import get_current_span
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract(received)
    if not get_current_span(context).get_span_context().is_valid:
        return None
    _last_remote = (traceparent, tracestate, context)
    return context
