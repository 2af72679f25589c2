"""A sandbox worker process: loads the cached runtime once, then runs jobs one at a time.

Run as `python -m ice_mcp.sandbox.worker CACHE_ROOT DRIVER_FILE`; it speaks frames (ipc.py) on
stdin/stdout. Whatever a guest does, at worst this process dies and the pool replaces it.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import BinaryIO

from ice_mcp.sandbox import errors as E
from ice_mcp.sandbox import ipc
from ice_mcp.sandbox.artifacts import is_private_file
from ice_mcp.sandbox.cache import CacheLayout
from ice_mcp.sandbox.engine import load_runtime
from ice_mcp.sandbox.runner import Job, execute


def _protocol_channel() -> BinaryIO:
    """Keep the frames on a private duplicate of fd 1; anything printed by mistake goes to stderr."""
    channel = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    return channel


def _send(channel: BinaryIO, message: dict[str, object]) -> None:
    channel.write(ipc.encode(message))


def serve(root: Path, driver: str) -> int:
    """`driver` is named by the host, so a host and a worker of different versions still agree."""
    channel = _protocol_channel()
    layout = CacheLayout(root)
    needed = (layout.cwasm, layout.stdlib_zip, layout.lib / driver)
    if "/" in driver or not all(is_private_file(path) for path in needed):
        _send(channel, {"ready": False, "message": f"sandbox cache {root} is not built"})
        return 1
    runtime = load_runtime(layout.cwasm, layout.lib)
    _send(channel, {"ready": True, "pid": os.getpid()})
    while True:
        message = ipc.read_frame(sys.stdin.buffer)
        if message is None:
            return 0
        try:
            outcome = execute(runtime, driver, Job.from_dict(message["job"]))
        except Exception as e:  # a host-side bug must not lose the worker
            traceback.print_exc()
            outcome = {"ok": False, "code": E.UNAVAILABLE, "message": f"sandbox worker error: {e}", "details": {}}
        _send(channel, outcome)


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: python -m ice_mcp.sandbox.worker CACHE_ROOT DRIVER_FILE", file=sys.stderr)
        return 2
    return serve(Path(sys.argv[1]), sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
