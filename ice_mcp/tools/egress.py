"""The egress guard: outbound HTTP reaches only globally routable addresses, connecting to the address it checked.

Every outbound fetch (the `http_request` tool, agents' tools, any future connector) goes through
`guarded_client(settings)` and `send(client, request)`: the host is resolved once, every address it
resolves to must be public (or allowed by `--allow-net` / `ICE_MCP_ALLOW_NET`), and the connection
goes to that checked address while the Host header and TLS (SNI, certificate) keep the original
name, so DNS cannot change the answer between check and connect. Redirects are followed one hop at
a time, each hop checked the same way. A refusal is an `EgressRefused` (code `egress_refused`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import ipaddress
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx2

from ice_mcp.errors import NodeFailure
from ice_mcp.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]

MAX_REDIRECTS = 10
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # well-known NAT64 prefix: the last 32 bits are an IPv4 address
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")  # carrier-grade NAT space, not private but not global
_HOST_NAME = re.compile(r"(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*")
_NUMERIC_HOST = re.compile(r"(?=.*[0-9])[0-9a-fx.]+", re.IGNORECASE)
_REASONS = (
    ("unspecified", "is_unspecified"),
    ("loopback", "is_loopback"),
    ("link-local", "is_link_local"),
    ("multicast", "is_multicast"),
    ("private", "is_private"),
    ("reserved", "is_reserved"),
)


class EgressRefused(NodeFailure):
    """An outbound connection the guard refused; never retried."""

    def __init__(self, message: str, **details: str) -> None:
        super().__init__(message, code="egress_refused", retryable=False, details=details)

    @classmethod
    def blocked(cls, host: str, address: str, reason: str) -> EgressRefused:
        target, allow = (address, address) if host == address else (f"{host} = {address}", f"{address} or {host}")
        return cls(f"refused to connect to {target} ({reason} address); the operator can allow it with "
                   f"--allow-net {allow} (or ICE_MCP_ALLOW_NET)", host=host, address=address, reason=reason)


def allow_entry(text: str) -> str:
    """One `--allow-net` entry, normalised and checked: a CIDR, an IP address or a host name."""
    entry = text.strip().lower().rstrip(".")
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        if not _HOST_NAME.fullmatch(entry) or entry.rsplit(".", 1)[-1].isdigit():  # `10.0.0.300` is no name
            raise ValueError(f"--allow-net {text!r} is neither a CIDR, an IP address nor a host name") from None
    return entry


def allow_net_argument(text: str) -> str:
    """`allow_entry` for argparse's `type=` (a bad entry is reported as a usage error)."""
    try:
        return allow_entry(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class AllowList:
    """What the operator allowed beyond public addresses: networks, and host names taken as written."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for text in entries:
            try:
                entry = allow_entry(text)
            except ValueError as exc:
                raise NodeFailure(str(exc), code="invalid_allow_net", retryable=False) from None
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry)
        return cls(tuple(networks), frozenset(hosts))

    def allows(self, host: str, address: IPAddress) -> bool:
        if host.lower().rstrip(".") in self.hosts:
            return True
        forms = {address, _embedded_ipv4(address)}
        return any(form in network for form in forms if form is not None for network in self.networks)


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (IPv4-mapped, 6to4, NAT64), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def blocked_reason(address: IPAddress) -> str | None:
    """Why an address is not one to fetch from by default (None: globally routable)."""
    target = _embedded_ipv4(address) or address  # an IPv6 wrapper means the IPv4 address it carries
    for reason, attribute in _REASONS:
        if getattr(target, attribute):
            return reason
    if isinstance(target, ipaddress.IPv4Address) and target in _SHARED:
        return "shared (carrier-grade NAT)"
    return None if target.is_global else "non-global"


def canonical_host(host: str) -> str:
    """The dotted quad a legacy IPv4 spelling means to the OS (`2130706433`, `0177.0.0.1`, `0x7f.1`)."""
    if _NUMERIC_HOST.fullmatch(host):
        try:
            return socket.inet_ntoa(socket.inet_aton(host.rstrip(".")))
        except OSError:
            pass
    return host


def canonical_url(url: str) -> str:
    """`url` with a legacy IPv4 host spelling replaced by its dotted quad (httpx refuses some spellings)."""
    match = re.match(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^/?#@]*@)?)(?P<host>[^/?#:\[\]]+)", url)
    if match is None:
        return url
    host = canonical_host(match["host"])
    return url if host == match["host"] else match["head"] + host + url[match.end():]


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the OS resolver gives for `host` (numeric spellings included)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def checked_addresses(host: str, port: int, allow: AllowList, resolve: Resolver = system_resolve) -> list[IPAddress]:
    """Resolve `host` once; every address must be public or allowed, else `EgressRefused`."""
    addresses: list[IPAddress] = []
    for text in await resolve(host, port):
        address = ipaddress.ip_address(text)
        reason = blocked_reason(address)
        if reason is not None and not allow.allows(host, address):
            raise EgressRefused.blocked(host, str(address), reason)
        if address not in addresses:
            addresses.append(address)
    return addresses


@functools.cache
def default_tls() -> ssl.SSLContext:
    """One verifying TLS context per process: building one costs ~40 ms of CPU on the event loop."""
    return httpx2.create_ssl_context()


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that checks each request's host and connects to the checked address itself.

    `proxy` sends every (already checked, address-pinned) request through an HTTP proxy instead.
    One inner transport per host name, so a TLS connection is only reused for the name it verified.
    """

    def __init__(self, allow: AllowList, *, proxy: str | None = None, resolve: Resolver = system_resolve,
                 **transport_options: Any) -> None:
        self._allow = allow
        self._resolve = resolve
        verify = transport_options.pop("verify", True)
        self._options = {"proxy": proxy, "verify": default_tls() if verify is True else verify, **transport_options}
        self._transports: dict[str, httpx2.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.scheme not in ("http", "https"):
            raise EgressRefused(f"refused to fetch {request.url}: only http and https", url=str(request.url))
        host = canonical_host(request.url.host)
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        try:
            async with asyncio.timeout(request.extensions.get("timeout", {}).get("connect")):
                addresses = await checked_addresses(host, port, self._allow, self._resolve)
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"resolving {host} timed out", request=request) from None
        except OSError as exc:
            raise httpx2.ConnectError(f"cannot resolve {host}: {exc}", request=request) from None
        transport = self._transports.get(host)
        if transport is None:
            transport = self._transports[host] = httpx2.AsyncHTTPTransport(**self._options)
        failure: httpx2.ConnectError | None = None
        for address in addresses:
            url = request.url.copy_with(host=str(address))
            extensions = {**request.extensions, "sni_hostname": host}
            if self._options["proxy"] and url.scheme == "http":  # httpcore2 drops IPv6 brackets here (httpx2 PR 1091)
                extensions["target"] = str(url).encode("ascii")
            pinned = httpx2.Request(request.method, url, headers=request.headers, stream=request.stream,
                                    extensions=extensions)
            try:
                response = await transport.handle_async_request(pinned)
            except httpx2.ConnectError as exc:  # nothing was sent: try the host's next address
                failure = exc
                continue
            if "location" in response.headers:  # so a redirect to `0177.0.0.1` is parsed, then checked
                response.headers["location"] = canonical_url(response.headers["location"])
            return response
        raise failure or httpx2.ConnectError(f"{host} has no address", request=request)

    async def aclose(self) -> None:
        for transport in self._transports.values():
            await transport.aclose()
        self._transports.clear()


def guarded_client(settings: Settings, **client_options: Any) -> httpx2.AsyncClient:
    """An httpx2 client for outbound calls under the guard (allow list and proxy from `settings`)."""
    transport = GuardedTransport(AllowList.parse(settings.allow_net), proxy=settings.egress_proxy)
    return httpx2.AsyncClient(transport=transport, follow_redirects=False, **client_options)


async def send(client: httpx2.AsyncClient, request: httpx2.Request, *, max_redirects: int = MAX_REDIRECTS) -> httpx2.Response:
    """Send `request` (streamed), following redirects hop by hop; the caller closes the response."""
    for _ in range(max_redirects + 1):
        response = await client.send(request, stream=True, follow_redirects=False)
        if response.next_request is None:
            return response
        await response.aclose()  # a redirect's body is never read
        request = response.next_request
    raise NodeFailure(f"more than {max_redirects} redirects", code="too_many_redirects", retryable=False)
