"""What a run shows of itself: OpenTelemetry tracing of live runs (tracing.py, optional: off unless OTEL_*
variables turn it on), a recorded run's trace rebuilt from its journal as OTLP/JSON (trace_export.py, for
`ice-mcp trace export`) and Prometheus metrics of an orchestrator's runs (metrics.py).

It sits just above the store: the engine core, the LLM service and the agent loop trace through it, and it reads
only the store's records and events' vocabulary."""
