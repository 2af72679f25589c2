"""Engines an orchestrator runs its runs on: the embedded one (asyncio, in this process; the default) and
Temporal (a fleet of workers), behind one interface."""

from __future__ import annotations

from ice_mcp.engines.base import Engine, EngineHost, Launch, LiveRuns, RunHandle
from ice_mcp.engines.embedded import EmbeddedEngine
from ice_mcp.errors import IceError
from ice_mcp.observability.metrics import PrometheusMetrics

ENGINES = ("embedded", "temporal")

__all__ = ["ENGINES", "EmbeddedEngine", "Engine", "Launch", "LiveRuns", "PrometheusMetrics", "RunHandle",
           "open_engine"]


def open_engine(orc: EngineHost) -> Engine:
    """The engine `orc.settings.engine` names, wired to the orchestrator's services, store and catalogue."""
    name = orc.settings.engine
    runs = LiveRuns()
    if name == "embedded":
        return EmbeddedEngine(orc.services, orc.runner, orc.workflow_plan, orc.stored_plan, orc.store, orc.owner,
                              runs, max_runs=orc.settings.max_concurrent_runs, observers=[orc.metrics.observe, orc.tell_watchers], sleep=orc.sleep,
                              questions=orc.questions, run_listeners=lambda record: [orc.questions_listener(record)],
                              resume_network=orc.resume_network, meter=orc.prometheus)
    if name == "temporal":
        from ice_mcp.engines.temporal.client import (
            TemporalEngine,  # temporalio loads only for this engine
        )

        return TemporalEngine.for_orchestrator(orc, runs)
    raise IceError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}", code="unknown_engine")
