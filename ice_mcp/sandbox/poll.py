"""A `poll_oneoff` that never sleeps past the run's deadline.

wasmtime's own poll_oneoff blocks in the host and ignores the epoch deadline,
so a guest `time.sleep(4)` would run 4 s under a 1 s limit. This shadow
sleeps at most until the deadline and then stops the guest.
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Final

import wasmtime

from ice_mcp.errors import IceError

SUBSCRIPTION_SIZE: Final = 48
EVENT_SIZE: Final = 32
TAG_CLOCK: Final = 0
CLOCK_REALTIME: Final = 0
ABSTIME: Final = 1
EINVAL: Final = 28
EFAULT: Final = 21
MAX_SUBSCRIPTIONS: Final = 4096


class DeadlineReached(IceError):
    """Raised out of the guest when a sleep would outlast the run's deadline."""

    code = "timeout"

    def __init__(self) -> None:
        super().__init__("the guest's sleep would outlast its deadline")


class RunClock(threading.local):
    """The running guest's deadline and clock origin, for the thread that runs it."""

    deadline_ns: int | None = None
    # wasmtime's monotonic clock counts from when the store's WASI context was made.
    origin_ns: int = 0


CLOCK = RunClock()


def _wait_ns(clock_id: int, timeout: int, flags: int, now_ns: int) -> int:
    if not flags & ABSTIME:
        return timeout
    if clock_id == CLOCK_REALTIME:
        return timeout - time.time_ns()
    return timeout - (now_ns - CLOCK.origin_ns)


def _poll_oneoff(caller: wasmtime.Caller, in_ptr: int, out_ptr: int, nsubs: int, nevents_ptr: int) -> int:
    memory = caller.get("memory")
    if not isinstance(memory, wasmtime.Memory) or not 0 < nsubs <= MAX_SUBSCRIPTIONS:
        return EINVAL
    try:
        raw = bytes(memory.read(caller, in_ptr, in_ptr + nsubs * SUBSCRIPTION_SIZE))
    except (ValueError, IndexError, wasmtime.WasmtimeError):
        return EFAULT
    now_ns = time.perf_counter_ns()
    ready: list[tuple[int, int]] = []  # (userdata, event type) for fd subscriptions
    clocks: list[tuple[int, int]] = []  # (userdata, wait ns)
    for i in range(nsubs):
        base = i * SUBSCRIPTION_SIZE
        userdata, tag = struct.unpack_from("<QB", raw, base)
        if tag == TAG_CLOCK:
            clock_id, timeout, _precision, flags = struct.unpack_from("<I4xQQH", raw, base + 16)
            clocks.append((userdata, _wait_ns(clock_id, timeout, flags, now_ns)))
        else:
            ready.append((userdata, tag))  # stdin is empty, stdout/stderr never block
    if not ready:
        wait = max(0, min(w for _, w in clocks))
        deadline = CLOCK.deadline_ns
        if deadline is not None and now_ns + wait >= deadline:
            time.sleep(max(0, deadline - now_ns) / 1e9)
            raise DeadlineReached()
        if wait:
            time.sleep(wait / 1e9)
        ready = [(u, TAG_CLOCK) for u, w in clocks if w <= wait]
    events = b"".join(struct.pack("<QHBxxxxxQH6x", u, 0, kind, 0, 0) for u, kind in ready)
    try:
        memory.write(caller, events, out_ptr)
        memory.write(caller, struct.pack("<I", len(ready)), nevents_ptr)
    except (ValueError, IndexError, wasmtime.WasmtimeError):
        return EFAULT
    return 0


def define_poll_oneoff(linker: wasmtime.Linker) -> None:
    """Shadow WASI's poll_oneoff on `linker` (which must allow shadowing)."""
    i32 = wasmtime.ValType.i32()
    ty = wasmtime.FuncType([i32] * 4, [i32])
    linker.define_func("wasi_snapshot_preview1", "poll_oneoff", ty, _poll_oneoff, access_caller=True)
