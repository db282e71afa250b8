"""What toolpath did, for the people who run it: OpenTelemetry traces of tasks, plans, cells and tool
calls (:mod:`toolpath.observability.tracing` and the modules beside it; ``docs/observability.md``
walks through them).

Imports nothing: each module loads on first use.
"""
