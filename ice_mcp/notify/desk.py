"""An orchestrator's notification targets, and the outbox that delivers run events to them.

When a run ends, each matching target gets an outbox entry in the run store (event id `evt_{run_id}_{status}`,
the `webhook-id` of every attempt). Every server on the store drains the outbox: it claims due entries with a
lease, POSTs them signed the Standard Webhooks way through the egress guard (15 s, no redirects), and
retries with backoff and jitter; a 410 disables the target. A server killed between attempts leaves the
entry to the others (or to itself once restarted).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.desks import RunLookups, RunStarter
from ice_mcp.errors import IceError, UnknownName, every_problem
from ice_mcp.hosts import HasOwner, HasRegistry, HasSettings
from ice_mcp.principals import acting_id, may_see
from ice_mcp.signing import SECRET_PREFIX, new_secret, standard_signature
from ice_mcp.store.base import Outbox, RunRecords, ScheduleStore
from ice_mcp.store.events import Event
from ice_mcp.store.outbox import NotifyTarget, OutboxEntry
from ice_mcp.store.records import NETWORK_ID_PREFIX, RunRecord, iso
from ice_mcp.store.vocabulary import EventType

if TYPE_CHECKING:
    import httpx2

    from ice_mcp.run_handles import RunHandle
    from ice_mcp.store.events import Listener

logger = logging.getLogger(__name__)
EVENTS = {"succeeded": "run.succeeded", "failed": "run.failed", "timed_out": "run.failed",
          "over_budget": "run.failed", "cancelled": "run.canceled"}
ON = ("succeeded", "failed", "canceled")
TIMEOUT_SECONDS = 15.0
LEASE_SECONDS = 30.0  # a claimed entry is due again this long after its claim (its sender died)
POLL_SECONDS = 1.0
SWEEP_SECONDS = 30.0  # how often a server looks for ended runs whose event no process put in the outbox
SWEEP_RUNS = 200  # the newest runs a sweep reads
SWEEP_HOURS = 24.0  # runs ended longer ago than this are not looked at again


class NotifyInvalid(IceError):
    code = "invalid_notify"


def backoff(attempt: int, delays: Sequence[float], rng: random.Random) -> float | None:
    """Seconds until the attempt after `attempt` (1-based), ±20 % jitter; None when attempts are spent."""
    if attempt > len(delays):
        return None
    return delays[attempt - 1] * rng.uniform(0.8, 1.2)


class NotifyStore(Outbox, ScheduleStore, RunRecords, Protocol):
    """What the notification desk reads and writes: targets and the outbox, the schedule a target names, and the
    recent runs a sweep looks at."""


class NotifyHost(RunStarter, RunLookups, HasSettings, HasOwner, HasRegistry, Protocol):
    """What the notification desk asks of its orchestrator: every run's events (the finished ones go in the
    outbox), the runs looked up, a workflow target's run started, the store, who this process is."""

    @property
    def store(self) -> NotifyStore | None: ...
    def watch_runs(self, listener: Listener) -> Callable[[], None]: ...


class Notifications:
    """The notification desk of one orchestrator; `start_loop` makes this process drain the outbox too."""

    def __init__(self, orc: NotifyHost) -> None:
        self._orc = orc
        self.clock = time.time
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._rng = random.Random()
        self._next_retry = 0.0  # the earliest retry this process scheduled (it looks again then)
        self._pending: set[asyncio.Task[None]] = set()  # runs whose final record is awaited
        self._unwatch: Callable[[], None] = lambda: None

    @property
    def store(self) -> NotifyStore:
        if self._orc.store is None:
            raise IceError("notifications are kept in the run store, and this orchestrator has none", code="no_store")
        return self._orc.store

    # -- targets ----------------------------------------------------------------------------------------

    def set(self, *, url: str | None = None, workflow: str | None = None, schedule_id: str | None = None,
            on: Sequence[str] = ("failed",), secret: str | None = None, target_id: str | None = None,
            workflow_target: str | None = None) -> dict[str, Any]:
        errors: list[dict[str, str]] = []
        if bool(url) == bool(workflow_target):
            errors.append({"path": "url", "message": "name one of url, workflow_target"})
        elif url:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                errors.append({"path": "url", "message": "an http:// or https:// URL"})
        elif workflow_target not in self._orc.registry.workflows:
            errors.append({"path": "workflow_target", "message": f"no workflow named {workflow_target!r}"})
        if bool(workflow) == bool(schedule_id):
            errors.append({"path": "workflow", "message": "name one of workflow, schedule_id"})
        elif workflow and workflow not in self._orc.registry.workflows:
            errors.append({"path": "workflow", "message": f"no workflow named {workflow!r}"})
        elif schedule_id and self.store.schedule(schedule_id) is None:
            errors.append({"path": "schedule_id", "message": f"no schedule {schedule_id!r}"})
        wrong = [o for o in on if o not in ON]
        if not on or wrong:
            errors.append({"path": "on", "message": f"some of {', '.join(ON)}"})
        if secret is not None and not secret.startswith(SECRET_PREFIX):
            errors.append({"path": "secret", "message": "a Standard Webhooks secret: whsec_<base64>"})
        if errors:
            raise NotifyInvalid(every_problem(f"{errors[0]['path']}: {errors[0]['message']}", len(errors)),
                                details={"errors": errors})
        target = NotifyTarget(target_id or f"n_{uuid.uuid4().hex[:12]}", url, secret or new_secret(), list(on),
                              workflow, schedule_id, created_at=self.clock(), workflow_target=workflow_target,
                              principal=acting_id())
        self.store.save_target(target)
        return {**self._summary(target), "secret": target.secret}

    def list(self) -> dict[str, Any]:
        return {"targets": [self._summary(t) for t in self.store.targets() if may_see(t.principal)]}

    def delete(self, target_id: str) -> dict[str, Any]:
        self._target(target_id)
        self.store.delete_target(target_id)
        return {"id": target_id, "deleted": True}

    def history(self, target_id: str, limit: int = 50) -> dict[str, Any]:
        self._target(target_id)
        return {"deliveries": [{"event_id": e.event_id, "type": e.payload["type"], "state": e.state,
                                "created_at": iso(e.created_at),
                                "next_attempt_at": iso(e.next_at) if e.state == "pending" else None,
                                "attempts": e.attempts} for e in self.store.outbox(target_id, limit)]}

    # -- events into the outbox -------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """A run watcher: a finished run's event goes into the outbox for every matching target, with the run's
        final record (on Temporal the record is final once its workflow's result is in, just after the event)."""
        if event.type != EventType.RUN_FINISHED or self._orc.store is None:
            return
        handle = self._orc.get_handle(event.run_id)
        if handle is None or handle.done:
            self._enqueue(event.run_id)
            return
        task = asyncio.get_running_loop().create_task(self._when_final(handle))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _when_final(self, handle: RunHandle) -> None:
        with contextlib.suppress(Exception):
            await handle.wait()
        try:
            self._enqueue(handle.run_id)
        except IceError as exc:
            logger.warning("outbox: event of run %s not kept: %s", handle.run_id, exc.message)

    def _enqueue(self, run_id: str) -> None:
        record = self._orc.get_run(run_id)
        if record is not None:
            self._enqueue_record(record, self.store.targets())

    def sweep(self) -> None:
        """Put the events of recently ended runs in the outbox where the process that saw them end died before
        it did (an entry already there, sent or not, stays as it is): so every ended run is notified once its
        final record is kept, whichever process dies when."""
        targets = [t for t in self.store.targets() if not t.disabled]
        if not targets:
            return
        since = self.clock() - SWEEP_HOURS * 3600
        for record in self.store.list(limit=SWEEP_RUNS):
            if record.finished_at is not None and record.finished_at >= since:
                self._enqueue_record(record, targets)

    def _enqueue_record(self, record: RunRecord, targets: Sequence[NotifyTarget]) -> None:
        if record.status not in EVENTS or record.run_id.startswith(NETWORK_ID_PREFIX):
            return  # a network's event is its workflows' events
        kind = EVENTS[record.status]
        wanted = kind.removeprefix("run.")
        schedule = (record.trigger or {}).get("schedule_id")
        ended = record.finished_at or 0.0
        targets = [t for t in targets if not t.disabled and wanted in t.on and ended + 1.0 >= t.created_at  # ms kept
                   and t.principal in (None, record.principal)  # a user's target hears of their own runs only
                   and (t.workflow == record.workflow or (schedule is not None and t.schedule_id == schedule))]
        if not targets:
            return
        now = self.clock()
        payload = {"type": kind, "timestamp": iso(now), "data": {
            "run_id": record.run_id, "workflow": record.workflow, "status": record.status, "error": record.error,
            "outputs": record.outputs, "trigger": record.trigger}}
        self.store.enqueue([OutboxEntry(f"evt_{record.run_id}_{record.status}", t.id, payload, next_at=now,
                                        created_at=now) for t in targets])
        self._wake.set()

    # -- the outbox, drained by every server ------------------------------------------------------------

    def start_loop(self) -> None:
        if self._task is None and self._orc.store is not None:
            self._unwatch = self._orc.watch_runs(self.on_event)
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="ice_mcp outbox")

    async def stop_loop(self) -> None:
        if self._task is not None:
            self._unwatch()
            for task in [self._task, *self._pending]:
                task.cancel()
            await asyncio.gather(self._task, *self._pending, return_exceptions=True)
            self._task = None

    async def _drain(self) -> None:
        next_sweep = self.clock()
        async with contextlib.AsyncExitStack() as stack:
            client: Any = None  # see _client: its TLS context alone costs ~40 ms of CPU
            while True:
                due: list[OutboxEntry] = []
                try:
                    if self.clock() >= next_sweep:
                        next_sweep = self.clock() + SWEEP_SECONDS
                        self.sweep()
                    due = self.store.claim_due(self.clock(), LEASE_SECONDS)
                    if due and client is None:
                        client = await stack.enter_async_context(self._client())
                    await asyncio.gather(*(self._attempt(client, entry) for entry in due))
                except IceError as exc:
                    logger.warning("outbox: %s", exc.message)
                except Exception:
                    logger.exception("outbox: draining failed; it goes on")
                if not due:
                    # Look again in a second (entries other servers add), or at this one's next retry if sooner;
                    # a retry time already past was claimed above (or by another server), so it never means 0 s.
                    retry_in = self._next_retry - self.clock()
                    wait = min(POLL_SECONDS, retry_in) if retry_in > 0 else POLL_SECONDS
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), wait)

    def _client(self) -> httpx2.AsyncClient:
        """The client every POST of this loop goes through: the egress guard, 15 s, no redirects. Opened with the
        first due entry, so httpcore2 and the TLS context load only once there is something to send."""
        from ice_mcp.tools.egress import guarded_client

        return guarded_client(self._orc.settings, timeout=TIMEOUT_SECONDS)

    async def _attempt(self, client: Any, entry: OutboxEntry) -> None:
        from ice_mcp.tools.egress import EgressRefused

        target = self.store.target(entry.target_id)
        if target is None:
            return
        if target.workflow_target is not None:
            await self._start_target(target, entry)
            return
        assert target.url is not None
        now = self.clock()
        body = json.dumps(entry.payload, separators=(",", ":"), default=str).encode()
        timestamp = str(int(now))
        headers = {"content-type": "application/json", "webhook-id": entry.event_id, "webhook-timestamp": timestamp,
                   "webhook-signature": standard_signature(target.secret, entry.event_id, timestamp, body)}
        tried: dict[str, Any] = {"at": iso(now), "replica": self._orc.owner.owner_id}
        retry_after = 0.0
        try:
            answer = await client.post(target.url, content=body, headers=headers)
            tried["status"] = answer.status_code
            retry_after = _retry_after(answer.headers)
        except EgressRefused as exc:
            tried["error"] = exc.message
            entry.attempts.append(tried)
            entry.state = "failed"  # refused before any connection: retrying would be refused again
            self.store.settle(entry)
            return
        except Exception as exc:  # a timeout, a refused or reset connection: worth another try
            tried["error"] = f"{type(exc).__name__}: {exc}"[:300]
        entry.attempts.append(tried)
        status = tried.get("status")
        if isinstance(status, int) and 200 <= status < 300:
            entry.state = "delivered"
        elif status == 410:
            entry.state = "disabled"
            target.disabled = True
            self.store.save_target(target)
        else:
            wait = backoff(len(entry.attempts), self._orc.settings.notify_backoff, self._rng)
            if wait is None:
                entry.state = "failed"
            else:
                entry.next_at = now + max(wait, min(retry_after, 3600.0))
                self._next_retry = min(self._next_retry, entry.next_at) if self._next_retry > now else entry.next_at
        self.store.settle(entry)

    async def _start_target(self, target: NotifyTarget, entry: OutboxEntry) -> None:
        """A workflow target: the event starts it as its inputs, once (the entry's key), whichever server; the
        run is the target's owner's."""
        assert target.workflow_target is not None
        tried: dict[str, Any] = {"at": iso(self.clock()), "replica": self._orc.owner.owner_id}
        try:
            handle = await self._orc.start(target.workflow_target, entry.payload,
                                           idempotency_key=f"{entry.event_id}:{entry.target_id}",
                                           trigger={"kind": "notification", "event_id": entry.event_id},
                                           caller=target.principal)
            tried["run_id"], entry.state = handle.run_id, "delivered"
        except IceError as exc:  # its inputs do not fit the event, it is over its limits...: kept, not retried
            tried["error"], entry.state = f"{exc.code}: {exc.message}", "failed"
        entry.attempts.append(tried)
        self.store.settle(entry)

    # -- helpers ----------------------------------------------------------------------------------------

    def _target(self, target_id: str) -> NotifyTarget:
        target = self.store.target(target_id)
        if target is None or not may_see(target.principal):
            raise UnknownName("notify_target", target_id, None)
        return target

    @staticmethod
    def _summary(target: NotifyTarget) -> dict[str, Any]:
        scope = {"workflow": target.workflow} if target.workflow else {"schedule_id": target.schedule_id}
        to = {"url": target.url} if target.url else {"workflow_target": target.workflow_target}
        return {"id": target.id, **to, "on": target.on, **scope, "disabled": target.disabled,
                "created_at": iso(target.created_at)}


def _retry_after(headers: Mapping[str, str]) -> float:
    value = headers.get("retry-after", "")
    return float(value) if value.isdigit() else 0.0

