"""Errors of a provider call, in one shape whatever the SDK (part of the IceError family)."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from ice_mcp.errors import IceError


class LLMError(IceError):
    """A failed model call: a stable code, the HTTP status if any, and whether retrying may help.

    `details` names the provider and the HTTP status."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "llm_error",
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        provider: str | None = None,
    ) -> None:
        details: dict[str, Any] = {"provider": provider}
        if status is not None:
            details["status"] = status
        super().__init__(message, code=code, details=details)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.provider = provider


class BudgetExceeded(LLMError):
    """A call refused before it is made: its upper-bound cost does not fit the budget left."""

    def __init__(self, message: str, *, upper_usd: float, remaining_usd: float) -> None:
        super().__init__(message, code="over_budget", retryable=False)
        self.upper_usd = upper_usd
        self.remaining_usd = remaining_usd


def status_error(provider: str, status: int, message: str, headers: Mapping[str, str] | None) -> LLMError:
    """The LLMError for an HTTP error answer: 408, 409, 429 and 5xx may be retried."""
    retryable = status in (408, 409, 429) or status >= 500
    if status == 429:
        code = "llm_rate_limited"
    elif status >= 500:
        code = "llm_server_error"
    elif status in (401, 403):
        code = "llm_auth_error"
    elif status == 404:
        code = "llm_not_found"
    else:
        code = "llm_bad_request"
    return LLMError(
        f"{provider} answered HTTP {status}: {message}",
        code=code,
        status=status,
        retryable=retryable,
        retry_after=parse_retry_after(headers or {}),
        provider=provider,
    )


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(parsed.timestamp() - time.time(), 0.0)
