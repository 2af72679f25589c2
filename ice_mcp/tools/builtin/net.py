"""http_request: one HTTP call under the egress guard, with a timeout and a response-size cap."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import httpx2
from pydantic import Field

from ice_mcp.errors import NodeFailure
from ice_mcp.tools import egress
from ice_mcp.tools.context import current_settings


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
    settings = current_settings()
    limit = min(max_bytes or settings.http_max_bytes, settings.http_max_bytes)
    timeout = httpx2.Timeout(timeout_seconds or settings.http_timeout_seconds)
    try:
        async with egress.guarded_client(settings, timeout=timeout) as client:
            request = client.build_request(method, egress.canonical_url(url), headers=headers, params=params,
                                           json=json_body, content=body)
            response = await egress.send(client, request)
            try:
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise NodeFailure(f"response larger than {limit} bytes", code="too_large", retryable=False)
                    chunks.append(chunk)
            finally:
                await response.aclose()
    except httpx2.TimeoutException:
        raise NodeFailure(f"request to {url} timed out", code="timeout") from None
    except httpx2.HTTPError as exc:
        raise NodeFailure(f"request to {url} failed: {exc}", code="http_error") from None
    except httpx2.InvalidURL as exc:
        raise NodeFailure(f"invalid URL {url!r}: {exc}", code="invalid_url", retryable=False) from None
    raw = b"".join(chunks)
    text = raw.decode(response.encoding or "utf-8", errors="replace")
    result: dict[str, Any] = {"status": response.status_code, "headers": dict(response.headers), "text": text}
    if "json" in response.headers.get("content-type", ""):
        try:
            result["json"] = json.loads(text)
        except json.JSONDecodeError:
            pass
    if response.status_code >= 500 or response.status_code == 429:
        raise NodeFailure(f"{method} {url} answered {response.status_code}", code="http_status",
                          details={"status": response.status_code, "body": text[:500]})
    return result
