"""The native tool-calling loop: ask the model, run the tools it asks for, hand back the
results (errors included), until it answers in text or runs out of iterations."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ice_mcp.agents.definition import AgentDefinition
from ice_mcp.agents.tools import AgentTool
from ice_mcp.errors import NodeFailure
from ice_mcp.llm.service import LLMService
from ice_mcp.llm.types import ChatRequest, Message
from ice_mcp.observability import tracing
from ice_mcp.store.vocabulary import NodeEventKind
from ice_mcp.types import Usage

MAX_TOOL_RESULT_CHARS = 20_000
Emit = Callable[..., None]


@dataclass(slots=True)
class AgentResult:
    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    # Cost of tools and workflows that charged the run themselves; reported, not re-charged.
    nested_cost_usd: float = 0.0
    stopped: str = "answered"

    def as_output(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": self.tool_calls,
            "iterations": self.iterations,
            "usage": self.usage.as_dict(),
            "cost_usd": self.cost_usd,
            "stopped": self.stopped,
        }


def _encode(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    if len(text) > MAX_TOOL_RESULT_CHARS:
        text = text[:MAX_TOOL_RESULT_CHARS] + f"... [truncated from {len(text)} characters]"
    return text


async def run_agent(
    service: LLMService,
    definition: AgentDefinition,
    task: str,
    tools: list[AgentTool],
    *,
    system: str | None = None,
    emit: Emit | None = None,
    budget_left: Callable[[], float | None] | None = None,
    fatal: tuple[type[BaseException], ...] = (),
) -> AgentResult:
    """Run the loop. `emit(event_type, **data)` hears every turn and tool call;
    `budget_left()` is the run's remaining budget (None: unlimited), checked before each turn;
    exceptions in `fatal` (a run being stopped) pass through tool calls untouched."""
    by_name = {t.name: t for t in tools}
    messages: list[Message] = [Message.user(task)]
    result = AgentResult(text="")
    notify: Emit = emit or (lambda *_a, **_k: None)
    for iteration in range(1, definition.max_iterations + 1):
        left = budget_left() if budget_left is not None else None
        if left is not None and result.cost_usd >= left:
            result.stopped = "budget"
            break
        request = ChatRequest(
            model=definition.model,
            messages=list(messages),
            system=system if system is not None else definition.system,
            max_tokens=definition.max_tokens,
            temperature=definition.temperature,
            tools=[t.spec for t in tools],
        )
        completion = await service.complete(
            request,
            provider=definition.provider,
            on_retry=lambda attempt, error, wait: notify(
                NodeEventKind.AGENT_RETRYING, attempt=attempt, error=error.code, delay_seconds=wait
            ),
            budget_left=left,
        )
        result.iterations = iteration
        result.usage.add(completion.usage)
        result.cost_usd += completion.cost_usd
        result.text = completion.text
        notify(
            NodeEventKind.AGENT_TURN,
            iteration=iteration,
            text=completion.text,
            tool_calls=[c.as_dict() for c in completion.tool_calls],
            usage=completion.usage.as_dict(),
            cost_usd=completion.cost_usd,
            model=completion.model,
            provider=completion.provider,
        )
        if not completion.tool_calls:
            result.stopped = "answered"
            return result
        messages.append(Message("assistant", completion.text, tool_calls=list(completion.tool_calls)))
        for call in completion.tool_calls:
            record: dict[str, Any] = {"iteration": iteration, "id": call.id, "name": call.name,
                                      "arguments": call.arguments}
            tool = by_name.get(call.name)
            try:
                if tool is None:
                    raise NodeFailure(
                        f"unknown tool {call.name!r}; available: {', '.join(sorted(by_name)) or 'none'}",
                        code="unknown_tool",
                    )
                if "_raw" in call.arguments and len(call.arguments) == 1:
                    raise NodeFailure(f"arguments are not a JSON object: {call.arguments['_raw'][:200]}",
                                      code="invalid_arguments")
                if tracing.ENABLED:
                    with tracing.tool_span(call.name, call.arguments):
                        outcome = await tool.invoke(call.arguments)
                else:
                    outcome = await tool.invoke(call.arguments)
            except fatal:
                raise
            except Exception as exc:  # the model reads the error and may try again
                code = getattr(exc, "code", None) or type(exc).__name__
                message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                error = {"code": code, "message": message}
                record["error"] = error
                messages.append(Message("tool", _encode({"error": error}), tool_call_id=call.id,
                                        name=call.name, is_error=True))
            else:
                record["result"] = outcome.output
                if outcome.charged:
                    result.nested_cost_usd += outcome.cost_usd
                else:
                    result.cost_usd += outcome.cost_usd
                    if outcome.usage is not None:
                        result.usage.add(outcome.usage)
                messages.append(Message("tool", _encode(outcome.output), tool_call_id=call.id, name=call.name))
            result.tool_calls.append(record)
            notify(NodeEventKind.AGENT_TOOL_CALL, iteration=iteration, tool=call.name, arguments=call.arguments,
                   ok="error" not in record, error=record.get("error"))
    else:
        result.stopped = "max_iterations"
    return result
