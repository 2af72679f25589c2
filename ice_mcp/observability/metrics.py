"""Prometheus metrics of one orchestrator's runs, nodes, model calls, schedules and webhook deliveries: counted in
plain dicts as the process that runs a run journals its events, exposed through a `CollectorRegistry` of its own."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ice_mcp.store.records import RunRecord, trigger_kind
from ice_mcp.store.vocabulary import EventType, NodeEventKind

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from ice_mcp.run_handles import RunHandle
    from ice_mcp.services import Services
    from ice_mcp.store.events import Event
    from ice_mcp.tools.registry import Registry

# Label values for runs of no registered workflow: direct tool and agent calls, and ad-hoc blueprints.
ADHOC, DIRECT_TOOL, DIRECT_AGENT = "adhoc", "tool", "agent"
TRIGGERS = frozenset({"call", "schedule", "webhook", "notification"})  # any other kind is `other`
UNKNOWN = "unknown"
MAX_MODELS = 64  # distinct (provider, model) label pairs; later ones are `other` (a model name can be anything)
RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0, 86400.0)
NODE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_RUN_BOUNDARIES = frozenset({EventType.RUN_STARTED, EventType.RUN_FINISHED})  # a batch that begins or ends its run
_NODE_SUCCEEDED = EventType.NODE_SUCCEEDED  # read once: an enum's class attribute costs ~0.1 µs on 3.11
MAX_WRITTEN = 10_000  # latest runs whose last journaled event a worker remembers (a batch written again counts once)


class Histogram:
    """Bucket counts (the last one past every bound), their sum; cumulated only when scraped."""

    __slots__ = ("buckets", "counts", "total")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.buckets, value)] += 1  # `le` is inclusive: the first bound >= value
        self.total += value

    def samples(self) -> tuple[list[tuple[str, float]], float]:
        running, cumulated = 0, []
        for bound, count in zip((*map(_bound, self.buckets), "+Inf"), self.counts, strict=True):
            running += count
            cumulated.append((bound, float(running)))
        return cumulated, self.total


class NodeStats:
    """One node type's finished executions (`llm`: its answers name the model, whose tokens count too)."""

    __slots__ = ("failed", "llm", "seconds", "succeeded")

    def __init__(self, node_type: str) -> None:
        self.succeeded = self.failed = 0
        self.seconds = Histogram(NODE_BUCKETS)
        self.llm = node_type == "llm"


class PrometheusMetrics:
    """The Prometheus series of one orchestrator. Fed by exactly one producer per event: the embedded engine's
    live event log of each run it executes (`listener`), or a Temporal worker's journal writes (`journaled`);
    never by a follower reading another process's journal, nor by nodes a resumed or retried run reuses.

    `registry` (the workflows a label may name) and `services` (models' providers) are read as events come.
    prometheus_client loads on the first scrape, so a stdio server never imports it."""

    def __init__(self, registry: Registry, services: Services) -> None:
        self._registry_of_names = registry
        self._services = services
        self.runs_started: dict[tuple[str, str], int] = {}
        self.runs_finished: dict[tuple[str, str], int] = {}
        self.run_seconds: dict[str, Histogram] = {}
        self.active = 0
        self.nodes: dict[str, NodeStats] = {}
        self.tokens: dict[tuple[str, str, str], int] = {}
        self.cost_usd: dict[tuple[str, str], float] = {}
        self.schedule_lag: dict[str, Histogram] = {}
        self.hook_deliveries: dict[str, int] = {}
        self._models: dict[tuple[str, str | None], tuple[str, str]] = {}
        self._written: OrderedDict[str, int] = OrderedDict()
        # Worker threads write journals at once and the metrics server scrapes from its own thread; the
        # embedded engine counts on the event loop, which is also where its /metrics answers.
        self._lock = threading.Lock()
        self._prometheus: CollectorRegistry | None = None

    # -- labels --------------------------------------------------------------------------------------

    def workflow_label(self, name: str, version: int | None = None) -> str:
        """A registered workflow's name (a version means registered at run time), else one bounded value:
        ad-hoc names are the caller's choice."""
        if version is not None or name in self._registry_of_names.workflows:
            return name
        if name.startswith("tool_"):
            return DIRECT_TOOL
        return DIRECT_AGENT if name.startswith("agent_") else ADHOC

    def _model_labels(self, model: str, provider: str | None) -> tuple[str, str]:
        found = self._models.get((model, provider))
        if found is not None:
            return found
        if len(self._models) >= MAX_MODELS:
            return provider or UNKNOWN, "other"
        try:
            resolved = self._services.llm.resolve(model, provider).provider
        except Exception:  # a label must never break the run it counts
            resolved = None
        found = self._models[(model, provider)] = (resolved or provider or UNKNOWN, model)
        return found

    # -- what events say ------------------------------------------------------------------------------

    def node_finished(self, data: dict[str, Any], succeeded: bool) -> None:
        """A node's final outcome (`node_succeeded` without `reused_from`, or `node_failed`)."""
        node_type = data.get("type")
        stats = self.nodes.get(node_type)  # type: ignore[arg-type]
        if stats is None:
            if not isinstance(node_type, str):
                return
            stats = self.nodes[node_type] = NodeStats(node_type)
        seconds = (data.get("duration_ms") or 0.0) / 1000
        histogram = stats.seconds  # Histogram.observe, inline: this runs once per node
        histogram.counts[bisect_left(NODE_BUCKETS, seconds)] += 1
        histogram.total += seconds
        if not succeeded:
            stats.failed += 1
            return
        stats.succeeded += 1
        if stats.llm:
            output = data.get("output")
            model, provider = (output.get("model"), output.get("provider")) if isinstance(output, dict) else (None,
                                                                                                              None)
            self._spent(str(model) if model else UNKNOWN, str(provider) if provider else None, data)

    def agent_turn(self, data: dict[str, Any]) -> None:
        """One model call of an agent (`node_event` `agent_turn`): the model and provider that answered (an older
        journal's turn: the ones its registered definition names)."""
        model, provider = data.get("model"), data.get("provider")
        if not model:
            entry = self._registry_of_names.agents.get(str(data.get("agent")))
            config = entry.config if entry is not None else {}
            model, provider = config.get("model"), config.get("provider")
        self._spent(str(model) if model else UNKNOWN, str(provider) if provider else None, data)

    def _spent(self, model: str, provider: str | None, data: dict[str, Any]) -> None:
        usage = data.get("usage") or {}
        labels = self._model_labels(model, provider)
        for direction in ("input", "output"):
            tokens = int(usage.get(f"{direction}_tokens") or 0)
            if tokens:
                key = (*labels, direction)
                self.tokens[key] = self.tokens.get(key, 0) + tokens
        cost = float(data.get("cost_usd") or 0.0)
        if cost:
            self.cost_usd[labels] = self.cost_usd.get(labels, 0.0) + cost

    def run_started(self, workflow: str, trigger: dict[str, Any] | None, at: float) -> None:
        kind = trigger_kind(trigger)
        key = (workflow, kind if kind in TRIGGERS else "other")
        self.runs_started[key] = self.runs_started.get(key, 0) + 1
        self.active += 1
        if kind == "schedule" and trigger is not None:
            self._schedule_lag(workflow, trigger, at)

    def _schedule_lag(self, workflow: str, trigger: dict[str, Any], at: float) -> None:
        """From the slot's due time to the run's start; a manual trigger or a backfill was never due then."""
        slot = trigger.get("slot")
        if trigger.get("manual") or trigger.get("backfill") or not isinstance(slot, str):
            return
        try:
            due = datetime.fromisoformat(slot).timestamp()
        except ValueError:
            return
        lag = self.schedule_lag.get(workflow)
        if lag is None:
            lag = self.schedule_lag[workflow] = Histogram(LAG_BUCKETS)
        lag.observe(max(0.0, at - due))

    def run_finished(self, workflow: str, status: str, seconds: float | None) -> None:
        key = (workflow, status)
        self.runs_finished[key] = self.runs_finished.get(key, 0) + 1
        self.active -= 1
        if seconds is not None:
            histogram = self.run_seconds.get(workflow)
            if histogram is None:
                histogram = self.run_seconds[workflow] = Histogram(RUN_BUCKETS)
            histogram.observe(max(0.0, seconds))

    def hook_delivery(self, status: int) -> None:
        """A `POST /hooks/{id}` answered with this HTTP status (by the server that received it)."""
        key = str(status)
        self.hook_deliveries[key] = self.hook_deliveries.get(key, 0) + 1

    # -- producers ------------------------------------------------------------------------------------

    def listener(self, record: RunRecord) -> RunMeter:
        """The embedded engine's listener on the live event log of one run it executes (new or resumed)."""
        return RunMeter(self, record, self.workflow_label(record.workflow, record.workflow_version))

    def journaled(self, run_id: str, events: list[Event], record_of: Callable[[str], RunRecord | None]) -> None:
        """A Temporal worker wrote this batch of a run's journal: count what it says, once (a batch written
        again has the same numbers). `record_of` reads the run's record (its trigger, start, workflow) when a
        batch starts or ends the run."""
        record = None
        if any(e.type in _RUN_BOUNDARIES for e in events):
            try:
                record = record_of(run_id)
            except Exception:  # the journal is written: counting goes on with what the events say
                record = None
        with self._lock:
            last = self._written.pop(run_id, -1)
            for event in events:
                if event.seq <= last:
                    continue
                last = event.seq
                kind, data = event.type, event.data
                if kind == EventType.NODE_SUCCEEDED:
                    if "reused_from" not in data:
                        self.node_finished(data, True)
                elif kind == EventType.NODE_FAILED:
                    self.node_finished(data, False)
                elif kind == EventType.NODE_EVENT:
                    if data.get("event") == NodeEventKind.AGENT_TURN:
                        self.agent_turn(data)
                elif kind == EventType.RUN_STARTED:
                    name = record.workflow if record is not None else str(data.get("workflow"))
                    version = record.workflow_version if record is not None else None
                    self.run_started(self.workflow_label(name, version),
                                     record.trigger if record is not None else None, event.ts)
                elif kind == EventType.RUN_FINISHED:
                    name = record.workflow if record is not None else ADHOC
                    version = record.workflow_version if record is not None else None
                    started = record.started_at if record is not None else None
                    # On a fleet, `active` is exact summed over the workers (a run may end on another).
                    self.run_finished(self.workflow_label(name, version), str(data.get("status")),
                                      None if started is None else event.ts - started)
            self._written[run_id] = last  # an ended run's too: its last batch may be written again
            while len(self._written) > MAX_WRITTEN:
                self._written.popitem(last=False)

    # -- exposition -----------------------------------------------------------------------------------

    @property
    def registry(self) -> CollectorRegistry:
        """This orchestrator's CollectorRegistry (no process-wide one): made, and prometheus_client loaded, on
        first use."""
        if self._prometheus is None:
            from prometheus_client import CollectorRegistry

            registry = CollectorRegistry()
            registry.register(self)
            self._prometheus = registry
        return self._prometheus

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The registry in the format `accept` asks for (OpenMetrics, else the 0.0.4 text format), and its
        content type."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type

    def describe(self) -> Iterator[Metric]:
        """The families' names, for the registry's duplicate check (no samples)."""
        return self._families(empty=True)

    def collect(self) -> Iterator[Metric]:
        return self._families(empty=False)

    def _families(self, *, empty: bool) -> Iterator[Metric]:
        # Families built here carry no `created` time, so no `_created` series (without the process-wide switch).
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        with self._lock:
            nodes = {k: (v.succeeded, v.failed, v.seconds.samples()) for k, v in self.nodes.items()}
            counters: list[tuple[str, str, list[str], dict[Any, float]]] = [
                ("ice_runs_started", "Runs started, by workflow and what started them.", ["workflow", "trigger"],
                 dict(self.runs_started)),
                ("ice_runs_finished", "Runs finished, by workflow and final status.", ["workflow", "status"],
                 dict(self.runs_finished)),
                ("ice_node_executions", "Nodes finished, by node type and status.", ["type", "status"],
                 {(t, status): n for t, (ok, failed, _) in nodes.items()
                  for status, n in (("succeeded", ok), ("failed", failed))}),
                ("ice_llm_tokens", "Model tokens, by provider, model and direction (input, output).",
                 ["provider", "model", "direction"], dict(self.tokens)),
                ("ice_llm_cost_usd", "Model calls' cost in US dollars, by provider and model.", ["provider", "model"],
                 dict(self.cost_usd)),
                ("ice_hook_deliveries", "Webhook deliveries received, by the HTTP status answered.", ["code"],
                 {(code,): n for code, n in self.hook_deliveries.items()}),
            ]
            histograms: list[tuple[str, str, str, dict[str, tuple[list[tuple[str, float]], float]]]] = [
                ("ice_run_duration_seconds", "Runs' duration, from start to end.", "workflow",
                 {k: v.samples() for k, v in self.run_seconds.items()}),
                ("ice_node_duration_seconds", "Nodes' duration, every attempt.", "type",
                 {t: seconds for t, (_, _, seconds) in nodes.items()}),
                ("ice_schedule_lag_seconds", "From a schedule slot's due time to its run's start.", "workflow",
                 {k: v.samples() for k, v in self.schedule_lag.items()}),
            ]
            active = self.active
        for name, documentation, labels, values in counters:
            counter = CounterMetricFamily(name, documentation, labels=labels)
            for key, value in sorted(values.items()) if not empty else ():
                counter.add_metric(key, value)
            yield counter
        for name, documentation, label, observed in histograms:
            histogram = HistogramMetricFamily(name, documentation, labels=[label])
            for label_value, (buckets, total) in sorted(observed.items()) if not empty else ():
                histogram.add_metric([label_value], buckets, total)
            yield histogram
        yield GaugeMetricFamily("ice_runs_active", "Runs under way in this process (on workers: summed over them).",
                                value=active)


class RunMeter:
    """The listener on one run's live event log in the process that executes it: one dict lookup per event."""

    __slots__ = ("handle", "metrics", "record", "workflow")

    def __init__(self, metrics: PrometheusMetrics, record: RunRecord, workflow: str) -> None:
        self.metrics, self.record, self.workflow = metrics, record, workflow
        self.handle: RunHandle | None = None  # set once the engine made it: a run suspended at shutdown never ends

    def __call__(self, event: Event) -> None:
        if event.type == _NODE_SUCCEEDED:  # every node's: one call less
            data = event.data
            if "reused_from" not in data:  # a retry's reused node did not run again
                self.metrics.node_finished(data, True)
            return
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    def _failed(self, event: Event) -> None:
        self.metrics.node_finished(event.data, False)

    def _node_event(self, event: Event) -> None:
        if event.data.get("event") == NodeEventKind.AGENT_TURN:
            self.metrics.agent_turn(event.data)

    def _started(self, event: Event) -> None:
        self.metrics.run_started(self.workflow, self.record.trigger, event.ts)

    def _resumed(self, event: Event) -> None:
        self.metrics.active += 1  # started (and counted) by the process that stopped; under way here now

    def _finished(self, event: Event) -> None:
        if self.handle is not None and self.handle.suspended:
            self.metrics.active -= 1  # left `running` for the next server, which ends it
            return
        duration = self.record.duration_ms
        self.metrics.run_finished(self.workflow, str(event.data.get("status")),
                                  None if duration is None else duration / 1000)


_HANDLERS: dict[str, Callable[[RunMeter, Event], None]] = {
    EventType.NODE_FAILED: RunMeter._failed, EventType.NODE_EVENT: RunMeter._node_event,
    EventType.RUN_STARTED: RunMeter._started, EventType.RUN_RESUMED: RunMeter._resumed,
    EventType.RUN_FINISHED: RunMeter._finished,
}


def _bound(value: float) -> str:
    return repr(float(value))
