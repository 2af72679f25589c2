"""Value types shared by every layer: token usage and what a node produced. Imports nothing of ours."""

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
