"""Schedules and their firings as the run store keeps them: one firing record per (schedule, slot).

A schedule's `cursor` is the last slot decided for it (started, skipped, missed...). A firing loop reads
the cursor, decides the slots due after it, and writes their firings with `advance`, which succeeds only
if the cursor is still what it read: so any number of processes on one store decide each slot once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ice_mcp.errors import IceError

TargetKind = Literal["workflow", "network"]  # what a schedule runs
Outcome = Literal["started", "skipped_overlap", "buffered", "buffer_dropped", "missed", "paused", "rate_limited"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


class StaleRevision(IceError):
    """An update named a revision of a schedule that is no longer the current one."""

    code = "stale_revision"


@dataclass(slots=True)
class ScheduleRecord:
    """A schedule as stored. `spec`, `policy` and `inputs` are the JSON the tools take; times are Unix seconds."""

    id: str
    target: str  # the workflow's or network's name
    target_kind: TargetKind
    spec: dict[str, Any]
    inputs: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    paused: bool = False
    note: str | None = None  # why it was paused
    revision: int = 0  # 0 before it is first saved; the store sets 1, 2, ...
    created_at: float = 0.0
    updated_at: float = 0.0
    cursor: float | None = None  # the last slot decided; None: from `created_at` (or `start_at`)
    origin: str = "runtime"  # "runtime" (a tool call) or "declared" (a blueprint's `schedules:`)
    running: list[str] = field(default_factory=list)  # run ids it started that may still run (overlap)
    counts: dict[str, int] = field(default_factory=dict)  # firings by outcome (a `missed` row adds its count)
    principal: str | None = None  # who made it (OAuth): its runs are theirs

    @property
    def decided_until(self) -> float:
        """Slots after this are undecided: the cursor, or the schedule's creation before its first slot."""
        return self.cursor if self.cursor is not None else self.created_at


@dataclass(slots=True)
class Firing:
    """What became of one slot (or, for `missed`, of `count` slots ending at `slot`)."""

    schedule_id: str
    slot: float  # the nominal time, Unix seconds UTC (jitter not included)
    outcome: Outcome
    run_id: str | None = None
    fired_at: float = 0.0
    replica: str | None = None  # the owner id of the process that decided it
    count: int = 1


def counts_of(firings: list[Firing]) -> dict[str, int]:
    """How many slots `firings` decide, by outcome (a firing adds its `count`)."""
    counts: dict[str, int] = {}
    for firing in firings:
        counts[firing.outcome] = counts.get(firing.outcome, 0) + firing.count
    return counts


def add_counts(counts: dict[str, int], change: dict[str, int]) -> dict[str, int]:
    """`counts` with `change` added; an outcome that comes to 0 is left out."""
    total = dict(counts)
    for outcome, n in change.items():
        total[outcome] = total.get(outcome, 0) + n
    return {outcome: n for outcome, n in total.items() if n}


def stale_revision(schedule_id: str, current: int | None, named: int) -> StaleRevision:
    """The error for an update that named revision `named` while the schedule is at `current` (None: gone)."""
    where = f"there is no schedule {schedule_id!r}" if current is None else \
        f"schedule {schedule_id!r} is at revision {current}"
    return StaleRevision(f"{where}, not revision {named}: read it again and retry",
                         details={"schedule": schedule_id, "revision": current or 0, "expected": named})
