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
import hashlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse, RequestId

from ice_mcp.bundled import bundled_dir
from ice_mcp.settings import Settings
from ice_mcp.store.sqlite_file import kept_blueprints_stamp, sqlite_file

logger = logging.getLogger(__name__)
KEPT_FILE = "stdio-start.json"
BUILD_AFTER_SECONDS = 0.5  # a host that sends nothing for this long gets its server built anyway
BLUEPRINT_SUFFIXES = (".json", ".yaml", ".yml")  # what `Catalogue.load_blueprints` reads from a folder
KEPT_METHODS = ("initialize", "tools/list")
READ_AHEAD = 16  # lines read before the server is built, at most (then it is built)
WATCHED_REQUESTS = 8  # a session's first requests are looked at (parsed once more); later ones pass untouched
LIST_CHANGED = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n"


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
    # Unset and callable ones left out: `ice-mcp serve` and `python -m ice_mcp.server serve` differ only there.
    arguments = {k: v for k, v in sorted(vars(args).items()) if v is not None and not callable(v)}
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
    """Looks at a stdio session's first lines both ways: answers the kept `initialize` and `tools/list` before the
    server is built, drops the server's own answers to those, and keeps them for the next start."""

    def __init__(self, path: Path, key: str | None) -> None:
        self._path = path
        self._key = key
        self._kept: dict[str, Exchange] = self._load() if key is not None else {}
        self._asked: dict[RequestId, tuple[str, dict[str, Any] | None]] = {}  # kept methods the server will answer
        self._early: dict[RequestId, Exchange] = {}  # of those, the ones answered here
        self._sent: set[RequestId] = set()  # early answers already handed to the wire
        self._seen: dict[str, Exchange] = {}  # the server's own answers, to keep for the next start
        self._due = False  # both seen: compare them with the kept ones once they are on the wire
        self._building = anyio.Event()
        self._requests = 0
        self._answers: ObjectSendStream[SessionMessage] | None = None
        self._ahead: list[str] = []
        self._read_ahead = anyio.Event()
        if not self._kept:
            self._read_ahead.set()  # nothing to answer early: the server reads every line itself

    @classmethod
    def for_serve(cls, args: argparse.Namespace, settings: Settings) -> WarmStart:
        return cls(settings.data_dir / KEPT_FILE, start_key(args, settings))

    @classmethod
    def off(cls) -> WarmStart:
        """Looks at nothing: nothing answered early, nothing kept."""
        return cls(Path(os.devnull), None)

    @property
    def answers_early(self) -> bool:
        """Whether this start has kept answers to give before the server is built."""
        return bool(self._kept)

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

    def attach(self, answers: ObjectSendStream[SessionMessage]) -> None:
        """Where early answers go: the stream the SDK's writer sends to the client."""
        self._answers = answers

    async def until_build(self, readline: Callable[[], Awaitable[str]], written: Callable[[], Awaitable[None]]
                          ) -> None:
        """Reads the session's first lines while the server is not built, answering the kept requests among them,
        and returns once the client has the answers it asked for, or a request needs the server, or after
        BUILD_AFTER_SECONDS. `written()` returns once the wire has taken what was handed to it (building blocks
        the loop that writes). The lines read go to the server first (`read_ahead`)."""
        try:
            with anyio.move_on_after(BUILD_AFTER_SECONDS):
                while not self._building.is_set() and len(self._ahead) < READ_AHEAD:
                    line = await readline()
                    if not line:
                        break  # end of input: build, and the server ends once it has read everything
                    self._ahead.append(line)
                    early = self.look(line)
                    if early is not None:
                        assert self._answers is not None
                        await self._answers.send(early)
            with anyio.move_on_after(BUILD_AFTER_SECONDS):  # a wire that never drains does not keep it unbuilt
                await written()
        finally:
            self._building.set()
            self._read_ahead.set()

    async def read_ahead(self) -> list[str]:
        """The lines `until_build` read, once it has returned (none when nothing was kept)."""
        await self._read_ahead.wait()
        lines, self._ahead = self._ahead, []
        return lines

    def look(self, line: str) -> SessionMessage | None:
        """A client's line: the session's first requests are noted, to keep the server's answers to the kept
        methods; returns the kept answer to give before the server is built, if there is one."""
        if self._key is None or self._requests >= WATCHED_REQUESTS:
            return None
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            self._building.set()  # the server answers what it cannot read
            return None
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            return None  # a notification (or a client's answer) waits for the server, as it would anyway
        if message.get("jsonrpc") != "2.0" or isinstance(message["id"], bool):
            self._building.set()  # not a request the SDK reads: the server answers it
            return None
        kept = self._note(message["id"], message["method"], message.get("params"))
        if kept is None:
            self._building.set()  # the server must answer this one: build it now
            return None
        self._early[message["id"]] = kept
        logger.info("stdio start: %s answered from what the last start kept (%s)", message["method"], self._path)
        if message["method"] == "tools/list":
            self._building.set()  # what a host waits for at start has gone out
        return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=message["id"], result=kept.result))

    def _note(self, request_id: Any, method: Any, params: Any) -> Exchange | None:
        """Notes the session's `initialize` (its first request) and first `tools/list`, whose answers are kept;
        returns the kept answer when this start may give it before the server is built."""
        self._requests += 1
        first = self._requests == 1
        if (method not in KEPT_METHODS or not isinstance(request_id, str | int) or request_id in self._asked
                or method in {noted for noted, _ in self._asked.values()} or method in self._seen
                or (method == "initialize" and not first) or (method == "tools/list" and first)):
            return None
        self._asked[request_id] = (method, params)
        kept = self._kept.get(method)
        if self._building.is_set() or kept is None or kept.params != params:
            return None
        return kept

    def outgoing(self, line: str) -> list[str]:
        """What to write for a line the SDK's writer hands over: the line; nothing for the server's own answer to
        a request answered early; and after it, `notifications/tools/list_changed` when the lists differ."""
        if not self._asked:
            return [line]
        try:
            message = json.loads(line)
        except ValueError:
            return [line]
        request_id = message.get("id") if isinstance(message, dict) and "method" not in message else None
        if request_id is None or request_id not in self._asked:
            return [line]
        if request_id in self._early and request_id not in self._sent:
            self._sent.add(request_id)  # the early answer itself, on its way out
            return [line]
        method, params = self._asked.pop(request_id)
        early = self._early.pop(request_id, None)
        real = message.get("result")
        written = [line] if early is None else []
        if early is not None and early.result != real:
            logger.warning("stdio start: the %s answer given early differs from the server's", method)
            if method == "tools/list":
                written.append(LIST_CHANGED)
        if isinstance(real, dict):  # an error is never kept
            self._seen[method] = Exchange(params, real)
            self._due = len(self._seen) == len(KEPT_METHODS)
        return written

    def keep(self) -> None:
        """Keeps the server's answers for the next start once it gave both, if they are new (called once the
        answer is on the wire: the file is written after the client has it)."""
        if self._due:
            self._due = False
            if self._seen != self._kept:
                self._save()
