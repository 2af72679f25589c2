"""The egress guard: non-public addresses refused after resolution and at every redirect hop, unless allowed.

Outbound requests go to a recording proxy on 127.0.0.1 (it plays every origin server), or to loopback
servers these tests start: a refused case must leave the proxy's record empty.
"""

from __future__ import annotations

import ipaddress
import json
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
import trustme

from ice_mcp import Orchestrator, Settings
from ice_mcp.cli import build_parser
from ice_mcp.tools import egress

from .egress_proxy import ALLOW_ALL, HOSTILE, Hostile, RecordingProxy, recording_proxy
from .helpers import blueprint, tool

ALLOWED_ORIGIN = "127.0.0.2"  # loopback, allowed by address: plays the server that redirects


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    with recording_proxy() as running:
        yield running


@pytest.fixture
def proxied(settings: Settings, proxy: RecordingProxy) -> Settings:
    settings.egress_proxy = proxy.url
    return settings


def same_address(text: str | None, addresses: tuple[str, ...]) -> bool:
    return ipaddress.ip_address(text or "") in {ipaddress.ip_address(address) for address in addresses}


async def fetch(orc: Orchestrator, url: str, **args: Any) -> Any:
    record = await orc.run(blueprint(tool("t", "http_request", {"url": url, **args}, retries=2, backoff_seconds=0)))
    return record.nodes["t"]


# -- the address check ---------------------------------------------------------


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("10.1.2.3", "private"), ("172.16.0.1", "private"),
    ("172.31.255.255", "private"), ("192.168.0.1", "private"), ("169.254.169.254", "link-local"),
    ("0.0.0.0", "unspecified"), ("0.1.2.3", "private"), ("100.64.0.1", "shared (carrier-grade NAT)"),
    ("224.0.0.1", "multicast"), ("240.0.0.1", "private"), ("255.255.255.255", "private"),
    ("192.0.2.1", "private"), ("198.18.0.1", "private"),
    ("::", "unspecified"), ("::1", "loopback"), ("fc00::1", "private"), ("fd12:3456::1", "private"),
    ("fe80::1", "link-local"), ("ff02::1", "multicast"), ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.0.0.1", "private"), ("64:ff9b::a9fe:a9fe", "link-local"), ("2002:7f00:1::", "loopback"),
    ("2001:db8::1", "private"),
])
def test_non_public_addresses_are_blocked(address: str, reason: str) -> None:
    assert egress.blocked_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700::1111",
                                     "64:ff9b::808:808", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert egress.blocked_reason(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(("spelling", "meaning"), [
    ("2130706433", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"), ("0x7f000001", "127.0.0.1"),
    ("127.1", "127.0.0.1"), ("0251.0376.0251.0376", "169.254.169.254"), ("10.1", "10.0.0.1"),
    ("example.com", "example.com"), ("cafe", "cafe"), ("1e100.net", "1e100.net"), ("::1", "::1"),
])
def test_legacy_ipv4_spellings_mean_what_the_os_resolver_means(spelling: str, meaning: str) -> None:
    assert egress.canonical_host(spelling) == meaning


def test_canonical_url_rewrites_only_the_host() -> None:
    assert egress.canonical_url("http://u:p@0177.0.0.1:8080/a?b=0177.0.0.1#c") == "http://u:p@127.0.0.1:8080/a?b=0177.0.0.1#c"
    assert egress.canonical_url("https://example.com/0177.0.0.1") == "https://example.com/0177.0.0.1"
    assert egress.canonical_url("http://[::1]:80/") == "http://[::1]:80/"
    assert egress.canonical_url("/relative/path") == "/relative/path"


def test_allow_list_entries() -> None:
    allow = egress.AllowList.parse(["10.0.0.0/8", " Internal.Example. ", "::1", "192.168.1.7"])
    assert allow.hosts == {"internal.example"}
    assert allow.allows("x", ipaddress.ip_address("10.9.9.9"))
    assert allow.allows("x", ipaddress.ip_address("::ffff:10.9.9.9"))  # the IPv4 a mapped address stands for
    assert allow.allows("INTERNAL.example", ipaddress.ip_address("172.16.0.1"))
    assert not allow.allows("x", ipaddress.ip_address("192.168.1.8"))
    for bad in ["10.0.0.0/33", "bad host", "10.0.0.300", "http://x/", ""]:
        with pytest.raises(ValueError, match="neither a CIDR"):
            egress.allow_entry(bad)


def test_allow_net_from_the_environment_and_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICE_MCP_ALLOW_NET", "10.0.0.0/8, localhost,,")
    monkeypatch.setenv("ICE_MCP_EGRESS_PROXY", "http://127.0.0.1:3128")
    settings = Settings.from_env()
    assert settings.allow_net == ("10.0.0.0/8", "localhost")
    assert settings.egress_proxy == "http://127.0.0.1:3128"
    assert Settings.from_env(allow_net=("::1",)).allow_net == ("::1",)  # the command line wins
    parser = build_parser()
    args = parser.parse_args(["run", "f.yaml", "--allow-net", "10.0.0.0/8", "--allow-net", "Internal.Example"])
    assert args.allow_net == ["10.0.0.0/8", "internal.example"]
    args = parser.parse_args(["serve", "--allow-net", "fc00::/7"])
    assert args.allow_net == ["fc00::/7"]
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["serve", "--allow-net", "10.0.0.0/33"])
    assert exit_info.value.code == 2


async def test_a_bad_allow_list_entry_from_the_environment_is_a_clear_tool_error(
        orc: Orchestrator, proxied: Settings, proxy: RecordingProxy) -> None:
    proxied.allow_net = ("not a host",)
    node = await fetch(orc, "http://example.com/")
    assert node.error["code"] == "invalid_allow_net"
    assert node.attempts == 1 and proxy.seen == []


# -- every hostile target, through the tool ------------------------------------


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
async def test_hostile_targets_are_refused_and_nothing_leaves(
        orc: Orchestrator, proxied: Settings, proxy: RecordingProxy, case: Hostile) -> None:
    node = await fetch(orc, case.url)
    assert node.status == "failed"
    assert node.error["code"] == "egress_refused"
    assert node.error["details"]["reason"] == case.reason
    assert same_address(node.error["details"]["address"], case.addresses)
    assert "--allow-net" in node.error["message"]
    assert node.attempts == 1  # a refusal is never retried
    assert proxy.seen == []


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
async def test_hostile_targets_are_fetched_when_allowed(
        orc: Orchestrator, proxied: Settings, proxy: RecordingProxy, case: Hostile) -> None:
    proxied.allow_net = ALLOW_ALL
    node = await fetch(orc, case.url)
    assert node.status == "succeeded", node.error
    [seen] = proxy.seen
    assert same_address(urlsplit(seen.target).hostname, case.addresses)  # it went to the address checked
    assert node.output["json"]["proxied"] == seen.target


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
async def test_a_redirect_to_a_hostile_target_is_refused_at_the_hop(
        orc: Orchestrator, proxied: Settings, proxy: RecordingProxy, case: Hostile) -> None:
    proxied.allow_net = (ALLOWED_ORIGIN,)
    start = proxy.redirect(proxy.origin(ALLOWED_ORIGIN), case.url)
    node = await fetch(orc, start)
    assert node.error["code"] == "egress_refused", node.error
    assert node.error["details"]["reason"] == case.reason
    assert [seen.target for seen in proxy.seen] == [start]  # the first hop only


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
async def test_a_redirect_to_an_allowed_target_is_followed(
        orc: Orchestrator, proxied: Settings, proxy: RecordingProxy, case: Hostile) -> None:
    proxied.allow_net = (ALLOWED_ORIGIN, *ALLOW_ALL)
    node = await fetch(orc, proxy.redirect(proxy.origin(ALLOWED_ORIGIN), case.url))
    assert node.status == "succeeded", node.error
    assert len(proxy.seen) == 2
    assert same_address(urlsplit(proxy.seen[1].target).hostname, case.addresses)


async def test_a_public_host_that_redirects_to_the_metadata_address(
        proxy: RecordingProxy) -> None:
    # "public.test" resolves (here) to a public address; the hop to 169.254.169.254 is refused
    async with client(resolve=resolver({"public.test": ["93.184.216.34"]}), proxy=proxy.url) as http:
        start = proxy.redirect("http://public.test", "http://169.254.169.254/latest/meta-data/")
        with pytest.raises(egress.EgressRefused, match=r"169\.254\.169\.254 \(link-local address\)"):
            await egress.send(http, http.build_request("GET", start))
    assert [(seen.target, seen.host) for seen in proxy.seen] == [
        ("http://93.184.216.34/redirect?to=http%3A%2F%2F169.254.169.254%2Flatest%2Fmeta-data%2F", "public.test")]


async def test_redirects_are_bounded(proxy: RecordingProxy) -> None:
    loop = proxy.origin(ALLOWED_ORIGIN) + "/loop"
    async with client(allow=(ALLOWED_ORIGIN,), proxy=proxy.url) as http:
        with pytest.raises(egress.NodeFailure) as failure:
            await egress.send(http, http.build_request("GET", loop), max_redirects=3)
    assert failure.value.code == "too_many_redirects"
    assert len(proxy.seen) == 4


async def test_only_http_and_https(orc: Orchestrator, proxied: Settings, proxy: RecordingProxy) -> None:
    proxied.allow_net = (ALLOWED_ORIGIN,)
    node = await fetch(orc, proxy.redirect(proxy.origin(ALLOWED_ORIGIN), "file:///etc/passwd"))
    assert node.error["code"] == "egress_refused"
    assert "only http and https" in node.error["message"]
    async with client(allow=ALLOW_ALL, proxy=proxy.url) as http:
        with pytest.raises(egress.EgressRefused, match="only http and https"):
            await http.send(httpx2.Request("GET", "ftp://127.0.0.1/"))
    assert len(proxy.seen) == 1


# -- pinning: the connection goes to the address checked ------------------------


def resolver(table: dict[str, list[str]], calls: list[str] | None = None) -> egress.Resolver:
    """A resolver the test controls: `table` on the first call, loopback on any later one (rebinding)."""

    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            return await egress.system_resolve(host, port)
        if calls is None:
            return table[host]
        calls.append(host)
        return table[host] if len(calls) == 1 else ["127.0.0.1"]

    return resolve


def client(*, allow: tuple[str, ...] = (), resolve: egress.Resolver = egress.system_resolve,
           **transport_options: Any) -> httpx2.AsyncClient:
    transport = egress.GuardedTransport(egress.AllowList.parse(allow), resolve=resolve, **transport_options)
    return httpx2.AsyncClient(transport=transport, timeout=5)


async def test_dns_rebinding_has_no_window(proxy: RecordingProxy) -> None:
    # the name answers a public address once, then loopback: the request still goes to the one checked
    calls: list[str] = []
    async with client(resolve=resolver({"rebind.test": ["93.184.216.34"]}, calls), proxy=proxy.url) as http:
        response = await egress.send(http, http.build_request("GET", "http://rebind.test/secret"))
        await response.aread()
    assert calls == ["rebind.test"]
    assert proxy.seen[0].target == "http://93.184.216.34/secret" and proxy.seen[0].host == "rebind.test"


async def test_a_name_with_any_non_public_address_is_refused(proxy: RecordingProxy) -> None:
    both = resolver({"mixed.test": ["93.184.216.34", "10.0.0.7"]})
    async with client(resolve=both, proxy=proxy.url) as http:
        with pytest.raises(egress.EgressRefused, match=r"mixed\.test = 10\.0\.0\.7 \(private address\)"):
            await http.get("http://mixed.test/")
    assert proxy.seen == []


async def test_allowed_by_host_name_only(proxy: RecordingProxy) -> None:
    async with client(allow=("localhost",), proxy=proxy.url) as http:
        assert (await http.get("http://localhost:8080/x")).status_code == 200
        with pytest.raises(egress.EgressRefused):
            await http.get("http://127.0.0.1:8080/x")
    assert len(proxy.seen) == 1


class Origin(BaseHTTPRequestHandler):
    """A loopback origin server that records the Host header of each request."""

    seen: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Host", ""))
        body = json.dumps({"host": self.headers.get("Host")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def origin() -> Iterator[tuple[int, list[str]]]:
    Origin.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd.server_address[1], Origin.seen
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


async def test_direct_connection_to_a_real_loopback_server(
        orc: Orchestrator, settings: Settings, origin: tuple[int, list[str]]) -> None:
    port, seen = origin
    node = await fetch(orc, f"http://127.0.0.1:{port}/")
    assert node.error["code"] == "egress_refused" and seen == []
    node = await fetch(orc, f"http://2130706433:{port}/")
    assert node.error["code"] == "egress_refused" and seen == []
    settings.allow_net = ("127.0.0.1",)
    node = await fetch(orc, f"http://2130706433:{port}/")
    assert node.output["json"] == {"host": f"127.0.0.1:{port}"}  # the URL is read as browsers read it
    assert seen == [f"127.0.0.1:{port}"]


@pytest.fixture
async def tls_origin() -> AsyncIterator[tuple[int, ssl.SSLContext]]:
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("pinned.test").configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    httpd.socket = server_context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd.server_address[1], client_context
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


async def test_tls_verifies_the_name_while_connecting_to_the_checked_address(
        tls_origin: tuple[int, ssl.SSLContext]) -> None:
    port, context = tls_origin
    names = resolver({"pinned.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    async with client(allow=("127.0.0.1",), resolve=names, verify=context) as http:
        response = await http.get(f"https://pinned.test:{port}/")
        assert response.json() == {"host": f"pinned.test:{port}"}
        with pytest.raises(httpx2.ConnectError, match="certificate verify failed"):
            await http.get(f"https://other.test:{port}/")  # same address, a name the certificate does not carry
