"""The one error family: every error a user or a model can see is an IceError with a stable `code`,
a message and structured details. Imports nothing of ours at run time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ice_mcp.blueprint.issues import ValidationReport


class IceError(Exception):
    code = "error"

    def __init__(self, message: str, *, code: str | None = None, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = dict(details or {})

    def as_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return error


def every_problem(first: str, count: int) -> str:
    """A message for `count` problems found at once: the first, and how many more."""
    return first if count <= 1 else f"{first} (and {count - 1} more problems)"


class BlueprintInvalid(IceError):
    """A blueprint or manifest with problems; `report` lists every one."""

    code = "invalid_blueprint"

    def __init__(self, report: ValidationReport):
        first = report.errors[0].message if report.errors else "invalid blueprint"
        super().__init__(every_problem(first, len(report.errors)), details={"errors": [e.model_dump() for e in report.errors]})
        self.report = report


class InputsInvalid(IceError):
    code = "invalid_inputs"


class RateLimited(IceError):
    """A workflow's `limits` turned a run away; `details.retry_after_seconds` says when to try again."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after_seconds: float) -> None:
        super().__init__(message, details={"retry_after_seconds": round(retry_after_seconds, 3)})

    @property
    def retry_after(self) -> float:
        return float(self.details["retry_after_seconds"])


class ArgumentsInvalid(IceError):
    """Arguments of a tool call that do not fit its input schema; `problems` lists each (path: message)."""

    code = "invalid_arguments"

    def __init__(self, message: str, problems: list[str] | None = None, *,
                 details: Mapping[str, Any] | None = None) -> None:
        problems = problems or []
        super().__init__(message, details={"problems": problems, **(details or {})})
        self.problems = problems


class NotWaiting(IceError):
    """No such question waits here: never asked, already answered, timed out, or its run is in another process."""

    code = "not_waiting"


class AnswerInvalid(IceError):
    """An answer that does not fit the question's schema; `problems` lists each (path: message)."""

    code = "invalid_answer"

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message, details={"problems": problems})
        self.problems = problems


class UnknownName(IceError):
    """An unknown workflow, tool, agent or run; `suggestion` names the nearest one."""

    code = "unknown_name"

    def __init__(self, kind: str, name: str, suggestion: str | None = None):
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        super().__init__(
            f"unknown {kind} {name!r}{hint}",
            code=f"unknown_{kind}",
            details={"name": name, **({"suggestion": suggestion} if suggestion else {})},
        )


class NodeFailure(IceError):
    """A node failed in a way the user (or a model) should read: a clear code and message.

    `retryable=False` tells the engine that another attempt cannot help
    (bad arguments, a sandbox violation, an unknown name).
    """

    code = "node_error"

    def __init__(
        self,
        message: str,
        *,
        code: str = "node_error",
        retryable: bool = True,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, code=code, details=details)
        self.retryable = retryable


class GraphFailed(NodeFailure):
    """A node failed with `on_error: fail`: the graph stopped. Names the node, and the root cause once."""

    def __init__(self, node_id: str, error: dict[str, Any]) -> None:
        path, cause = [node_id], error
        while cause.get("code") == "node_failed" and isinstance(cause.get("details"), dict):
            path.append(str(cause["details"].get("node_id")))
            cause = cause["details"].get("error") or {}
        where = " > ".join(path)
        super().__init__(f"node {where!r} failed: {cause.get('message', '')}", code="node_failed",
                         retryable=False,
                         details={"node_id": node_id, "path": path, "cause": cause, "error": error})
        self.node_id = node_id
        self.error = error


class RunStopped(IceError):
    """Stops the whole run through every level of nesting; `code` is the run's final status (over_budget)."""

    def __init__(self, status: str, message: str, spend: Any = None) -> None:
        super().__init__(message, code=status)
        self.status = status
        self.spend = spend  # the budget that was reached


class TemplateCompileError(IceError):
    """A template or expression that cannot be compiled; `code` is the validation code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)
