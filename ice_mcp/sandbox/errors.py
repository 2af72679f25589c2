"""The one error a code node's sandbox raises: a stable code, a message and details."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ice_mcp.errors import NodeFailure

TIMEOUT: Final = "timeout"
MEMORY_LIMIT: Final = "memory_limit"
OUTPUT_LIMIT: Final = "output_limit"
FORBIDDEN: Final = "forbidden"
NOT_JSON: Final = "not_json"
GUEST_EXCEPTION: Final = "guest_exception"
# Not the guest's fault: the runtime is missing, a worker died, the input cannot be sent.
UNAVAILABLE: Final = "sandbox_unavailable"
INVALID_INPUT: Final = "invalid_input"

CODES: Final = frozenset(
    {TIMEOUT, MEMORY_LIMIT, OUTPUT_LIMIT, FORBIDDEN, NOT_JSON, GUEST_EXCEPTION, UNAVAILABLE, INVALID_INPUT}
)


class SandboxError(NodeFailure):
    """A code node that failed in (or before) the sandbox.

    Never retryable: the same snippet with the same inputs fails the same way.
    """

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, code=code, retryable=False, details=details)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only NodeFailure arguments would not survive pickling otherwise.
        return (SandboxError, (self.code, self.message, self.details))
