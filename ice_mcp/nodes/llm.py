"""`llm` nodes: one templated prompt to a model; with `output_schema`, a validated JSON answer
(one repair attempt)."""

from __future__ import annotations

import json
from typing import Any

from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue, nearest
from ice_mcp.blueprint.models import LLMNode, NodeSpec
from ice_mcp.core.executor import CheckContext, NodeCall, NodeType
from ice_mcp.errors import NodeFailure
from ice_mcp.llm.errors import LLMError
from ice_mcp.llm.json_call import OutputInvalid, ask
from ice_mcp.llm.pricing import call_cost_range, estimate_tokens
from ice_mcp.llm.service import DEFAULT_MAX_TOKENS, LLMService
from ice_mcp.llm.structured import check_schema
from ice_mcp.llm.types import ChatRequest, Message
from ice_mcp.store.vocabulary import NodeEventKind
from ice_mcp.types import Effects, NodeResult


def as_text(value: Any) -> str:
    """A rendered template as prompt text (a lone `{{ expr }}` may render to any JSON value)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def llm_failure(exc: LLMError, **extra: Any) -> NodeFailure:
    return NodeFailure(exc.message, code=exc.code, retryable=exc.retryable, details={**exc.details, **extra})


def retry_reporter(call: NodeCall) -> Any:
    def report(attempt: int, error: LLMError, wait: float) -> None:
        call.emit(NodeEventKind.LLM_RETRYING, error={"code": error.code, "message": error.message},
                  retry=attempt, delay_seconds=wait)

    return report


async def execute_llm(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, LLMNode)
    service = call.services.llm
    system = as_text(call.render("system")) if spec.system else None
    request = ChatRequest(
        model=spec.model,
        messages=[Message.user(as_text(call.render("prompt")))],
        system=system or None,
        max_tokens=spec.max_tokens or DEFAULT_MAX_TOKENS,
        temperature=spec.temperature,
        json_schema=spec.output_schema,
    )
    try:
        answer = await ask(service, request, provider=spec.provider, on_retry=retry_reporter(call),
                           on_repair=lambda problems: call.emit(NodeEventKind.LLM_REPAIRING, problems=problems),
                           budget_left=call.spend.remaining())
    except OutputInvalid as exc:
        raise NodeFailure(
            exc.message,
            code=exc.code,
            details={"problems": exc.problems, "text": exc.answer.completion.text[:2000],
                     "cost_usd": exc.answer.cost_usd, "usage": exc.answer.usage.as_dict()},
        ) from None
    except LLMError as exc:
        raise llm_failure(exc) from None
    output: dict[str, Any] = {
        "text": answer.completion.text,
        "usage": answer.usage.as_dict(),
        "cost_usd": answer.cost_usd,
        "model": answer.completion.model,
        "provider": answer.completion.provider,  # what metrics and traces label the call with
    }
    if spec.output_schema is not None:
        output["json"] = answer.value
    return NodeResult(output, answer.cost_usd, answer.usage)


def check_llm(spec: NodeSpec, ctx: CheckContext) -> list[ValidationIssue]:
    assert isinstance(spec, LLMNode)
    issues: list[ValidationIssue] = []
    issues.extend(model_issues(spec.model, spec.provider, spec.id, ctx.services.llm))
    if spec.output_schema is not None:
        problem = check_schema(spec.output_schema)
        if problem:
            issues.append(ValidationIssue(code="schema", message=f"output_schema is not a valid JSON Schema: {problem}",
                                          node_id=spec.id, field="output_schema"))
    return issues


def model_issues(model: str, provider: str | None, node_id: str, service: LLMService,
                 field: str = "model") -> list[ValidationIssue]:
    resolution = service.resolve(model, provider)
    if resolution.ok:
        return []
    configured = set(service.config.configured_providers())
    candidates = [m for m in service.config.prices.models()
                  if service.config.prices.provider_of(m) in configured]
    suggestion = nearest(model, candidates) or ("local" if "local" in configured else None)
    return [ValidationIssue(code="unknown_model", message=resolution.problem or f"unknown model {model!r}",
                            node_id=node_id, field=field, suggestion=suggestion)]


def estimate_llm(spec: NodeSpec, ctx: CheckContext, sub: CostEstimate) -> CostEstimate:
    assert isinstance(spec, LLMNode)
    service = ctx.services.llm
    resolution = service.resolve(spec.model, spec.provider)
    if not resolution.ok or resolution.provider is None:
        return CostEstimate(llm_calls_min=1, llm_calls_max=1)
    price = service.price(resolution.model, resolution.provider)
    text = spec.prompt + (spec.system or "") + (json.dumps(spec.output_schema) if spec.output_schema else "")
    max_tokens = spec.max_tokens or DEFAULT_MAX_TOKENS
    low, high = call_cost_range(price, estimate_tokens(text), max_tokens)
    if spec.output_schema is None:
        return CostEstimate(llm_calls_min=1, llm_calls_max=1, usd_min=low, usd_max=high)
    # A repair resends the prompt with the first answer.
    _, repair_high = call_cost_range(price, estimate_tokens(text) + max_tokens + 100, max_tokens)
    return CostEstimate(llm_calls_min=1, llm_calls_max=2, usd_min=low, usd_max=high + repair_high)


# A model call changes nothing here, but it reaches a provider and answers differently each time.
LLM_NODE = NodeType(name="llm", execute=execute_llm, check=check_llm, estimate=estimate_llm,
                    effects=Effects(read_only=True, destructive=False, idempotent=False, open_world=True),
                    model=LLMNode, placement="activity")
