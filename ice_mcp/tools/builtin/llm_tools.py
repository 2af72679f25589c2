"""Built-in tools that ask the configured model: `summarize` and `extract_insights`.

Each returns a `NodeResult`, so a tool node (or an agent) charges its spend to the run like
an `llm` node's. `model: "default"` is the configured default model (the local model when no
API key is set)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field

from ice_mcp.errors import NodeFailure
from ice_mcp.llm.errors import LLMError
from ice_mcp.llm.json_call import OutputInvalid, ask
from ice_mcp.llm.service import LLMService
from ice_mcp.llm.types import ChatRequest, Message
from ice_mcp.settings import Settings
from ice_mcp.tools.context import current_call
from ice_mcp.tools.registry import Registry, ToolAnnotations
from ice_mcp.types import NodeResult

MAX_INPUT_CHARS = 200_000
MAX_RECORDS = 1_000

INSIGHTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "insights": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "insight": {"type": "string"},
                    "evidence": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                },
                "required": ["insight", "evidence"],
            },
        }
    },
    "required": ["insights"],
}

_fallback: LLMService | None = None


def _service() -> tuple[LLMService, float | None]:
    """The calling run's LLM service and budget left, or a service from the environment outside any run."""
    global _fallback
    call = current_call()
    if call is not None and call.services is not None:
        return call.services.llm, call.budget_left()
    if _fallback is None:
        _fallback = LLMService.from_settings(Settings.from_env())
    return _fallback, None


def _result(answer_text: str, extra: dict[str, Any], answer: Any) -> NodeResult:
    output = {**extra, "usage": answer.usage.as_dict(), "cost_usd": answer.cost_usd,
              "model": answer.completion.model}
    if answer_text:
        output = {"summary": answer_text, **output}
    return NodeResult(output, answer.cost_usd, answer.usage)


async def summarize(
    text: Annotated[str, Field(description="The text to summarize", max_length=MAX_INPUT_CHARS)],
    max_words: Annotated[int, Field(ge=5, le=2000, description="Longest summary, in words")] = 100,
    model: Annotated[str, Field(description="Model name; 'default' is the configured one")] = "default",
    provider: str | None = None,
) -> NodeResult:
    """Summarize text in at most `max_words` words with the configured model."""
    request = ChatRequest(
        model=model,
        system="You write faithful, concise summaries. Do not add facts that are not in the text.",
        messages=[Message.user(f"Summarize the following text in at most {max_words} words.\n\n{text}")],
        max_tokens=max(64, int(max_words * 2)),
        temperature=0.2,
    )
    service, budget_left = _service()
    try:
        answer = await ask(service, request, provider=provider, budget_left=budget_left)
    except LLMError as exc:
        raise NodeFailure(exc.message, code=exc.code, retryable=exc.retryable) from None
    words = answer.completion.text.strip().split()
    summary = " ".join(words[:max_words])
    return _result(summary, {"words": min(len(words), max_words)}, answer)


async def extract_insights(
    records: Annotated[list[Any], Field(description="Records (objects or text) to study", max_length=MAX_RECORDS)],
    question: Annotated[str | None, Field(description="What to look for")] = None,
    max_insights: Annotated[int, Field(ge=1, le=50)] = 5,
    model: Annotated[str, Field(description="Model name; 'default' is the configured one")] = "default",
    provider: str | None = None,
) -> NodeResult:
    """Find insights in records, each with the records that support it as evidence."""
    numbered = "\n".join(f"[{i}] {json.dumps(r, default=str, ensure_ascii=False)}" for i, r in enumerate(records))
    if len(numbered) > MAX_INPUT_CHARS:
        raise NodeFailure(f"records are longer than {MAX_INPUT_CHARS} characters as text; pass fewer",
                          code="invalid_arguments", retryable=False)
    ask_for = f" about: {question}" if question else ""
    request = ChatRequest(
        model=model,
        system="You are a careful analyst. Every insight must cite the numbers of the records that support it.",
        messages=[Message.user(
            f"Find insights{ask_for} in these records (at most {max_insights}). "
            f"Answer as JSON: {{\"insights\": [{{\"insight\": text, \"evidence\": [record numbers]}}]}}.\n\n{numbered}"
        )],
        max_tokens=300 + 150 * max_insights,
        temperature=0.2,
        json_schema=INSIGHTS_SCHEMA,
    )
    service, budget_left = _service()
    try:
        answer = await ask(service, request, provider=provider, budget_left=budget_left)
    except OutputInvalid as exc:
        raise NodeFailure(exc.message, code=exc.code, details={"problems": exc.problems}) from None
    except LLMError as exc:
        raise NodeFailure(exc.message, code=exc.code, retryable=exc.retryable) from None
    insights = []
    for item in answer.value["insights"][:max_insights]:
        cited = [i for i in item["evidence"] if 0 <= i < len(records)]
        insights.append({"insight": item["insight"], "evidence": [{"index": i, "record": records[i]} for i in cited]})
    return _result("", {"insights": insights}, answer)


LLM_TOOLS = (summarize, extract_insights)
LLM_TOOL_ANNOTATIONS = ToolAnnotations(read_only=True, open_world=True)


def register_llm_tools(registry: Registry) -> None:
    for function in LLM_TOOLS:
        if function.__name__ not in registry.tools:
            registry.add_tool(function, annotations=LLM_TOOL_ANNOTATIONS)
