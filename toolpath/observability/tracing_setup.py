"""Sending toolpath's traces somewhere: the OpenTelemetry SDK, set up from the standard ``OTEL_*``
variables. The only module of toolpath that imports the SDK (the ``otel`` extra:
``pip install 'toolpath[otel]'``).

:func:`configure_tracing` does what the OpenTelemetry specification's environment variables say
(https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/), for traces:

- nothing when ``OTEL_SDK_DISABLED`` is ``true``, or when neither ``OTEL_TRACES_EXPORTER`` nor an
  OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set:
  toolpath then makes no span at all (:func:`toolpath.observability.tracing.tracer`);
- nothing either when the process already has a tracer provider (set by the program embedding
  toolpath, or by ``opentelemetry-instrument``): that one gets toolpath's spans;
- otherwise a ``TracerProvider`` whose resource names the service ``OTEL_SERVICE_NAME`` (default
  ``toolpath``) with ``OTEL_RESOURCE_ATTRIBUTES``, sampled as ``OTEL_TRACES_SAMPLER`` says, exporting
  in batches (``OTEL_BSP_*``) to each exporter ``OTEL_TRACES_EXPORTER`` names (default ``otlp``):
  ``otlp`` over HTTP/protobuf to the endpoint (default ``http://localhost:4318``, headers
  ``OTEL_EXPORTER_OTLP_HEADERS``), or over gRPC when ``OTEL_EXPORTER_OTLP_PROTOCOL`` is ``grpc``
  and that exporter is installed; ``console`` to standard error (standard output may be an MCP
  channel); ``none`` for nothing. Spans still buffered are sent when the process exits.

A setting toolpath cannot follow (an SDK that is not installed, an unknown exporter or protocol) is
said in a :class:`TracingSetupWarning`, and no trace is sent rather than sent elsewhere.
"""

from __future__ import annotations

import os
import sys
import warnings

#: The service name when ``OTEL_SERVICE_NAME`` (or ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``) gives none.
DEFAULT_SERVICE_NAME = "toolpath"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_INSTALL = "pip install 'toolpath[otel]'"


class TracingSetupWarning(UserWarning):
    """The environment asks for traces in a way toolpath cannot follow; no trace is sent. The
    message names the variable and what to do."""


def configure_tracing() -> str:
    """Set up the OpenTelemetry SDK from the environment as the module docstring says (the
    exporters read their own ``OTEL_EXPORTER_OTLP_*`` variables).

    Returns:
        What was set up, in words (``"traces go to otlp (http/protobuf)"``), or ``""`` when nothing
        was (not asked for, disabled, a provider already set, or a warning said why).

    Warns:
        TracingSetupWarning: the SDK or an exporter is not installed, or an exporter or protocol is unknown.
    """
    environ = os.environ
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ""
    names = [name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()]
    asked_by = "OTEL_TRACES_EXPORTER" if names else next((name for name in _ENDPOINTS if environ.get(name, "").strip()), "")
    if not asked_by or names == ["none"]:
        return ""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        warnings.warn(TracingSetupWarning(f"{asked_by} is set, but the OpenTelemetry SDK is not installed, so no trace is sent: {_INSTALL}"), stacklevel=2)
        return ""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return ""  # the program (or opentelemetry-instrument) set its own: it gets toolpath's spans
    exporters = []
    for name in names or ["otlp"]:
        exporter = _exporter(name)
        if exporter is None:
            return ""
        exporters.append((name, exporter))
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for _, exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return "traces go to " + ", ".join(name for name, _ in exporters)


def _exporter(name: str):
    """The span exporter ``OTEL_TRACES_EXPORTER``'s ``name`` means, or ``None`` after a warning."""
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    if name != "otlp":
        warnings.warn(
            TracingSetupWarning(f"OTEL_TRACES_EXPORTER names {name!r}, which toolpath cannot send traces to (otlp, console or none); no trace is sent"),
            stacklevel=3,
        )
        return None
    variable = next(
        (variable for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL") if os.environ.get(variable, "").strip()), ""
    )
    protocol = os.environ[variable].strip() if variable else "http/protobuf"
    try:
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        elif protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # type: ignore[no-redef]
        else:
            warnings.warn(TracingSetupWarning(f"{variable}={protocol!r}: toolpath exports OTLP as http/protobuf or grpc; no trace is sent"), stacklevel=3)
            return None
    except ImportError:
        extra = _INSTALL if protocol == "http/protobuf" else "pip install opentelemetry-exporter-otlp-proto-grpc"
        warnings.warn(TracingSetupWarning(f"the OTLP exporter over {protocol} is not installed, so no trace is sent: {extra}"), stacklevel=3)
        return None
    return OTLPSpanExporter()
