"""The per-process wasmtime state: one Engine, one epoch ticker, one linker, one InstancePre."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Final

import wasmtime

from ice_mcp.sandbox.poll import define_poll_oneoff

# Everything that changes the compiled code: part of the cache key.
ENGINE_SETTINGS: Final = (("epoch_interruption", True),)
# Epoch granularity: a deadline is met within about one tick.
TICK_SECONDS: Final = 0.01
# The snapshot imports `host.call` (a tool door we never open): it answers "no host".
NO_HOST: Final = -1


def wasmtime_version() -> str:
    return version("wasmtime")


def make_engine() -> wasmtime.Engine:
    config = wasmtime.Config()
    for name, value in ENGINE_SETTINGS:
        setattr(config, name, value)
    return wasmtime.Engine(config)


class EpochTicker:
    """The one thread that advances the engine's epoch; every store's deadline counts its ticks.

    A timer per run would interrupt other runs on the same engine, so there is one per engine.
    """

    def __init__(self, engine: wasmtime.Engine, tick_seconds: float = TICK_SECONDS) -> None:
        self._engine = engine
        self._tick = tick_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sandbox-epoch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._tick):
            self._engine.increment_epoch()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)


def _host_call(a: int, b: int, c: int, d: int) -> int:
    return NO_HOST


@dataclass(slots=True)
class Runtime:
    """A loaded runtime: ready to instantiate a fresh guest per run."""

    engine: wasmtime.Engine
    module: wasmtime.Module
    pre: wasmtime.InstancePre
    ticker: EpochTicker
    lib_dir: Path

    def close(self) -> None:
        self.ticker.close()


def load_runtime(cwasm: Path, lib_dir: Path) -> Runtime:
    """Deserialize the cached module (milliseconds) and prepare instantiation once."""
    engine = make_engine()
    module = wasmtime.Module.deserialize_file(engine, str(cwasm))
    return _prepare(engine, module, lib_dir)


def compile_runtime(wasm: bytes, lib_dir: Path) -> tuple[Runtime, bytearray]:
    """Compile from verified bytes (slow: about a minute and 2.3 GB for the snapshot)."""
    engine = make_engine()
    module = wasmtime.Module(engine, wasm)
    return _prepare(engine, module, lib_dir), module.serialize()


def _prepare(engine: wasmtime.Engine, module: wasmtime.Module, lib_dir: Path) -> Runtime:
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    linker.allow_shadowing = True
    define_poll_oneoff(linker)
    i32 = wasmtime.ValType.i32()
    linker.define_func("host", "call", wasmtime.FuncType([i32] * 4, [i32]), _host_call)
    pre = linker.instantiate_pre(module)
    return Runtime(engine, module, pre, EpochTicker(engine), lib_dir)
