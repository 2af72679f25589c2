"""A headless OAuth client for tests: the SDK's own `OAuthClientProvider`, with a "browser" that needs no human.

The provider is the `mcp` SDK's (`mcp.client.auth.OAuthClientProvider`, an `httpx2.Auth`), so a test exercises the
real client side: 401 -> protected resource metadata (RFC 9728) -> authorization server metadata (RFC 8414) ->
dynamic client registration (RFC 7591) -> authorization code + PKCE with `resource` (RFC 8707) -> token, and on
`403 error="insufficient_scope"` a step-up asking for the union of scopes (SEP-2350), refreshing when the token
expires. Only the browser is replaced: `HeadlessBrowser.redirect` GETs the authorize URL (no redirect followed),
reads `code`, `state` and `iss` from the 302 `Location`, and `HeadlessBrowser.callback` hands them to the SDK.

Use from another test (this folder is put on `sys.path` by `tests/auth/conftest.py`; from another folder, insert
`tests/auth` yourself, or add it in that folder's conftest):

    from authserver import AuthServer
    from oauth_client import HeadlessBrowser, mcp_client, oauth_provider

    async with AuthServer(subject="alice") as auth:
        ...  # start the resource server with auth.issuer as its authorization server
        browser = HeadlessBrowser()
        provider = oauth_provider(f"{base}/mcp", browser=browser)
        async with mcp_client(f"{base}/mcp", provider) as client:  # an `mcp.Client` over streamable HTTP
            await client.list_tools()
        assert "ice:run" in browser.authorized[-1]["scope"]  # what the SDK asked for
        assert auth.issued[-1]["sub"] == "alice"  # what the AS issued

`mcp.Client` has no `auth=` parameter: the provider goes on the httpx2 client the transport uses,
`streamable_http_client(url, http_client=create_mcp_http_client(auth=provider))`, which `mcp_client` builds. For
plain HTTP requests use `oauth_http_client(provider)` (an `httpx2.AsyncClient`). Tokens and the registration live
in `MemoryTokenStorage` (`provider.context.storage`); pass the same storage to a second provider to resume.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the browser stops at the AS's 302


class AuthorizationRefused(OAuthFlowError):
    """The authorization server redirected back with an `error` (e.g. `access_denied`) instead of a code."""

    def __init__(self, error: str, description: str | None) -> None:
        super().__init__(f"authorization refused: {error}" + (f" ({description})" if description else ""))
        self.error, self.description = error, description


class MemoryTokenStorage:
    """The SDK's `TokenStorage` protocol, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessBrowser:
    """The SDK's `redirect_handler` and `callback_handler`: follows the authorize URL to its 302, no browser.

    `authorized` keeps the query of every authorize URL visited (what the SDK asked for: scope, resource...),
    `answers` the query of every redirect back (code, state, iss or error)."""

    def __init__(self) -> None:
        self.authorized: list[dict[str, str]] = []
        self.answers: list[dict[str, str]] = []
        self._pending: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.authorized.append(dict(parse_qsl(urlsplit(authorization_url).query)))
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.get(authorization_url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (302, 303) or not location:
            raise OAuthFlowError(f"authorize answered {response.status_code}, not a redirect: {response.text[:300]}")
        answer = dict(parse_qsl(urlsplit(location).query))
        self.answers.append(answer)
        if "error" in answer:
            raise AuthorizationRefused(answer["error"], answer.get("error_description"))
        self._pending = AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        result, self._pending = self._pending, None
        if result is None:
            raise OAuthFlowError("callback without a completed authorization redirect")
        return result


def oauth_provider(
    server_url: str,
    scopes: str | None = None,
    *,
    browser: HeadlessBrowser | None = None,
    storage: MemoryTokenStorage | None = None,
    redirect_uri: str = REDIRECT_URI,
    token_endpoint_auth_method: str = "none",
    client_name: str = "ice-mcp tests",
    **provider_kwargs: Any,
) -> OAuthClientProvider:
    """The SDK's `OAuthClientProvider` for the MCP endpoint `server_url`, completing authorization headlessly.

    `scopes` only seeds the DCR request: on every 401/403 the SDK replaces it with the challenge's `scope` (else
    the PRM's `scopes_supported`). A public client (`"none"`) by default; `provider_kwargs` go to the provider
    (e.g. `client_metadata_url=`, `validate_resource_url=`)."""
    browser = browser or HeadlessBrowser()
    metadata = OAuthClientMetadata.model_validate({
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": token_endpoint_auth_method,
        "scope": scopes,
    })
    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=storage or MemoryTokenStorage(),
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
        **provider_kwargs,
    )


def oauth_http_client(provider: OAuthClientProvider, **headers: str) -> httpx2.AsyncClient:
    """An `httpx2.AsyncClient` with the MCP transports' timeouts, authenticating through `provider`."""
    return create_mcp_http_client(headers=headers or None, auth=provider)


@contextlib.asynccontextmanager
async def mcp_client(server_url: str, provider: OAuthClientProvider, **client_kwargs: Any) -> AsyncIterator[Client]:
    """An entered `mcp.Client` over streamable HTTP to `server_url` (the MCP endpoint, e.g. `.../mcp`), authorized
    by `provider`; `client_kwargs` go to `Client` (e.g. `mode=`). The httpx2 client is closed on exit (the
    transport leaves a client it was given open)."""
    async with oauth_http_client(provider) as http:
        transport = streamable_http_client(server_url, http_client=http)
        async with Client(transport, **client_kwargs) as client:
            yield client
