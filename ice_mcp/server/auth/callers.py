"""Who is calling and what they may do: one reading of `Authorization`, token checks, catalogue rights."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ice_mcp.principals import acting_as
from ice_mcp.server.auth.resource_server import LOCAL, Principal

if TYPE_CHECKING:  # the options hold an OAuthConfig: auth sits below them
    from ice_mcp.server.options import ServerOptions

PRINCIPAL_KEY = "ice_principal"  # where the HTTP Guard leaves the request's principal in the ASGI scope's state
ANONYMOUS = Principal("anonymous", frozenset({"ice:read", "ice:run"}))  # HTTP without a token configured


@dataclass(frozen=True, slots=True)
class Credential:
    """What the `Authorization` header(s) of one request say; `ambiguous` when there were several."""

    token: str | None
    ambiguous: bool = False
    page: str | None = None  # the run view's session cookie (OAuth), when there is no token


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


def principal_of(request: Any) -> Principal:
    """Whom the request stands for, as the HTTP Guard found it; `local` over stdio and in memory."""
    if request is None:
        return LOCAL
    scope = getattr(request, "scope", None)
    return (principal_in(scope) if isinstance(scope, dict) else None) or ANONYMOUS


def principal_in(scope: Mapping[str, Any]) -> Principal | None:
    """The principal the Guard left in an ASGI scope, if it left one."""
    found = scope.get("state", {}).get(PRINCIPAL_KEY)
    return found if isinstance(found, Principal) else None


def caller_id(request: Any) -> str:
    """Whom runs and budgets are kept for: the request's principal (an OAuth user, `token`, `local`)."""
    return principal_of(request).id


def may_administer(request: Any, options: ServerOptions) -> bool:
    """`request` is the HTTP request the message came on, or None (stdio, in memory)."""
    return not options.read_only and principal_of(request).allows("ice:admin")


class ActingPrincipal:
    """Server middleware (OAuth): every MCP request runs as the principal of the HTTP request it came on, so
    the orchestrator's lookups answer only what it owns. Per message, not per session: a 2025 session's
    handlers run in the task of the request that opened it."""

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.request is None:
            return await call_next(ctx)
        principal = principal_of(ctx.request)
        with acting_as(principal.id, scopes=principal.scopes):
            return await call_next(ctx)
