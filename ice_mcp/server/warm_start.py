"""A stdio server's warm start: the `initialize` and `tools/list` answers of its last start, given again at once
while the server is built, when nothing they depend on has changed since.

A host such as Claude Desktop starts the server for each session with the same command, data folder and
requests, and waits for the tool list. Building the server (the engine's imports, compiling every blueprint)
takes ~250 ms; the answers it then gives are a pure function of the code, the command line, the environment,
the blueprint files and the blueprints the data folder's store keeps. `start_key` digests all of these, as a
`.pyc` is keyed by its source; a start whose key and requests match the kept ones answers from them, and the
server, once built, answers the same requests again behind the scenes: a difference is logged, kept for the
next start, and a changed tool list is announced with `notifications/tools/list_changed`. A start that cannot
be keyed cheaply (tool modules, extensions, upstream MCP servers, a store shared through Redis) is never
answered early. Only the standard library, anyio and the SDK's message types load here.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse, RequestId

from ice_mcp.bundled import bundled_dir
from ice_mcp.settings import Settings
from ice_mcp.store.sqlite_file import kept_blueprints_stamp, sqlite_file

logger = logging.getLogger(__name__)
KEPT_FILE = "stdio-start.json"
BUILD_AFTER_SECONDS = 0.5  # a host that sends nothing for this long gets its server built anyway
BLUEPRINT_SUFFIXES = (".json", ".yaml", ".yml")  # what `Catalogue.load_blueprints` reads from a folder
KEPT_METHODS = ("initialize", "tools/list")
INBOX = 64  # messages read ahead of a server still being built (then reading waits for it, as it would anyway)
ClientItem = SessionMessage | Exception


def start_key(args: argparse.Namespace, settings: Settings) -> str | None:
    """A digest of everything a stdio server's first answers depend on, or None when part of it cannot be
    read without building the server."""
    env = os.environ
    if (args.tools or env.get("ICE_MCP_TOOLS") or args.extend or args.conformance_fixtures or args.mcp_config
            or env.get("ICE_MCP_MCP_CONFIG")):
        return None  # Python modules and other servers decide what they add
    path = sqlite_file(settings.state_url, settings.data_dir)
    store = kept_blueprints_stamp(path) if path is not None else None
    if store is None:
        return None  # a store shared through Redis: other servers change it while this one is down
    folders = [bundled_dir("blueprints")] if args.templates else []
    arguments = {k: v for k, v in sorted(vars(args).items()) if not callable(v)}
    digest = hashlib.sha256()
    for part in (sys.version, sys.executable, os.getcwd(), repr(settings), json.dumps(arguments, default=str),
                 json.dumps(sorted(env.items())), _code(), _blueprint_files([*folders, *args.blueprints]), store):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def _code() -> str:
    """Every file of the package (path, size, modification time) and when each site-packages folder last
    changed (installing or removing a distribution changes its entries)."""
    root = Path(__file__).resolve().parents[1]
    stamps = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            stat = os.stat(os.path.join(folder, name))
            stamps.append(f"{folder}/{name}:{stat.st_size}:{stat.st_mtime_ns}")
    for entry in sys.path:
        if entry.endswith("site-packages") and os.path.isdir(entry):
            stamps.append(f"{entry}:{os.stat(entry).st_mtime_ns}")
    return "\n".join(stamps)


def _blueprint_files(folders: list[Path]) -> str:
    """The contents of the blueprint files the server registers at start."""
    parts = []
    for folder in folders:
        paths = sorted(p for p in Path(folder).glob("*") if p.suffix in BLUEPRINT_SUFFIXES)
        for path in paths:
            try:
                parts.append(f"{path.resolve()}:{hashlib.sha256(path.read_bytes()).hexdigest()}")
            except OSError as exc:
                parts.append(f"{path}:{exc.errno}")
    return "\n".join(parts)


@dataclass
class Exchange:
    """A request's params (as the client sent them) and the result the server answered."""

    params: dict[str, Any] | None
    result: dict[str, Any]


class WarmStart:
    """Relays a stdio session between the client and the server, answering the kept `initialize` and
    `tools/list` before the server is built; keeps the server's own answers to them for the next start."""

    def __init__(self, path: Path, key: str | None) -> None:
        self._path = path
        self._key = key
        self._kept: dict[str, Exchange] = self._load() if key is not None else {}
        self._asked: dict[RequestId, tuple[str, dict[str, Any] | None]] = {}  # kept methods the server will answer
        self._early: dict[RequestId, Exchange] = {}  # of those, the ones answered here already
        self._seen: dict[str, Exchange] = {}  # the server's own answers, to keep for the next start
        self._building = anyio.Event()
        self._requests = 0

    @classmethod
    def for_serve(cls, args: argparse.Namespace, settings: Settings) -> WarmStart:
        return cls(settings.data_dir / KEPT_FILE, start_key(args, settings))

    @property
    def answers_early(self) -> bool:
        """Whether this start has kept answers to give before the server is built."""
        return bool(self._kept)

    @classmethod
    def off(cls) -> WarmStart:
        """Relays only: nothing answered early, nothing kept."""
        return cls(Path(os.devnull), None)

    def _load(self) -> dict[str, Exchange]:
        try:
            kept = json.loads(self._path.read_text(encoding="utf-8"))
            if kept.get("key") != self._key:
                return {}
            return {method: Exchange(kept[method]["params"], kept[method]["result"]) for method in KEPT_METHODS}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def _save(self) -> None:
        document = {"key": self._key, **{m: {"params": e.params, "result": e.result} for m, e in self._seen.items()}}
        temporary = self._path.with_name(f".{KEPT_FILE}.{os.getpid()}")
        try:
            temporary.write_text(json.dumps(document), encoding="utf-8")
            os.replace(temporary, self._path)
        except OSError as exc:  # a read-only data folder: every start is a cold one
            logger.info("stdio start answers not kept in %s: %s", self._path, exc)

    @contextlib.asynccontextmanager
    async def relay(self, client_in: ObjectReceiveStream[ClientItem], client_out: ObjectSendStream[SessionMessage]
                    ) -> AsyncIterator[tuple[ObjectReceiveStream[ClientItem], ObjectSendStream[SessionMessage]]]:
        """The streams the server runs on; until `until_build` returns, the kept answers go out from here."""
        if self._key is None:
            yield client_in, client_out  # nothing to answer or keep: the server talks to the client itself
            return
        to_server, server_reads = anyio.create_memory_object_stream[ClientItem](INBOX)
        server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)
        relayed = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._inbound, client_in, client_out, to_server)
            tasks.start_soon(self._outbound, from_server, client_out, relayed)
            try:
                yield server_reads, server_writes
                server_writes.close()
                await relayed.wait()  # the server's last answers reach the client
            finally:
                tasks.cancel_scope.cancel()

    async def until_build(self, written: Callable[[], Awaitable[None]]) -> None:
        """Returns once the client got the kept answers it asked for (or after BUILD_AFTER_SECONDS): `written()`
        returns when the wire has taken every message handed to it (building blocks the loop that writes)."""
        with anyio.move_on_after(BUILD_AFTER_SECONDS):
            await self._building.wait()
        await written()
        self._building.set()

    async def _inbound(self, client_in: ObjectReceiveStream[ClientItem], client_out: ObjectSendStream[SessionMessage],
                       to_server: ObjectSendStream[ClientItem]) -> None:
        async with to_server:
            async for item in client_in:
                message = item.message if isinstance(item, SessionMessage) else None
                if isinstance(message, JSONRPCRequest):
                    kept = self._note(message)
                    if kept is None:
                        self._building.set()  # the server must answer this one: build it now
                    else:
                        self._early[message.id] = kept
                        await client_out.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=message.id,
                                                                             result=kept.result)))
                        logger.info("stdio start: %s answered from what the last start kept (%s)", message.method,
                                    self._path)
                        if message.method == "tools/list":
                            self._building.set()  # what a host waits for at start has gone out
                await to_server.send(item)  # the server sees every message, in order, those answered here too
        self._building.set()  # end of input: build, and the server ends once it has read everything

    def _note(self, request: JSONRPCRequest) -> Exchange | None:
        """Notes the session's `initialize` (its first request) and first `tools/list`, whose answers are kept;
        returns the kept answer when this start may give it before the server is built."""
        self._requests += 1
        method, first = request.method, self._requests == 1
        if (method not in KEPT_METHODS or method in {noted for noted, _ in self._asked.values()}
                or method in self._seen or (method == "initialize" and not first) or (method == "tools/list" and first)):
            return None
        self._asked[request.id] = (method, request.params)
        kept = self._kept.get(method)
        if self._building.is_set() or kept is None or kept.params != request.params:
            return None
        return kept

    async def _outbound(self, from_server: ObjectReceiveStream[SessionMessage],
                        client_out: ObjectSendStream[SessionMessage], relayed: anyio.Event) -> None:
        async with from_server, client_out:  # as the server closes its stream when it is done
            async for item in from_server:
                message = item.message
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None \
                        and message.id in self._asked:
                    answered = self._early.pop(message.id, None)
                    await self._settle(message, answered, client_out)
                    if answered is not None:
                        continue  # the client has this answer already
                await client_out.send(item)
        relayed.set()

    async def _settle(self, answer: JSONRPCResponse | JSONRPCError, answered: Exchange | None,
                      client_out: ObjectSendStream[SessionMessage]) -> None:
        """The server's own answer to a kept method: checked against the one given early, kept for next time."""
        assert answer.id is not None
        method, params = self._asked.pop(answer.id)
        real = json.loads(answer.model_dump_json(by_alias=True, exclude_unset=True)).get("result")
        if answered is not None and answered.result != real:
            logger.warning("stdio start: the %s answer given early differs from the server's", method)
            if method == "tools/list":
                changed = JSONRPCNotification(jsonrpc="2.0", method="notifications/tools/list_changed")
                await client_out.send(SessionMessage(changed))
        if real is None:
            return  # an error is never kept
        self._seen[method] = Exchange(params, real)
        if len(self._seen) == len(KEPT_METHODS) and self._seen != self._kept:
            self._save()
