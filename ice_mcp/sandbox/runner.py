"""One guest run: a fresh WASI context and Store, its limits, its output sinks, its verdict."""

from __future__ import annotations

import errno
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Final

import wasmtime

from ice_mcp.sandbox import errors as E
from ice_mcp.sandbox.engine import TICK_SECONDS, Runtime
from ice_mcp.sandbox.poll import CLOCK, DeadlineReached

ARGV0: Final = "/usr/local/bin/python.wasm"
GUEST_LIB: Final = "/usr/local/lib"
# Never the host's environment: only what CPython needs.
GUEST_ENV: Final = [("HOME", "/"), ("PYTHONTZPATH", ""), ("TMPDIR", "/tmp")]
# The verdicts the guest driver may report itself; the others only the host decides.
GUEST_CODES: Final = frozenset({E.GUEST_EXCEPTION, E.FORBIDDEN, E.NOT_JSON, E.OUTPUT_LIMIT, E.MEMORY_LIMIT})
# JSON escaping can grow printed text up to 6x (\u00XX); the envelope adds a little.
ENVELOPE_SLACK: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Job:
    """What one run needs; plain data so it can cross a process boundary."""

    code: str
    inputs_json: str
    timeout_seconds: float
    memory_bytes: int
    max_stdout_bytes: int
    max_result_bytes: int
    readonly_dirs: tuple[tuple[str, str], ...] = ()  # (host path, guest path)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        dirs = tuple((str(host), str(guest)) for host, guest in data.get("readonly_dirs", ()))
        return cls(**{**data, "readonly_dirs": dirs})


@dataclass(slots=True)
class Sink:
    """A capped output stream: past the cap the guest's write fails with EFBIG."""

    cap: int
    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    overflowed: bool = False

    def __call__(self, data: bytes) -> int:
        if self.size + len(data) > self.cap:
            self.overflowed = True
            return -errno.EFBIG
        self.size += len(data)
        self.parts.append(bytes(data))
        return len(data)

    def text(self) -> str:
        return b"".join(self.parts).decode("utf-8", "replace")


def boot_argv(driver_file: str) -> list[str]:
    """argv that loads the marshalled driver from the read-only lib folder and runs it."""
    boot = f"import marshal;exec(marshal.loads(open({GUEST_LIB + '/' + driver_file!r},'rb').read()))"
    return [ARGV0, "-c", boot]


def run_guest(
    runtime: Runtime,
    argv: list[str],
    *,
    timeout_seconds: float,
    memory_bytes: int,
    stdout_cap: int,
    stderr_cap: int = 64 * 1024,
    readonly_dirs: tuple[tuple[str, str], ...] = (),
) -> tuple[str, int | None, Sink, Sink]:
    """Run the guest once. Returns (ending, exit code, stdout, stderr).

    ending is "exit", "timeout", "trap:<name>" or "error:<text>".
    """
    wasi = wasmtime.WasiConfig()
    wasi.argv = argv
    wasi.env = GUEST_ENV
    wasi.preopen_dir(str(runtime.lib_dir), GUEST_LIB, False)
    for host, guest in readonly_dirs:
        wasi.preopen_dir(host, guest, False)
    out, err = Sink(stdout_cap), Sink(stderr_cap)
    wasi.stdout_custom = out
    wasi.stderr_custom = err
    store = wasmtime.Store(runtime.engine)
    ending, code = "exit", None
    try:
        store.set_limits(memory_size=memory_bytes)
        store.set_epoch_deadline(max(1, math.ceil(timeout_seconds / TICK_SECONDS)))
        CLOCK.origin_ns = time.perf_counter_ns()
        store.set_wasi(wasi)
        CLOCK.deadline_ns = CLOCK.origin_ns + int(timeout_seconds * 1e9)
        instance = runtime.pre.instantiate(store)
        run = instance.exports(store)["run"]
        assert isinstance(run, wasmtime.Func)
        code = run(store)
    except wasmtime.ExitTrap as e:
        code = e.code
    except DeadlineReached:
        ending = "timeout"
    except wasmtime.Trap as e:
        trap = e.trap_code
        ending = "timeout" if trap == wasmtime.TrapCode.INTERRUPT else f"trap:{trap.name if trap else 'unknown'}"
    except wasmtime.WasmtimeError as e:
        ending = f"error:{str(e).splitlines()[0] if str(e) else type(e).__name__}"
    finally:
        CLOCK.deadline_ns = None
        store.close()
    return ending, code, out, err


def execute(runtime: Runtime, driver_file: str, job: Job) -> dict[str, Any]:
    """Run a code node's snippet. The outcome is plain JSON-able data:
    {"ok": True, "result", "stdout"} or {"ok": False, "code", "message", "details"}."""
    roots = "\n".join([GUEST_LIB, *(guest for _, guest in job.readonly_dirs)])
    argv = [*boot_argv(driver_file), job.code, job.inputs_json, str(job.max_stdout_bytes), str(job.max_result_bytes), roots]
    cap = job.max_result_bytes + 6 * job.max_stdout_bytes + ENVELOPE_SLACK
    started = time.perf_counter()
    ending, code, out, err = run_guest(
        runtime,
        argv,
        timeout_seconds=job.timeout_seconds,
        memory_bytes=job.memory_bytes,
        stdout_cap=cap,
        readonly_dirs=job.readonly_dirs,
    )
    outcome = _verdict(job, ending, code, out, err)
    outcome["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 3)
    return outcome


def _error(code: str, text: str, **details: Any) -> dict[str, Any]:
    return {"ok": False, "code": code, "message": text, "details": details}


def _verdict(job: Job, ending: str, code: int | None, out: Sink, err: Sink) -> dict[str, Any]:
    if ending == "timeout":
        return _error(E.TIMEOUT, f"the code ran longer than {job.timeout_seconds:g} s", limit_seconds=job.timeout_seconds)
    if out.overflowed or err.overflowed:
        return _error(E.OUTPUT_LIMIT, "the code's output is too large", limit_bytes=job.max_stdout_bytes)
    stderr = err.text()
    if ending == "trap:STACK_OVERFLOW":
        return _error(E.GUEST_EXCEPTION, "RecursionError: the guest's stack overflowed", type="RecursionError", message="stack overflow", line=None)
    if ending.startswith(("trap:", "error:")) or code != 0:
        # CPython aborts (an `unreachable` trap) on allocations it cannot recover from.
        if "MemoryError" in stderr or "memory" in ending.lower() or ending == "trap:UNREACHABLE":
            return _error(E.MEMORY_LIMIT, f"the code ran out of memory ({job.memory_bytes >> 20} MiB)", limit_mb=job.memory_bytes >> 20)
        if ending == "exit":  # the snippet ended the interpreter itself (os._exit, a crash)
            return _error(E.GUEST_EXCEPTION, f"SystemExit: the code exited with status {code}", type="SystemExit", message=str(code), line=None)
        return _error(E.GUEST_EXCEPTION, f"the guest stopped: {ending}", type="Trap", message=ending, line=None)
    try:
        envelope = json.loads(b"".join(out.parts))
    except ValueError:
        envelope = None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("stdout"), str):
        return _error(E.GUEST_EXCEPTION, "the code wrote no result (it replaced the driver's output)", type="ProtocolError", message="no envelope", line=None)
    error = envelope.get("error")
    if isinstance(error, dict):
        kind = error.get("code") if error.get("code") in GUEST_CODES else E.GUEST_EXCEPTION
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
        return {"ok": False, "code": kind, "message": str(error.get("message", "")), "details": details, "stdout": envelope["stdout"]}
    if "result" not in envelope:
        return _error(E.GUEST_EXCEPTION, "the code wrote no result", type="ProtocolError", message="no result", line=None)
    return {"ok": True, "result": envelope["result"], "stdout": envelope["stdout"]}


def marshal_driver(runtime: Runtime, source: str) -> bytes:
    """Compile the driver in the guest (its marshal format is the guest's CPython's)."""
    boot = "import marshal,posix,sys;posix.write(1,marshal.dumps(compile(sys.argv[1],'<sandbox>','exec')));posix._exit(0)"
    ending, code, out, err = run_guest(
        runtime, [ARGV0, "-c", boot, source], timeout_seconds=30, memory_bytes=256 << 20, stdout_cap=1 << 22
    )
    if ending != "exit" or code != 0 or not out.parts:
        raise E.SandboxError(E.UNAVAILABLE, f"could not compile the guest driver: {ending} {code} {err.text()[-2000:]}")
    return b"".join(out.parts)
