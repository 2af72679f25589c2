"""Who may change the catalogue: stdio callers unless read-only; HTTP callers with the admin token."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from ice_mcp.server.options import ServerOptions


def bearer_token(headers: Any) -> str | None:
    if headers is None:
        return None
    value = headers.get("authorization") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def same_secret(given: str | None, expected: str | None) -> bool:
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def caller_id(request: Any) -> str:
    """Whom a budget is kept for: `local` over stdio, else a hash of the bearer token (never the token)."""
    headers = getattr(request, "headers", None)
    if request is None or headers is None:
        return "local"
    token = bearer_token(headers)
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:16] if token else "anonymous"


def may_administer(request: Any, options: ServerOptions) -> bool:
    """`request` is the HTTP request the message came on, or None (stdio, in memory)."""
    if options.read_only:
        return False
    headers = getattr(request, "headers", None)
    if request is None or headers is None:
        return True
    return same_secret(bearer_token(headers), options.admin_token)
