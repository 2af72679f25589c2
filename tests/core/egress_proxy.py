"""A recording HTTP proxy on 127.0.0.1 that plays every origin server: nothing it receives goes further."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit


@dataclass(frozen=True)
class Seen:
    """One request the proxy received: its method, request target (absolute URL) and Host header."""

    method: str
    target: str
    host: str


@dataclass
class RecordingProxy:
    """Answers `/redirect?to=URL` with a 302 to URL (after `redirect_delay`), `/loop` with a 302 to itself,
    anything else with 200 JSON."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    redirect_delay: float = 0.0

    def origin(self, host: str) -> str:
        """A made-up origin this proxy answers for (its port, so allowed cases look like local services)."""
        return f"http://{host}:{urlsplit(self.url).port}"

    @staticmethod
    def redirect(origin: str, to: str) -> str:
        return f"{origin}/redirect?to={quote(to, safe='')}"


def _handler(proxy: RecordingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            proxy.seen.append(Seen(self.command, self.path, self.headers.get("Host", "")))
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if self.command == "CONNECT":  # no tunnels: a TLS target is recorded, never reached
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            target = urlsplit(self.path)
            if target.path in ("/redirect", "/loop"):
                time.sleep(proxy.redirect_delay)
                self.send_response(302)
                self.send_header("Location", parse_qs(target.query)["to"][0] if target.path == "/redirect" else "/loop")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = json.dumps({"proxied": self.path, "host": self.headers.get("Host")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_CONNECT = _answer

    return Handler


@contextlib.contextmanager
def recording_proxy() -> Iterator[RecordingProxy]:
    """Start a `RecordingProxy` on a free loopback port; stop it after the block."""
    proxy = RecordingProxy()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    httpd.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@dataclass(frozen=True)
class Hostile:
    """A target the guard refuses by default: its URL, the address it means, and why it is refused."""

    name: str
    url: str
    addresses: tuple[str, ...]
    reason: str


HOSTILE = [
    Hostile("loopback", "http://127.0.0.1:8080/", ("127.0.0.1",), "loopback"),
    Hostile("10/8", "http://10.0.0.1/admin", ("10.0.0.1",), "private"),
    Hostile("172.16/12", "http://172.16.5.4/", ("172.16.5.4",), "private"),
    Hostile("172.31", "http://172.31.255.254/", ("172.31.255.254",), "private"),
    Hostile("192.168/16", "http://192.168.1.1/", ("192.168.1.1",), "private"),
    Hostile("metadata", "http://169.254.169.254/latest/meta-data/iam/", ("169.254.169.254",), "link-local"),
    Hostile("0.0.0.0", "http://0.0.0.0:8080/", ("0.0.0.0",), "unspecified"),
    Hostile("::1", "http://[::1]:8080/", ("::1",), "loopback"),
    Hostile("fc00::/7", "http://[fd00::1]/", ("fd00::1",), "private"),
    Hostile("fe80::/10", "http://[fe80::1]/", ("fe80::1",), "link-local"),
    Hostile("ipv4-mapped", "http://[::ffff:127.0.0.1]:8080/", ("::ffff:127.0.0.1",), "loopback"),
    Hostile("ipv4-mapped-metadata", "http://[::ffff:a9fe:a9fe]/", ("::ffff:169.254.169.254",), "link-local"),
    Hostile("decimal", "http://2130706433:8080/", ("127.0.0.1",), "loopback"),
    Hostile("octal", "http://0177.0.0.1:8080/", ("127.0.0.1",), "loopback"),
    Hostile("hex", "http://0x7f.0.0.1:8080/", ("127.0.0.1",), "loopback"),
    Hostile("short", "http://127.1:8080/", ("127.0.0.1",), "loopback"),
    Hostile("localhost", "http://localhost:8080/", ("127.0.0.1", "::1"), "loopback"),
]

# What an operator passes to allow every HOSTILE target (localhost by name, the rest by range).
ALLOW_ALL = ("localhost", "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
             "0.0.0.0/32", "::1", "fc00::/7", "fe80::/10")
