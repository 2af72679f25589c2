"""The token rules of `--auth oauth` on their own: claim shapes of real issuers (Keycloak, Auth0, Entra), the
scope hierarchy, RFC 8707 canonical resources, configuration from the environment, opaque tokens checked by
RFC 7662 introspection on loopback, and the issuer's keys found from its metadata."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from authserver import AuthServer, serve_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ice_mcp.server.auth.resource_server import (
    AuthUnavailable,
    InvalidToken,
    OAuthConfig,
    TokenVerifier,
    canonical,
    claims_principal,
    granted,
)

ISSUER = "https://id.example.com/realms/acme"


def test_claim_shapes_of_keycloak_auth0_and_entra() -> None:
    keycloak = claims_principal({"iss": ISSUER, "sub": "f1c2", "azp": "claude", "scope": "openid ice:run profile",
                           "exp": 2_000_000_000})
    assert keycloak.id == f"oauth:{ISSUER}#f1c2" and keycloak.client_id == "claude"
    assert keycloak.scopes == {"ice:read", "ice:run"}  # ice:run implies ice:read; other scopes ignored
    auth0 = claims_principal({"iss": "https://acme.eu.auth0.com/", "sub": "auth0|65a", "client_id": "abc",
                        "scope": "ice:read"})
    assert auth0.id == "oauth:https://acme.eu.auth0.com/#auth0|65a" and auth0.scopes == {"ice:read"}
    entra = claims_principal({"iss": "https://login.microsoftonline.com/tid/v2.0", "sub": "AAAA", "azp": "app",
                        "scp": ["ice:admin"]})
    assert entra.scopes == {"ice:read", "ice:run", "ice:admin"}
    machine = claims_principal({"iss": ISSUER, "client_id": "nightly-job", "scope": "ice:run"})  # client credentials
    assert machine.id == f"oauth:{ISSUER}#client:nightly-job" and machine.subject is None


def test_scopes_and_resources() -> None:
    assert granted(["ice:admin"]) == {"ice:read", "ice:run", "ice:admin"}
    assert granted(["openid", "offline_access"]) == frozenset()
    assert canonical("HTTPS://Ice.Example.COM/mcp/") == "https://ice.example.com/mcp"
    assert canonical("https://ice.example.com/mcp#frag") == "https://ice.example.com/mcp"
    config = OAuthConfig(resource="https://ice.example.com/mcp", issuer=ISSUER)
    assert config.metadata_path == "/.well-known/oauth-protected-resource/mcp"
    assert config.metadata_url() == "https://ice.example.com/.well-known/oauth-protected-resource/mcp"


def test_configuration_from_the_environment() -> None:
    with pytest.raises(ValueError, match="ICE_MCP_RESOURCE and ICE_MCP_ISSUER"):
        OAuthConfig.from_env({})
    config = OAuthConfig.from_env({"ICE_MCP_RESOURCE": "https://Ice.example.com/mcp/", "ICE_MCP_ISSUER": ISSUER,
                                   "ICE_MCP_AUDIENCES": "api://ice, 0000-1111", "ICE_MCP_JWKS_URL": "https://k/j"})
    assert config.resource == "https://ice.example.com/mcp" and config.issuer == ISSUER
    assert config.audiences == ("api://ice", "0000-1111") and config.jwks_url == "https://k/j"


async def test_the_keys_are_found_from_the_issuers_metadata_and_extra_audiences_pass() -> None:
    async with AuthServer() as auth:
        verifier = TokenVerifier(OAuthConfig(resource="http://127.0.0.1:9/mcp", issuer=auth.issuer,
                                             audiences=("api://ice",)))
        found = await verifier.verify(auth.token(sub="erin", scopes=("ice:run",), audience="api://ice"))
        assert found.subject == "erin" and auth.jwks_fetches == 1  # no ICE_MCP_JWKS_URL: from RFC 8414 metadata
        with pytest.raises(InvalidToken):
            await verifier.verify(auth.token(sub="erin", audience="api://other"))
        wrong = TokenVerifier(OAuthConfig(resource="http://127.0.0.1:9/mcp", issuer=auth.issuer + "/"))
        with pytest.raises(AuthUnavailable):  # the metadata names another issuer (exact comparison)
            await wrong.verify(auth.token(sub="erin", audience="http://127.0.0.1:9/mcp"))


async def test_opaque_tokens_are_checked_by_introspection() -> None:
    resource = "http://127.0.0.1:9/mcp"
    answers: dict[str, dict[str, Any]] = {
        "good": {"active": True, "sub": "dana", "client_id": "c1", "scope": "ice:run", "aud": resource,
                 "iss": ISSUER, "exp": 4_000_000_000},
        "elsewhere": {"active": True, "sub": "dana", "scope": "ice:run", "aud": "https://other/mcp"},
        "revoked": {"active": False},
    }
    asked: list[tuple[str, str]] = []

    async def introspect(request: Request) -> JSONResponse:
        form = await request.form()
        asked.append((str(form["token"]), request.headers.get("authorization", "")))
        return JSONResponse(answers.get(str(form["token"]), {"active": False}))

    app = Starlette(routes=[Route("/introspect", introspect, methods=["POST"])])
    async with serve_app(lambda base: app) as base:
        config = OAuthConfig(resource=resource, issuer=ISSUER, introspection_url=f"{base}/introspect",
                             client_id="ice", client_secret="s3cret")
        verifier = TokenVerifier(config)
        good = await verifier.verify("good")
        assert good.id == f"oauth:{ISSUER}#dana" and good.scopes == {"ice:read", "ice:run"}
        await verifier.verify("good")  # cached: asked once
        for token in ("elsewhere", "revoked"):
            with pytest.raises(InvalidToken):
                await verifier.verify(token)
    basic = "Basic " + base64.b64encode(b"ice:s3cret").decode()
    assert asked == [("good", basic), ("elsewhere", basic), ("revoked", basic)]
    with pytest.raises(AuthUnavailable):  # the endpoint is gone now
        await TokenVerifier(config).verify("good")
