"""Errors that reach users: each has a stable code, a message and structured details."""

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


class BlueprintInvalid(IceError):
    code = "invalid_blueprint"

    def __init__(self, report: ValidationReport):
        first = report.errors[0].message if report.errors else "invalid blueprint"
        count = len(report.errors)
        summary = first if count == 1 else f"{first} (and {count - 1} more problems)"
        super().__init__(summary, details={"errors": [e.model_dump() for e in report.errors]})
        self.report = report


class InputsInvalid(IceError):
    code = "invalid_inputs"


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
