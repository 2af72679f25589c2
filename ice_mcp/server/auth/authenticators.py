"""Who an HTTP request stands for: the static tokens, or OAuth access tokens with their challenges
(401 with the resource metadata's address, 403 insufficient_scope before the call runs, 503 while the
authorization server is away) and the RFC 9728 metadata routes."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ice_mcp.errors import IceError
from ice_mcp.server.auth.callers import ANONYMOUS, PRINCIPAL_KEY, Credential, same_secret
from ice_mcp.server.auth.resource_server import (
    FIRST_SCOPES,
    RETRY_AFTER_SECONDS,
    SCOPES,
    AuthUnavailable,
    InvalidToken,
    OAuthConfig,
    Principal,
    TokenVerifier,
)

logger = logging.getLogger(__name__)

UNAUTHORIZED = -32001
CORS_HEADERS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, OPTIONS",
                "Access-Control-Allow-Headers": "Authorization, Content-Type, Mcp-Protocol-Version"}


class Refusal(IceError):
    """An answer instead of the request: 401, 403 or 503, with its challenge."""

    code = "unauthorized"

    def __init__(self, status: int, message: str, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers

    def response(self) -> Response:
        body = {"jsonrpc": "2.0", "error": {"code": UNAUTHORIZED, "message": self.message}, "id": None}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


class Authenticator(Protocol):
    """How the Guard learns whom a request stands for, and whether it may do what it asks."""

    isolates: bool  # each principal sees only its own runs, schedules, hooks and notification targets

    async def principal(self, credential: Credential) -> Principal: ...
    def refuse_scope(self, principal: Principal, needed: str) -> Refusal | None: ...


@dataclass(slots=True)
class StaticTokens:
    """`ICE_MCP_TOKEN` (all callers are one principal, `token`) and the admin token, which adds ice:admin.
    Without a token every HTTP caller is `anonymous`. Tools check admin rights as they run (isError)."""

    token: str | None
    admin_token: str | None
    isolates: bool = False  # one principal: everyone with the token sees everything

    async def principal(self, credential: Credential) -> Principal:
        if same_secret(credential.token, self.admin_token):
            return Principal("token" if self.token else "anonymous", frozenset(SCOPES))
        if self.token is None:
            return ANONYMOUS
        if same_secret(credential.token, self.token):
            return Principal("token", ANONYMOUS.scopes)
        raise Refusal(401, "Unauthorized: send Authorization: Bearer <token>",
                      {"WWW-Authenticate": 'Bearer realm="ice-mcp"'})

    def refuse_scope(self, principal: Principal, needed: str) -> Refusal | None:
        return None


COOKIE = "ice_ui"
TICKET_SECONDS = 60.0  # a /ui sign-in link works once, this soon
COOKIE_SECONDS = 3600.0  # the page's session: about an access token's life


@dataclass(slots=True)
class PageSessions:
    """The run view under OAuth: `ui_link` mints a one-time ticket for the caller's principal; the page trades
    it (POST /ui/session) for an HttpOnly, SameSite=Strict cookie. Kept in this process's memory."""

    clock: Callable[[], float] = time.time
    _tickets: dict[str, tuple[float, Principal]] = field(default_factory=dict)
    _sessions: dict[str, tuple[float, Principal]] = field(default_factory=dict)

    def mint(self, principal: Principal) -> str:
        now = self.clock()
        self._forget(now)
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = (now + TICKET_SECONDS, principal)
        return ticket

    def redeem(self, ticket: str) -> tuple[str, int] | None:
        """The cookie value and its max-age for a live ticket (used up), else None."""
        now = self.clock()
        found = self._tickets.pop(ticket, None)
        if found is None or found[0] < now:
            return None
        principal = found[1]
        until = min(now + COOKIE_SECONDS, principal.expires_at or now + COOKIE_SECONDS)
        session = secrets.token_urlsafe(32)
        self._sessions[session] = (until, principal)
        return session, max(1, int(until - now))

    def principal(self, session: str) -> Principal | None:
        found = self._sessions.get(session)
        if found is None or found[0] < self.clock():
            return None
        return found[1]

    def _forget(self, now: float) -> None:
        for kept in (self._tickets, self._sessions):
            for key in [key for key, (until, _) in kept.items() if until < now]:
                del kept[key]

    def route(self) -> Route:
        """POST /ui/session {ticket}: the page's cookie (outside /ui/api: the ticket is the credential)."""

        async def exchange(request: Request) -> Response:
            if "application/json" not in request.headers.get("content-type", ""):  # no cross-site form can send it
                return JSONResponse({"error": {"code": "invalid_request", "message": "send JSON"}}, 415)
            try:
                ticket = orjson.loads(await request.body()).get("ticket")
            except (orjson.JSONDecodeError, AttributeError):
                ticket = None
            redeemed = self.redeem(ticket) if isinstance(ticket, str) else None
            if redeemed is None:
                return JSONResponse({"error": {"code": "invalid_ticket", "message": "this sign-in link has expired "
                                               "or was used: ask for a new one (the ui_link tool)"}}, 401)
            session, max_age = redeemed
            response = Response(status_code=204)
            response.set_cookie(COOKIE, session, max_age=max_age, path="/ui", httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")
            return response

        return Route("/ui/session", exchange, methods=["POST"])


@dataclass(slots=True)
class OAuthTokens:
    """Access tokens from the configured issuer, for this resource (`--auth oauth`)."""

    config: OAuthConfig
    verifier: TokenVerifier
    pages: PageSessions = field(default_factory=PageSessions)
    isolates: bool = True

    def challenge(self, error: str | None = None, scope: str = FIRST_SCOPES) -> dict[str, str]:
        fields = ([f'error="{error}"'] if error else []) + [
            f'resource_metadata="{self.config.metadata_url()}"', f'scope="{scope}"']
        return {"WWW-Authenticate": "Bearer " + ", ".join(fields)}

    async def principal(self, credential: Credential) -> Principal:
        if credential.token is None and credential.page is not None:  # the run view's cookie
            if (signed_in := self.pages.principal(credential.page)) is not None:
                return signed_in
        if credential.token is None:  # RFC 6750 §3: no credentials, no error code
            raise Refusal(401, "Unauthorized: sign in (OAuth) and send Authorization: Bearer <token>",
                          self.challenge())
        try:
            return await self.verifier.verify(credential.token)
        except InvalidToken as exc:
            logger.info("oauth: token refused: %s", exc)
            raise Refusal(401, "Unauthorized: the access token is not valid here",
                          self.challenge("invalid_token")) from None
        except AuthUnavailable as exc:
            logger.warning("oauth: %s", exc)
            raise Refusal(503, "The authorization server cannot be reached: try again shortly",
                          {"Retry-After": str(RETRY_AFTER_SECONDS)}) from None

    def refuse_scope(self, principal: Principal, needed: str) -> Refusal | None:
        if principal.allows(needed):
            return None
        asked = " ".join(dict.fromkeys((needed, "ice:read")))  # a client that replaces its scopes keeps reading
        return Refusal(403, f"Forbidden: this needs the {needed} scope",
                       self.challenge("insufficient_scope", asked))

    def routes(self) -> list[Route]:
        """The protected-resource metadata, path-inserted and at the root (some clients look only there)."""
        document = self.config.metadata()

        async def metadata(request: Request) -> Response:
            if request.method == "OPTIONS":
                return Response(status_code=204, headers=CORS_HEADERS)
            return JSONResponse(document, headers={**CORS_HEADERS, "Cache-Control": "public, max-age=3600"})

        paths = dict.fromkeys((self.config.metadata_path, "/.well-known/oauth-protected-resource"))
        return [Route(path, metadata, methods=["GET", "OPTIONS"]) for path in paths]


def authenticated(scope: MutableMapping[str, Any], principal: Principal) -> None:
    """Leave the principal where the app reads it, and as the SDK's user (it binds sessions to it)."""
    scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
    if principal.issuer is not None:
        scope["user"] = AuthenticatedUser(AccessToken(
            token="", client_id=principal.client_id or "", scopes=sorted(principal.scopes),
            expires_at=int(principal.expires_at) if principal.expires_at else None, subject=principal.subject,
            claims={"iss": principal.issuer}))


def needed_scope(path: str, message: Any, tool_scope: Callable[[str], str], rpc_scope: Callable[[str], str]) -> str:
    """The scope a POST needs, from its JSON-RPC body (never from headers a client could set apart), decoded
    (`bodies.try_decode`: None when it is no JSON, which the endpoint answers itself). That decoder accepts all
    that the endpoints' own accept (NaN, Infinity, 1e400: orjson refused them, and such a body needed ice:read)."""
    messages = message if isinstance(message, list) else [message]
    needed = {"ice:read"}
    for each in messages:
        if not isinstance(each, dict) or not isinstance(each.get("method"), str):
            continue
        params = each.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if path.startswith("/rpc"):
            needed.add(rpc_scope(each["method"]))
        elif each["method"] == "tools/call" and isinstance(name, str):
            needed.add(tool_scope(name))
        elif each["method"] == "tasks/cancel":
            needed.add("ice:run")
    return max(needed, key=SCOPES.index)
