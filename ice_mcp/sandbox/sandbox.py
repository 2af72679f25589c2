"""The public face of the sandbox: `Sandbox.run_code` with server-wide ceilings."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ice_mcp.sandbox import artifacts as A
from ice_mcp.sandbox import errors as E
from ice_mcp.sandbox.cache import CacheLayout
from ice_mcp.sandbox.errors import SandboxError
from ice_mcp.sandbox.pool import WorkerPool, bootstrap
from ice_mcp.sandbox.runner import Job

MIB = 1024 * 1024
# The snapshot's linear memory starts at 40 MiB; below this it cannot even start.
MIN_MEMORY_MB = 64


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """Server-wide settings. A node's own limits are clamped to the ceilings."""

    workers: int = field(default_factory=lambda: max(1, os.cpu_count() or 1))
    default_timeout_seconds: float = 10.0
    max_timeout_seconds: float = 60.0
    default_memory_mb: int = 256
    max_memory_mb: int = 1024
    max_stdout_bytes: int = 1 * MIB
    max_result_bytes: int = 4 * MIB
    max_input_bytes: int = 8 * MIB
    cache_dir: Path | None = None
    # Extra host folders shown read-only to every guest, as (host path, guest path).
    readonly_dirs: tuple[tuple[Path, str], ...] = ()

    def __post_init__(self) -> None:
        for host, guest in self.readonly_dirs:
            if not guest.startswith("/") or guest.rstrip("/") in ("", "/usr", "/usr/local", "/usr/local/lib"):
                raise ValueError(f"readonly_dirs: guest path {guest!r} must be absolute and not hide the stdlib")
            if not Path(host).is_dir():
                raise ValueError(f"readonly_dirs: {host} is not a folder")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SandboxConfig:
        """From settings such as `Settings.extra["sandbox"]`; unknown keys are ignored."""
        known = {k: v for k, v in values.items() if k in cls.__dataclass_fields__}
        if known.get("cache_dir") is not None:
            known["cache_dir"] = Path(known["cache_dir"])
        if "readonly_dirs" in known:
            known["readonly_dirs"] = tuple((Path(host), str(guest)) for host, guest in known["readonly_dirs"])
        return cls(**known)

    @classmethod
    def from_env(cls, overrides: Mapping[str, Any] | None = None) -> SandboxConfig:
        """ICE_MCP_SANDBOX_WORKERS, _MAX_TIMEOUT_SECONDS and _MAX_MEMORY_MB, then `overrides`."""
        values: dict[str, Any] = {}
        for name, kind in (("workers", int), ("max_timeout_seconds", float), ("max_memory_mb", int)):
            raw = os.environ.get(f"ICE_MCP_SANDBOX_{name.upper()}")
            if raw:
                values[name] = kind(raw)
        values.update(overrides or {})
        return cls.from_mapping(values)

    def clamp(self, timeout_seconds: float | None, memory_mb: int | None) -> tuple[float, int]:
        timeout = self.default_timeout_seconds if timeout_seconds is None else timeout_seconds
        memory = self.default_memory_mb if memory_mb is None else memory_mb
        return (
            min(max(timeout, 0.01), self.max_timeout_seconds),
            min(max(memory, MIN_MEMORY_MB), max(self.max_memory_mb, MIN_MEMORY_MB)),
        )


@dataclass(frozen=True, slots=True)
class CodeOutcome:
    """A successful run: the snippet's JSON result and what it printed."""

    result: Any
    stdout: str
    elapsed_ms: float

    def as_output(self) -> dict[str, Any]:
        return {"result": self.result, "stdout": self.stdout}


class Sandbox:
    """Runs code-node snippets in fresh WebAssembly instances on a pool of worker processes."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._layout: CacheLayout | None = None
        self._pool: WorkerPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting: asyncio.Lock | None = None

    async def warmup(self) -> None:
        """Build the cache if needed and start every worker, so the first run is fast."""
        pool = await self._ready_pool()
        await pool.start()

    async def _ensure_cache(self) -> CacheLayout:
        layout = CacheLayout.at(self.config.cache_dir)
        if layout.ready():
            return layout
        # The first compile takes ~2.3 GB and a minute: do it in a child, not in the server.
        env = dict(os.environ)
        if self.config.cache_dir is not None:
            env[A.CACHE_ENV] = str(self.config.cache_dir)
        entry = "from ice_mcp.sandbox.cli import warmup_cli; sys.exit(warmup_cli([]))"
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", bootstrap(entry), env=env, stdout=asyncio.subprocess.DEVNULL
        )
        if await process.wait() != 0 or not layout.ready():
            try:  # the usual cause, checked here for a precise message (never compiled here)
                await asyncio.to_thread(A.verified_carrier)
            except A.RuntimeMissing as e:
                raise SandboxError(E.UNAVAILABLE, str(e)) from None
            raise SandboxError(
                E.UNAVAILABLE, "the sandbox runtime could not be compiled; run `ice-mcp sandbox warmup` to see why"
            )
        return layout

    async def _ready_pool(self) -> WorkerPool:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop:
            return self._pool
        if self._starting is None or self._loop is not loop:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._pool is not None and self._loop is not loop:
                self._pool.kill_all()  # its pipes belong to a loop that is gone
                self._pool = None
            if self._pool is None:
                self._layout = self._layout or await self._ensure_cache()
                self._pool = WorkerPool(self._layout, self.config.workers)
                self._loop = loop
            return self._pool

    def _job(self, code: str, inputs: Mapping[str, Any], timeout_seconds: float | None, memory_mb: int | None) -> Job:
        if not isinstance(code, str):
            raise SandboxError(E.INVALID_INPUT, "code must be a string")
        try:
            # ASCII only: argv must be valid UTF-8, and escapes keep lone surrogates intact.
            inputs_json = json.dumps(dict(inputs), allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as e:
            raise SandboxError(E.INVALID_INPUT, f"the code node's inputs are not JSON: {e}") from None
        if len(inputs_json) + len(code) > self.config.max_input_bytes:
            raise SandboxError(
                E.INVALID_INPUT,
                f"the code and its inputs are larger than {self.config.max_input_bytes} bytes",
                {"limit_bytes": self.config.max_input_bytes},
            )
        if "\x00" in code:
            raise SandboxError(E.INVALID_INPUT, "the code contains a NUL character")
        try:
            code.encode("utf-8")
        except UnicodeEncodeError:
            raise SandboxError(E.INVALID_INPUT, "the code is not valid Unicode text") from None
        timeout, memory = self.config.clamp(timeout_seconds, memory_mb)
        return Job(
            code=code,
            inputs_json=inputs_json,
            timeout_seconds=timeout,
            memory_bytes=memory * MIB,
            max_stdout_bytes=self.config.max_stdout_bytes,
            max_result_bytes=self.config.max_result_bytes,
            readonly_dirs=tuple((str(host), guest) for host, guest in self.config.readonly_dirs),
        )

    async def run_code(
        self,
        code: str,
        inputs: Mapping[str, Any],
        *,
        timeout_seconds: float | None = None,
        memory_mb: int | None = None,
    ) -> CodeOutcome:
        """Run `code` as the body of `def main(inputs)`; raise SandboxError on any failure."""
        job = self._job(code, inputs, timeout_seconds, memory_mb)
        pool = await self._ready_pool()
        outcome = await pool.run(job)
        if not outcome.get("ok"):
            details = outcome.get("details")
            details = dict(details) if isinstance(details, dict) else {}
            if outcome.get("stdout"):  # what it printed before failing helps to debug it
                details["stdout"] = outcome["stdout"]
            raise SandboxError(str(outcome.get("code", E.GUEST_EXCEPTION)), str(outcome.get("message", "")), details)
        return CodeOutcome(outcome.get("result"), str(outcome.get("stdout", "")), float(outcome.get("elapsed_ms", 0)))

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()
