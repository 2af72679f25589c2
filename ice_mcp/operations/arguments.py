"""A tool's arguments checked against its inputSchema, every problem at once (no MCP SDK: the CLI uses it too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import exceptions as js_exceptions

from ice_mcp.blueprint.schemas import SchemaInvalid, schema_validator
from ice_mcp.errors import ArgumentsInvalid

_VALIDATORS: dict[int, tuple[Mapping[str, Any], Any]] = {}


def _validator(schema: Mapping[str, Any]) -> Any:
    """One validator per schema object (the built-in tools' schemas live as long as the process)."""
    found = _VALIDATORS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_VALIDATORS) > 1024:
            _VALIDATORS.clear()
        found = _VALIDATORS[id(schema)] = (schema, schema_validator(schema))
    return found[1]


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    """Raise ArgumentsInvalid listing every problem (path: message)."""
    try:
        validator = _validator(schema)
        if validator.is_valid(arguments):
            return
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except (SchemaInvalid, js_exceptions.SchemaError, TypeError, ValueError, RecursionError):
        return  # a schema the validator cannot use: what runs checks its arguments itself
    problems = [f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message[:300]}"
                for e in errors[:20]]
    raise ArgumentsInvalid("; ".join(problems), problems)
