"""The OAuth 2.1 resource server of `serve --http --auth oauth`: which access tokens it accepts (JWTs checked
against the issuer's keys, or opaque tokens by RFC 7662 introspection) and whom each one stands for."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import os
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2

from ice_mcp.errors import IceError

logger = logging.getLogger(__name__)

SCOPES = ("ice:read", "ice:run", "ice:admin")
# Each scope grants the ones below it (2026-07-28: servers account for scope hierarchies).
IMPLIED = {"ice:read": ("ice:read",), "ice:run": ("ice:read", "ice:run"), "ice:admin": SCOPES}
FIRST_SCOPES = "ice:read ice:run"  # what the first challenge asks for: step-up is unreliable in hosts
ALGORITHMS = ["RS256", "PS256", "ES256"]  # pinned here, never taken from a token's header
LEEWAY_SECONDS = 30.0
KEYS_SECONDS = 300.0  # the issuer's key set is fetched again after this long
UNKNOWN_KID_SECONDS = 30.0  # an unknown `kid` fetches the key set again at most this often
FAILED_FETCH_SECONDS = 1.0  # after a failed fetch (the issuer away), the next try waits this long
INTROSPECTION_SECONDS = 60.0  # an introspected token is trusted this long (never past its `exp`)
RETRY_AFTER_SECONDS = 10  # what a 503 tells clients when the authorization server is away
FETCH_TIMEOUT_SECONDS = 5.0


class InvalidToken(IceError):
    """The token is not one this server accepts (401 invalid_token; the reason is logged, not sent)."""

    code = "invalid_token"


class AuthUnavailable(IceError):
    """The authorization server or its keys could not be reached (503 + Retry-After, never a 401)."""

    code = "auth_unavailable"


@dataclass(frozen=True, slots=True)
class Principal:
    """Whom a request stands for. `id` keys runs, budgets and sessions: `oauth:<iss>#<sub>` (or
    `#client:<client_id>` without `sub`), `token` for the static token, `local` over stdio."""

    id: str
    scopes: frozenset[str] = frozenset(SCOPES)
    client_id: str | None = None
    issuer: str | None = None
    subject: str | None = None
    expires_at: float | None = None

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


LOCAL = Principal("local")


def granted(scopes: Iterable[str]) -> frozenset[str]:
    """The ice scopes a token's scopes amount to, the hierarchy applied (other scopes are ignored)."""
    return frozenset(s for scope in scopes for s in IMPLIED.get(scope, ()))


def canonical(url: str) -> str:
    """RFC 8707's canonical form: lower-case scheme and host, no fragment, no single trailing slash."""
    parts = urllib.parse.urlsplit(url.strip())
    path = parts.path[:-1] if parts.path.endswith("/") else parts.path
    return urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    """Where tokens come from and for whom they must be (ICE_MCP_RESOURCE, ICE_MCP_ISSUER, ...)."""

    resource: str  # the canonical URL of /mcp: the audience every token must carry
    issuer: str  # compared exactly (RFC 8414, RFC 9207)
    jwks_url: str | None = None  # default: the issuer's metadata `jwks_uri`
    audiences: tuple[str, ...] = ()  # accepted besides the resource (Entra: api://..., a GUID)
    introspection_url: str | None = None  # RFC 7662, for opaque tokens
    client_id: str | None = None  # this server's credentials at the introspection endpoint
    client_secret: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OAuthConfig:
        env = os.environ if env is None else env
        missing = [name for name in ("ICE_MCP_RESOURCE", "ICE_MCP_ISSUER") if not env.get(name)]
        if missing:
            raise ValueError(f"--auth oauth needs {' and '.join(missing)} (the URL of /mcp, the issuer)")
        return cls(
            resource=canonical(env["ICE_MCP_RESOURCE"]), issuer=env["ICE_MCP_ISSUER"].strip(),
            jwks_url=env.get("ICE_MCP_JWKS_URL") or None,
            audiences=tuple(a.strip() for a in env.get("ICE_MCP_AUDIENCES", "").split(",") if a.strip()),
            introspection_url=env.get("ICE_MCP_INTROSPECTION_URL") or None,
            client_id=env.get("ICE_MCP_INTROSPECTION_CLIENT_ID") or None,
            client_secret=env.get("ICE_MCP_INTROSPECTION_CLIENT_SECRET") or None)

    @property
    def metadata_path(self) -> str:
        """RFC 9728 §3.1: the well-known path with the resource's path inserted."""
        path = urllib.parse.urlsplit(self.resource).path.rstrip("/")
        return "/.well-known/oauth-protected-resource" + path

    def metadata_url(self) -> str:
        parts = urllib.parse.urlsplit(self.resource)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, self.metadata_path, "", ""))

    def metadata(self) -> dict[str, Any]:
        """The protected-resource metadata document (RFC 9728)."""
        return {"resource": self.resource, "authorization_servers": [self.issuer],
                "scopes_supported": list(SCOPES), "bearer_methods_supported": ["header"],
                "resource_name": "ice-mcp"}


@dataclass(slots=True)
class _Keys:
    keys: dict[str | None, Any] = field(default_factory=dict)  # kid -> PyJWK
    fetched_at: float = float("-inf")  # a failed fetch counts too: the cooldown holds either way
    loaded_at: float = float("-inf")
    failed: bool = False  # the last fetch failed: a key we lack may be one the issuer has


@dataclass(slots=True)
class TokenVerifier:
    """Checks access tokens for one resource. Key sets and introspection answers are cached; every fetch
    goes through `http` (loopback allowed: the authorization server is the operator's, not a caller's)."""

    config: OAuthConfig
    clock: Callable[[], float] = time.time
    http: Callable[[], httpx2.AsyncClient] = lambda: httpx2.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS)
    _keys: _Keys = field(default_factory=_Keys)
    _jwks_url: str | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _introspected: dict[str, tuple[float, Principal]] = field(default_factory=dict)
    fetches: int = 0  # key-set fetches so far

    def __post_init__(self) -> None:
        # PyJWT (and cryptography) load here, when a server checks tokens, not when this module is imported:
        # every server imports it (Principal), and stdio or a static token never needs them.
        importlib.import_module("jwt")

    async def verify(self, token: str) -> Principal:
        """The principal `token` stands for; raises InvalidToken or AuthUnavailable."""
        if token.count(".") != 2:
            if self.config.introspection_url:
                return await self._introspect(token)
            raise InvalidToken("not a JWT, and no introspection endpoint is configured")
        import jwt  # PyJWT and cryptography: loaded with the verifier (see __post_init__)

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"unreadable token: {exc}") from None
        if header.get("alg") not in ALGORITHMS:
            raise InvalidToken(f"algorithm {header.get('alg')!r} is not accepted")
        key = await self._key(header.get("kid"))
        try:
            claims = jwt.decode(token, key.key, algorithms=ALGORITHMS, issuer=self.config.issuer,
                                audience=[self.config.resource, *self.config.audiences], leeway=LEEWAY_SECONDS,
                                options={"require": ["exp", "iss", "aud"]})
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"{type(exc).__name__}: {exc}") from None
        return claims_principal(claims)

    # -- keys -----------------------------------------------------------------------------------------

    async def _key(self, kid: str | None) -> Any:
        if self._must_fetch(kid):
            async with self._lock:  # one fetch for every request that waits on it
                if self._must_fetch(kid):
                    await self._fetch_keys()
        keys = self._keys.keys
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        if kid not in keys:
            if not keys or self._keys.failed:
                raise AuthUnavailable("the issuer's keys could not be fetched")
            raise InvalidToken(f"no key {kid!r} in the issuer's key set")
        return keys[kid]

    def _must_fetch(self, kid: str | None) -> bool:
        """The set is stale (or never loaded), or lacks `kid`; and no fetch happened in the last 30 s."""
        now, keys = self.clock(), self._keys
        known = kid in keys.keys or (kid is None and len(keys.keys) == 1)
        pause = FAILED_FETCH_SECONDS if keys.failed else UNKNOWN_KID_SECONDS
        return (not known or now - keys.loaded_at > KEYS_SECONDS) and now - keys.fetched_at >= pause

    async def _fetch_keys(self) -> None:
        import jwt

        self._keys.fetched_at = self.clock()
        try:
            url = self._jwks_url or self.config.jwks_url or await self._discover_jwks()
            self._jwks_url = url
            self.fetches += 1
            data = await self._get_json(url)
            found = jwt.PyJWKSet.from_dict(data)
        except (httpx2.HTTPError, ValueError, jwt.PyJWTError, AuthUnavailable) as exc:
            self._keys.failed = True
            if self._keys.keys:  # keep the keys we had: a brief outage must not refuse good tokens
                logger.warning("oauth: key set not refreshed (%s); the cached keys stay", exc)
                return
            raise AuthUnavailable(f"the issuer's keys could not be fetched: {exc}") from None
        self._keys = _Keys({k.key_id: k for k in found.keys}, fetched_at=self._keys.fetched_at,
                           loaded_at=self.clock())  # failed: False again

    async def _discover_jwks(self) -> str:
        """The issuer's `jwks_uri` from its RFC 8414 metadata (path-inserted), or OpenID's document."""
        issuer = self.config.issuer
        parts = urllib.parse.urlsplit(issuer)
        path = parts.path.rstrip("/")
        candidates = [urllib.parse.urlunsplit((parts.scheme, parts.netloc,
                                               "/.well-known/oauth-authorization-server" + path, "", "")),
                      issuer.rstrip("/") + "/.well-known/openid-configuration"]
        last: Exception | None = None
        for url in candidates:
            try:
                metadata = await self._get_json(url)
            except (httpx2.HTTPError, ValueError) as exc:
                last = exc
                continue
            if metadata.get("issuer") != issuer or not metadata.get("jwks_uri"):
                raise AuthUnavailable(f"{url} does not describe issuer {issuer!r} with a jwks_uri")
            return str(metadata["jwks_uri"])
        raise AuthUnavailable(f"no metadata for issuer {issuer!r}: {last}")

    async def _get_json(self, url: str) -> dict[str, Any]:
        async with self.http() as client:
            answer = await client.get(url, headers={"accept": "application/json"})
        answer.raise_for_status()
        data = json.loads(answer.content)
        if not isinstance(data, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return data

    # -- opaque tokens --------------------------------------------------------------------------------

    async def _introspect(self, token: str) -> Principal:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        cached = self._introspected.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        config = self.config
        assert config.introspection_url is not None
        auth: dict[str, Any] = ({"auth": httpx2.BasicAuth(config.client_id, config.client_secret or "")}
                                if config.client_id else {})
        try:
            async with self.http() as client:
                answer = await client.post(config.introspection_url, data={"token": token},
                                           headers={"accept": "application/json"}, **auth)
            answer.raise_for_status()
            claims = json.loads(answer.content)
        except (httpx2.HTTPError, ValueError) as exc:
            raise AuthUnavailable(f"the introspection endpoint could not answer: {exc}") from None
        if not isinstance(claims, dict) or claims.get("active") is not True:
            raise InvalidToken("the token is not active")
        if claims.get("iss") not in (None, config.issuer):
            raise InvalidToken("the token is from another issuer")
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else list(audiences or [])
        if audiences and not {config.resource, *config.audiences} & set(audiences):
            raise InvalidToken("the token is for another resource")
        exp = claims.get("exp")
        if isinstance(exp, int | float) and exp + LEEWAY_SECONDS < now:
            raise InvalidToken("the token has expired")
        principal = claims_principal({**claims, "iss": claims.get("iss") or config.issuer})
        until = min(now + INTROSPECTION_SECONDS, float(exp) if isinstance(exp, int | float) else float("inf"))
        if len(self._introspected) > 10_000:
            self._introspected.clear()
        self._introspected[digest] = (until, principal)
        return principal


def claims_principal(claims: Mapping[str, Any]) -> Principal:
    """Scopes from `scope` (a string) or `scp` (Entra: a list); the client from `client_id` or `azp`."""
    raw = claims.get("scope", claims.get("scp", ""))
    scopes = raw.split() if isinstance(raw, str) else [str(s) for s in raw or []]
    issuer = str(claims["iss"])
    client = claims.get("client_id") or claims.get("azp")
    subject = claims.get("sub")
    who = f"oauth:{issuer}#{subject}" if subject else f"oauth:{issuer}#client:{client}"
    exp = claims.get("exp")
    return Principal(who, granted(scopes), str(client) if client else None, issuer,
                     str(subject) if subject else None, float(exp) if isinstance(exp, int | float) else None)
