"""Grading a drafted workflow offline: its case's files in a workspace of its own, `http_request` and `email_send`
answered from the case (pinned responses, an outbox), `human` questions answered from it, the run's outputs and
effects held to the case's checks."""

from __future__ import annotations

import json
import math
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from ice_mcp.blueprint.schemas import schema_validator
from ice_mcp.drafting.cases import Case, Checks
from ice_mcp.errors import NodeFailure
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.store.records import RunRecord
from ice_mcp.tools.registry import Registry, ToolAnnotations


@dataclass(slots=True)
class Effects:
    """What a graded run did outside itself: HTTP calls made, emails sent, human questions asked."""

    http_calls: list[str] = field(default_factory=list)
    emails: list[dict[str, Any]] = field(default_factory=list)
    questions: int = 0


def pinned_registry(case: Case, effects: Effects) -> Registry:
    """A registry whose `http_request` and `email_send` answer from `case` (same names and arguments as the real
    ones, so a draft that validates against it runs against it); the other built-ins are added by the orchestrator."""
    calls: dict[str, int] = {}

    async def http_request(
        url: Annotated[str, Field(pattern=r"^https?://", description="http:// or https:// URL")],
        method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "GET",
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        json_body: Any = None,
        body: str | None = None,
        timeout_seconds: Annotated[float | None, Field(gt=0, le=300)] = None,
        max_bytes: Annotated[int | None, Field(gt=0)] = None,
    ) -> dict[str, Any]:
        """Make an HTTP request; returns status, headers, text, and json when the body is JSON."""
        full = url if not params else url + ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
        effects.http_calls.append(f"{method} {full}")
        found = next((r for r in case.http if r.url == full and r.method == method), None)
        if found is None:
            return {"status": 404, "headers": {}, "text": "not found", "json": {"error": "not found"}}
        seen = calls[full] = calls.get(full, 0) + 1
        status = found.times[seen - 1] if found.times and seen <= len(found.times) else found.status
        if status >= 500 or status == 429:
            raise NodeFailure(f"{method} {url} answered {status}", code="http_status", retryable=True)
        answer: dict[str, Any] = {"status": status, "headers": {"content-type": "application/json"}}
        if found.json_body is not None:
            answer["json"] = found.json_body
            answer["text"] = json.dumps(found.json_body)
        else:
            answer["text"] = found.text or ""
        return answer

    async def email_send(
        to: Annotated[list[str], Field(min_length=1, max_length=100, description="Recipients' addresses")],
        subject: Annotated[str, Field(max_length=998)],
        text: Annotated[str, Field(description="The plain-text body")],
        html: Annotated[str | None, Field(description="An HTML body shown instead of the text where supported")] = None,
        attachments: Annotated[list[str] | None, Field(description="Files to attach, relative to the workspace")] = None,
    ) -> dict[str, Any]:
        """Send an email through the configured SMTP server; refused recipients or a failed login are errors."""
        effects.emails.append({"to": to, "subject": subject, "text": text, "html": html, "attachments": attachments})
        return {"sent": True, "to": to, "message_id": f"<bench-{len(effects.emails)}@ice-mcp>"}

    registry = Registry()
    registry.add_tool(http_request, annotations=ToolAnnotations(read_only=False, open_world=True))
    registry.add_tool(email_send, annotations=ToolAnnotations(read_only=False, open_world=True))
    return registry


def write_files(case: Case, workspace: Path) -> None:
    workspace.mkdir(parents=True, exist_ok=True)
    for relative, text in case.files.items():
        path = workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def pointed_at_grader(value: Any) -> Any:
    """The blueprint with every `llm` node's and inline agent's model set to `default` (the grader's model)."""
    if isinstance(value, list):
        return [pointed_at_grader(item) for item in value]
    if not isinstance(value, dict):
        return value
    changed = {key: pointed_at_grader(item) for key, item in value.items()}
    if changed.get("type") == "llm":
        changed["model"] = "default"
        changed.pop("provider", None)
    if changed.get("type") == "agent" and isinstance(changed.get("agent"), dict):
        changed["agent"] = {**changed["agent"], "model": "default"}
    return changed


async def run_graded(orc: Orchestrator, blueprint: dict[str, Any], case: Case, effects: Effects) -> RunRecord:
    """Run the drafted workflow on the case's inputs, answering each `human` question with the case's answer."""
    plan = orc.compile(pointed_at_grader(blueprint))
    handle = await orc.start(plan, dict(case.inputs))
    answered: set[str] = set()
    while True:
        record = await handle.wait(case.timeout_seconds, or_question=True)
        waiting = [path for path in record.questions if path not in answered]
        if record.done or not waiting:
            if not record.done:  # neither ended nor asked within the time: stop it
                await orc.cancel(record.run_id)
                record = await handle.wait(5)
            return record
        for path in waiting:
            answered.add(path)
            effects.questions += 1
            await orc.respond(record.run_id, path, case.answers, by="benchmark")


def _equal(got: Any, want: Any, tolerance: float) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return got == want
    if isinstance(want, int | float) and isinstance(got, int | float | str):
        try:
            return math.isclose(float(got), float(want), abs_tol=tolerance)
        except ValueError:
            return False
    if isinstance(want, dict) and isinstance(got, dict):
        return set(got) == set(want) and all(_equal(got[k], want[k], tolerance) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_equal(g, w, tolerance) for g, w in zip(got, want, strict=True))
    return bool(got == want)


def check(record: RunRecord, effects: Effects, checks: Checks, workspace: Path) -> list[str]:
    """Every check that fails, in words (none: the case passes)."""
    failures: list[str] = []
    if checks.status is not None and record.status != checks.status:
        error = record.error or {}
        failures.append(f"status {record.status} (want {checks.status})"
                        + (f": {error.get('message', error)}" if error else ""))
    outputs = record.outputs if isinstance(record.outputs, dict) else {}
    for name, want in checks.outputs.items():
        if name not in outputs:
            failures.append(f"no output {name!r} (outputs: {', '.join(sorted(outputs)) or 'none'})")
        elif not _equal(outputs[name], want, checks.tolerance):
            failures.append(f"output {name!r} is {_short(outputs[name])}, want {_short(want)}")
    for name, wanted in checks.contains.items():
        text = str(outputs.get(name, "")).lower()
        for part in [wanted] if isinstance(wanted, str) else wanted:
            if part.lower() not in text:
                failures.append(f"output {name!r} does not hold {part!r}")
    for name in checks.nonempty:
        if outputs.get(name) in (None, "", [], {}):
            failures.append(f"output {name!r} is missing or empty")
    if checks.schema_ is not None:
        problems = sorted(schema_validator(checks.schema_).iter_errors(outputs), key=lambda e: list(e.path))
        failures += [f"outputs: {'/'.join(str(p) for p in e.path) or '/'}: {e.message}" for e in problems[:3]]
    for email in checks.emails:
        if not any(_email_fits(sent, email.to, email.subject_contains, email.text_contains) for sent in effects.emails):
            failures.append(f"no email like {email.model_dump(exclude_none=True)} (sent {len(effects.emails)})")
    if checks.max_emails is not None and len(effects.emails) > checks.max_emails:
        failures.append(f"{len(effects.emails)} emails sent, at most {checks.max_emails} wanted")
    for relative, part in checks.files.items():
        path = workspace / relative
        if not path.is_file():
            failures.append(f"no file {relative!r} written")
        elif part.lower() not in path.read_text(encoding="utf-8", errors="replace").lower():
            failures.append(f"file {relative!r} does not hold {part!r}")
    for part in checks.http_calls:
        if not any(part in call for call in effects.http_calls):
            failures.append(f"no HTTP call to {part!r}")
    if len(effects.http_calls) < checks.min_http_calls:
        failures.append(f"{len(effects.http_calls)} HTTP calls, at least {checks.min_http_calls} wanted")
    if checks.questions is not None and effects.questions < checks.questions:
        failures.append(f"{effects.questions} human question(s) asked, at least {checks.questions} wanted")
    return failures


def _email_fits(sent: dict[str, Any], to: str | None, subject: str | None, text: str | None) -> bool:
    body = f"{sent.get('text') or ''} {sent.get('html') or ''}".lower()
    return ((to is None or to in sent["to"]) and (subject is None or subject.lower() in sent["subject"].lower())
            and (text is None or text.lower() in body))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
