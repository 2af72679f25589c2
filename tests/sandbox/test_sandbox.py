"""The code-node sandbox against real wasmtime: results, guest errors, and escape attempts.

Every abuse test asserts the exact structured outcome, then checks that the
next run still works (the host and the pool survived).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from ice_mcp.errors import NodeFailure
from ice_mcp.sandbox import Sandbox, SandboxConfig, SandboxError

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def still_works(sandbox: Sandbox) -> None:
    outcome = await sandbox.run_code("return inputs['n'] + 1", {"n": 41})
    assert outcome.result == 42


async def fails(sandbox: Sandbox, code: str, expected: str, inputs: dict[str, Any] | None = None, **limits: Any) -> SandboxError:
    with pytest.raises(SandboxError) as caught:
        await sandbox.run_code(code, inputs or {}, **limits)
    error = caught.value
    assert error.code == expected, error.as_dict()
    await still_works(sandbox)
    return error


# --- correctness ---------------------------------------------------------------------------


async def test_result_and_stdout(sandbox: Sandbox) -> None:
    outcome = await sandbox.run_code(
        "print('rows:', len(inputs['rows']))\nreturn sum(r['amount'] for r in inputs['rows'])",
        {"rows": [{"amount": 2.5}, {"amount": 4}]},
    )
    assert outcome.result == 6.5
    assert outcome.stdout == "rows: 2\n"
    assert outcome.as_output() == {"result": 6.5, "stdout": "rows: 2\n"}


async def test_structured_result_round_trips(sandbox: Sandbox) -> None:
    value = {"list": [1, 2.5, None, True], "text": "héllo ✓", "nested": {"a": []}}
    outcome = await sandbox.run_code("return inputs['value']", {"value": value})
    assert outcome.result == value


async def test_unusual_text_round_trips(sandbox: Sandbox) -> None:
    value = "emoji 🎉, nul-free control \x01, lone surrogate \ud800"
    outcome = await sandbox.run_code("print(inputs['v'])\nreturn inputs['v']", {"v": value})
    assert outcome.result == value
    assert outcome.stdout == value + "\n"


async def test_code_with_a_nul_character_is_refused_on_the_host(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError) as caught:
        await sandbox.run_code("return 1\x00", {})
    assert caught.value.code == "invalid_input"


async def test_empty_body_returns_none(sandbox: Sandbox) -> None:
    assert (await sandbox.run_code("", {})).result is None
    assert (await sandbox.run_code("x = 1", {})).result is None


async def test_body_keeps_multiline_strings_and_helpers(sandbox: Sandbox) -> None:
    code = 's = """a\n  b"""\ndef double(x):\n    return 2 * x\nreturn [s, double(inputs["k"])]'
    assert (await sandbox.run_code(code, {"k": 21})).result == ["a\n  b", 42]


async def test_stdlib_imports_work(sandbox: Sandbox) -> None:
    code = "import math, statistics, re, datetime\nreturn [math.isqrt(17), statistics.mean([1, 2, 3]), bool(re.match('a+', 'aa'))]"
    assert (await sandbox.run_code(code, {})).result == [4, 2, True]


async def test_in_memory_sqlite_works_but_a_database_file_is_forbidden(sandbox: Sandbox) -> None:
    code = "import sqlite3\nreturn sqlite3.connect(':memory:').execute('select 6 * 7').fetchone()[0]"
    assert (await sandbox.run_code(code, {})).result == 42
    error = await fails(sandbox, "import sqlite3\nsqlite3.connect('/data/x.db')", "forbidden")
    assert error.details == {"event": "sqlite3.connect", "target": "'/data/x.db'"}


async def test_guest_exception_reports_type_message_and_line(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "x = 1\ny = 2\nraise ValueError('bad value')", "guest_exception")
    assert error.details == {"type": "ValueError", "message": "bad value", "line": 3}
    assert error.retryable is False
    assert isinstance(error, NodeFailure)


async def test_guest_exception_line_is_innermost_user_frame(sandbox: Sandbox) -> None:
    code = "def helper(d):\n    return d['missing']\n\nreturn helper({})"
    error = await fails(sandbox, code, "guest_exception")
    assert error.details == {"type": "KeyError", "message": "'missing'", "line": 2}


async def test_an_unprintable_exception_is_still_reported(sandbox: Sandbox) -> None:
    code = "class Odd(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise Odd()"
    error = await fails(sandbox, code, "guest_exception")
    assert error.details == {"type": "Odd", "message": "<unprintable Odd>", "line": 4}


async def test_syntax_error_reports_line(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "x = 1\nif x\n    pass", "guest_exception")
    assert error.details["type"] == "SyntaxError"
    assert error.details["line"] == 2


async def test_failure_keeps_what_was_printed(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "print('step 1')\n1 / 0", "guest_exception")
    assert error.details["type"] == "ZeroDivisionError"
    assert error.details["line"] == 2
    assert error.details["stdout"] == "step 1\n"


async def test_sys_exit_is_a_guest_exception(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "import sys\nsys.exit(4)", "guest_exception")
    assert error.details == {"type": "SystemExit", "message": "4", "line": 2}


async def test_hard_exit_is_a_guest_exception(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "import os\nos._exit(3)", "guest_exception")
    assert error.details == {"type": "SystemExit", "message": "3", "line": None}


async def test_inputs_that_are_not_json_are_refused_on_the_host(sandbox: Sandbox) -> None:
    with pytest.raises(SandboxError) as caught:
        await sandbox.run_code("return 1", {"x": {1, 2}})
    assert caught.value.code == "invalid_input"


async def test_parallel_runs_are_independent(sandbox: Sandbox) -> None:
    code = "import sys\nsys.counter = getattr(sys, 'counter', 0) + 1\nreturn [inputs['i'], sys.counter]"
    outcomes = await asyncio.gather(*(sandbox.run_code(code, {"i": i}) for i in range(24)))
    # A fresh instance per run: no state leaks from one run into the next.
    assert [o.result for o in outcomes] == [[i, 1] for i in range(24)]


async def test_limits_are_clamped_to_the_ceilings() -> None:
    config = SandboxConfig(default_timeout_seconds=5, max_timeout_seconds=30, default_memory_mb=256, max_memory_mb=512)
    assert config.clamp(None, None) == (5, 256)
    assert config.clamp(1000, 100_000) == (30, 512)
    assert config.clamp(0.5, 1) == (0.5, 64)  # below 64 MiB the interpreter cannot start


async def test_config_from_env_and_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ICE_MCP_SANDBOX_WORKERS", "3")
    monkeypatch.setenv("ICE_MCP_SANDBOX_MAX_TIMEOUT_SECONDS", "7.5")
    config = SandboxConfig.from_env({"max_memory_mb": 300, "readonly_dirs": [[str(tmp_path), "/ref"]], "bogus": 1})
    assert (config.workers, config.max_timeout_seconds, config.max_memory_mb) == (3, 7.5, 300)
    assert config.readonly_dirs == ((tmp_path, "/ref"),)
    with pytest.raises(ValueError):
        SandboxConfig(readonly_dirs=((tmp_path, "/usr/local/lib"),))


# --- time -----------------------------------------------------------------------------------


async def test_infinite_loop_times_out(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "while True:\n    pass", "timeout", timeout_seconds=0.5)
    assert error.details == {"limit_seconds": 0.5}


async def test_sleep_past_the_deadline_is_cut_short(sandbox: Sandbox) -> None:
    pool = sandbox._pool
    assert pool is not None
    started = pool.workers_started
    error = await fails(sandbox, "import time\ntime.sleep(30)\nreturn 1", "timeout", timeout_seconds=0.5)
    assert error.details == {"limit_seconds": 0.5}
    # Stopped by the sandbox's own deadline, not by the pool's watchdog killing the worker.
    assert pool.workers_started == started


async def test_many_short_sleeps_time_out(sandbox: Sandbox) -> None:
    await fails(sandbox, "import time\nwhile True:\n    time.sleep(0.01)", "timeout", timeout_seconds=0.5)


async def test_short_sleep_within_the_deadline_works(sandbox: Sandbox) -> None:
    assert (await sandbox.run_code("import time\ntime.sleep(0.05)\nreturn 'done'", {})).result == "done"


# --- memory and stack -----------------------------------------------------------------------


async def test_memory_bomb_hits_the_memory_limit(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "a = []\nwhile True:\n    a.append(' ' * 10**6)", "memory_limit", memory_mb=96)
    assert "memory" in error.message


async def test_one_huge_allocation_hits_the_memory_limit(sandbox: Sandbox) -> None:
    await fails(sandbox, "b = bytearray(10**9)", "memory_limit")


async def test_deep_recursion_is_a_recursion_error(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "def f(n):\n    return f(n + 1)\nreturn f(0)", "guest_exception")
    assert error.details["type"] == "RecursionError"
    assert error.details["line"] == 2


async def test_recursion_past_the_interpreter_limit_overflows_the_wasm_stack_safely(sandbox: Sandbox) -> None:
    code = "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return f(n + 1)\nreturn f(0)"
    error = await fails(sandbox, code, "guest_exception")
    assert error.details["type"] == "RecursionError"


async def test_deeply_nested_json_parse_is_contained(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "import json\nreturn json.loads('[' * 100000 + ']' * 100000)", "guest_exception")
    assert error.details["type"] == "RecursionError"


# --- files ----------------------------------------------------------------------------------


async def test_reading_etc_passwd_is_forbidden(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "return open('/etc/passwd').read()", "forbidden")
    assert error.details == {"event": "open", "target": "/etc/passwd"}


@pytest.mark.parametrize("path", ["/proc/self/environ", "/root/.bashrc", "/work/main/pyproject.toml", "/", "relative.txt"])
async def test_reading_other_host_paths_is_forbidden(sandbox: Sandbox, path: str) -> None:
    error = await fails(sandbox, f"return open({path!r}).read()", "forbidden")
    assert error.details["event"] == "open"


async def test_the_cache_folder_is_not_visible(sandbox: Sandbox) -> None:
    layout = sandbox._layout
    assert layout is not None
    await fails(sandbox, f"return open({str(layout.cwasm)!r}, 'rb').read(4)", "forbidden")


async def test_listing_the_root_is_forbidden(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "import os\nreturn os.listdir('/')", "forbidden")
    assert error.details == {"event": "os.listdir", "target": "'/'"}


async def test_a_preopened_folder_is_readable(sandbox: Sandbox) -> None:
    outcome = await sandbox.run_code("return open('/data/hello.txt').read()", {})
    assert outcome.result == "hello from the host\n"


async def test_dotdot_escape_from_a_preopened_folder_is_forbidden(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "return open('/data/../etc/passwd').read()", "forbidden")
    assert error.details["event"] == "open"


@pytest.mark.parametrize("path", ["/data/passwd", "/data/etc/passwd", "/data/sub/up/up/etc/passwd"])
async def test_symlink_escapes_are_refused_by_wasi(sandbox: Sandbox, path: str) -> None:
    # These paths pass the guest's own check; WASI's preopen refuses them.
    error = await fails(sandbox, f"return open({path!r}).read()", "forbidden")
    assert error.details["type"] in {"PermissionError", "FileNotFoundError", "OSError"}
    assert "root:" not in json.dumps(error.as_dict())


async def test_symlink_escape_caught_by_the_snippet_reads_nothing(sandbox: Sandbox) -> None:
    code = "try:\n    return open('/data/passwd').read()\nexcept OSError as e:\n    return [type(e).__name__, e.errno]"
    outcome = await sandbox.run_code(code, {})
    assert outcome.result[0] in {"PermissionError", "FileNotFoundError", "OSError"}


async def test_writing_into_a_preopened_folder_is_forbidden(sandbox: Sandbox, data_dir: Path) -> None:
    error = await fails(sandbox, "open('/data/new.txt', 'w').write('x')", "forbidden")
    assert error.details == {"event": "open", "target": "/data/new.txt"}
    assert not (data_dir / "new.txt").exists()


async def test_deleting_from_a_preopened_folder_is_forbidden(sandbox: Sandbox, data_dir: Path) -> None:
    await fails(sandbox, "import os\nos.remove('/data/hello.txt')", "forbidden")
    assert (data_dir / "hello.txt").read_text() == "hello from the host\n"


async def test_writing_to_tmp_is_forbidden(sandbox: Sandbox) -> None:
    await fails(sandbox, "open('/tmp/x', 'w').write('x')", "forbidden")


# --- network, processes, native code ---------------------------------------------------------


async def test_sockets_are_forbidden(sandbox: Sandbox) -> None:
    code = "import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 80))"
    error = await fails(sandbox, code, "forbidden")
    assert error.details["event"] == "socket.__new__"


async def test_dns_is_forbidden(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "import socket\nreturn socket.getaddrinfo('example.com', 80)", "forbidden")
    assert error.details["event"] == "socket.getaddrinfo"


async def test_subprocess_is_forbidden(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "import subprocess\nreturn subprocess.run(['id']).returncode", "forbidden")
    assert error.details["type"] == "OSError"


async def test_ctypes_is_forbidden(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "import ctypes\nreturn ctypes.CDLL(None).getpid()", "forbidden")
    assert error.details["type"] == "OSError"


async def test_host_environment_is_not_visible(sandbox_cache: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICE_MCP_TEST_SECRET", "s3cr3t-value")
    box = Sandbox(SandboxConfig(workers=1))  # its worker starts with the secret in its environment
    try:
        outcome = await box.run_code("import os\nreturn dict(os.environ)", {})
        assert outcome.result == {"HOME": "/", "PYTHONTZPATH": "", "TMPDIR": "/tmp"}
        outcome = await box.run_code("import os\nreturn os.environ.get('ICE_MCP_TEST_SECRET')", {})
        assert outcome.result is None
    finally:
        await box.aclose()


# --- output ---------------------------------------------------------------------------------


async def test_ten_megabytes_of_print_hits_the_output_limit(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "print('x' * (10 * 1024 * 1024))", "output_limit")
    assert error.details["limit_bytes"] == 64 * 1024


async def test_many_small_prints_hit_the_output_limit(sandbox: Sandbox) -> None:
    await fails(sandbox, "for i in range(10**6):\n    print('line', i)", "output_limit")


async def test_output_limit_cannot_be_caught_by_the_snippet(sandbox: Sandbox) -> None:
    code = "try:\n    print('x' * 10**7)\nexcept BaseException:\n    pass\nreturn 'sneaky'"
    await fails(sandbox, code, "output_limit")


async def test_raw_writes_to_stdout_and_stderr_hit_the_output_limit(sandbox: Sandbox) -> None:
    await fails(sandbox, "import os\nos.write(1, b'x' * 10_000_000)", "output_limit")
    await fails(sandbox, "import os\nos.write(2, b'x' * 10_000_000)", "output_limit")


async def test_a_huge_result_hits_the_output_limit(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "return 'x' * 1_000_000", "output_limit")
    assert error.details == {"limit_bytes": 256 * 1024}


@pytest.mark.parametrize(("code", "kind"), [("return {1, 2}", "set"), ("return object()", "object"), ("return float('nan')", "float")])
async def test_a_non_json_result_is_not_json(sandbox: Sandbox, code: str, kind: str) -> None:
    error = await fails(sandbox, code, "not_json")
    assert error.details["type"] == kind


# --- the pool survives ---------------------------------------------------------------------


async def test_a_killed_worker_is_replaced(sandbox: Sandbox) -> None:
    pool = sandbox._pool
    assert pool is not None
    victim = next(iter(pool._all))
    victim.process.kill()
    await victim.process.wait()
    outcomes = await asyncio.gather(*(sandbox.run_code("return inputs['i']", {"i": i}) for i in range(6)))
    assert [o.result for o in outcomes] == list(range(6))
    assert victim not in pool._all


async def test_a_worker_dying_unnoticed_costs_no_run(sandbox: Sandbox) -> None:
    pool = sandbox._pool
    assert pool is not None
    for worker in list(pool._all):
        worker.process.kill()  # not awaited: the pool meets a dead pipe mid-run and retries
    outcomes = await asyncio.gather(*(sandbox.run_code("return inputs['i']", {"i": i}) for i in range(4)))
    assert [o.result for o in outcomes] == list(range(4))


async def test_a_cancelled_run_leaves_the_pool_usable(sandbox: Sandbox) -> None:
    task = asyncio.ensure_future(sandbox.run_code("while True:\n    pass", {}, timeout_seconds=0.5))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await still_works(sandbox)
    await asyncio.sleep(0.6)  # the abandoned run ends at its own deadline and rejoins the pool
    await asyncio.gather(*(still_works(sandbox) for _ in range(4)))


async def test_host_process_is_untouched(sandbox: Sandbox) -> None:
    pid = os.getpid()
    # The guest's os has no process API at all: there is nothing to signal.
    error = await fails(sandbox, "import os\nos.kill(1, 9)", "guest_exception")
    assert error.details == {"type": "AttributeError", "message": "module 'os' has no attribute 'kill'", "line": 2}
    assert os.getpid() == pid
