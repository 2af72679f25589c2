"""The Redis run store: what `--state redis://...` shares between MCP replicas and workers.

Layout (every key under a prefix, `ice_mcp:` by default):
  run:{id}            hash: record, summary, workflow, status, trigger, started_at, owner, blueprint, version,
                      key, retry_of, principal
  runs, workflow:{w}, status:{s}, trigger:{kind}, principal:{p}   sorted sets of run ids by start time (lists)
  finished            sorted set of ended run ids by end time (retention)
  events:{id}         stream: one entry per written batch of a run's events, id `{last_seq + 1}-0`,
                      so `events(after)` is one XRANGE (other replicas follow a run by polling it)
  key:{k}             an idempotency key's run id, expiring with the key
  owners              hash owner id -> [host, pid, heartbeat]
  cancel:{id}         a run whose cancellation was asked for (a day)
  spend               hash caller -> dollars spent in all (HINCRBYFLOAT: atomic across replicas)
  blob:{sha256}       a large Temporal payload that travels by reference
  secret:{name}       a random key every replica shares (the one sealing multi-round requestState)
  blueprint:{name}    hash version -> {source, created_at, text?}; blueprint_versions, blueprints, deleted_blueprints
  signals             a pub/sub channel: cancel requests, blueprint changes and answers, heard by every replica
  schedule:{id}, schedules, firings:{id}, firing:{id}, scheduler_alive   schedules (see redis_schedules)
Records and events are written by the writer thread, one MULTI transaction per batch, so a reader
never sees a finished run's record without its last events. Standalone Redis (the scripts build
key names at run time, which Redis Cluster does not allow).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

from ice_mcp.errors import IceError
from ice_mcp.store.base import (
    SIGNAL_KINDS,
    Chunk,
    Item,
    Owner,
    QueuedWriter,
    Signal,
    StoredBlueprint,
    StoredRun,
    dumps,
    event_dict,
    follow_journal,
    journal_text,
    loads,
    owner_gone,
)
from ice_mcp.store.records import ACTIVE, Listed, RunRecord
from ice_mcp.store.redis_hooks import RedisHooks
from ice_mcp.store.redis_limits import RedisLimits
from ice_mcp.store.redis_outbox import RedisOutbox
from ice_mcp.store.redis_schedules import RedisSchedules, unavailable

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "ice_mcp:"
CANCEL_KEEP_SECONDS = 24 * 3600
SIGNAL_WAIT_SECONDS = 0.25  # the signal thread looks at its stop flag this often
_LIST_PAGE = 200
_RUN_FIELDS = ("record", "owner", "blueprint", "version", "key", "retry_of")

# Save a run: its hash, its place in the run lists (moved between status lists), its idempotency key.
# Creating one (ARGV[13] = '1') whose key another run holds writes nothing and answers that run's id.
_SAVE = """
local p, run_id, workflow, status = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local h = p .. 'run:' .. run_id
if ARGV[13] == '1' and ARGV[10] ~= '' then
  local holder = redis.call('GET', p .. 'key:' .. ARGV[10])
  if holder and holder ~= run_id then return holder end
end
local old = redis.call('HGET', h, 'status')
local started = ARGV[5]
if started == '' then started = redis.call('HGET', h, 'started_at') or '0' end
redis.call('HSET', h, 'workflow', workflow, 'status', status, 'record', ARGV[6], 'started_at', started)
if ARGV[7] ~= '' then redis.call('HSET', h, 'owner', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HSET', h, 'blueprint', ARGV[8]) end
if ARGV[9] ~= '' then redis.call('HSET', h, 'version', ARGV[9]) end
if ARGV[11] ~= '' then redis.call('HSET', h, 'retry_of', ARGV[11]) end
if ARGV[10] ~= '' then
  local k = p .. 'key:' .. ARGV[10]
  redis.call('SET', k, run_id, 'NX', 'PX', ARGV[12])
  if redis.call('GET', k) == run_id then redis.call('HSET', h, 'key', ARGV[10]) end
end
local score = tonumber(started)
redis.call('ZADD', p .. 'runs', score, run_id)
redis.call('ZADD', p .. 'workflow:' .. workflow, score, run_id)
if old and old ~= status then redis.call('ZREM', p .. 'status:' .. old, run_id) end
redis.call('ZADD', p .. 'status:' .. status, score, run_id)
if ARGV[14] ~= '' then
  redis.call('HSET', h, 'principal', ARGV[14])
  redis.call('ZADD', p .. 'principal:' .. ARGV[14], score, run_id)
end
redis.call('HSET', h, 'summary', ARGV[16], 'trigger', ARGV[15])
redis.call('ZADD', p .. 'trigger:' .. ARGV[15], score, run_id)
if ARGV[17] ~= '' then redis.call('ZADD', p .. 'finished', tonumber(ARGV[17]), run_id) end
return 1
"""
# Take a run over from its previous owner ('' for none), if nobody took it first.
_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local current = redis.call('HGET', KEYS[1], 'owner') or ''
if current ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[2])
return 1
"""
# A new version of a registered blueprint (undeleting its name).
_SAVE_BLUEPRINT = """
local p, name = ARGV[1], ARGV[2]
local version = redis.call('HINCRBY', p .. 'blueprint_versions', name, 1)
redis.call('HSET', p .. 'blueprint:' .. name, version, ARGV[3])
redis.call('SADD', p .. 'blueprints', name)
redis.call('SREM', p .. 'deleted_blueprints', name)
return version
"""
_DELETE_BLUEPRINT = """
local p, name = ARGV[1], ARGV[2]
if redis.call('SISMEMBER', p .. 'blueprints', name) == 0 then return 0 end
if redis.call('SADD', p .. 'deleted_blueprints', name) == 0 then return 0 end
return 1
"""


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class RedisRunStore(RedisSchedules, RedisHooks, RedisOutbox, RedisLimits, QueuedWriter):
    """Runs, journals, owners, idempotency keys, caller spend and blueprints in one Redis, shared."""

    shared = True

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, idempotency_key_seconds: float = 24 * 3600.0,
                 timeout: float = 5.0) -> None:
        self.url, self.prefix = url, prefix
        self.location = redact(url)
        self.key_ms = max(1, int(idempotency_key_seconds * 1000))
        try:
            # Any: redis-py types each answer as the union of every protocol's shape; these are RESP2 bytes.
            self._redis: Any = redis.Redis.from_url(url, socket_timeout=timeout,
                                                            socket_connect_timeout=timeout, health_check_interval=30)
            self._redis.ping()
        except (redis.RedisError, ValueError) as exc:
            raise IceError(f"cannot reach the state store at {self.location}: {type(exc).__name__}: {exc}",
                           code="state_unavailable") from None
        self._save = self._redis.register_script(_SAVE)
        self._claim = self._redis.register_script(_CLAIM)
        self._save_bp = self._redis.register_script(_SAVE_BLUEPRINT)
        self._delete_bp = self._redis.register_script(_DELETE_BLUEPRINT)
        self._register_schedule_scripts()
        self._register_outbox_scripts()
        self._register_limit_scripts()
        self._listeners: dict[threading.Thread, threading.Event] = {}  # signal threads, stopped on close
        self._start_queue()

    # -- writes ---------------------------------------------------------------------------------

    @staticmethod
    def _save_args(prefix: str, key_ms: int, row: tuple[Any, ...], create: bool) -> builtins.list[Any]:
        run_id, workflow, status, started, key, record, owner, blueprint, version, retry_of = row
        if isinstance(record, RunRecord):
            record = record.to_dict()
        listed = Listed.of(record)
        return [prefix, run_id, workflow, status, "" if started is None else repr(started), dumps(record), owner or "",
                "" if blueprint is None else blueprint if isinstance(blueprint, str) else dumps(blueprint),
                "" if version is None else str(version), key or "",
                retry_of or "", key_ms, "1" if create else "0", listed.principal or "", listed.trigger_kind,
                dumps(listed.summary), "" if listed.finished_at is None else repr(listed.finished_at)]

    @unavailable
    def create(self, record: RunRecord, *, idempotency_key: str | None = None, owner: str | None = None,
               blueprint: dict[str, Any] | str | None = None, version: int | None = None,
               retry_of: str | None = None) -> str | None:
        """Keep a new run at once, so any replica finds it as soon as its id is handed out; if its
        idempotency key already belongs to another run (started by any replica), write nothing and
        return that run's id."""
        row = (record.run_id, record.workflow, record.status, record.started_at, idempotency_key, record.to_dict(),
               owner, blueprint, version, retry_of)
        holder = self._save(args=self._save_args(self.prefix, self.key_ms, row, create=True))
        return holder.decode() if isinstance(holder, bytes) else None

    def _write_batch(self, items: builtins.list[Item], chunks: builtins.list[Chunk]) -> None:
        pipe = self._redis.pipeline(transaction=True)
        for _, kind, row in items:
            if kind == "run":
                self._save(args=self._save_args(self.prefix, self.key_ms, row, create=False), client=pipe)
            elif kind == "owner":
                owner_id, host, pid, beat = row
                pipe.hset(self._key("owners"), owner_id, dumps([host, pid, beat]))
        for run_id, journal, end in chunks:
            if end > journal.written:
                # The entry id carries the batch's last sequence number: `events(after)` is one range read.
                pipe.xadd(self._key("events", run_id), {"events": journal_text(journal.events[journal.written:end])},
                          id=f"{journal.events[end - 1].seq + 1}-0")
        if len(pipe):
            pipe.execute()

    # -- reads ----------------------------------------------------------------------------------

    @unavailable
    def get(self, run_id: str) -> RunRecord | None:
        text = self._redis.hget(self._key("run", run_id), "record")
        return None if text is None else RunRecord.from_dict(loads(text))

    @unavailable
    def run(self, run_id: str) -> StoredRun | None:
        record, owner, blueprint, version, key, retry_of = self._redis.hmget(self._key("run", run_id), _RUN_FIELDS)
        if record is None:
            return None
        return StoredRun(RunRecord.from_dict(loads(record)), _text(owner),
                         None if blueprint is None else loads(blueprint),
                         None if version is None else int(version), _text(key), _text(retry_of))

    @unavailable
    def events(self, run_id: str, after: int = -1) -> builtins.list[dict[str, Any]]:
        # Entries whose last event is past `after`: those with an id of at least after + 2.
        entries = self._redis.xrange(self._key("events", run_id), min=f"{max(after, -1) + 2}-0")
        return [event_dict(e) for _, fields in entries for e in loads(fields[b"events"]) if e["seq"] > after]

    def follow(self, run_id: str, after: int = -1) -> AsyncGenerator[builtins.list[dict[str, Any]], None]:
        """A run's events after `after` as they are written, in batches (an empty one each idle second);
        the caller stops following. It polls with one range read: redis.asyncio can swallow a task's
        cancellation inside a blocking read (redis-py #2028), and a follower is cancelled when a wait ends."""

        async def read(seen: int) -> builtins.list[dict[str, Any]]:
            return self.events(run_id, seen)

        return follow_journal(read, after)

    @unavailable
    def run_ids(self, prefix: str, limit: int = 10) -> builtins.list[str]:
        """Ids of kept runs that start with `prefix`, in order (at most `limit`): a scan of the runs' list, which
        only a short id that is not a whole one costs (no index by id is kept for it)."""
        pattern = "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix) + "*"
        found: set[str] = set()
        for member, _ in self._redis.zscan_iter(self._key("runs"), match=pattern, count=1000):
            found.add(member.decode() if isinstance(member, bytes) else str(member))
            if len(found) > limit:  # enough to say it is ambiguous
                break
        return sorted(found)[:max(1, limit)]

    @unavailable
    def by_idempotency_key(self, key: str) -> str | None:
        return _text(self._redis.get(self._key("key", key)))

    @unavailable
    def list(self, *, status: str | None = None, workflow: str | None = None, limit: int = 50,
             principal: str | None = None) -> list[RunRecord]:
        """The newest runs, filtered (`principal`: only the runs it owns), from the narrowest list."""
        limit = max(1, min(limit, 1000))
        index = (self._key("principal", principal) if principal is not None else
                 self._key("workflow", workflow) if workflow else
                 self._key("status", status) if status else self._key("runs"))
        check_status = bool(status and (workflow or principal is not None))  # a list holding every status
        check_workflow = bool(workflow and principal is not None)
        found: builtins.list[RunRecord] = []
        start = 0
        while len(found) < limit:
            ids = self._redis.zrevrange(index, start, start + _LIST_PAGE - 1)
            if not ids:
                break
            start += len(ids)
            pipe = self._redis.pipeline(transaction=False)
            for run_id in ids:
                pipe.hmget(self._key("run", run_id.decode()), ("record", "status", "workflow"))
            for record, run_status, run_workflow in pipe.execute():
                if (record is not None and (not check_status or _text(run_status) == status)
                        and (not check_workflow or _text(run_workflow) == workflow)):
                    found.append(RunRecord.from_dict(loads(record)))
        return found[:limit]

    @unavailable
    def page(self, *, status: str | None = None, workflow: str | None = None, trigger: str | None = None,
             principal: str | None = None, limit: int = 50, cursor: str | None = None
             ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """Run summaries, newest first, filtered, and the next page's cursor (`started_at:run_id`), read from
        the narrowest list by score from the cursor on (its cost does not grow with the number of runs)."""
        limit = max(1, min(limit, 1000))
        filters = {"principal": principal, "workflow": workflow, "trigger": trigger, "status": status}
        name = next((k for k, v in filters.items() if v is not None), None)
        index = self._key(name, str(filters[name])) if name is not None else self._key("runs")
        checks = {k: v for k, v in filters.items() if v is not None and k not in (name, "principal")}
        top, after_id = ("+inf", None) if cursor is None else _redis_cursor(cursor)
        found: builtins.list[tuple[dict[str, Any], float]] = []
        batch = _LIST_PAGE if checks else limit + 2  # unfiltered, the list's order is the page's
        while len(found) <= limit:
            rows = self._redis.zrevrangebyscore(index, top, "-inf", start=0, num=batch, withscores=True)
            rows = [(m.decode(), s) for m, s in rows
                    if after_id is None or s != float(top) or m.decode() < after_id]  # past the cursor
            if not rows:
                break
            pipe = self._redis.pipeline(transaction=False)
            for run_id, _ in rows:
                pipe.hmget(self._key("run", run_id), ("summary", "status", "workflow", "trigger"))
            for (run_id, score), (summary, *fields) in zip(rows, pipe.execute(), strict=True):
                values = dict(zip(("status", "workflow", "trigger"), (_text(f) for f in fields), strict=True))
                if values["status"] is None or not all(values[k] == v for k, v in checks.items()):
                    continue  # pruned meanwhile, or filtered out
                if summary is None:  # a run kept before summaries were
                    if (kept := self.get(run_id)) is None:
                        continue
                    summary = dumps(kept.summary())
                found.append((loads(summary), score))
            top, after_id = repr(rows[-1][1]), rows[-1][0]
            if len(rows) < batch:
                break
        page = found[:limit]
        more = len(found) > limit
        return [s for s, _ in page], (f"{page[-1][1]!r}:{page[-1][0]['run_id']}" if more else None)

    @unavailable
    def prune(self, before: float, limit: int = 10_000) -> int:
        """Delete up to `limit` runs that ended before `before`, with their journals; never one under way."""
        ids = [m.decode() for m in self._redis.zrangebyscore(self._key("finished"), "-inf", f"({before!r}",
                                                              start=0, num=limit)]
        pruned = 0
        for chunk in range(0, len(ids), 500):
            part = ids[chunk:chunk + 500]
            pipe = self._redis.pipeline(transaction=False)
            for run_id in part:
                pipe.hmget(self._key("run", run_id), ("status", "workflow", "trigger", "principal", "key"))
            pipe_rm = self._redis.pipeline(transaction=True)
            for run_id, (status, workflow, trigger, principal, key) in zip(part, pipe.execute(), strict=True):
                if status is not None and _text(status) in ACTIVE:
                    continue  # retried or resumed since it ended: not done any more
                pruned += 1
                pipe_rm.delete(self._key("run", run_id), self._key("events", run_id))
                pipe_rm.zrem(self._key("finished"), run_id)
                pipe_rm.zrem(self._key("runs"), run_id)
                for name, value in (("status", status), ("workflow", workflow), ("trigger", trigger),
                                    ("principal", principal)):
                    if value is not None:
                        pipe_rm.zrem(self._key(name, _text(value) or ""), run_id)
                if key is not None and (text := _text(key)):
                    pipe_rm.delete(self._key("key", text))
            pipe_rm.execute()
        return pruned

    # -- ownership ------------------------------------------------------------------------------

    def _owners(self) -> dict[str, tuple[str, int, float]]:
        return {k.decode(): tuple(loads(v)) for k, v in self._redis.hgetall(self._key("owners")).items()}

    @unavailable
    def orphaned_runs(self, me: Owner, lease_seconds: float) -> builtins.list[tuple[str, str | None]]:
        """Runs still under way (ACTIVE: running, waiting for a person, queued) whose owner is gone: its lease
        ran out, or its process on this host died."""
        ids = [run_id.decode() for status in ACTIVE for run_id in self._redis.zrange(self._key("status", status), 0, -1)]
        if not ids:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for run_id in ids:
            pipe.hget(self._key("run", run_id), "owner")
        owners = [_text(owner) for owner in pipe.execute()]
        known = self._owners()
        orphans = []
        for run_id, owner in zip(ids, owners, strict=True):
            host, pid, beat = known.get(owner or "", (None, None, None))
            if owner_gone(owner, host, pid, beat, me, lease_seconds):
                orphans.append((run_id, owner))
        return orphans

    @unavailable
    def owner_alive(self, owner_id: str | None, me: Owner, lease_seconds: float) -> bool:
        found = self._redis.hget(self._key("owners"), owner_id) if owner_id else None
        host, pid, beat = loads(found) if found is not None else (None, None, None)
        return not owner_gone(owner_id, host, pid, beat, me, lease_seconds)

    @unavailable
    def claim(self, run_id: str, previous_owner: str | None, me: Owner) -> bool:
        """Take a run over from `previous_owner`; False if someone else took it first."""
        return bool(self._claim(keys=[self._key("run", run_id)], args=[previous_owner or "", me.owner_id]))

    @unavailable
    def register_owner(self, me: Owner) -> None:
        self._redis.hset(self._key("owners"), me.owner_id, dumps([me.host, me.pid, time.time()]))

    @unavailable
    def release_owner(self, me: Owner) -> None:
        self._redis.hdel(self._key("owners"), me.owner_id)

    # -- signals --------------------------------------------------------------------------------

    def _publish(self, kind: str, subject: str, data: dict[str, Any] | None = None) -> None:
        self._redis.publish(self._key("signals"), dumps({"kind": kind, "subject": subject, "data": data}))

    @unavailable
    def request_cancel(self, run_id: str) -> None:
        """Ask whichever replica runs `run_id` to cancel it: a flag (for one that resumes it later) and
        a signal (for the one running it now)."""
        self._redis.set(self._key("cancel", run_id), 1, ex=CANCEL_KEEP_SECONDS)
        self._publish("cancel", run_id)

    @unavailable
    def cancel_requested(self, run_id: str) -> bool:
        return bool(self._redis.exists(self._key("cancel", run_id)))

    @unavailable
    def send_answer(self, run_id: str, answer: dict[str, Any]) -> None:
        """Hand a person's answer to whichever replica runs `run_id` (a signal: it is listening)."""
        self._publish("answer", run_id, answer)

    async def signals(self) -> AsyncGenerator[Signal, None]:
        """Signals published from now on, by any replica (this one included). A thread of its own reads
        the subscription (the sync client: redis.asyncio can swallow a cancellation) and hands them over."""
        loop = asyncio.get_running_loop()
        heard: asyncio.Queue[Signal | IceError] = asyncio.Queue()
        stop = threading.Event()
        pubsub = self._redis.pubsub()

        def hand_over(item: Signal | IceError) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens any more
                loop.call_soon_threadsafe(heard.put_nowait, item)

        def listen() -> None:
            try:
                pubsub.subscribe(self._key("signals"))
                while not stop.is_set():
                    message = pubsub.get_message(timeout=SIGNAL_WAIT_SECONDS)
                    if message is None:
                        continue
                    if message["type"] == "subscribe":
                        hand_over(Signal("listening", ""))
                    elif message["type"] == "message" and (signal := _signal(message["data"])) is not None:
                        hand_over(signal)
            except Exception as exc:  # the connection broke, or the store closed it under us
                if not stop.is_set():
                    hand_over(IceError(f"the state store at {self.location} did not answer: {exc}",
                                       code="state_unavailable"))
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

        thread = threading.Thread(target=listen, name="ice_mcp-signals", daemon=True)
        self._listeners[thread] = stop
        thread.start()
        try:
            while True:
                item = await heard.get()
                if isinstance(item, IceError):
                    raise item
                yield item
        finally:
            stop.set()
            self._listeners.pop(thread, None)

    # -- caller spend ---------------------------------------------------------------------------

    @unavailable
    def add_spend(self, caller: str, usd: float) -> float:
        return float(self._redis.hincrbyfloat(self._key("spend"), caller, usd))

    @unavailable
    def spent(self, caller: str) -> float:
        value = self._redis.hget(self._key("spend"), caller)
        return 0.0 if value is None else float(value)

    # -- blobs (large payloads that travel by reference) ------------------------------------------

    @unavailable
    def put_blob(self, key: str, data: bytes) -> None:
        self._redis.set(self._key("blob", key), data, nx=True)

    @unavailable
    def secret(self, name: str) -> bytes:
        """A random 32-byte secret every replica shares (made by the first to ask)."""
        self._redis.set(self._key("secret", name), os.urandom(32), nx=True)
        return bytes(self._redis.get(self._key("secret", name)))

    @unavailable
    def get_blob(self, key: str) -> bytes:
        data = self._redis.get(self._key("blob", key))
        if data is None:
            raise IceError(f"no payload {key[:80]!r} in the run store", code="payload_missing")
        return bytes(data)

    # -- registered blueprints ------------------------------------------------------------------

    @unavailable
    def save_blueprint(self, name: str, source: dict[str, Any], text: str | None = None) -> int:
        entry = {"source": source, "created_at": time.time(), **({"text": text} if text is not None else {})}
        version = int(self._save_bp(args=[self.prefix, name, dumps(entry)]))
        self._publish("blueprint", name)
        return version

    @unavailable
    def delete_blueprint(self, name: str) -> bool:
        deleted = bool(self._delete_bp(args=[self.prefix, name]))
        if deleted:
            self._publish("blueprint", name)
        return deleted

    @unavailable
    def blueprints(self) -> builtins.list[StoredBlueprint]:
        """The current version of every registered blueprint that was not deleted."""
        names = sorted(n.decode() for n in self._redis.sdiff(self._key("blueprints"), self._key("deleted_blueprints")))
        if not names:
            return []
        versions = self._redis.hmget(self._key("blueprint_versions"), names)
        pipe = self._redis.pipeline(transaction=False)
        for name, version in zip(names, versions, strict=True):
            pipe.hget(self._key("blueprint", name), version or b"0")
        kept = []
        for name, version, text in zip(names, versions, pipe.execute(), strict=True):
            if text is not None:
                entry = loads(text)
                kept.append(StoredBlueprint(name, int(version), entry["source"], entry["created_at"], entry.get("text")))
        return kept

    @unavailable
    def blueprint_versions(self, name: str) -> builtins.list[StoredBlueprint]:
        rows = self._redis.hgetall(self._key("blueprint", name))
        found = sorted(((int(version), loads(text)) for version, text in rows.items()), key=lambda pair: pair[0])
        return [StoredBlueprint(name, version, entry["source"], entry["created_at"], entry.get("text"))
                for version, entry in found]

    def close(self) -> None:
        """Finish pending writes (bounded), stop the writer and the signal listeners, close the connections."""
        listeners = list(self._listeners.items())
        for _, stop in listeners:
            stop.set()
        for thread, _ in listeners:
            thread.join(timeout=2 * SIGNAL_WAIT_SECONDS)
        if self._stop_writer():
            self._redis.close()


def _signal(data: bytes) -> Signal | None:
    try:
        message = loads(data)
        kind, subject, extra = message["kind"], str(message["subject"]), message.get("data")
    except (ValueError, KeyError, TypeError, AttributeError):
        logger.warning("state store: an unreadable signal was ignored")
        return None
    return Signal(kind, subject, extra if isinstance(extra, dict) else None) if kind in SIGNAL_KINDS else None


def _redis_cursor(cursor: str) -> tuple[str, str]:
    """A page cursor back to (score, run id); IceError(invalid_cursor) for anything else."""
    score, _, run_id = cursor.partition(":")
    try:
        float(score)
    except ValueError:
        raise IceError("cursor: pass back the next_cursor a page answered", code="invalid_cursor") from None
    return score, run_id


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value
