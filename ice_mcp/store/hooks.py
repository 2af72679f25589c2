"""Webhook records as the run store keeps them: a hook (what it starts, how callers sign) and its deliveries."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ice_mcp.store.schedules import TargetKind

Auth = Literal["standard", "github", "stripe", "bearer"]  # how a caller proves it holds the hook's secret


@dataclass(slots=True)
class HookSecret:
    """One signing secret; `expires_at` (Unix seconds) is set on the old one while a rotation overlaps."""

    secret: str
    expires_at: float | None = None


@dataclass(slots=True)
class HookRecord:
    """An inbound webhook: POST /hooks/{id} starts `target` with the inputs a delivery maps to.

    With neither `inputs` nor `body_input`, the body's top-level fields the workflow declares are its inputs
    (a sender's other fields are ignored); a hook saved before `body_input` existed loads with None."""

    id: str
    target: str
    target_kind: TargetKind
    auth: Auth = "standard"
    inputs: dict[str, Any] | None = None  # input name -> template over trigger.body, .headers, .query
    body_input: str | None = None  # the input that takes the whole body (beside any `inputs`)
    secrets: list[HookSecret] = field(default_factory=list)
    created_at: float = 0.0
    principal: str | None = None  # who made it (OAuth): its deliveries' runs are theirs

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HookRecord:
        secrets = [HookSecret(**s) for s in data.get("secrets") or []]
        return cls(**{**data, "secrets": secrets})
