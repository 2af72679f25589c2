"""The one interface an orchestrator runs its runs through (start, watch, cancel, resume, list). Every engine
gives back a `RunHandle` (kept in ice_mcp.run_handles), so nothing above the orchestrator knows which engine runs a run."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.hosts import HasOwner, HasQuestions, HasRunner, HasServices, HasSettings
from ice_mcp.run_handles import RunHandle

if TYPE_CHECKING:
    from ice_mcp.core.context import Sleep, Spend
    from ice_mcp.core.metrics import Metrics
    from ice_mcp.core.plan import Plan
    from ice_mcp.errors import IceError
    from ice_mcp.observability.metrics import PrometheusMetrics
    from ice_mcp.store.base import RunStorage
    from ice_mcp.store.events import Event, Listener
    from ice_mcp.store.journal import Replay
    from ice_mcp.store.records import RunRecord
    from ice_mcp.store.sqlite import StoredRun

__all__ = ["RECENT_RUNS", "Engine", "EngineHost", "HandedNetwork", "Launch", "LiveRuns", "NetworkLaunch", "RunHandle",
           "Wiring", "resume_failed"]

RECENT_RUNS = 512
logger = logging.getLogger(__name__)


def resume_failed(store: RunStorage, run_id: str, exc: IceError) -> None:
    """A run taken over that cannot go on here (its blueprint no longer compiles, its manifest was not kept):
    it ends readably instead of staying `running` for ever."""
    logger.warning("run %s could not be resumed: %s", run_id, exc.message)
    stored = store.run(run_id)
    if stored is not None:
        stored.record.status, stored.record.error = "failed", {**exc.as_dict(), "code": "resume_failed"}
        store.save(stored.record)


class LiveRuns:
    """The runs this process started or follows, by id: every live one, and the latest finished ones."""

    def __init__(self, limit: int = RECENT_RUNS) -> None:
        self.limit = limit
        self._handles: OrderedDict[str, RunHandle] = OrderedDict()

    def get(self, run_id: str) -> RunHandle | None:
        return self._handles.get(run_id)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._handles

    def values(self) -> list[RunHandle]:
        return list(self._handles.values())

    def drop(self, run_id: str) -> None:
        self._handles.pop(run_id, None)

    def add(self, handle: RunHandle) -> None:
        self._handles[handle.run_id] = handle
        while len(self._handles) > self.limit:
            oldest_id, oldest = next(iter(self._handles.items()))
            if not oldest.done:
                break
            del self._handles[oldest_id]


@dataclass(slots=True)
class Launch:
    """One run for an engine to execute: a new run, a retry (`replay`: the finished nodes it reuses) or a
    resumed one (`replay` and `journal`: its events so far)."""

    plan: Plan
    record: RunRecord
    replay: Replay | None = None
    idempotency_key: str | None = None
    listeners: list[Listener] = field(default_factory=list)
    globals: dict[str, Any] = field(default_factory=dict)
    parent_spend: Spend | None = None
    caller: str | None = None
    journal: list[Event] | None = None
    # Registered workflows the plan may call (name -> blueprint document), for engines that run elsewhere.
    workflows: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(slots=True)
class NetworkLaunch:
    """A network for an engine that runs networks whole: its record (kept already), its manifest as a document,
    each workflow's plan by its id in the manifest (resolved by the server), who started it, and the `trigger`
    its templates see."""

    record: RunRecord
    manifest: dict[str, Any]
    members: dict[str, Plan]
    caller: str | None = None
    trigger: dict[str, Any] = field(default_factory=lambda: {"kind": "call"})


@dataclass(slots=True)
class HandedNetwork:
    """A network an engine took: `started` is True once the engine has it (False: refused, its record ended);
    `ended` gives its final record (cancelling it stops only the following); `cancel` stops the network."""

    started: asyncio.Future[bool]
    ended: Awaitable[RunRecord]
    cancel: Callable[[], bool]


class Engine(Protocol):
    """What the orchestrator asks of an engine. `runs` holds the handles of the runs this process follows.
    `network_owner`: set by an engine that runs networks whole (who owns their records: no server's lease);
    None: the orchestrator runs a network, each of its workflows a run of the engine's."""

    name: str
    runs: LiveRuns

    @property
    def network_owner(self) -> str | None: ...

    def launch(self, run: Launch) -> RunHandle:
        """Start the run (the store hears of it first) and return its handle at once."""
        ...

    def follow(self, stored: StoredRun) -> RunHandle | None:
        """A handle on a `running` run kept in the store that this process does not follow yet (a retried
        call's idempotency key found it), or None when it cannot be followed here."""
        ...

    async def cancel(self, run_id: str) -> bool:
        """Ask a run to stop, wherever it runs; True when it was running."""
        ...

    def cancel_here(self, run_id: str) -> None:
        """Another process asked, through the store, for a run to stop: stop it if this process runs it."""
        ...

    async def hand_answer(self, run_id: str, answer: dict[str, Any]) -> None:
        """Send a checked answer (`{node, answer, by, at, declined}`) to a run another process runs: the
        caller then waits for the run's journal to show it taken."""
        ...

    def launch_network(self, network: NetworkLaunch) -> HandedNetwork:
        """Run a network whole, its workflows inside it (only when `network_owner` is set)."""
        ...

    def recover(self) -> int:
        """At server start: take over the runs interrupted by a server that stopped; returns how many."""
        ...

    def caller_spend(self, caller: str, budget_usd: float) -> Spend:
        """The caller's spend so far against its budget, as every run of this engine sees it."""
        ...

    async def aclose(self, *, suspend: bool) -> None:
        """Stop following runs; without `suspend`, stop the runs this process started too."""
        ...


class Wiring(HasSettings, HasServices, HasRunner, Protocol):
    """What engines and Temporal workers are built from, of their orchestrator: its settings, run store, services,
    runner, registered workflows' plans and Prometheus metrics."""

    @property
    def store(self) -> RunStorage | None: ...
    @property
    def prometheus(self) -> PrometheusMetrics: ...
    def workflow_plan(self, name: str) -> Plan: ...


class EngineHost(Wiring, HasOwner, HasQuestions, Protocol):
    """What `open_engine` wires an engine with, of its orchestrator: besides the `Wiring`, who this process is,
    where runs' events go (metrics, watchers, each run's questions), stored runs' plans, and networks resumed."""

    @property
    def metrics(self) -> Metrics: ...
    @property
    def sleep(self) -> Sleep: ...
    def stored_plan(self, stored: StoredRun) -> Plan: ...
    def tell_watchers(self, event: Event) -> None: ...
    def questions_listener(self, record: RunRecord) -> Listener: ...
    def resume_network(self, record: RunRecord) -> object: ...
