"""The content blocks, schemas and client requests the conformance fixtures answer with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types


def object_schema(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    """The JSON schema of an object with these properties, of which `required` must be given."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
NAME_SCHEMA = object_schema({"name": {"type": "string"}}, "name")
CONFIRM_SCHEMA = object_schema({"ok": {"type": "boolean"}}, "ok")

Ctx = Any
Handler = Callable[[Ctx, dict[str, Any], types.CallToolRequestParams], Awaitable[Any]]


def text_result(text: str) -> types.CallToolResult:
    """A tool result of one text block."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def image() -> types.ImageContent:
    """The fixtures' image (a one-pixel PNG) as a content block."""
    return types.ImageContent(type="image", data=IMAGE, mime_type="image/png")


def embedded_text(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    """A content block embedding a text resource."""
    resource = types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return types.EmbeddedResource(type="resource", resource=resource)


def elicit(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    """A form elicitation asking the client's user `message`, answered in `schema`'s shape."""
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def sample(text: str, max_tokens: int = 100) -> types.CreateMessageRequest:
    """A sampling request asking the client's model `text`."""
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def answered(answer: Any, key: str) -> Any:
    """The field `key` of an accepted elicitation's content (None for any other answer)."""
    if isinstance(answer, types.ElicitResult) and answer.content:
        return answer.content.get(key)
    return None
