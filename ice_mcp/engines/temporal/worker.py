"""A Temporal worker: runs the workflows of runs and the activities of their nodes, with an orchestrator's
tools, node types and services, writing journals and records to the store the MCP servers read."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ice_mcp.engines.base import Wiring
from ice_mcp.engines.temporal.activities import NodeActivities
from ice_mcp.engines.temporal.client import connect
from ice_mcp.engines.temporal.planning import serve_node_types, stop_serving
from ice_mcp.engines.temporal.workflow import NestedWorkflow, NetworkWorkflow, RunWorkflow
from ice_mcp.errors import IceError

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from ice_mcp.core.context import Spend
    from ice_mcp.core.executor import NodeType
    from ice_mcp.core.plan import Plan
    from ice_mcp.store.records import RunRecord

logger = logging.getLogger(__name__)
# Workflow code runs in Temporal's sandbox; our modules and the libraries they use are deterministic where the
# workflow calls them and are passed through (imported once per process, not once per workflow run).
PASS_THROUGH = ("ice_mcp", "jinja2", "markupsafe", "pydantic", "pydantic_core", "jsonschema", "referencing",
                "rpds", "re2", "orjson", "yaml", "jmespath", "annotated_types", "typing_extensions")


JOURNAL_WRITES = 100  # local activities (journal and record writes) at once: never held back by the node slots


class WorkerHost(Wiring, Protocol):
    """What a worker is built from, of its orchestrator: besides the `Wiring`, the node types its activities run
    and how a network's workflow is begun as a run (`Orchestrator.new_run`)."""

    @property
    def node_types(self) -> Mapping[str, NodeType]: ...
    @property
    def unavailable_node_types(self) -> Mapping[str, str]: ...
    def new_run(self, plan: Plan, inputs: Mapping[str, Any], *, idempotency_key: str | None = None,
                parent_spend: Spend | None = None, caller: str | None = None,
                trigger: Mapping[str, Any] | None = None, engine: str | None = None) -> RunRecord: ...


def sandbox_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASS_THROUGH))


async def run_worker(orc: WorkerHost, *, concurrency: int = 100, stop: asyncio.Event | None = None,
                     metrics_address: tuple[str, int] | None = None) -> None:
    """Serve `orc.settings.temporal_task_queue` until `stop` is set (or the task is cancelled); with
    `metrics_address` (host, port), this worker's Prometheus metrics over HTTP there meanwhile."""
    settings = orc.settings
    if orc.store is None:
        raise IceError("a worker needs the run store its MCP servers read (persist_runs)", code="temporal_unavailable")
    client = await connect(settings, orc.store)
    # Its workflows run this orchestrator's node types too: each where its placement says.
    plans = serve_node_types(settings.temporal_task_queue, orc.node_types.values(), orc.unavailable_node_types)
    metrics: WSGIServer | None = None
    try:
        activities = NodeActivities(orc.services, orc.node_types, orc.store, orc.runner, orc.workflow_plan,
                                    meter=orc.prometheus, new_run=orc.new_run, plans=plans)
        worker = Worker(client, task_queue=settings.temporal_task_queue,
                        workflows=[RunWorkflow, NestedWorkflow, NetworkWorkflow],
                        activities=activities.all(), workflow_runner=sandbox_runner(),
                        max_concurrent_activities=concurrency, max_concurrent_local_activities=JOURNAL_WRITES,
                        graceful_shutdown_timeout=timedelta(seconds=5))
        logger.warning("ice_mcp worker: task queue %r on %s (namespace %s), %d activities at once",
                       settings.temporal_task_queue, settings.temporal_address, settings.temporal_namespace,
                       concurrency)
        metrics = serve_metrics(orc, *metrics_address) if metrics_address is not None else None
        async with worker:
            await (stop or asyncio.Event()).wait()
    finally:
        stop_serving(settings.temporal_task_queue, plans)
        if metrics is not None:
            metrics.shutdown()
            metrics.server_close()


def serve_metrics(orc: WorkerHost, host: str, port: int) -> WSGIServer:
    """The orchestrator's registry in Prometheus' text format on http://host:port/ (any path), from a thread of
    prometheus_client's own (no auth: bind it to loopback or a private network)."""
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=host, registry=orc.prometheus.registry)
    logger.warning("ice_mcp worker: metrics at http://%s:%d/metrics", host, server.server_port)
    return server
