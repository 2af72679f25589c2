"""JSON answers: read JSON out of a model's reply and validate it against a schema."""

from __future__ import annotations

import json
import re
from typing import Any

from ice_mcp.blueprint.schemas import SchemaInvalid, schema_validator
from ice_mcp.blueprint.schemas import check_schema as check_json_schema
from ice_mcp.errors import IceError

_FENCE = re.compile(r"^```(?:json|JSON)?\s*\n?(?P<body>.*?)\n?```$", re.DOTALL)


class InvalidOutput(IceError):
    """A model's answer that does not match the schema asked for; `problems` lists how."""

    code = "invalid_output"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def parse_json(text: str) -> Any:
    """The JSON value in `text`: the whole reply, a fenced block, or the outermost object/array."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group("body").strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as first:
        for opener, closer in (("{", "}"), ("[", "]")):
            start, end = stripped.find(opener), stripped.rfind(closer)
            if start != -1 and end > start:
                try:
                    return json.loads(stripped[start : end + 1])
                except ValueError:
                    continue
        raise InvalidOutput([f"not valid JSON: {first.msg} at line {first.lineno} column {first.colno}"]) from None


def check_schema(schema: dict[str, Any]) -> str | None:
    """A problem with the schema itself (too large, a non-RE2 pattern, invalid), or None."""
    try:
        check_json_schema(schema)
    except SchemaInvalid as exc:
        return exc.message
    return None


def validate(value: Any, schema: dict[str, Any]) -> None:
    try:
        validator = schema_validator(schema)
    except SchemaInvalid as exc:
        raise InvalidOutput([f"the output schema is refused: {exc.message}"]) from None
    problems = [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]
    if problems:
        raise InvalidOutput(problems[:10])


def read_output(text: str, schema: dict[str, Any], json_value: Any = None) -> Any:
    """The validated JSON value of a reply (`json_value` when the provider gave one already)."""
    value = json_value if json_value is not None else parse_json(text)
    validate(value, schema)
    return value


def repair_prompt(problems: list[str], schema: dict[str, Any]) -> str:
    return (
        "Your previous reply was not acceptable: "
        + "; ".join(problems)
        + ".\nReply again with only a JSON value (no prose, no code fences) that validates against "
        + "this JSON Schema:\n"
        + json.dumps(schema, sort_keys=True)
    )
