"""Data tools: json_query (a JMESPath into JSON), render_template (the sandboxed template language)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import jmespath
from jmespath.exceptions import JMESPathError
from pydantic import Field

from ice_mcp.core.templates import render_text
from ice_mcp.errors import NodeFailure, TemplateCompileError


def json_query(
    data: Annotated[Any, Field(description="A JSON value, or JSON text")],
    path: Annotated[str, Field(description="A JMESPath expression, e.g. `orders[?total > `100`].id`")],
) -> dict[str, Any]:
    """Select from JSON with a JMESPath expression."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise NodeFailure(f"data is not JSON: {exc}", code="invalid_arguments", retryable=False) from None
    try:
        return {"result": jmespath.search(path, data)}
    except JMESPathError as exc:
        raise NodeFailure(f"invalid path {path!r}: {exc}", code="invalid_arguments", retryable=False) from None


def render_template(
    template: Annotated[str, Field(description="Text with {{ expressions }} (no {% %} blocks)")],
    data: Annotated[dict[str, Any], Field(description="Names the template can read")] | None = None,
) -> dict[str, Any]:
    """Render text with the sandboxed template language; a lone {{ expr }} keeps its type."""
    try:
        return {"text": render_text(template, data or {})}
    except TemplateCompileError as exc:
        raise NodeFailure(f"invalid template: {exc}", code="invalid_arguments", retryable=False) from None
