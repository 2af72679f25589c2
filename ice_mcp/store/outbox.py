"""Notification records as the run store keeps them: where run events go, and the outbox of their deliveries."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

State = Literal["pending", "delivered", "failed", "disabled"]  # disabled: the target answered 410 Gone


@dataclass(slots=True)
class NotifyTarget:
    """Runs of `workflow` (or started by schedule `schedule_id`) that end in one of `on` are POSTed to `url`, or
    start the workflow `workflow_target` with the event as its inputs."""

    id: str
    url: str | None
    secret: str
    on: list[str] = field(default_factory=lambda: ["failed"])
    workflow: str | None = None
    schedule_id: str | None = None
    disabled: bool = False  # a 410 Gone: nothing more is sent
    workflow_target: str | None = None
    created_at: float = 0.0
    principal: str | None = None  # who set it (OAuth): only their runs' events reach it

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NotifyTarget:
        return cls(**data)


@dataclass(slots=True)
class OutboxEntry:
    """One event for one target: sent until a 2xx (at most `max_attempts`); `attempts` logs each try."""

    event_id: str  # evt_{run_id}_{status}: the webhook-id of every attempt
    target_id: str
    payload: dict[str, Any]
    state: State = "pending"
    next_at: float = 0.0
    created_at: float = 0.0
    attempts: list[dict[str, Any]] = field(default_factory=list)  # {at, status?, error?, replica}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OutboxEntry:
        return cls(**data)
