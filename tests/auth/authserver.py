"""A real, local OAuth 2.1 authorization server for tests: RFC 8414 metadata, JWKS, DCR, PKCE code flow, JWTs.

`async with AuthServer() as auth:` serves it with uvicorn on 127.0.0.1 (a free port) in the running event loop:

- `GET /.well-known/oauth-authorization-server` and `/.well-known/openid-configuration`: RFC 8414 metadata;
- `GET /jwks`: the public keys (every key ever used, newest last), counted in `auth.jwks_fetches`;
- `POST /register`: RFC 7591 dynamic client registration (public clients with `"none"`, or a client secret);
- `GET /authorize`: auto-consent; checks client, redirect URI, PKCE S256, then 302s back with `code`, `state` and
  the RFC 9207 `iss`; the RFC 8707 `resource`, the granted scope and the subject are bound to the code;
- `POST /token`: `authorization_code` (PKCE verifier checked) and `refresh_token` (rotated) grants, issuing
  RS256 JWT access tokens (header `kid`, `typ: at+jwt`; claims iss, sub, aud = the resource, scope, client_id,
  iat, exp, jti).

Knobs tests turn at runtime: `auth.subject` (who consents next), `auth.grantable` (granted = requested ∩ grantable),
`auth.resource` (the audience when a client sends no `resource`), `auth.token_lifetime`, `auth.deny` (the user
refuses: `error=access_denied`), `auth.down` (every endpoint answers 503, as an unreachable or failing AS would).

For unit tests of a resource server, tokens are minted directly: `auth.token(...)` (a good one), `auth.forge(...)`
(any header/claim/key override) and `auth.bad_token(kind)` for each kind in `BAD_TOKENS`.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import hashlib
import hmac
import json
import secrets
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

DEFAULT_SCOPES = ("ice:read", "ice:run", "ice:admin")
ALGORITHM = "RS256"
CODE_LIFETIME = 60  # seconds an authorization code stays redeemable

# The bad tokens a resource server must refuse (each is `auth.bad_token(kind)`; see `forge` for what they are).
BAD_TOKENS = (
    "unknown_kid",  # signed with `auth.foreign_key` (never published) under its own kid, unknown to the JWKS
    "foreign_key",  # signed with `auth.foreign_key` but claiming the current kid: the signature does not verify
    "expired",  # exp 10 minutes ago (beyond any sane leeway)
    "not_yet_valid",  # nbf 10 minutes ahead
    "no_exp",  # no exp claim at all
    "wrong_issuer",  # iss is another server
    "other_audience",  # aud is another resource
    "no_aud",  # no aud claim at all
    "alg_none",  # alg "none", empty signature
    "hs256_public_pem",  # HS256 keyed with the current public key's PEM (algorithm confusion)
)
BadToken = Literal[
    "unknown_kid", "foreign_key", "expired", "not_yet_valid", "no_exp", "wrong_issuer", "other_audience", "no_aud",
    "alg_none", "hs256_public_pem",
]


class _Drop:
    """Marker for a claim `forge` must leave out."""

    def __repr__(self) -> str:
        return "DROP"


DROP: Any = _Drop()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def pkce_pair() -> tuple[str, str]:
    """A fresh PKCE (code_verifier, S256 code_challenge)."""
    verifier = secrets.token_urlsafe(48)
    return verifier, s256(verifier)


def s256(verifier: str) -> str:
    return b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def unused_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (connection refused), e.g. an issuer that is gone."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def serve_app(
    make_app: Callable[[str], ASGIApp], *, lifespan: Literal["auto", "on", "off"] = "auto"
) -> AsyncIterator[str]:
    """Serve the app `make_app(base_url)` builds with uvicorn on 127.0.0.1 (a free port) in this event loop;
    yields the base URL, `http://127.0.0.1:PORT` (known before the app is built, for its metadata)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # proto set: TCP_NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(make_app(base), log_level="warning", lifespan=lifespan, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield base
    finally:
        server.should_exit = True
        await task
        sock.close()


@dataclass
class SigningKey:
    """One RSA key pair with its key id."""

    kid: str
    private: rsa.RSAPrivateKey

    @classmethod
    def generate(cls, kid: str | None = None) -> SigningKey:
        return cls(kid or f"k-{uuid.uuid4().hex[:12]}", rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def jwk(self) -> dict[str, Any]:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        public.pop("key_ops", None)
        return {**public, "kid": self.kid, "use": "sig", "alg": ALGORITHM}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@dataclass
class RegisteredClient:
    """A registered client (RFC 7591)."""

    client_id: str
    redirect_uris: list[str]
    token_endpoint_auth_method: str = "none"
    client_secret: str | None = None
    scope: str | None = None
    grant_types: list[str] = field(default_factory=lambda: ["authorization_code", "refresh_token"])
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Grant:
    """What one consent authorized: bound to its code, then to its refresh tokens."""

    client_id: str
    subject: str
    scopes: tuple[str, ...]
    resource: str | None
    redirect_uri: str = ""
    code_challenge: str = ""
    expires_at: float = 0.0


class _OAuthError(Exception):
    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(f"{error}: {description}")
        self.error, self.description, self.status = error, description, status

    def response(self) -> JSONResponse:
        headers = {"Cache-Control": "no-store"}
        if self.status == 401:
            headers["WWW-Authenticate"] = 'Basic realm="token"'
        return JSONResponse({"error": self.error, "error_description": self.description}, self.status, headers)


class AuthServer:
    """An OAuth 2.1 authorization server on 127.0.0.1 issuing RS256 JWT access tokens (see the module docstring)."""

    def __init__(
        self,
        *,
        subject: str = "alice",
        resource: str | None = None,
        grantable: Iterable[str] = DEFAULT_SCOPES,
        scopes_supported: Iterable[str] = DEFAULT_SCOPES,
        default_scopes: Iterable[str] = ("ice:read",),
        token_lifetime: int = 300,
        refresh_tokens: bool = True,
        issue_iss_in_redirect: bool = True,
    ) -> None:
        """`resource` is the audience of tokens whose request named none (also `token()`'s default audience);
        `default_scopes` are asked for when an authorization request has no `scope`."""
        self.subject = subject
        self.resource = resource
        self.grantable: set[str] = set(grantable)
        self.scopes_supported = list(scopes_supported)
        self.default_scopes = tuple(default_scopes)
        self.token_lifetime = token_lifetime
        self.refresh_tokens = refresh_tokens
        self.issue_iss_in_redirect = issue_iss_in_redirect
        self.down = False
        self.deny = False
        self.jwks_fetches = 0
        self.requests: collections.Counter[str] = collections.Counter()  # path -> requests, answered or not
        self.issued: list[dict[str, Any]] = []  # claims of every access token /token issued, in order
        self.clients: dict[str, RegisteredClient] = {}
        self.keys: list[SigningKey] = [SigningKey.generate()]
        self._foreign: SigningKey | None = None
        self._codes: dict[str, Grant] = {}
        self._refresh: dict[str, Grant] = {}
        self.port = 0
        self._serving: contextlib.AbstractAsyncContextManager[str] | None = None
        self.app: ASGIApp = self._build_app()

    # -- URLs ------------------------------------------------------------------------------------------------------

    @property
    def issuer(self) -> str:
        """`http://127.0.0.1:PORT`: no trailing slash, the exact `iss` of every token and the metadata `issuer`."""
        if not self.port:
            raise RuntimeError("the AuthServer is not started: use `async with AuthServer() as auth`")
        return f"http://127.0.0.1:{self.port}"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def metadata_url(self) -> str:
        return f"{self.issuer}/.well-known/oauth-authorization-server"

    @property
    def authorization_endpoint(self) -> str:
        return f"{self.issuer}/authorize"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def registration_endpoint(self) -> str:
        return f"{self.issuer}/register"

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> AuthServer:
        self._serving = serve_app(lambda base: self.app, lifespan="off")
        base = await self._serving.__aenter__()
        self.port = int(base.rsplit(":", 1)[1])
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._serving is not None:
            serving, self._serving = self._serving, None
            await serving.__aexit__(*exc)

    # -- keys ------------------------------------------------------------------------------------------------------

    @property
    def key(self) -> SigningKey:
        """The current signing key (the newest)."""
        return self.keys[-1]

    @property
    def kid(self) -> str:
        return self.key.kid

    def rotate_key(self, *, retire_old: bool = False) -> str:
        """A new signing key: published in the JWKS and used for every token from now on; returns its kid.
        The old keys stay published (tokens they signed still verify) unless `retire_old`."""
        new = SigningKey.generate()
        self.keys = [new] if retire_old else [*self.keys, new]
        return new.kid

    def jwks(self) -> dict[str, Any]:
        """The JWK Set /jwks serves."""
        return {"keys": [key.jwk() for key in self.keys]}

    def public_pem(self, kid: str | None = None) -> bytes:
        """The PEM of a published public key (the current one by default)."""
        for key in self.keys:
            if (kid is None and key is self.key) or key.kid == kid:
                return key.public_pem()
        raise KeyError(kid)

    @property
    def foreign_key(self) -> SigningKey:
        """A key this server never publishes (made on first use)."""
        if self._foreign is None:
            self._foreign = SigningKey.generate(kid=f"foreign-{uuid.uuid4().hex[:12]}")
        return self._foreign

    # -- minting tokens directly -----------------------------------------------------------------------------------

    def claims(
        self,
        *,
        sub: str | None = None,
        scopes: Iterable[str] = ("ice:read",),
        audience: str | list[str] | None = None,
        expires_in: int = 300,
        client_id: str = "test-client",
        **extra_claims: Any,
    ) -> dict[str, Any]:
        """The claims `token()` would sign: iss, sub, aud, scope, client_id, iat, exp, jti, plus `extra_claims`."""
        audience = audience if audience is not None else self.resource
        scopes = scopes.split() if isinstance(scopes, str) else scopes  # "ice:read ice:run" works too
        if audience is None:
            raise ValueError("no audience: pass audience= or set AuthServer(resource=...)")
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": sub if sub is not None else self.subject,
            "aud": audience,
            "scope": " ".join(scopes),
            "client_id": client_id,
            "iat": now,
            "exp": now + expires_in,
            "jti": uuid.uuid4().hex,
        }
        claims.update(extra_claims)
        return {name: value for name, value in claims.items() if value is not DROP}

    def token(
        self,
        sub: str | None = None,
        scopes: Iterable[str] = ("ice:read",),
        audience: str | list[str] | None = None,
        expires_in: int = 300,
        **extra_claims: Any,
    ) -> str:
        """A valid access token signed with the current key. `audience` defaults to `auth.resource`; a claim set
        to `DROP` is left out (`auth.token(sub=DROP)`: a client-credentials token with no subject)."""
        claims = self.claims(sub=sub, scopes=scopes, audience=audience, expires_in=expires_in, **extra_claims)
        return self.sign(claims)

    def sign(
        self,
        claims: Mapping[str, Any],
        *,
        key: SigningKey | None = None,
        kid: str | _Drop | None = None,
        alg: str = ALGORITHM,
        headers: Mapping[str, Any] | None = None,
    ) -> str:
        """Sign `claims` as a JWT. `key` defaults to the current key, `kid` to the key's kid (`DROP`: no kid);
        `alg` may be RS256/RS384/RS512/PS256 (with the RSA key), `none` (no signature) or `HS256` (keyed with the
        key's public PEM: the algorithm-confusion attack)."""
        key = key or self.key
        header: dict[str, Any] = {"alg": alg, "typ": "at+jwt"}
        if kid is not DROP:
            header["kid"] = kid if kid is not None else key.kid
        header.update(headers or {})
        if alg == "none" or alg.startswith("HS"):  # PyJWT refuses to make these: do it by hand
            signing_input = f"{b64url(_json(header))}.{b64url(_json(dict(claims)))}"
            signature = b""
            if alg.startswith("HS"):
                digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
                signature = hmac.new(key.public_pem(), signing_input.encode("ascii"), digest).digest()
            return f"{signing_input}.{b64url(signature)}"
        extra = {name: value for name, value in header.items() if name != "alg"}
        return jwt.encode(dict(claims), key.private, algorithm=alg, headers=extra)

    def forge(
        self,
        *,
        key: SigningKey | None = None,
        kid: str | _Drop | None = None,
        alg: str = ALGORITHM,
        headers: Mapping[str, Any] | None = None,
        drop: Iterable[str] = (),
        sub: str | None = None,
        scopes: Iterable[str] = ("ice:read",),
        audience: str | list[str] | None = None,
        expires_in: int = 300,
        **claims: Any,
    ) -> str:
        """A token with any override: header (`key`, `kid`, `alg`, `headers`), claims (`drop=("exp",)` leaves
        claims out, other keywords set them, e.g. `iss="http://evil"`, `nbf=time.time() + 600`)."""
        body = self.claims(sub=sub, scopes=scopes, audience=audience, expires_in=expires_in, **claims)
        for name in drop:
            body.pop(name, None)
        return self.sign(body, key=key, kid=kid, alg=alg, headers=headers)

    def bad_token(self, kind: BadToken | str, **claims: Any) -> str:
        """A token a resource server must refuse, of one of the `BAD_TOKENS` kinds; `claims` as for `forge`."""
        now = int(time.time())
        overrides: dict[str, Any]
        match kind:
            case "unknown_kid":
                overrides = {"key": self.foreign_key}
            case "foreign_key":
                overrides = {"key": self.foreign_key, "kid": self.kid}
            case "expired":
                overrides = {"iat": now - 900, "exp": now - 600}
            case "not_yet_valid":
                overrides = {"nbf": now + 600}
            case "no_exp":
                overrides = {"drop": ("exp",)}
            case "wrong_issuer":
                overrides = {"iss": "https://issuer.invalid"}
            case "other_audience":
                overrides = {"audience": "https://other.invalid/mcp"}
            case "no_aud":
                overrides = {"drop": ("aud",), "audience": claims.get("audience") or "unused"}
            case "alg_none":
                overrides = {"alg": "none"}
            case "hs256_public_pem":
                overrides = {"alg": "HS256"}
            case _:
                raise ValueError(f"unknown bad token kind {kind!r}; one of {BAD_TOKENS}")
        return self.forge(**{**claims, **overrides})

    # -- clients ---------------------------------------------------------------------------------------------------

    def register_client(
        self,
        redirect_uris: Iterable[str],
        *,
        token_endpoint_auth_method: str = "none",
        scope: str | None = None,
        client_id: str | None = None,
    ) -> RegisteredClient:
        """Pre-register a client without HTTP (a confidential one gets a secret)."""
        client = RegisteredClient(
            client_id=client_id or f"c-{uuid.uuid4().hex}",
            redirect_uris=list(redirect_uris),
            token_endpoint_auth_method=token_endpoint_auth_method,
            client_secret=None if token_endpoint_auth_method == "none" else secrets.token_urlsafe(32),
            scope=scope,
        )
        self.clients[client.client_id] = client
        return client

    # -- HTTP ------------------------------------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The RFC 8414 document."""
        return {
            "issuer": self.issuer,
            "authorization_endpoint": self.authorization_endpoint,
            "token_endpoint": self.token_endpoint,
            "registration_endpoint": self.registration_endpoint,
            "jwks_uri": self.jwks_url,
            "scopes_supported": self.scopes_supported,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": self.issue_iss_in_redirect,
            "id_token_signing_alg_values_supported": [ALGORITHM],  # the OIDC alias's required members
            "subject_types_supported": ["public"],
        }

    def _build_app(self) -> ASGIApp:
        routes = [
            Route("/.well-known/oauth-authorization-server", self._metadata, methods=["GET"]),
            Route("/.well-known/openid-configuration", self._metadata, methods=["GET"]),
            Route("/jwks", self._jwks, methods=["GET"]),
            Route("/register", self._register, methods=["POST"]),
            Route("/authorize", self._authorize, methods=["GET"]),
            Route("/token", self._token, methods=["POST"]),
        ]
        starlette = Starlette(routes=routes)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                self.requests[scope["path"]] += 1
                if self.down:
                    response = JSONResponse({"error": "temporarily_unavailable"}, 503, {"Retry-After": "1"})
                    await response(scope, receive, send)
                    return
            await starlette(scope, receive, send)

        return app

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(self.metadata())

    async def _jwks(self, request: Request) -> Response:
        self.jwks_fetches += 1
        return JSONResponse(self.jwks())

    async def _register(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _registration_error("invalid_client_metadata", "the body must be a JSON object")
        uris = body.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(isinstance(uri, str) for uri in uris):
            return _registration_error("invalid_redirect_uri", "redirect_uris must be a non-empty list of URLs")
        for uri in uris:
            parts = urlsplit(uri)
            if not parts.scheme or parts.fragment or (parts.scheme in ("http", "https") and not parts.netloc):
                return _registration_error("invalid_redirect_uri", f"not an absolute URL without fragment: {uri}")
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"  # RFC 7591 §2 default
        if method not in ("none", "client_secret_basic", "client_secret_post"):
            return _registration_error("invalid_client_metadata", f"unsupported token_endpoint_auth_method {method}")
        grant_types = body.get("grant_types") or ["authorization_code"]
        if "authorization_code" not in grant_types:
            return _registration_error("invalid_client_metadata", "grant_types must include authorization_code")
        if "code" not in (body.get("response_types") or ["code"]):
            return _registration_error("invalid_client_metadata", "response_types must include code")
        client = self.register_client(uris, token_endpoint_auth_method=method, scope=body.get("scope"))
        client.grant_types = list(grant_types)
        client.metadata = body
        answer: dict[str, Any] = {
            **body,
            "client_id": client.client_id,
            "client_id_issued_at": int(time.time()),
            "redirect_uris": client.redirect_uris,
            "token_endpoint_auth_method": method,
            "grant_types": client.grant_types,
        }
        if client.client_secret is not None:
            answer |= {"client_secret": client.client_secret, "client_secret_expires_at": 0}
        return JSONResponse(answer, 201, {"Cache-Control": "no-store"})

    async def _authorize(self, request: Request) -> Response:
        params = request.query_params
        client = self.clients.get(params.get("client_id", ""))
        if client is None:
            return JSONResponse({"error": "invalid_request", "error_description": "unknown client_id"}, 400)
        redirect_uri = params.get("redirect_uri") or (client.redirect_uris[0] if len(client.redirect_uris) == 1 else "")
        if redirect_uri not in client.redirect_uris:
            return JSONResponse({"error": "invalid_request", "error_description": "redirect_uri not registered"}, 400)
        state = params.get("state")

        def back(**answer: str) -> Response:
            if state is not None:
                answer["state"] = state
            if self.issue_iss_in_redirect:
                answer["iss"] = self.issuer
            return RedirectResponse(_add_query(redirect_uri, answer), status_code=302)

        if params.get("response_type") != "code":
            return back(error="unsupported_response_type", error_description="only response_type=code")
        challenge = params.get("code_challenge", "")
        if params.get("code_challenge_method") != "S256" or not 43 <= len(challenge) <= 128:
            return back(error="invalid_request", error_description="PKCE with code_challenge_method=S256 is required")
        resource = params.get("resource")
        if resource is not None and not _valid_resource(resource):
            return back(error="invalid_target", error_description="resource must be an absolute URI, no fragment")
        if self.deny:
            return back(error="access_denied", error_description="the user refused")
        requested = params.get("scope")
        wanted = requested.split() if requested else (client.scope.split() if client.scope else self.default_scopes)
        code = secrets.token_urlsafe(32)
        self._codes[code] = Grant(
            client_id=client.client_id,
            subject=self.subject,
            scopes=tuple(scope for scope in dict.fromkeys(wanted) if scope in self.grantable),
            resource=resource,
            redirect_uri=redirect_uri,
            code_challenge=challenge,
            expires_at=time.time() + CODE_LIFETIME,
        )
        return back(code=code)

    async def _token(self, request: Request) -> Response:
        form = dict((await request.form()).items())
        try:
            client = self._authenticate(request, form)
            grant_type = form.get("grant_type")
            if grant_type == "authorization_code":
                grant = self._redeem_code(client, form)
            elif grant_type == "refresh_token":
                grant = self._redeem_refresh(client, form)
            else:
                raise _OAuthError("unsupported_grant_type", f"grant_type {grant_type!r} is not supported")
            if grant_type not in client.grant_types:
                raise _OAuthError("unauthorized_client", f"client not registered for {grant_type}")
        except _OAuthError as error:
            return error.response()
        audience = grant.resource or self.resource
        if audience is None:
            return _OAuthError("invalid_target", "no resource requested and no default resource").response()
        claims = self.claims(sub=grant.subject, scopes=grant.scopes, audience=audience,
                             expires_in=self.token_lifetime, client_id=client.client_id)
        self.issued.append(claims)
        answer: dict[str, Any] = {
            "access_token": self.sign(claims),
            "token_type": "Bearer",
            "expires_in": self.token_lifetime,
            "scope": claims["scope"],
        }
        if self.refresh_tokens and "refresh_token" in client.grant_types:
            refresh = secrets.token_urlsafe(32)
            self._refresh[refresh] = grant
            answer["refresh_token"] = refresh
        return JSONResponse(answer, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})

    def _authenticate(self, request: Request, form: dict[str, Any]) -> RegisteredClient:
        client_id, secret = form.get("client_id"), form.get("client_secret")
        basic = request.headers.get("authorization", "")
        if basic.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(basic[6:]).decode()
            except ValueError as error:
                raise _OAuthError("invalid_client", "malformed Basic credentials", 401) from error
            user, _, password = decoded.partition(":")
            client_id, secret = unquote(user), unquote(password)
        client = self.clients.get(client_id or "")
        if client is None:
            raise _OAuthError("invalid_client", "unknown client", 401)
        if client.client_secret is not None and not (
            secret and hmac.compare_digest(secret.encode(), client.client_secret.encode())
        ):
            raise _OAuthError("invalid_client", "client authentication failed", 401)
        return client

    def _redeem_code(self, client: RegisteredClient, form: dict[str, Any]) -> Grant:
        grant = self._codes.pop(form.get("code", ""), None)  # single use: a replay finds nothing
        if grant is None or grant.expires_at < time.time() or grant.client_id != client.client_id:
            raise _OAuthError("invalid_grant", "unknown, used or expired authorization code")
        if form.get("redirect_uri", grant.redirect_uri) != grant.redirect_uri:
            raise _OAuthError("invalid_grant", "redirect_uri differs from the authorization request's")
        verifier = form.get("code_verifier", "")
        if not verifier or not hmac.compare_digest(s256(verifier), grant.code_challenge):
            raise _OAuthError("invalid_grant", "PKCE code_verifier does not match the code_challenge")
        return self._check_resource(grant, form)

    def _redeem_refresh(self, client: RegisteredClient, form: dict[str, Any]) -> Grant:
        grant = self._refresh.pop(form.get("refresh_token", ""), None)  # rotated: each refresh token works once
        if grant is None or grant.client_id != client.client_id:
            raise _OAuthError("invalid_grant", "unknown or used refresh token")
        scopes = grant.scopes
        if form.get("scope"):
            asked = form["scope"].split()
            if not set(asked) <= set(grant.scopes):
                raise _OAuthError("invalid_scope", "a refresh cannot widen the grant")
            scopes = tuple(asked)
        scopes = tuple(scope for scope in scopes if scope in self.grantable)
        return self._check_resource(
            Grant(client_id=grant.client_id, subject=grant.subject, scopes=scopes, resource=grant.resource), form
        )

    def _check_resource(self, grant: Grant, form: dict[str, Any]) -> Grant:
        resource = form.get("resource")
        if resource is None:
            return grant
        if not _valid_resource(resource):
            raise _OAuthError("invalid_target", "resource must be an absolute URI, no fragment")
        if grant.resource is None:
            grant.resource = resource
        elif resource != grant.resource:
            raise _OAuthError("invalid_target", "resource differs from the one authorized")
        return grant


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _valid_resource(resource: str) -> bool:
    parts = urlsplit(resource)
    return bool(parts.scheme and parts.netloc) and not parts.fragment and "#" not in resource


def _add_query(url: str, params: Mapping[str, str]) -> str:
    parts = urlsplit(url)
    query = urlencode([*parse_qsl(parts.query, keep_blank_values=True), *params.items()])
    return urlunsplit(parts._replace(query=query))


def _registration_error(error: str, description: str) -> Response:
    return JSONResponse({"error": error, "error_description": description}, 400, {"Cache-Control": "no-store"})
