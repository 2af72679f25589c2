"""The drafting benchmark's cases: a goal in words, the fixture a drafted workflow runs on offline (workspace files,
pinned HTTP responses, answers to `human` questions, inputs) and the checks on its run, all data (YAML files)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from ice_mcp.errors import IceError

CASES_ENV = "ICE_MCP_DRAFTING_CASES"


class PinnedResponse(BaseModel):
    """What `http_request` answers for a URL (and method) while the workflow is graded."""

    model_config = ConfigDict(extra="forbid")

    url: str  # exact, query string included (`params` are added to the URL before it is looked up)
    method: str = "GET"
    status: int = 200
    json_body: Any = Field(default=None, alias="json")
    text: str | None = None
    times: list[int] | None = None  # statuses of the first calls, then `status` (a flaky API: [503, 503])


class EmailCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str | None = None
    subject_contains: str | None = None
    text_contains: str | None = None


class Checks(BaseModel):
    """What the graded run must show; every one given must hold."""

    model_config = ConfigDict(extra="forbid")

    status: str | None = "succeeded"  # None: any ending (a rejection may fail the run or branch round it)
    outputs: dict[str, Any] = Field(default_factory=dict)  # equal (numbers within `tolerance`, lists as sets no)
    contains: dict[str, str | list[str]] = Field(default_factory=dict)  # the output's text holds it (any case)
    nonempty: list[str] = Field(default_factory=list)  # outputs that must be there and not empty
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")  # JSON Schema of the whole outputs object
    emails: list[EmailCheck] = Field(default_factory=list)  # each sent (and no more sent than `max_emails`)
    max_emails: int | None = None
    files: dict[str, str] = Field(default_factory=dict)  # workspace file -> text it holds
    http_calls: list[str] = Field(default_factory=list)  # URL parts some call reached
    min_http_calls: int = 0
    questions: int | None = None  # how many `human` questions the run asked, at least
    tolerance: float = 0.01


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: str
    goal: str
    files: dict[str, str] = Field(default_factory=dict)
    http: list[PinnedResponse] = Field(default_factory=list)
    answers: dict[str, Any] = Field(default_factory=lambda: {"approved": True, "reason": "approved by the benchmark"})
    inputs: dict[str, Any] = Field(default_factory=dict)
    timeout_seconds: float = 60.0
    checks: Checks = Field(default_factory=Checks)


def cases_dir() -> Path:
    """Where the shipped cases are: $ICE_MCP_DRAFTING_CASES, else the package's copy (evals/drafting/cases)."""
    import os

    override = os.environ.get(CASES_ENV)
    if override:
        return Path(override).expanduser().resolve()
    return Path(str(files("ice_mcp") / "_data" / "evals" / "drafting" / "cases")).resolve()


def load_cases(folder: Path | None = None, only: list[str] | None = None) -> list[Case]:
    """Every case in `folder` (default: the shipped ones), sorted by file name; `only`: these ids or kinds."""
    folder = folder or cases_dir()
    if not folder.is_dir():
        raise IceError(f"no drafting cases at {folder}", code="not_found")
    cases = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            cases.append(Case.model_validate(yaml.safe_load(path.read_text(encoding="utf-8"))))
        except Exception as exc:
            raise IceError(f"{path.name}: {exc}", code="invalid_case") from None
    if only:
        cases = [case for case in cases if case.id in only or case.kind in only]
    return cases
