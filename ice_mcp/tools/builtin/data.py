"""Data tools: json_query (a JMESPath into JSON), render_template (the sandboxed template language)."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from jmespath.exceptions import JMESPathError, JMESPathTypeError
from jmespath.parser import Parser
from jmespath.visitor import TreeInterpreter
from pydantic import Field

from ice_mcp.core.templates import render_text
from ice_mcp.errors import NodeFailure, TemplateCompileError

# A decimal number written as text, as CSV cells are (no "nan", "inf" or "1_000": those stay text).
_NUMERIC_TEXT = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*")
TO_NUMBER_HINT = ("values read from CSV are text: convert them with to_number(), e.g. [?to_number(amount) > `400`] "
                  "or sum(map(&to_number(@), rows[*].amount))")


class _NumbersAsNumbers(TreeInterpreter):
    """JMESPath where a number compared with a numeric string compares as numbers (`"420.50" > 400`): CSV cells
    are text, and a filter such as [?amount > `400`] would otherwise fail or never match."""

    def visit_comparator(self, node: Any, value: Any) -> Any:
        left = self.visit(node["children"][0], value)
        right = self.visit(node["children"][1], value)
        compare = self.COMPARATOR_FUNC[node["value"]]
        if node["value"] in ("eq", "ne"):  # "n/a" == 400 is simply false
            return compare(_as_number(left, right), _as_number(right, left))
        if _is_number(left) and isinstance(right, str):
            right = _number_or_fail(right, left)
        elif _is_number(right) and isinstance(left, str):
            left = _number_or_fail(left, right)
        # As JMESPath itself: ordering is for two numbers or two strings; anything else is null.
        if (_is_number(left) and _is_number(right)) or (isinstance(left, str) and isinstance(right, str)):
            return compare(left, right)
        return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_number(value: Any, other: Any) -> Any:
    """`value` as a number when it is numeric text compared with a number; else as it is."""
    if isinstance(value, str) and _is_number(other) and _NUMERIC_TEXT.fullmatch(value) is not None:
        return _parse(value)
    return value


def _number_or_fail(text: str, other: Any) -> int | float:
    if _NUMERIC_TEXT.fullmatch(text) is None:
        raise NodeFailure(f"cannot compare {text!r} (text) with the number {other!r}; {TO_NUMBER_HINT}",
                          code="invalid_arguments", retryable=False, details={"value": text, "hint": TO_NUMBER_HINT})
    return _parse(text)


def _parse(text: str) -> int | float:
    try:
        return int(text)  # exact for integers of any size
    except ValueError:
        return float(text)


def json_query(
    data: Annotated[Any, Field(description="A JSON value, or JSON text")],
    path: Annotated[str, Field(description="A JMESPath expression, e.g. `orders[?total > `100`].id`; a number "
                                           "compared with numeric text (CSV cells) compares as numbers")],
) -> dict[str, Any]:
    """Select from JSON with a JMESPath expression."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise NodeFailure(f"data is not JSON: {exc}", code="invalid_arguments", retryable=False) from None
    try:
        parsed = Parser().parse(path)  # the parser keeps a cache of recent expressions
    except JMESPathError as exc:
        raise NodeFailure(f"invalid path {path!r}: {exc}", code="invalid_arguments", retryable=False) from None
    try:
        return {"result": _NumbersAsNumbers().visit(parsed.parsed, data)}
    except JMESPathTypeError as exc:
        raise NodeFailure(f"type error in {path!r}: {exc}; {TO_NUMBER_HINT}", code="invalid_arguments",
                          retryable=False, details={"hint": TO_NUMBER_HINT}) from None
    except JMESPathError as exc:
        raise NodeFailure(f"invalid path {path!r}: {exc}", code="invalid_arguments", retryable=False) from None
    except (TypeError, ValueError) as exc:  # what jmespath lets through (sort_by over mixed types, ...)
        raise NodeFailure(f"cannot evaluate {path!r} on this data: {exc}; {TO_NUMBER_HINT}",
                          code="invalid_arguments", retryable=False, details={"hint": TO_NUMBER_HINT}) from None


def render_template(
    template: Annotated[str, Field(description="Text with {{ expressions }} (no {% %} blocks)")],
    data: Annotated[dict[str, Any], Field(description="Names the template can read")] | None = None,
) -> dict[str, Any]:
    """Render text with the sandboxed template language; a lone {{ expr }} keeps its type."""
    try:
        return {"text": render_text(template, data or {})}
    except TemplateCompileError as exc:
        raise NodeFailure(f"invalid template: {exc}", code="invalid_arguments", retryable=False) from None
