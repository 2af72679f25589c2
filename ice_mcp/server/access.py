"""Who is calling and what they may do: one reading of `Authorization`, token checks, catalogue rights."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from ice_mcp.server.options import ServerOptions


@dataclass(frozen=True, slots=True)
class Credential:
    """What the `Authorization` header(s) of one request say; `ambiguous` when there were several."""

    token: str | None
    ambiguous: bool = False


def read_authorization(headers: Any) -> Credential:
    """The one reading of `Authorization` that the auth check and the caller identity both use."""
    if headers is None:
        return Credential(None)
    values = headers.getlist("authorization") if hasattr(headers, "getlist") else None
    if values is None:
        value = headers.get("authorization")
        values = [] if value is None else [value]
    if len(values) > 1:
        return Credential(None, ambiguous=True)
    scheme, _, token = (values[0] if values else "").partition(" ")
    token = token.strip()
    return Credential(token or None if scheme.lower() == "bearer" else None)


def bearer_token(headers: Any) -> str | None:
    return read_authorization(headers).token


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def same_secret(given: str | None, expected: str | None) -> bool:
    """Constant time, and on fixed-length digests so neither the content nor the length leaks."""
    if not given or not expected:
        return False
    return hmac.compare_digest(_digest(given), _digest(expected))


def caller_of_token(token: str | None) -> str:
    return "token:" + _digest(token).hex()[:16] if token else "anonymous"


def caller_id(request: Any) -> str:
    """Whom a budget is kept for: `local` over stdio, else a hash of the bearer token (never the token)."""
    headers = getattr(request, "headers", None)
    if request is None or headers is None:
        return "local"
    return caller_of_token(bearer_token(headers))


def may_administer(request: Any, options: ServerOptions) -> bool:
    """`request` is the HTTP request the message came on, or None (stdio, in memory)."""
    if options.read_only:
        return False
    headers = getattr(request, "headers", None)
    if request is None or headers is None:
        return True
    return same_secret(bearer_token(headers), options.admin_token)
