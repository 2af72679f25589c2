"""The test authorization server on its own: metadata, DCR, PKCE code flow, JWKS, refresh, bad tokens, SDK client."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx2
import jwt
import pytest
from authserver import BAD_TOKENS, DROP, AuthServer, pkce_pair, serve_app, unused_url
from mcp.server.auth.provider import AccessToken
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata
from oauth_client import (
    AuthorizationRefused,
    HeadlessBrowser,
    mcp_client,
    oauth_http_client,
    oauth_provider,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

RESOURCE = "https://ice.example/mcp"  # an audience only: never contacted
REDIRECT = "http://127.0.0.1:9/callback"


@pytest.fixture
async def auth() -> AsyncIterator[AuthServer]:
    async with AuthServer(subject="alice", grantable=("ice:read", "ice:run")) as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=10) as client:
        yield client


async def register(http: httpx2.AsyncClient, auth: AuthServer, **metadata: Any) -> dict[str, Any]:
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "client_name": "t",
            "grant_types": ["authorization_code", "refresh_token"], **metadata}
    response = await http.post(auth.registration_endpoint, json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def authorize(
    http: httpx2.AsyncClient, auth: AuthServer, client_id: str, *, challenge: str, scope: str | None = "ice:read",
    resource: str | None = RESOURCE, state: str = "st-1", **extra: str,
) -> dict[str, str]:
    """GET /authorize (no redirect followed); the query of the 302's Location."""
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": state,
              "code_challenge": challenge, "code_challenge_method": "S256", **extra}
    if scope is not None:
        params["scope"] = scope
    if resource is not None:
        params["resource"] = resource
    response = await http.get(f"{auth.authorization_endpoint}?{urlencode(params)}", follow_redirects=False)
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith(REDIRECT + "?")
    return dict(parse_qsl(urlsplit(location).query))


async def exchange(http: httpx2.AsyncClient, auth: AuthServer, **form: str) -> httpx2.Response:
    return await http.post(auth.token_endpoint, data={"grant_type": "authorization_code", "redirect_uri": REDIRECT,
                                                      **form})


async def fetch_keys(http: httpx2.AsyncClient, auth: AuthServer) -> jwt.PyJWKSet:
    response = await http.get(auth.jwks_url)
    assert response.status_code == 200
    return jwt.PyJWKSet.from_dict(response.json())


def verify(
    token: str, keys: jwt.PyJWKSet, auth: AuthServer, audience: str = RESOURCE, **options: Any
) -> dict[str, Any]:
    """What a strict resource server does: key by kid from the JWKS, algorithm pinned, iss/aud/exp required."""
    key = keys[jwt.get_unverified_header(token)["kid"]]
    return dict(jwt.decode(token, key.key, algorithms=["RS256"], audience=audience, issuer=auth.issuer,
                           options={"require": ["exp", "iss", "aud"], **options}))  # type: ignore[arg-type]


async def code_flow(http: httpx2.AsyncClient, auth: AuthServer, scope: str = "ice:read") -> dict[str, Any]:
    """DCR, then the code flow; the token response."""
    client = await register(http, auth)
    verifier, challenge = pkce_pair()
    answer = await authorize(http, auth, client["client_id"], challenge=challenge, scope=scope)
    response = await exchange(http, auth, code=answer["code"], code_verifier=verifier, client_id=client["client_id"])
    assert response.status_code == 200, response.text
    return {**response.json(), "client_id": client["client_id"]}


# -- metadata and registration ----------------------------------------------------------------------------------


async def test_metadata_documents(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        document = (await http.get(auth.issuer + path)).json()
        assert document["issuer"] == auth.issuer == f"http://127.0.0.1:{auth.port}"  # exact, no trailing slash
        assert document["authorization_endpoint"] == f"{auth.issuer}/authorize"
        assert document["token_endpoint"] == f"{auth.issuer}/token"
        assert document["registration_endpoint"] == f"{auth.issuer}/register"
        assert document["jwks_uri"] == auth.jwks_url
        assert document["response_types_supported"] == ["code"]
        assert document["code_challenge_methods_supported"] == ["S256"]
        assert {"authorization_code", "refresh_token"} <= set(document["grant_types_supported"])
        assert "none" in document["token_endpoint_auth_methods_supported"]
        assert str(OAuthMetadata.model_validate(document).issuer) == auth.issuer  # the SDK client reads it so


async def test_dynamic_client_registration(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    public = await register(http, auth, scope="ice:read")
    assert public["token_endpoint_auth_method"] == "none" and "client_secret" not in public
    assert public["redirect_uris"] == [REDIRECT] and public["client_name"] == "t"
    OAuthClientInformationFull.model_validate(public)
    confidential = await http.post(auth.registration_endpoint, json={"redirect_uris": [REDIRECT]})
    assert confidential.status_code == 201
    assert confidential.json()["token_endpoint_auth_method"] == "client_secret_basic"  # RFC 7591's default
    assert confidential.json()["client_secret"] and confidential.json()["client_secret_expires_at"] == 0
    assert set(auth.clients) == {public["client_id"], confidential.json()["client_id"]}
    bad: dict[str, Any]
    for bad in ({}, {"redirect_uris": []}, {"redirect_uris": ["/relative"]}, {"redirect_uris": ["http://h/#f"]}):
        refused = await http.post(auth.registration_endpoint, json=bad)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_redirect_uri"


# -- the code flow by plain HTTP ------------------------------------------------------------------------------------


async def test_code_flow_with_pkce_issues_a_jwt_for_the_resource(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    client = await register(http, auth)
    verifier, challenge = pkce_pair()
    answer = await authorize(http, auth, client["client_id"], challenge=challenge,
                             scope="ice:read ice:run ice:admin other")
    assert answer["state"] == "st-1" and answer["iss"] == auth.issuer and answer["code"]
    response = await exchange(http, auth, code=answer["code"], code_verifier=verifier, client_id=client["client_id"])
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    tokens = response.json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 300 and tokens["refresh_token"]
    assert tokens["scope"] == "ice:read ice:run"  # requested ∩ grantable
    header = jwt.get_unverified_header(tokens["access_token"])
    assert header == {"alg": "RS256", "typ": "at+jwt", "kid": auth.kid}
    claims = verify(tokens["access_token"], await fetch_keys(http, auth), auth)
    assert claims["aud"] == RESOURCE and claims["iss"] == auth.issuer and claims["sub"] == "alice"
    assert claims["scope"] == "ice:read ice:run" and claims["client_id"] == client["client_id"]
    assert claims["exp"] - claims["iat"] == 300 and claims["jti"]
    assert auth.issued == [claims]
    replay = await exchange(http, auth, code=answer["code"], code_verifier=verifier, client_id=client["client_id"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"  # a code works once


async def test_a_wrong_verifier_or_client_is_refused(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    client = await register(http, auth)
    other = await register(http, auth)
    verifier, challenge = pkce_pair()
    code = (await authorize(http, auth, client["client_id"], challenge=challenge))["code"]
    wrong = await exchange(http, auth, code=code, code_verifier=pkce_pair()[0], client_id=client["client_id"])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    code = (await authorize(http, auth, client["client_id"], challenge=challenge))["code"]
    missing = await exchange(http, auth, code=code, client_id=client["client_id"])
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_grant"
    code = (await authorize(http, auth, client["client_id"], challenge=challenge))["code"]
    stolen = await exchange(http, auth, code=code, code_verifier=verifier, client_id=other["client_id"])
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    unknown = await exchange(http, auth, code=code, code_verifier=verifier, client_id="nobody")
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"
    assert auth.issued == []


async def test_authorize_refusals(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    client_id = (await register(http, auth))["client_id"]
    _, challenge = pkce_pair()
    base = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
            "code_challenge_method": "S256", "state": "s"}
    for params in ({**base, "client_id": "nobody"}, {**base, "redirect_uri": "http://127.0.0.1:9/elsewhere"}):
        response = await http.get(f"{auth.authorization_endpoint}?{urlencode(params)}")
        assert response.status_code == 400  # never redirected to an unverified URI
    no_pkce = await authorize(http, auth, client_id, challenge="", code_challenge_method="plain")
    assert no_pkce["error"] == "invalid_request" and no_pkce["state"] == "st-1" and "code" not in no_pkce
    fragment = await authorize(http, auth, client_id, challenge=challenge, resource="https://h/mcp#x")
    assert fragment["error"] == "invalid_target"
    auth.deny = True
    assert (await authorize(http, auth, client_id, challenge=challenge))["error"] == "access_denied"


async def test_confidential_client_authenticates(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    client = (await http.post(auth.registration_endpoint, json={"redirect_uris": [REDIRECT]})).json()
    verifier, challenge = pkce_pair()
    code = (await authorize(http, auth, client["client_id"], challenge=challenge))["code"]
    no_secret = await exchange(http, auth, code=code, code_verifier=verifier, client_id=client["client_id"])
    assert no_secret.status_code == 401
    code = (await authorize(http, auth, client["client_id"], challenge=challenge))["code"]
    basic = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
    response = await http.post(auth.token_endpoint, headers={"Authorization": f"Basic {basic}"}, data={
        "grant_type": "authorization_code", "code": code, "code_verifier": verifier, "redirect_uri": REDIRECT})
    assert response.status_code == 200, response.text


async def test_resource_binding_and_default_audience(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    client_id = (await register(http, auth))["client_id"]
    verifier, challenge = pkce_pair()
    code = (await authorize(http, auth, client_id, challenge=challenge))["code"]
    other = await exchange(http, auth, code=code, code_verifier=verifier, client_id=client_id,
                           resource="https://other.example/mcp")
    assert other.status_code == 400 and other.json()["error"] == "invalid_target"
    code = (await authorize(http, auth, client_id, challenge=challenge, resource=None))["code"]
    none = await exchange(http, auth, code=code, code_verifier=verifier, client_id=client_id)
    assert none.status_code == 400 and none.json()["error"] == "invalid_target"  # no resource, no default
    auth.resource = "https://default.example/mcp"
    code = (await authorize(http, auth, client_id, challenge=challenge, resource=None, scope=None))["code"]
    default = await exchange(http, auth, code=code, code_verifier=verifier, client_id=client_id)
    claims = jwt.decode(default.json()["access_token"], options={"verify_signature": False})
    assert claims["aud"] == "https://default.example/mcp" and claims["scope"] == "ice:read"  # default scopes


# -- refresh, subjects, keys, outage ----------------------------------------------------------------------------


async def test_refresh_rotates_and_keeps_the_grant(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    first = await code_flow(http, auth, scope="ice:read ice:run")
    auth.subject = "bob"  # the next consent is bob's; alice's grant stays alice's
    refresh = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"], "client_id": first["client_id"]}
    second = await http.post(auth.token_endpoint, data=refresh)
    assert second.status_code == 200, second.text
    keys = await fetch_keys(http, auth)
    claims = verify(second.json()["access_token"], keys, auth)
    assert claims["sub"] == "alice" and claims["aud"] == RESOURCE and claims["scope"] == "ice:read ice:run"
    assert second.json()["refresh_token"] != first["refresh_token"]
    reused = await http.post(auth.token_endpoint, data=refresh)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"  # rotated
    narrower = await http.post(auth.token_endpoint, data={**refresh, "refresh_token": second.json()["refresh_token"],
                                                          "scope": "ice:read"})
    assert verify(narrower.json()["access_token"], keys, auth)["scope"] == "ice:read"
    wider = await http.post(auth.token_endpoint, data={**refresh, "refresh_token": narrower.json()["refresh_token"],
                                                       "scope": "ice:read ice:admin"})
    assert wider.status_code == 400 and wider.json()["error"] == "invalid_scope"
    bobs = await code_flow(http, auth)
    assert verify(bobs["access_token"], keys, auth)["sub"] == "bob"


async def test_rotate_key_and_jwks_fetches(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    assert auth.jwks_fetches == 0
    old_token, old_kid = auth.token(audience=RESOURCE), auth.kid
    keys = await fetch_keys(http, auth)
    assert [key.key_id for key in keys.keys] == [old_kid] and auth.jwks_fetches == 1
    new_kid = auth.rotate_key()
    assert new_kid != old_kid and auth.kid == new_kid
    new_token = auth.token(audience=RESOURCE)
    assert jwt.get_unverified_header(new_token)["kid"] == new_kid
    with pytest.raises(KeyError):
        verify(new_token, keys, auth)  # the cached set does not know the new kid: a refetch is needed
    keys = await fetch_keys(http, auth)
    assert [key.key_id for key in keys.keys] == [old_kid, new_kid] and auth.jwks_fetches == 2
    assert verify(new_token, keys, auth)["sub"] == "alice"
    assert verify(old_token, keys, auth)["sub"] == "alice"  # the old key stays published
    auth.rotate_key(retire_old=True)
    assert len((await fetch_keys(http, auth)).keys) == 1 and auth.jwks_fetches == 3


async def test_down_answers_503(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    auth.down = True
    for url in (auth.jwks_url, auth.metadata_url, f"{auth.issuer}/.well-known/openid-configuration"):
        response = await http.get(url)
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert auth.jwks_fetches == 0 and auth.requests["/jwks"] == 1
    auth.down = False
    assert (await http.get(auth.jwks_url)).status_code == 200 and auth.jwks_fetches == 1
    with pytest.raises(httpx2.ConnectError):
        await http.get(unused_url() + "/jwks")  # a gone AS: connection refused


# -- minted tokens, good and bad ----------------------------------------------------------------------------------


async def test_minted_token_and_overrides(auth: AuthServer, http: httpx2.AsyncClient) -> None:
    keys = await fetch_keys(http, auth)
    claims = verify(auth.token(sub="carol", scopes=("ice:read", "ice:run"), audience=RESOURCE, azp="x"), keys, auth)
    assert claims["sub"] == "carol" and claims["scope"] == "ice:read ice:run" and claims["azp"] == "x"
    assert "sub" not in verify(auth.token(sub=DROP, audience=RESOURCE), keys, auth)  # client-credentials shape
    both = verify(auth.token(audience=[RESOURCE, "api://ice"]), keys, auth, audience="api://ice")
    assert both["aud"] == [RESOURCE, "api://ice"]
    with pytest.raises(ValueError, match="no audience"):
        auth.token()  # no audience given and no AuthServer(resource=)
    entra = verify(auth.forge(audience=RESOURCE, drop=("scope",), scp=["ice:read"]), keys, auth)
    assert "scope" not in entra and entra["scp"] == ["ice:read"]


RELAXED: dict[str, tuple[type[Exception], dict[str, Any]]] = {
    # kind: (what a strict verifier raises, the one check whose removal makes the token pass)
    "foreign_key": (jwt.InvalidSignatureError, {"verify_signature": False}),
    "expired": (jwt.ExpiredSignatureError, {"verify_exp": False}),
    "not_yet_valid": (jwt.ImmatureSignatureError, {"verify_nbf": False}),
    "no_exp": (jwt.MissingRequiredClaimError, {"require": ["iss", "aud"]}),
    "wrong_issuer": (jwt.InvalidIssuerError, {"verify_iss": False}),
    "other_audience": (jwt.InvalidAudienceError, {"verify_aud": False}),
    "no_aud": (jwt.MissingRequiredClaimError, {"require": ["exp", "iss"], "verify_aud": False}),
    "alg_none": (jwt.InvalidAlgorithmError, {}),
    "hs256_public_pem": (jwt.InvalidAlgorithmError, {}),
}


@pytest.mark.parametrize("kind", BAD_TOKENS)
async def test_bad_tokens_are_what_they_say(auth: AuthServer, http: httpx2.AsyncClient, kind: str) -> None:
    keys = await fetch_keys(http, auth)
    token = auth.bad_token(kind, audience=RESOURCE, scopes=("ice:read", "ice:run"))
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == "alice" and claims["scope"] == "ice:read ice:run"
    if kind == "unknown_kid":
        assert header["kid"] not in {key.key_id for key in keys.keys} and header["alg"] == "RS256"
        with pytest.raises(KeyError):
            verify(token, keys, auth)
        assert header["kid"] == auth.foreign_key.kid
        only_foreign = jwt.PyJWKSet.from_dict({"keys": [auth.foreign_key.jwk()]})
        assert verify(token, only_foreign, auth)["sub"] == "alice"  # the kid (and its key) is the only defect
        return
    error, relaxed = RELAXED[kind]
    with pytest.raises(error):
        verify(token, keys, auth)
    if kind == "alg_none":
        assert header["alg"] == "none" and token.endswith(".")
    elif kind == "hs256_public_pem":
        assert header["alg"] == "HS256" and header["kid"] == auth.kid
        signing_input, _, signature = token.rpartition(".")
        expected = hmac.new(auth.public_pem(), signing_input.encode(), hashlib.sha256).digest()
        assert base64.urlsafe_b64decode(signature + "==") == expected  # the confusion attack, really keyed so
    else:
        assert header == {"alg": "RS256", "typ": "at+jwt", "kid": auth.kid}
        assert verify(token, keys, auth, **relaxed)["sub"] == "alice"  # the one defect is the only one
    if kind == "no_exp":
        assert "exp" not in claims
    if kind == "no_aud":
        assert "aud" not in claims
    if kind == "wrong_issuer":
        assert claims["iss"] != auth.issuer
    if kind == "not_yet_valid":
        assert claims["nbf"] > time.time() + 500
    if kind == "expired":
        assert claims["exp"] < time.time() - 500


# -- the SDK's OAuthClientProvider, headless ----------------------------------------------------------------------


def protected_resource(auth: AuthServer, seen: list[dict[str, Any]]) -> Any:
    """A tiny resource server: `/mcp` needs `ice:read`, `/mcp?need=ice:admin` needs admin; RFC 9728 metadata."""

    def make(base: str) -> Starlette:
        resource = f"{base}/mcp"
        metadata_url = f"{base}/.well-known/oauth-protected-resource/mcp"

        async def prm(request: Request) -> Response:
            return JSONResponse({"resource": resource, "authorization_servers": [auth.issuer],
                                 "scopes_supported": ["ice:read", "ice:run", "ice:admin"]})

        async def mcp(request: Request) -> Response:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token:
                return Response(status_code=401, headers={
                    "WWW-Authenticate": f'Bearer resource_metadata="{metadata_url}", scope="ice:read ice:run"'})
            try:
                keys = jwt.PyJWKSet.from_dict(auth.jwks())
                claims = verify(token, keys, auth, audience=resource)
            except (jwt.PyJWTError, KeyError):
                return Response(status_code=401, headers={
                    "WWW-Authenticate": f'Bearer error="invalid_token", resource_metadata="{metadata_url}", '
                                        'scope="ice:read ice:run"'})
            need = request.query_params.get("need", "ice:read")
            if need not in claims["scope"].split():
                return Response(status_code=403, headers={
                    "WWW-Authenticate": f'Bearer error="insufficient_scope", scope="ice:read {need}", '
                                        f'resource_metadata="{metadata_url}"'})
            seen.append(claims)
            return JSONResponse({"sub": claims["sub"], "scope": claims["scope"]})

        return Starlette(routes=[Route("/.well-known/oauth-protected-resource/mcp", prm),
                                 Route("/mcp", mcp, methods=["GET", "POST"])])

    return make


async def test_sdk_client_provider_completes_the_flow_headlessly(auth: AuthServer) -> None:
    seen: list[dict[str, Any]] = []
    auth.grantable = {"ice:read", "ice:run", "ice:admin"}
    async with serve_app(protected_resource(auth, seen)) as base:
        browser = HeadlessBrowser()
        provider = oauth_provider(f"{base}/mcp", browser=browser)
        async with oauth_http_client(provider) as client:
            first = await client.get(f"{base}/mcp")
            assert first.status_code == 200, first.text
            assert first.json() == {"sub": "alice", "scope": "ice:read ice:run"}
            asked = browser.authorized[0]
            assert asked["scope"] == "ice:read ice:run" and asked["resource"] == f"{base}/mcp"
            assert asked["code_challenge_method"] == "S256" and browser.answers[0]["iss"] == auth.issuer
            assert seen[0]["aud"] == f"{base}/mcp" and seen[0]["iss"] == auth.issuer
            assert len(auth.clients) == 1  # DCR happened once

            assert (await client.get(f"{base}/mcp")).status_code == 200 and len(browser.authorized) == 1  # reused

            stepped = await client.get(f"{base}/mcp", params={"need": "ice:admin"})  # 403 -> step-up -> retry
            assert stepped.status_code == 200, stepped.text
            assert browser.authorized[1]["scope"] == "ice:read ice:run ice:admin"  # SEP-2350 union
            assert len(auth.clients) == 1

            provider.context.token_expiry_time = time.time() - 1  # expired: the SDK refreshes, no new consent
            assert (await client.get(f"{base}/mcp")).status_code == 200
            assert len(browser.authorized) == 2 and len(auth.issued) == 3
            stored = provider.context.storage.tokens.access_token  # type: ignore[attr-defined]
            assert jwt.decode(stored, options={"verify_signature": False}) == auth.issued[-1]


async def test_sdk_client_provider_when_scope_is_not_granted_or_consent_refused(auth: AuthServer) -> None:
    seen: list[dict[str, Any]] = []
    async with serve_app(protected_resource(auth, seen)) as base:
        async with oauth_http_client(oauth_provider(f"{base}/mcp")) as client:
            assert (await client.get(f"{base}/mcp")).status_code == 200
            refused = await client.get(f"{base}/mcp", params={"need": "ice:admin"})  # admin is not grantable
            assert refused.status_code == 403 and 'error="insufficient_scope"' in refused.headers["www-authenticate"]
            assert auth.issued[-1]["scope"] == "ice:read ice:run"
        auth.deny = True
        async with oauth_http_client(oauth_provider(f"{base}/mcp")) as client:
            with pytest.raises(AuthorizationRefused, match="access_denied"):
                await client.get(f"{base}/mcp")


# -- the whole chain: mcp.Client + the SDK provider + an SDK MCP server verifying our JWTs -----------------------


class JwksVerifier:
    """A minimal `TokenVerifier` for the SDK server, against the AuthServer's keys."""

    def __init__(self, auth: AuthServer, resource: str) -> None:
        self.auth, self.resource = auth, resource

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = verify(token, jwt.PyJWKSet.from_dict(self.auth.jwks()), self.auth, audience=self.resource)
        except (jwt.PyJWTError, KeyError):
            return None
        return AccessToken(token=token, client_id=claims["client_id"], scopes=claims["scope"].split(),
                           expires_at=claims["exp"], resource=claims["aud"], subject=claims.get("sub"), claims=claims)


async def test_mcp_client_over_streamable_http_with_the_provider(auth: AuthServer) -> None:
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer

    def make(base: str) -> Any:
        server = MCPServer(
            "authtest",
            token_verifier=JwksVerifier(auth, f"{base}/mcp"),
            auth=AuthSettings(issuer_url=auth.issuer, resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
                              required_scopes=["ice:read"], validate_token_resource=True),
        )

        @server.tool()
        def whoami() -> str:
            """The subject of the caller's token."""
            token = get_access_token()
            return token.subject if token and token.subject else "nobody"

        return server.streamable_http_app()

    async with serve_app(make, lifespan="on") as base:
        browser = HeadlessBrowser()
        async with mcp_client(f"{base}/mcp", oauth_provider(f"{base}/mcp", browser=browser)) as client:
            result = await client.call_tool("whoami", {})
            assert result.content[0].text == "alice"  # type: ignore[union-attr]
        assert browser.authorized[0]["resource"] == f"{base}/mcp" and auth.issued[0]["aud"] == f"{base}/mcp"
