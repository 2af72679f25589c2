"""The on-disk cache: the compiled module, the guest's stdlib folder and the marshalled driver.

Layout (folders 0700, files 0600, this user's own):
    <cache>/<key>/runtime.cwasm           serialized wasmtime module
    <cache>/<key>/lib/python315.zip       the guest's stdlib, preopened read-only
    <cache>/<key>/lib/driver-<hash>.bin   the guest driver, marshalled by the guest
The key covers the wasm's sha256, the wasmtime version, the engine settings and the CPU
architecture; wasmtime itself refuses a .cwasm made for other CPU features. <cache> is the
virtual environment's own folder when this user owns it, else the per-user one (`artifacts.cache_dirs`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ice_mcp.sandbox import artifacts as A
from ice_mcp.sandbox.driver_source import DRIVER_SOURCE
from ice_mcp.sandbox.engine import ENGINE_SETTINGS, compile_runtime, load_runtime, wasmtime_version
from ice_mcp.sandbox.runner import marshal_driver


def cache_key() -> str:
    # The machine too: a home folder shared by machines of another architecture must not mix.
    text = f"{A.PINNED_SHA256[A.SNAPSHOT_NAME]}|wasmtime {wasmtime_version()}|{ENGINE_SETTINGS!r}|{platform.machine()}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def driver_name() -> str:
    return f"driver-{hashlib.sha256(DRIVER_SOURCE.encode()).hexdigest()[:16]}.bin"


@dataclass(frozen=True, slots=True)
class CacheLayout:
    root: Path

    @classmethod
    def at(cls, cache_dir: Path | None = None) -> CacheLayout:
        return cls((cache_dir or A.default_cache_dir()) / cache_key())

    @property
    def cwasm(self) -> Path:
        return self.root / "runtime.cwasm"

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    @property
    def stdlib_zip(self) -> Path:
        return self.lib / A.GUEST_ZIP_NAME

    @property
    def driver(self) -> Path:
        return self.lib / driver_name()

    @property
    def origin(self) -> Path:
        """How this folder's module came to be: compiled here (from an empty folder or not), or copied."""
        return self.root / "origin.json"

    def made(self) -> dict[str, Any] | None:
        try:
            found = json.loads(self.origin.read_text())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def ready(self) -> bool:
        """Whether every file is there and private (a .cwasm is native code, run as found)."""
        return all(A.is_private_file(p) for p in (self.cwasm, self.stdlib_zip, self.driver))


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One builder at a time across processes (tests, servers and setup may race)."""
    A.ensure_private_dir(root)
    with open(root / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _compiled_before() -> Path | None:
    """This runtime's module as compiled into a later folder of `cache_dirs()` (the per-user one), if it is."""
    for folder in A.cache_dirs()[1:]:
        if A.is_private_file(cwasm := CacheLayout.at(folder).cwasm):
            return cwasm
    return None


def _record(layout: CacheLayout, made: dict[str, Any]) -> None:
    """Say how the module was made (`ice-mcp sandbox warmup` and a test of the first-time path read it)."""
    A.write_private(layout.origin, json.dumps({**made, "at": time.time()}).encode())


def _log(quiet: bool, message: str) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def ensure_cache(cache_dir: Path | None = None, *, quiet: bool = True) -> CacheLayout:
    """Build whatever is missing: verify the carrier, compile, copy the stdlib, marshal the driver.

    Fast when everything is there. The first compile of the snapshot takes about a
    minute and 2.3 GB of memory; run it in its own process (`warmup`).
    """
    layout = CacheLayout.at(cache_dir)
    if layout.ready():
        return layout
    A.ensure_private_dir(layout.root.parent)
    with _locked(layout.root):
        if layout.ready():
            return layout
        empty = not any(A.is_private_file(p) for p in (layout.cwasm, layout.stdlib_zip, layout.driver))
        A.ensure_private_dir(layout.lib)
        carrier = A.verified_carrier()
        if not A.is_private_file(layout.stdlib_zip):
            data = carrier.stdlib_zip.read_bytes()
            if hashlib.sha256(data).hexdigest() != A.PINNED_SHA256[A.STDLIB_NAME]:
                raise A.RuntimeMissing(f"{carrier.stdlib_zip} changed after it was verified")
            A.write_private(layout.stdlib_zip, data)
        if cache_dir is None and not A.is_private_file(layout.cwasm) and (earlier := _compiled_before()):
            A.write_private(layout.cwasm, earlier.read_bytes())  # a copy takes a second, a compile minutes
            _record(layout, {"made": "copied", "from": str(earlier)})
        if A.is_private_file(layout.cwasm):
            runtime = load_runtime(layout.cwasm, layout.lib)
        else:
            _log(quiet, f"compiling the sandbox runtime into {layout.root} (about a minute, once)…")
            started = time.perf_counter()
            wasm = carrier.snapshot.read_bytes()
            # Compile only the bytes that were hashed, so nothing swapped in later is compiled.
            if hashlib.sha256(wasm).hexdigest() != A.PINNED_SHA256[A.SNAPSHOT_NAME]:
                raise A.RuntimeMissing(f"{carrier.snapshot} changed after it was verified")
            runtime, serialized = compile_runtime(wasm, layout.lib)
            del wasm
            A.write_private(layout.cwasm, serialized)
            del serialized
            seconds = round(time.perf_counter() - started, 1)
            _record(layout, {"made": "compiled", "from_empty_folder": empty, "seconds": seconds})
            _log(quiet, f"compiled in {seconds:.1f} s")
        try:
            A.write_private(layout.driver, marshal_driver(runtime, DRIVER_SOURCE))
        finally:
            runtime.close()
        # Other drivers stay: another checkout sharing this cache may still be using one.
    return layout

