"""Value types shared by every layer: token usage, what a node produced, what it may do. Imports nothing of ours."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Usage:
    """Tokens a model call (or everything a node did) consumed."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens

    def as_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass(slots=True)
class NodeResult:
    """What a node produced: its output object and what it cost."""

    output: dict[str, Any]
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class Effects:
    """What running something may do to the world: MCP's four tool hints, as a node type or tool declares them."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    def then(self, other: Effects) -> Effects:
        """Both, one after the other: read-only and idempotent only if both are, destructive or open if either is."""
        return Effects(read_only=self.read_only and other.read_only,
                       destructive=(self.destructive and not self.read_only) or (other.destructive and not other.read_only),
                       idempotent=self.idempotent and other.idempotent, open_world=self.open_world or other.open_world)


EFFECTFUL = Effects()  # what a node type or tool that declares nothing is taken to do: anything
PURE = Effects(read_only=True, destructive=False, idempotent=True, open_world=False)  # computes, touches nothing
