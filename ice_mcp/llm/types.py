"""Provider-neutral shapes of a chat request and its answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ice_mcp.types import Usage

Role = Literal["user", "assistant", "tool"]


@dataclass(slots=True)
class ToolCall:
    """A model's request to run one tool."""

    id: str
    name: str
    arguments: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(slots=True)
class Message:
    """One conversation message.

    `assistant` messages may carry `tool_calls`; a `tool` message answers the call
    `tool_call_id` with `content` (a JSON text), `is_error` when the tool failed.
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: name, description and JSON Schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(slots=True)
class ChatRequest:
    model: str
    messages: list[Message]
    system: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    # JSON Schema the answer must follow: the provider's structured-output mode where it has one.
    json_schema: dict[str, Any] | None = None


@dataclass(slots=True)
class Completion:
    """A model's answer: text or tool calls, what it used and what it cost."""

    text: str
    model: str
    provider: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    finish_reason: str | None = None
    # With `json_schema` on a provider that answers through a forced tool (Anthropic).
    json_value: Any = None


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """A piece of a streamed answer; the last one carries the whole `Completion`."""

    text: str = ""
    completion: Completion | None = None
