"""The drafting loop: the configured model writes a Draft for a goal, the orchestrator's validator checks it, and
its problems go back to the model until it validates or the attempts run out (IceError `draft_invalid`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import yaml

from ice_mcp.blueprint.issues import ValidationReport
from ice_mcp.drafting.draft_format import Assumptions, Draft, read_draft
from ice_mcp.drafting.instructions import goal_message, issue_dict, repair_message, system_prompt
from ice_mcp.errors import IceError
from ice_mcp.llm.errors import LLMError
from ice_mcp.llm.service import LLMService
from ice_mcp.llm.types import ChatRequest, Message
from ice_mcp.orchestrator import Orchestrator

DEFAULT_MAX_ATTEMPTS = 4
MAX_ATTEMPTS = 10
DEFAULT_MAX_TOKENS = 4096


@dataclass(slots=True)
class DraftAttempt:
    """One model answer and its check: valid or not, how many issues, what it used and cost, how long each side took."""

    number: int
    valid: bool
    issues: list[dict[str, Any]]
    input_tokens: int
    output_tokens: int
    cost_usd: float
    model_ms: float  # the model call, as this server waited for it
    overhead_ms: float  # everything else this attempt took here: reading the draft, validating, the next message

    def as_dict(self) -> dict[str, Any]:
        return {"attempt": self.number, "valid": self.valid, "issues": len(self.issues),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": round(self.cost_usd, 8), "model_ms": round(self.model_ms, 3),
                "overhead_ms": round(self.overhead_ms, 3)}


@dataclass(slots=True)
class DraftResult:
    """A draft that validates: the blueprint, its YAML, the Draft as written, the estimate, attempts, assumptions."""

    blueprint: dict[str, Any]
    draft: str
    report: ValidationReport
    attempts: list[DraftAttempt]
    assumptions: Assumptions
    model: str
    provider: str

    @property
    def yaml(self) -> str:
        return yaml.safe_dump(self.blueprint, sort_keys=False, allow_unicode=True, width=100)

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": True, "name": self.blueprint.get("name"), "blueprint": self.blueprint, "yaml": self.yaml,
            "draft": self.draft, "estimate": self.report.estimate.model_dump(mode="json"),
            "warnings": [issue_dict(w) for w in self.report.warnings],
            "attempts": [a.as_dict() for a in self.attempts], "assumes": self.assumptions.as_dict(),
            "model": self.model, "provider": self.provider,
            "usage": {"input_tokens": sum(a.input_tokens for a in self.attempts),
                      "output_tokens": sum(a.output_tokens for a in self.attempts),
                      "cost_usd": round(sum(a.cost_usd for a in self.attempts), 8)},
        }


@dataclass(slots=True)
class Constraints:
    """What a caller may ask of a draft beyond the goal."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    model: str = "default"
    provider: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = 0.0
    name: str | None = None
    notes: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, given: dict[str, Any] | None) -> Constraints:
        given = dict(given or {})
        attempts = int(given.pop("max_attempts", DEFAULT_MAX_ATTEMPTS))
        if not 1 <= attempts <= MAX_ATTEMPTS:
            raise IceError(f"max_attempts: from 1 to {MAX_ATTEMPTS}", code="invalid_arguments")
        return cls(max_attempts=attempts, model=str(given.pop("model", None) or "default"),
                   provider=given.pop("provider", None), max_tokens=int(given.pop("max_tokens", DEFAULT_MAX_TOKENS)),
                   temperature=given.pop("temperature", 0.0), name=given.pop("name", None),
                   notes=given.pop("notes", None), extra=given)


def _checked(orc: Orchestrator, answer: str, goal: str) -> tuple[Draft | None, ValidationReport | None,
                                                                   list[dict[str, Any]]]:
    """The answer read as a Draft and validated: (draft, report, issues); a draft that does not parse has one
    issue (`draft_syntax`) and no report."""
    try:
        draft = read_draft(answer, goal)
    except IceError as exc:
        return None, None, [{"code": exc.code, "node": None, "path": None, "message": exc.message,
                             "suggestion": "answer with one ```yaml block holding one blueprint mapping"}]
    report = orc.validate(draft.blueprint)
    return draft, report, [issue_dict(issue) for issue in report.errors]


async def draft_blueprint(orc: Orchestrator, goal: str, constraints: dict[str, Any] | None = None, *,
                          llm: LLMService | None = None) -> DraftResult:
    """A blueprint for `goal` that validates, written by the configured model (or `constraints.model`) and
    repaired from the validator's issues; raises IceError `draft_invalid` (details: the last issues, the last
    draft, every attempt) when `max_attempts` answers all fail, `llm_error` when the model cannot be reached."""
    if not goal.strip():
        raise IceError("goal: say in words what the workflow should do", code="invalid_arguments")
    wanted = Constraints.of(constraints)
    service = llm or orc.services.llm
    system = system_prompt(orc)
    messages = [Message.user(goal_message(goal, {"name": wanted.name, "notes": wanted.notes}))]
    attempts: list[DraftAttempt] = []
    issues: list[dict[str, Any]] = []
    answer = ""
    for number in range(1, wanted.max_attempts + 1):
        request = ChatRequest(model=wanted.model, messages=list(messages), system=system,
                              max_tokens=wanted.max_tokens, temperature=wanted.temperature)
        started = time.perf_counter()
        try:
            completion = await service.complete(request, provider=wanted.provider)
        except LLMError as exc:
            raise IceError(f"the drafting model could not answer: {exc}", code="llm_error",
                           details={"attempts": [a.as_dict() for a in attempts]}) from None
        answered = time.perf_counter()
        answer = completion.text
        # Parsing and compiling may take longer than an event-loop turn: a thread does it (as blueprint_validate).
        draft, report, issues = await asyncio.to_thread(_checked, orc, answer, goal)
        valid = report is not None and report.ok and draft is not None
        if not valid:
            messages += [Message("assistant", answer), Message.user(repair_message(issues))]
        attempts.append(DraftAttempt(
            number, valid, issues, completion.usage.input_tokens, completion.usage.output_tokens,
            completion.cost_usd, (answered - started) * 1000, (time.perf_counter() - answered) * 1000))
        if valid:
            assert draft is not None and report is not None
            return DraftResult(draft.blueprint, draft.text, report, attempts, draft.assumptions,
                               completion.model, completion.provider)
    raise IceError(
        f"no valid blueprint after {wanted.max_attempts} attempt(s): "
        + "; ".join(i["message"] for i in issues[:3]) + (f" (and {len(issues) - 3} more)" if len(issues) > 3 else ""),
        code="draft_invalid",
        details={"issues": issues, "last_draft": answer, "attempts": [a.as_dict() for a in attempts]})
