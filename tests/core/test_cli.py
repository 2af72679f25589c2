"""The `ice-mcp` command line, in-process through `main([...])`, and as a subprocess where processes matter."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from ice_mcp import DEFAULT_REGISTRY
from ice_mcp.cli import main, parse_inputs
from ice_mcp.errors import IceError
from ice_mcp.server.cli import bind_listener

ROOT = Path(__file__).resolve().parents[2]

GOOD = {
    "name": "cli_demo",
    "inputs": {"type": "object", "properties": {"n": {"type": "integer"}, "who": {"type": "string"}},
               "required": ["n"]},
    "outputs": {"text": "{{ greet.text }}", "double": "{{ inputs.n * 2 }}"},
    "nodes": [{"id": "greet", "type": "tool", "tool_name": "render_template",
               "tool_args": {"template": "hello {{ inputs.who }} x{{ inputs.n }}"}}],
}
BAD = {
    "name": "cli_bad",
    "nodes": [
        {"id": "q", "type": "tool", "tool_name": "json_querry", "tool_args": {}},
        {"id": "r", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "{{ qq.x }}"}},
    ],
}


@pytest.fixture(autouse=True)
def restore_default_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The CLI uses the process-wide registry: put it back as it was after each test."""
    monkeypatch.setenv("ICE_MCP_WORKSPACE", str(tmp_path))
    monkeypatch.delenv("ICE_MCP_DATA_DIR", raising=False)
    monkeypatch.delenv("ICE_MCP_TOOLS", raising=False)
    saved = {k: dict(getattr(DEFAULT_REGISTRY, k)) for k in ("tools", "agents", "workflows")}
    yield
    for key, value in saved.items():
        table = getattr(DEFAULT_REGISTRY, key)
        table.clear()
        table.update(value)


def write(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_validate_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "good.json", GOOD)
    assert main(["validate", path, "--data-dir", str(tmp_path / "d")]) == 0
    out, err = capsys.readouterr()
    assert out == f"{path}: valid (LLM calls 0..0)\n"
    assert err == ""


def test_validate_lists_every_error_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bad.json", BAD)
    assert main(["validate", path, "--data-dir", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == f"{path}: 2 problem(s)"
    assert lines[1] == "  [unknown_tool] q.tool_name: no tool named 'json_querry' (did you mean 'json_query'?)"
    assert lines[2].startswith("  [unknown_reference] r.tool_args: tool_args reads 'qq'")
    assert len(lines) == 3


def test_validate_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bad.json", BAD)
    assert main(["validate", path, "--json", "--data-dir", str(tmp_path / "d")]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert [e["code"] for e in report["errors"]] == ["unknown_tool", "unknown_reference"]


def test_run_prints_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "good.json", GOOD)
    code = main(["run", path, "-i", "n=5", "-i", "who=ada", "--data-dir", str(tmp_path / "d"), "--no-progress"])
    out, _ = capsys.readouterr()
    record = json.loads(out)
    assert code == 0
    assert record["status"] == "succeeded"
    assert record["workflow"] == "cli_demo"
    assert record["inputs"] == {"n": 5, "who": "ada"}
    assert record["outputs"] == {"text": "hello ada x5", "double": 10}
    assert record["nodes"]["greet"]["status"] == "succeeded"


def test_run_with_inputs_json_and_invalid_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "good.json", GOOD)
    assert main(["run", path, "--inputs", '{"n": 2}', "--data-dir", str(tmp_path / "d")]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["double"] == 4
    assert main(["run", path, "-i", "n=two", "--data-dir", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "error [invalid_inputs]: n: 'two' is not of type 'integer'\n"


def test_run_invalid_blueprint_reports_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bad.json", BAD)
    assert main(["run", path, "--data-dir", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"{path}: 2 problem(s)\n")


def test_failed_run_exits_1_with_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "fail.json", {"name": "fails", "nodes": [
        {"id": "r", "type": "tool", "tool_name": "file_read", "tool_args": {"path": "../../etc/passwd"}}]})
    assert main(["run", path, "--data-dir", str(tmp_path / "d")]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "failed"
    assert record["nodes"]["r"]["error"]["code"] == "forbidden"


def test_runs_list_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = str(tmp_path / "d")
    path = write(tmp_path / "good.json", GOOD)
    assert main(["run", path, "-i", "n=1", "--data-dir", data_dir]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["runs", "list", "--data-dir", data_dir]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{run_id}  ")
    assert line.split()[-2:] == ["succeeded", "cli_demo"]
    assert main(["runs", "list", "--status", "failed", "--data-dir", data_dir]) == 0
    assert capsys.readouterr().out == ""
    assert main(["runs", "show", run_id, "--events", "--data-dir", data_dir]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run_id"] == run_id
    assert shown["outputs"] == {"text": "hello  x1", "double": 2}
    assert [e["type"] for e in shown["events"]] == ["run_started", "node_started", "node_succeeded", "run_finished"]
    assert main(["runs", "show", "nope", "--data-dir", data_dir]) == 1
    assert capsys.readouterr().err == "no run 'nope'\n"


def test_network_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "first.json", {"name": "first", "nodes": [
        {"id": "t", "type": "tool", "tool_name": "render_template",
         "tool_args": {"template": "{{ global.greeting }}"}}], "outputs": {"text": "{{ t.text }}"}})
    write(tmp_path / "second.json", {"name": "second", "inputs": {"type": "object"}, "nodes": [
        {"id": "t", "type": "tool", "tool_name": "render_template",
         "tool_args": {"template": "{{ inputs.prev }}, again"}}], "outputs": {"text": "{{ t.text }}"}})
    manifest = tmp_path / "net.yaml"
    manifest.write_text("api_version: network.v0\nname: cli_net\nglobal: {greeting: hi}\nworkflows:\n"
                        "  - {id: a, ref: first.json}\n"
                        "  - {id: b, ref: second.json, inputs: {prev: '{{ a.text }}'}}\n")
    assert main(["network", "run", str(manifest), "--data-dir", str(tmp_path / "d")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["network"] == "cli_net"
    assert result["status"] == "succeeded"
    assert result["workflows"]["a"]["outputs"] == {"text": "hi"}
    assert result["workflows"]["b"]["outputs"] == {"text": "hi, again"}


def test_parse_inputs() -> None:
    assert parse_inputs('{"a": 1}', ["b=[1, 2]", "c=text", "d=true", "e=x=y"]) == \
        {"a": 1, "b": [1, 2], "c": "text", "d": True, "e": "x=y"}
    with pytest.raises(IceError):
        parse_inputs(None, ["novalue"])
    with pytest.raises(IceError):
        parse_inputs("[1]", [])


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    capsys.readouterr()


def test_subprocess_run_of_the_example(tmp_path: Path) -> None:
    # No workspace given: ~/ice-mcp-workspace (here a temporary home), where the sample CSV is copied.
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")  # the compiled sandbox, kept
    env = {**os.environ, "ICE_MCP_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path / "home"),
           "XDG_CACHE_HOME": cache}
    env.pop("ICE_MCP_WORKSPACE", None)
    done = subprocess.run([sys.executable, "-m", "ice_mcp", "run", "examples/sales_report.yaml"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["status"] == "succeeded"
    assert record["inputs"] == {"path": "examples/sales.csv", "threshold": 1000}
    assert record["outputs"] == {
        "weeks": [{"week": "2026-W44", "total": 808.5}, {"week": "2026-W45", "total": 1143.0},
                  {"week": "2026-W46", "total": 1156.5}],
        "big_weeks": ["2026-W45", "2026-W46"],
        "summary": "Weeks over 1000: 2026-W45, 2026-W46",
    }
    assert (tmp_path / "data" / "runs.sqlite3").exists()


def test_tools_from_a_module_in_the_current_folder_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cli_user_tools.py").write_text(
        "from ice_mcp import tool\n\n@tool\ndef shout(text: str) -> str:\n    return text.upper() + '!'\n")
    bp = write(tmp_path / "bp.json", {"name": "shouty", "nodes": [
        {"id": "s", "type": "tool", "tool_name": "shout", "tool_args": {"text": "hi"}}]})
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "cli_user_tools", raising=False)
    for tools in ("cli_user_tools", str(tmp_path / "cli_user_tools.py")):
        assert main(["run", bp, "--tools", tools, "--no-progress", "--data-dir", str(tmp_path / "data")]) == 0
        assert json.loads(capsys.readouterr().out)["outputs"] == {"s": {"result": "HI!"}}
        sys.modules.pop("cli_user_tools", None)
        DEFAULT_REGISTRY.tools.pop("shout", None)
    assert main(["run", bp, "--tools", "no_such_tools_module", "--data-dir", str(tmp_path / "data")]) == 1
    assert "tools_import_error" in capsys.readouterr().err


# -- papercuts a new user hit (issue 15) ------------------------------------------------------------

def cli_env(tmp_path: Path) -> dict[str, str]:
    """A subprocess running this checkout's ice_mcp with private data and workspace folders."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICE_MCP_DATA_DIR": str(tmp_path / "data"),
           "ICE_MCP_WORKSPACE": str(tmp_path)}
    env.pop("ICE_MCP_TOOLS", None)
    return env


def test_run_a_workflow_from_blueprints_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    write(folder / "cli_demo.json", GOOD)
    code = main(["run", "cli_demo", "--blueprints", str(folder), "-i", "n=3", "--no-progress",
                 "--data-dir", str(tmp_path / "d")])
    record = json.loads(capsys.readouterr().out)
    assert code == 0
    assert record["workflow"] == "cli_demo"
    assert record["outputs"] == {"text": "hello  x3", "double": 6}


def test_run_a_bundled_template_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "render_summary", "--inputs", '{"rows": [{"a": 1}, {"a": 2}], "path": "s.md"}',
                 "--no-progress", "--data-dir", str(tmp_path / "d")])
    record = json.loads(capsys.readouterr().out)
    assert code == 0
    assert record["workflow"] == "render_summary"
    assert record["outputs"]["count"] == 2
    assert (tmp_path / "s.md").read_text().startswith("# Summary\n\n2 rows\n")


def test_run_an_unknown_name_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "render_sumary", "--data-dir", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("error [unknown_workflow]: 'render_sumary' is neither a blueprint file "
                   f"(no file {Path.cwd() / 'render_sumary'}) nor a workflow name (from --blueprints and the "
                   "bundled templates); did you mean 'render_summary'?\n")
    assert main(["run", "missing.json", "--data-dir", str(tmp_path / "d")]) == 1
    [line] = capsys.readouterr().err.splitlines()  # a blueprint's extension: a file was meant (issue 28)
    assert line == f"error [not_found]: file not found: missing.json (looked for {Path.cwd() / 'missing.json'})"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"ice-mcp {version('ice_mcp')}\n"


def test_malformed_inputs_one_line_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path / "good.json", GOOD)
    for args, message in (
        (["--inputs", "{bad"], "--inputs is not valid JSON: Expecting property name enclosed in double quotes: "
                               "line 1 column 2 (char 1)"),
        (["--inputs", "[1]"], "--inputs must be a JSON object"),
        (["-i", "novalue"], "-i expects KEY=VALUE, got 'novalue'"),
    ):
        done = subprocess.run([sys.executable, "-m", "ice_mcp", "run", path, *args], cwd=tmp_path,
                              env=cli_env(tmp_path), capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error [invalid_inputs]: {message}\n")


def test_piped_to_head_ends_quietly(tmp_path: Path) -> None:
    # The record (twice 100 KB) outgrows the pipe's buffer, so writing goes on after `head` has left.
    path = write(tmp_path / "big.json", {"name": "big", "outputs": {"text": "{{ t.text }}"}, "nodes": [
        {"id": "t", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "{{ inputs.who }}"}}]})
    command = f"set -o pipefail; {sys.executable} -m ice_mcp run {path} -i who={'x' * 100_000} | head -n 2"
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=cli_env(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert done.stderr == ""
    assert done.returncode == 141  # 128 + SIGPIPE, like any other command cut short by its reader
    assert done.stdout.splitlines()[0] == "{"


def first_stderr_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first line a process writes to stderr, read on a thread so that a silent process cannot hang the test."""
    lines: queue.Queue[str] = queue.Queue()
    stream = proc.stderr
    assert stream is not None
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    return lines.get(timeout=timeout)


def test_serve_announces_once_it_listens(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ice_mcp", "serve", "--http", "--port", "0", "--templates"],
                            cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = first_stderr_line(proc, timeout=60)
        match = re.fullmatch(r"ice_mcp: MCP over Streamable HTTP at (http://127\.0\.0\.1:\d+)/mcp .*\n", first)
        assert match, first
        # Port 0 was given: the banner names the port actually bound, and it answers right away.
        response = httpx2.get(f"{match.group(1)}/healthz", timeout=5)
        assert response.status_code == 200
        assert response.json()["workflows"] == 8  # --templates registered the bundled templates
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_on_a_busy_port_fails_in_one_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "ice_mcp", "serve", "--http", "--port", str(port)],
                              cwd=tmp_path, env=cli_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"error [address_unavailable]: cannot listen on 127.0.0.1:{port}: "
                           "Address already in use\n")


async def test_served_connections_send_without_delay() -> None:
    # Without TCP_NODELAY a small response waits for a delayed ACK: /healthz took 44 ms instead of 2 ms.
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    with bind_listener("127.0.0.1", 0) as listener:
        async with await asyncio.start_server(on_connect, sock=listener):
            _, client = await asyncio.open_connection(*listener.getsockname())
            assert await asyncio.wait_for(accepted, 5) != 0
            client.close()
