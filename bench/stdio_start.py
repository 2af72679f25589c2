"""stdio start-up: from spawning the server (as Claude Desktop does) to its `tools/list` answer, ours vs a bare SDK server.

    .venv/bin/python bench/stdio_start.py               # 7 runs each, interleaved; `ice-mcp serve --templates`
    .venv/bin/python bench/stdio_start.py --runs 11 --args serve

Each run spawns the process, writes `initialize`, waits for its answer, writes `notifications/initialized` and
`tools/list`, and stops the clock when the `tools/list` answer arrives: raw JSON-RPC over the pipes, so no
client library's own start-up is counted. Ours is `.venv/bin/ice-mcp` with the arguments of the README's
Claude Desktop block (`serve --templates`); the peer (stdio_peer.py) is the official SDK's low-level `Server`
with one tool, run over `mcp.server.stdio` by the same Python, importing nothing else.
Two kinds of start are measured. A host's later sessions: each server starts again and again on one data folder
and workspace, as Claude Desktop starts it for every session, so ours may answer from what its last start kept
(ice_mcp/server/warm_start.py). A first start: each start on a new data folder and workspace, so ours builds
everything before it answers. Prints the median of each, the ratios and the target (at most 1.2x); the exit
status is that of the later sessions' ratio.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.2
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def answer(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, object]:
    """The next message on stdout answering `request_id` (notifications and logs skipped)."""
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        message = json.loads(line)
        if message.get("id") == request_id:
            return dict(message)
    raise RuntimeError(f"the server exited ({proc.wait()}) before answering request {request_id}")


def once(command: list[str], folder: Path) -> tuple[float, int]:
    """Seconds from spawn to the `tools/list` answer, and how many tools it listed."""
    env = {**os.environ, "ICE_MCP_DATA_DIR": str(folder / "data"), "ICE_MCP_WORKSPACE": str(folder / "work")}
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=folder, env=env)
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        answer(proc, 1)
        proc.stdin.write(json.dumps(INITIALIZED).encode() + b"\n" + json.dumps(TOOLS_LIST).encode() + b"\n")
        proc.stdin.flush()
        listed = answer(proc, 2)
        elapsed = time.perf_counter() - started
    finally:
        proc.stdin.close()  # end of input: the server shuts down
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    result = listed.get("result")
    tools = result.get("tools", []) if isinstance(result, dict) else []
    if not tools:
        raise RuntimeError(f"tools/list answered no tools: {listed}")
    return elapsed, len(tools)


def measure(ours: list[str], bare: list[str], runs: int, *, same_folder: bool
            ) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Milliseconds to the tools/list answer of `runs` starts of each server, interleaved, the order alternating,
    so that the machine's noise falls on both alike. `same_folder`: every start of a server on one data folder
    and workspace, as a host's sessions are (its first start untimed); else each on new ones."""
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="ice-bench-stdio-") as root:
        kept = {kind: Path(tempfile.mkdtemp(dir=root)) for kind in times}
        for kind, command in (("ours", ours), ("bare", bare)):
            once(command, kept[kind])  # warms the OS file cache; on `same_folder`, the host's first session
        for run in range(runs):
            order = (("ours", ours), ("bare", bare)) if run % 2 == 0 else (("bare", bare), ("ours", ours))
            for kind, command in order:
                folder = kept[kind] if same_folder else Path(tempfile.mkdtemp(dir=root))
                elapsed, counts[kind] = once(command, folder)
                times[kind].append(elapsed * 1000)
    return times, counts


def main(args: argparse.Namespace) -> int:
    # As installing a wheel does: the untimed first run cannot write .pyc files under PYTHONDONTWRITEBYTECODE, and
    # ours would then compile each of its modules at every start while the SDK's came compiled from pip.
    compileall.compile_dir(ROOT / "ice_mcp", quiet=1)
    ours = [str(Path(sys.executable).with_name("ice-mcp")), *args.args.split()]
    bare = [sys.executable, str(Path(__file__).with_name("stdio_peer.py"))]
    print(f"bench/stdio_start.py: {os.cpu_count()} CPU(s), Python {sys.version.split()[0]}, "
          f"median of {args.runs} runs, spawn to the tools/list answer")
    met = True
    for same_folder, title in ((True, "a host's later sessions (one data folder, as Claude Desktop starts it)"),
                               (False, "first start on a new data folder")):
        times, counts = measure(ours, bare, args.runs, same_folder=same_folder)
        ratio = statistics.median(times["ours"]) / statistics.median(times["bare"])
        print(f" {title}:")
        for kind, label in (("ours", f"ice-mcp {args.args}"), ("bare", "bare SDK Server, one tool")):
            spread = ", ".join(f"{x:.0f}" for x in times[kind])
            print(f"  {label:32} {statistics.median(times[kind]):7.0f} ms  ({counts[kind]} tools)  [{spread}]")
        print(f"  ratio {ratio:.2f} (target at most {TARGET:.1f}): {'met' if ratio <= TARGET else 'NOT met'}")
        met = met and (ratio <= TARGET or not same_folder)
    return 0 if met else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs of each server; medians are reported")
    parser.add_argument("--args", default="serve --templates",
                        help="arguments of `ice-mcp` (default: the README's Claude Desktop block)")
    sys.exit(main(parser.parse_args()))
