"""A model call whose answer must be JSON valid against a schema: the provider's structured
mode, validation, and one repair attempt that shows the model what was wrong."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ice_mcp.llm.errors import LLMError
from ice_mcp.llm.resilience import OnRetry
from ice_mcp.llm.service import LLMService
from ice_mcp.llm.structured import InvalidOutput, read_output, repair_prompt
from ice_mcp.llm.types import ChatRequest, Completion, Message
from ice_mcp.types import Usage


@dataclass(slots=True)
class Answer:
    """The last completion, the parsed value (with a schema), and the spend of every call."""

    completion: Completion
    value: Any = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    calls: int = 0

    def add(self, completion: Completion) -> None:
        self.completion = completion
        self.usage.add(completion.usage)
        self.cost_usd += completion.cost_usd
        self.calls += 1


class OutputInvalid(LLMError):
    """The answer did not match the schema even after the repair attempt."""

    def __init__(self, problems: list[str], answer: Answer) -> None:
        super().__init__(
            "the model's answer does not match output_schema, even after one repair attempt: " + "; ".join(problems),
            code="invalid_output",
            retryable=True,
            provider=answer.completion.provider,
        )
        self.problems = problems
        self.answer = answer


async def ask(
    service: LLMService,
    request: ChatRequest,
    *,
    provider: str | None = None,
    on_retry: OnRetry | None = None,
    on_repair: Callable[[list[str]], None] | None = None,
    budget_left: float | None = None,
) -> Answer:
    """Call the model; with `request.json_schema`, return the validated value (one repair).
    Each call must fit `budget_left` (None: no budget), less what the calls before it cost."""
    answer = Answer(await service.complete(request, provider=provider, on_retry=on_retry, budget_left=budget_left))
    answer.add(answer.completion)
    schema = request.json_schema
    if schema is None:
        return answer
    try:
        answer.value = read_output(answer.completion.text, schema, answer.completion.json_value)
        return answer
    except InvalidOutput as first:
        if on_repair is not None:
            on_repair(first.problems)
        repair = ChatRequest(
            model=request.model,
            messages=[
                *request.messages,
                Message("assistant", answer.completion.text),
                Message.user(repair_prompt(first.problems, schema)),
            ],
            system=request.system,
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            json_schema=schema,
        )
    left = None if budget_left is None else budget_left - answer.cost_usd
    answer.add(await service.complete(repair, provider=provider, on_retry=on_retry, budget_left=left))
    try:
        answer.value = read_output(answer.completion.text, schema, answer.completion.json_value)
    except InvalidOutput as again:
        raise OutputInvalid(again.problems, answer) from None
    return answer
