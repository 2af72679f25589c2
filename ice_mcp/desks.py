"""What several of the orchestrator's desks ask of it, as narrow protocols each desk's own is built from.

A desk (schedules, webhooks, notifications, answers, networks) is typed with a protocol of exactly what it uses
of its orchestrator, defined beside it; the parts two or more desks share are here. `Orchestrator` satisfies
them all structurally (mypy checks it where it builds each desk), so no desk imports the orchestrator.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ice_mcp.blueprint.issues import nearest
from ice_mcp.errors import UnknownName
from ice_mcp.principals import may_see

if TYPE_CHECKING:
    from ice_mcp.core.context import Spend
    from ice_mcp.core.plan import Plan
    from ice_mcp.run_handles import RunHandle
    from ice_mcp.store.records import RunRecord


class RunStarter(Protocol):
    """Starts a run of a workflow (named, or its plan) and hands back its handle at once; the same idempotency
    key gives the same run."""

    async def start(self, target: str | Plan, inputs: Mapping[str, Any] | None = None, *,
                    idempotency_key: str | None = None, globals: Mapping[str, Any] | None = None,
                    parent_spend: Spend | None = None, caller: str | None = None,
                    trigger: Mapping[str, Any] | None = None) -> RunHandle: ...


class RunLookups(Protocol):
    """A run by id, as the acting principal may see it: its record, and its handle while this process has it."""

    def get_run(self, run_id: str) -> RunRecord | None: ...
    def get_handle(self, run_id: str) -> RunHandle | None: ...


class NetworkRun(Protocol):
    """A network run, as the desks that start one see it (`network.NetworkHandle`)."""

    @property
    def network_id(self) -> str: ...
    @property
    def done(self) -> bool: ...
    async def wait(self, timeout: float | None = None) -> dict[str, Any]: ...


class TargetStarter(RunStarter, Protocol):
    """Starts a workflow's run or a network's run on its own (a schedule's slot, a webhook's delivery) and
    follows either by id."""

    def start_network(self, manifest: str, *, from_client: bool = True, idempotency_key: str | None = None,
                      caller: str | None = None, trigger: Mapping[str, Any] | None = None) -> NetworkRun: ...
    def get_network(self, network_id: str) -> NetworkRun | None: ...
    def network_status(self, network_id: str) -> dict[str, Any] | None: ...
    def get_run(self, run_id: str) -> RunRecord | None: ...


class NamedTargets(Protocol):
    """What a workflow or a network named by a schedule or a webhook is checked against."""

    @property
    def networks(self) -> Collection[str]: ...  # the network manifests kept by name
    def workflow_plan(self, name: str) -> Plan: ...


class Owned(Protocol):
    """A record a principal made (a schedule, a webhook), by its id."""

    @property
    def id(self) -> str: ...
    @property
    def principal(self) -> str | None: ...


R = TypeVar("R", bound=Owned)


def visible(kind: str, key: str, found: R | None, every: Callable[[], Iterable[R]]) -> R:
    """`found` if the acting principal may see it; else UnknownName, with the nearest of the ids they may see."""
    if found is None or not may_see(found.principal):
        raise UnknownName(kind, key, nearest(key, [r.id for r in every() if may_see(r.principal)]))
    return found
