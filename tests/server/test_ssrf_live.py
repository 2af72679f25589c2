"""SSRF against a real server: `tool_http_request` refuses every non-public target and redirect hop,
as a readable isError result, while /healthz keeps answering; `--allow-net` lets them through.

The server's outbound requests all go to a recording proxy on 127.0.0.1 that plays every origin
(`ICE_MCP_EGRESS_PROXY`): a refused case must leave its record empty, and nothing ever leaves the host.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
import pytest
from live import healthz_watch, live_server
from mcp_helpers import http_client

from tests.core.egress_proxy import ALLOW_ALL, HOSTILE, Hostile, RecordingProxy, recording_proxy

ALLOWED_ORIGIN = "127.0.0.2"  # a loopback origin allowed by address: it plays the server that redirects
REDIRECT_DELAY = 0.3  # the redirecting origin answers slowly, so the hostile call is in flight for a while


@pytest.fixture(scope="module")
def proxy() -> Iterator[RecordingProxy]:
    with recording_proxy() as running:
        running.redirect_delay = REDIRECT_DELAY
        yield running


def serve(folder: Path, proxy: RecordingProxy, allow: tuple[str, ...]) -> Any:
    flags = [arg for entry in allow for arg in ("--allow-net", entry)]
    return live_server(folder, *flags, env={"ICE_MCP_EGRESS_PROXY": proxy.url, "ICE_MCP_ALLOW_NET": ""})


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, proxy: RecordingProxy) -> Iterator[str]:
    """A server with the default guard (only the redirecting origin allowed)."""
    with serve(tmp_path_factory.mktemp("guarded"), proxy, (ALLOWED_ORIGIN,)) as url:
        yield url


@pytest.fixture(scope="module")
def allowing(tmp_path_factory: pytest.TempPathFactory, proxy: RecordingProxy) -> Iterator[str]:
    """A server whose operator allowed every hostile target with --allow-net."""
    with serve(tmp_path_factory.mktemp("allowing"), proxy, (ALLOWED_ORIGIN, *ALLOW_ALL)) as url:
        yield url


async def fetch(server: str, target: str) -> types.CallToolResult:
    async with http_client(server) as client:
        return await client.call_tool("tool_http_request", {"url": target})


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def same_address(text: str | None, case: Hostile) -> bool:
    return ipaddress.ip_address(text or "") in {ipaddress.ip_address(address) for address in case.addresses}


def assert_refused(result: types.CallToolResult, case: Hostile) -> None:
    assert result.is_error is True
    error = (result.structured_content or {})["error"]
    assert error["code"] == "node_failed", error
    cause = error["details"]["error"]
    assert cause["code"] == "egress_refused" and cause["details"]["reason"] == case.reason
    assert same_address(cause["details"]["address"], case)
    text = text_of(result)
    assert "refused to connect" in text and "--allow-net" in text and "Traceback" not in text


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
async def test_hostile_target_is_refused(guarded: str, proxy: RecordingProxy, case: Hostile) -> None:
    proxy.seen.clear()
    results: list[types.CallToolResult] = []
    async with http_client(guarded) as client:
        with healthz_watch(guarded) as watch:
            while len(watch.latencies) < 3:  # a refusal is instant: keep hostile calls coming meanwhile
                results.append(await client.call_tool("tool_http_request", {"url": case.url}))
    for result in results:
        assert_refused(result, case)
    assert proxy.seen == []  # nothing left for the target
    watch.assert_responsive()


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
async def test_redirect_to_hostile_target_is_refused_at_the_hop(
        guarded: str, proxy: RecordingProxy, case: Hostile) -> None:
    proxy.seen.clear()
    start = proxy.redirect(proxy.origin(ALLOWED_ORIGIN), case.url)
    with healthz_watch(guarded) as watch:
        result = await fetch(guarded, start)
    assert_refused(result, case)
    assert [seen.target for seen in proxy.seen] == [start]  # the allowed first hop only
    watch.assert_responsive()
    assert len(watch.latencies) >= 5  # probes kept coming while the origin took its time


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
async def test_allowed_with_allow_net(allowing: str, proxy: RecordingProxy, case: Hostile) -> None:
    proxy.seen.clear()
    result = await fetch(allowing, case.url)
    assert result.is_error is False, text_of(result)
    [seen] = proxy.seen
    assert same_address(urlsplit(seen.target).hostname, case)  # sent to the address that was checked
    output = (result.structured_content or {})["outputs"]["result"]
    assert output["status"] == 200 and output["json"]["proxied"] == seen.target


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
async def test_redirect_allowed_with_allow_net(allowing: str, proxy: RecordingProxy, case: Hostile) -> None:
    proxy.seen.clear()
    result = await fetch(allowing, proxy.redirect(proxy.origin(ALLOWED_ORIGIN), case.url))
    assert result.is_error is False, text_of(result)
    assert len(proxy.seen) == 2 and same_address(urlsplit(proxy.seen[1].target).hostname, case)
