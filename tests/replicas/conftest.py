"""A real redis-server on a free loopback port for the replica tests (one per session), a fresh key
prefix per test, tests/server on sys.path for the live-server helpers, and both run stores (SQLite, Redis) for the
store contract tests."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER_TESTS = Path(__file__).resolve().parents[1] / "server"
if str(SERVER_TESTS) not in sys.path:
    sys.path.insert(0, str(SERVER_TESTS))

from ice_mcp.store.base import RunStorage  # noqa: E402
from ice_mcp.store.sqlite import open_store  # noqa: E402
from ice_mcp_dev.cluster import RedisProcess  # noqa: E402


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    if shutil.which("redis-server") is None:
        missing = "redis-server is not installed (scripts/setup_llm.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(missing)  # in CI a missing install step must not pass as skipped tests
        pytest.skip(missing)
    server = RedisProcess(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisProcess) -> str:
    """The session's Redis, one database number per test run (flushed), so tests never see each other's runs."""
    import redis

    url = redis_server.url(db=1)
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
    return url


@pytest.fixture(params=["sqlite", "redis"])
def kind(request: pytest.FixtureRequest) -> str:
    """The run-store contract tests run on both stores."""
    return str(request.param)


@pytest.fixture
def url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return f"sqlite://{tmp_path / 'runs.sqlite3'}" if kind == "sqlite" else str(request.getfixturevalue("redis_url"))


@pytest.fixture
def store(url: str, tmp_path: Path) -> Iterator[RunStorage]:
    opened = open_store(url, tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def other(url: str, tmp_path: Path) -> Iterator[RunStorage]:
    """A second connection to the same store, as another process would open it."""
    opened = open_store(url, tmp_path)
    yield opened
    opened.close()
