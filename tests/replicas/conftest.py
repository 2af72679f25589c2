"""A real redis-server and a real PostgreSQL on free loopback ports for the replica tests (one each per session), a
fresh Redis database and a fresh PostgreSQL database per test, tests/server on sys.path for the live-server helpers,
and the three run stores (SQLite, Redis, PostgreSQL) for the store contract tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER_TESTS = Path(__file__).resolve().parents[1] / "server"
if str(SERVER_TESTS) not in sys.path:
    sys.path.insert(0, str(SERVER_TESTS))

from ice_mcp.store.base import RunStorage  # noqa: E402
from ice_mcp.store.sqlite import open_store  # noqa: E402
from ice_mcp_dev.cluster import PostgresProcess, RedisProcess, postgres_binaries  # noqa: E402


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


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresProcess]:
    if postgres_binaries() is None:
        missing = "PostgreSQL is not installed (scripts/setup_postgres.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    server = PostgresProcess(tmp_path_factory.mktemp("postgres"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresProcess) -> Iterator[str]:
    """The session's PostgreSQL, one fresh database per test (dropped after it)."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    yield postgres_server.create_database(name)
    with contextlib.suppress(Exception):
        postgres_server.drop_database(name)


STORE_KINDS = ["sqlite", "redis", "postgresql"]


@pytest.fixture(params=STORE_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """The run-store contract tests run on every store."""
    return str(request.param)


def state_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh store of `kind` for one test: a SQLite file, a flushed Redis database, a new PostgreSQL database."""
    if kind == "sqlite":
        return f"sqlite://{tmp_path / 'runs.sqlite3'}"
    return str(request.getfixturevalue("redis_url" if kind == "redis" else "postgres_url"))


@pytest.fixture(params=["redis", "postgresql"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store that servers on other machines could share: Redis, then PostgreSQL."""
    return state_url(str(request.param), tmp_path, request)


@pytest.fixture
def url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return state_url(kind, tmp_path, request)


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
