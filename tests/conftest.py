"""Shared, generic fixtures. Nothing here is autouse; the only global state touched is Hypothesis's profile and
two variables that keep every test, and every server or command a test starts, out of the real home."""

from __future__ import annotations

import http.server
import os
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from ice_mcp import Orchestrator, Registry, Settings

# The server and observability tests' helpers (mcp_helpers, live, llm_mock, otlp_receiver) serve other folders
# too; appended, so no folder's conftest module is shadowed (several folders import theirs as `conftest`).
for helpers in ("server", "observability"):
    folder = str(Path(__file__).resolve().parent / helpers)
    if folder not in sys.path:
        sys.path.append(folder)

from llm_mock import Aimock, serve_aimock  # noqa: E402 (found on the path just set)

# Where tests start real processes (servers, Redis, Temporal, Chromium, Node, sandbox workers, a built wheel): marked
# `live`, so `make test-fast` (-m "not live and not slow") keeps the inner loop to in-process tests.
LIVE = ("tests/replicas/", "tests/temporal/", "tests/ui/", "tests/upstream/", "_live.py", "test_first_hour.py",
        "test_first_call.py", "test_wheel.py", "test_conformance.py", "test_inspector.py", "test_strict_schemas.py",
        "test_ts_client.py", "test_warm_start.py", "test_cancel_eras.py", "tests/sandbox/", "test_stdio.py",
        "test_metrics_temporal.py", "test_tracing_kill.py", "test_llm_local.py")


# A test that times the server's /healthz during a hostile call (tests/server/live.py's healthz_watch) measures
# latency, which other tests' load would distort: marked `alone` here (others say so themselves), `make test` runs
# them after the parallel part.
TIMES_LATENCY = "healthz_watch"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(part in item.nodeid for part in LIVE):
            item.add_marker(pytest.mark.live)
        code = getattr(getattr(item, "function", None), "__code__", None)
        if code is not None and TIMES_LATENCY in code.co_names:
            item.add_marker(pytest.mark.alone)


def pytest_configure(config: pytest.Config) -> None:
    """Servers and commands that tests start without folders of their own work in a scratch folder, never in
    ~/ice-mcp-workspace or ~/.local/share/ice_mcp (a test of those defaults sets HOME itself)."""
    scratch = Path(tempfile.mkdtemp(prefix="ice-mcp-tests-"))
    os.environ.setdefault("ICE_MCP_WORKSPACE", str(scratch / "workspace"))
    os.environ.setdefault("ICE_MCP_DATA_DIR", str(scratch / "data"))


# No test asserts on time, Hypothesis's own checks included: a loaded 2-core CI machine is slow, not wrong.
hypothesis_settings.register_profile("ice_mcp", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("ice_mcp")


@pytest.fixture
def registry() -> Registry:
    """A fresh registry per test (never DEFAULT_REGISTRY), so test tools do not leak."""
    return Registry()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings confined to the test's temporary folder."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return Settings(data_dir=tmp_path / "data", workspace=workspace)


@pytest.fixture
async def orc(registry: Registry, settings: Settings) -> AsyncIterator[Orchestrator]:
    """An orchestrator on the fresh registry and temporary settings; closed after the test."""
    orchestrator = Orchestrator(registry=registry, settings=settings)
    yield orchestrator
    await orchestrator.aclose()


# -- a real SMTP server on loopback (email_send) ---------------------------------------------------------


class Inbox:
    """An aiosmtpd handler keeping what arrives; `nobody@` is refused as an unknown user."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:
        if address.startswith("nobody@"):
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 Message accepted"


def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    good = isinstance(data, LoginPassword) and (data.login, data.password) == (b"robot", b"s3cret")
    return AuthResult(success=good, handled=False)


@pytest.fixture
def smtp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Inbox, int]]:
    """A real SMTP server on 127.0.0.1 offering STARTTLS (a trustme certificate the client trusts) and a login."""
    authority = trustme.CA()
    cert = authority.issue_cert("127.0.0.1", "localhost")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(server_context)
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))  # the client's default context trusts the test CA
    inbox = Inbox()
    port = free_port()  # the controller checks it is up by connecting to its port: 0 will not do
    controller = Controller(inbox, hostname="127.0.0.1", port=port, tls_context=server_context,
                            require_starttls=True, authenticator=authenticator, auth_required=True)
    controller.start()
    try:
        yield inbox, port
    finally:
        controller.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- a loopback HTTP receiver (notifications) ----------------------------------------------------------


class Receiver:
    """A loopback HTTP server answering POSTs with the next status of `answers` (then 200), keeping each request."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = list(answers)
        self.received: list[tuple[dict[str, str], bytes, float]] = []


@contextmanager
def receiver(answers: list[int]) -> Iterator[tuple[Receiver, str]]:
    state = Receiver(answers)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            state.received.append(({k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()))
            self.send_response(state.answers.pop(0) if state.answers else 200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/events"
    finally:
        server.shutdown()


@pytest.fixture
def make_receiver() -> Any:
    """`with make_receiver([500, 200]) as (state, url)`: a loopback receiver answering those statuses."""
    return receiver


# -- aimock: the LLM providers' APIs on a free loopback port, for the whole session ----------------------------


@pytest.fixture(scope="session")
def aimock() -> Iterator[Aimock]:
    """aimock answering from tests/llm/fixtures/aimock.json."""
    with serve_aimock() as mock:
        yield mock
