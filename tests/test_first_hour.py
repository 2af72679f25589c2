"""A newcomer's first hour (issue 28, items 1, 5 and 6): the bundled workflows run on a first call from Claude
Desktop's own launch command, errors say where and what next, and the README shows what the commands print."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp_helpers import http_server, make_options, structured

from ice_mcp import Orchestrator, Settings
from ice_mcp.bundled import seed_workspace
from ice_mcp.cli import main
from ice_mcp.cli.main import build_parser
from ice_mcp.errors import NodeFailure
from ice_mcp.server.cli import HelpWithDefaults, announce
from ice_mcp.tools.builtin.data import json_query

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ["examples/README.md", "examples/sales.csv", "examples/sales_report.yaml"]
# The compiled code-node sandbox lives in the cache folder: a temporary HOME keeps using it (no recompile).
CACHE = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
# The README's placeholders for what differs between machines.
README_COMMAND = "/path/to/ice_mcp/.venv/bin/ice-mcp"
README_HOME = "/home/you"


def fresh_home_env(home: Path, **extra: str) -> dict[str, str]:
    """This checkout's `ice-mcp` as a new user runs it: a home of its own, nothing of ours set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICE_MCP_") and k != "XDG_DATA_HOME"}
    return {**env, "HOME": str(home), "XDG_CACHE_HOME": CACHE, "PYTHONPATH": str(ROOT), **extra}


def ice_mcp(*args: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ice_mcp", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


# -- 1. the bundled workflows run on the first call ----------------------------------------------------------


def test_a_new_workspace_gets_the_samples_and_a_users_folder_is_left_alone(tmp_path: Path) -> None:
    workspace = tmp_path / "new" / "ws"
    assert seed_workspace(workspace) == SAMPLES  # missing: created, then filled
    for name in SAMPLES:
        assert (workspace / name).read_bytes() == (ROOT / name).read_bytes()
    (workspace / "examples" / "sales.csv").write_text("mine\n")
    assert seed_workspace(workspace) == []  # once: never again, never over a user's file
    assert (workspace / "examples" / "sales.csv").read_text() == "mine\n"

    users = tmp_path / "users"
    users.mkdir()
    (users / "notes.txt").write_text("x")
    assert seed_workspace(users) == [] and sorted(p.name for p in users.iterdir()) == ["notes.txt"]
    hidden_only = tmp_path / "hidden"
    hidden_only.mkdir()
    (hidden_only / ".DS_Store").write_text("")
    assert seed_workspace(hidden_only) == SAMPLES  # hidden files aside, it is empty


async def test_claude_desktops_first_calls_succeed_on_the_bundled_samples(tmp_path: Path) -> None:
    """The `claude-config` block launched as Claude Desktop does: a bare environment, in `/`."""
    home = tmp_path / "home"
    printed = ice_mcp("claude-config", env=fresh_home_env(home))
    assert printed.returncode == 0, printed.stderr
    server = json.loads(printed.stdout)["mcpServers"]["ice-mcp"]
    workspace = home / "ice-mcp-workspace"
    assert server["args"][-2:] == ["--workspace", str(workspace)]
    assert sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file()) == SAMPLES
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": CACHE, **server.get("env", {})}
    params = StdioServerParameters(command=server["command"], args=server["args"], env=env, cwd="/")
    async with Client(params) as client:
        assert client.instructions is not None
        assert f"workspace {workspace}," in client.instructions and "examples/sales.csv" in client.instructions
        report = await client.call_tool("workflow_csv_report", {"path": "examples/sales.csv"})
        assert report.is_error is False, report.content
        assert structured(report)["outputs"]["total"] == 3108.0
        rows = await client.call_tool("workflow_extract_rows",
                                      {"path": "examples/sales.csv", "filter": "[?amount > `400`].week"})
        assert rows.is_error is False, rows.content
        assert structured(rows)["outputs"]["rows"] == ["2026-W44", "2026-W45", "2026-W45", "2026-W46", "2026-W46"]
        missing = await client.call_tool("workflow_csv_report", {"path": "sales.csv"})
        assert missing.is_error is True
        text = json.dumps([c.model_dump() for c in missing.content])
        assert f"no file 'sales.csv' in the workspace {workspace}" in text and "--workspace DIR" in text
    assert (workspace / "reports" / "sales.md").read_text().startswith("# Sales report")
    assert not Path("/reports").exists()


def test_the_cli_reads_and_writes_in_the_workspace_not_the_checkout(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = ice_mcp("run", "csv_report", "-i", "path=examples/sales.csv", "--no-progress",
                   env=fresh_home_env(home, ICE_MCP_DATA_DIR=str(tmp_path / "data")))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"]["report"] == "reports/sales.md"
    assert (home / "ice-mcp-workspace" / "reports" / "sales.md").is_file()
    assert not (ROOT / "reports").exists()


# -- 5. no dead ends --------------------------------------------------------------------------------------


def test_extract_rows_compares_csv_numbers_as_numbers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = ice_mcp("run", "extract_rows", "-i", "path=examples/sales.csv", "-i", "filter=[?amount > `600`]",
                   "--no-progress", env=fresh_home_env(home, ICE_MCP_DATA_DIR=str(tmp_path / "data")))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"]["rows"] == [
        {"week": "2026-W45", "region": "north", "amount": "612.25"},
        {"week": "2026-W46", "region": "north", "amount": "701.10"}]


NUMERIC = [{"id": 1, "amount": "420.50", "name": "a"}, {"id": 2, "amount": " 1e3 ", "name": "c"},
           {"id": 3, "amount": "388.00", "name": "d"}]
WITH_TEXT = [*NUMERIC, {"id": 4, "amount": "n/a", "name": "e"}]


@pytest.mark.parametrize(("rows", "path", "expected"), [
    (NUMERIC, "[?amount > `400`].id", [1, 2]),
    (NUMERIC, "[?amount >= `420.5`].id", [1, 2]),
    (WITH_TEXT, "[?amount == `388`].id", [3]),  # "388.00" is 388; "n/a" is simply not equal
    (WITH_TEXT, "[?amount != `388`].id", [1, 2, 4]),
    (WITH_TEXT, "[?id == `1`].amount", ["420.50"]),  # numbers stay numbers, text stays text
    (WITH_TEXT, "[?to_number(amount) > `400`].id", [1, 2]),
    (WITH_TEXT, "[?name > 'b'].id", [2, 3, 4]),  # two strings: JMESPath's own ordering
])
def test_json_query_numbers_and_numeric_text(rows: list[dict[str, Any]], path: str, expected: Any) -> None:
    assert json_query(rows, path) == {"result": expected}


@pytest.mark.parametrize("path", ["[?amount > `400`]", "sum([*].amount)", "sort_by(@, &amount)"])
def test_json_query_type_errors_are_structured_with_a_hint(path: str) -> None:
    rows = [{"amount": "420.50"}, {"amount": "n/a"}, {"amount": 7}]
    with pytest.raises(NodeFailure) as info:
        json_query(rows, path)
    assert info.value.code == "invalid_arguments"
    assert "to_number(" in info.value.message and "TypeError" not in info.value.message


async def test_get_root_names_the_endpoints_and_sends_a_browser_to_the_run_view(orc: Orchestrator) -> None:
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(base_url=url) as http:
        page = await http.get("/", headers={"Accept": "text/html,application/xhtml+xml"})
        assert page.status_code == 307 and page.headers["location"] == "/ui"
        answer = await http.get("/", headers={"Accept": "application/json"})
    assert answer.status_code == 200
    assert answer.json() == {"name": "ice-mcp", "version": make_options().version, "mcp": "/mcp", "ui": "/ui",
                             "rpc": "/rpc", "health": "/healthz", "metrics": "/metrics"}


def parsers(parser: argparse.ArgumentParser, name: str = "ice-mcp") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                yield from parsers(child, f"{name} {child_name}")


def test_every_option_has_help_and_says_its_default() -> None:
    undocumented = []
    for name, parser in parsers(build_parser()):
        formatter = HelpWithDefaults(name)
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction):
                continue
            text = formatter._get_help_string(action) or ""
            has_default = bool(action.option_strings) and action.nargs != 0 and action.default not in (None, [], ())
            decided_later = action.dest in ("workspace", "data_dir")  # by the environment and the home folder
            if not text or ((has_default or decided_later) and "default" not in text):
                undocumented.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert undocumented == []


def test_serve_help_in_a_terminal(tmp_path: Path) -> None:
    done = ice_mcp("serve", "--help", env=fresh_home_env(tmp_path / "home"))
    assert done.returncode == 0
    assert "Serve workflows, tools and agents as MCP tools" in " ".join(done.stdout.split())
    helps: dict[str, str] = {}  # each option's help text, its wrapped lines joined
    option = ""
    for line in done.stdout.split("options:", 1)[1].splitlines():
        if line.startswith("  -"):
            option, _, line = line.strip().partition("  ")
        helps[option] = f"{helps.get(option, '')} {line.strip()}".strip()
    assert helps["--host HOST"].endswith("(default: 127.0.0.1)")
    assert helps["--port PORT"].endswith("(default: 8000)")
    assert helps["--log-level LOG_LEVEL"].startswith("what the log shows")
    assert helps["--log-level LOG_LEVEL"].endswith("(default: WARNING)")


def test_validate_suggests_the_field_meant(tmp_path: Path) -> None:
    blueprint = tmp_path / "deps.yaml"
    blueprint.write_text("name: deps\nnodes:\n"
                         "  - {id: a, type: tool, tool_name: render_template, tool_args: {template: x}}\n"
                         "  - {id: b, type: tool, tool_name: render_template, depends_on: [a],\n"
                         "     tool_args: {template: y}, timout_seconds: 3}\n")
    done = ice_mcp("validate", str(blueprint), env=fresh_home_env(tmp_path / "home"))
    assert done.returncode == 1
    assert done.stderr.splitlines()[1:] == [
        "  [schema] b.depends_on: unknown field 'depends_on' (did you mean 'dependencies'?)",
        "  [schema] b.timout_seconds: unknown field 'timout_seconds' (did you mean 'timeout_seconds'?)"]
    assert not (tmp_path / "home" / "ice-mcp-workspace").exists()  # checking creates no workspace


def test_run_says_which_file_or_workflow_it_looked_for(tmp_path: Path) -> None:
    env = fresh_home_env(tmp_path / "home", ICE_MCP_DATA_DIR=str(tmp_path / "data"))
    done = ice_mcp("run", "examples/nope.yaml", env=env)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"error [not_found]: file not found: examples/nope.yaml "
                           f"(looked for {ROOT / 'examples' / 'nope.yaml'})\n")
    done = ice_mcp("run", "nope", env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error [unknown_workflow]: 'nope' is neither a blueprint file (no file "
                                  f"{ROOT / 'nope'}) nor a workflow name (from --blueprints and the bundled "
                                  "templates); workflows: api_extract, csv_report,")


# -- 6. the README says what the commands do; whose runs `runs list` shows ----------------------------------


def readme_block(after: str, fence: str = "```") -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(fence, text.index(after)) + len(fence)
    start = text.index("\n", start) + 1
    return text[start:text.index("```\n", start)]


def test_the_readme_blueprint_is_the_example_file_and_valid(orc: Orchestrator) -> None:
    shown = readme_block("A blueprint (`examples/sales_report.yaml`):", "```yaml")
    assert shown == (ROOT / "examples" / "sales_report.yaml").read_text()
    report = orc.validate(shown)
    assert report.ok, report.errors


def test_the_readme_shows_what_make_run_and_claude_config_print(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    printed = ice_mcp("claude-config", env=fresh_home_env(home))
    assert printed.returncode == 0, printed.stderr
    command = json.loads(printed.stdout)["mcpServers"]["ice-mcp"]["command"]
    block = readme_block("`make run` serves the bundled templates").replace(README_COMMAND, command) \
        .replace(README_HOME, str(home))
    assert block.split("claude_desktop_config.json:\n", 1)[1] == printed.stdout  # the claude-config block

    monkeypatch.setenv("HOME", str(home))  # what `make run` announces (--blueprints blueprints)
    workflows = sorted(json.loads(p.read_text())["name"] for p in (ROOT / "blueprints").glob("*.json"))
    settings = Settings(workspace=home / "ice-mcp-workspace", data_dir=home / ".local" / "share" / "ice_mcp")
    announce("127.0.0.1", 8000, workflows, settings=settings)
    assert capsys.readouterr().err == block


def test_runs_list_says_which_data_folder_it_reads(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shared = ice_mcp("runs", "list", env=fresh_home_env(home))
    assert (shared.returncode, shared.stdout) == (0, "")
    assert shared.stderr == (f"runs in {home / '.local' / 'share' / 'ice_mcp'}, shared by every ice-mcp on this "
                             "machine not given --data-dir or ICE_MCP_DATA_DIR\n")
    own = ice_mcp("runs", "list", "--data-dir", ".data", env=fresh_home_env(home), cwd=tmp_path)
    assert (own.returncode, own.stderr) == (0, f"runs in {tmp_path / '.data'}\n")


def test_a_command_in_process_uses_the_default_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", CACHE)
    monkeypatch.delenv("ICE_MCP_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "csv_report", "-i", "path=examples/sales.csv", "--no-progress",
                 "--data-dir", str(tmp_path / "data")]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "succeeded"
    assert (tmp_path / "home" / "ice-mcp-workspace" / "reports" / "sales.md").is_file()
    assert not (tmp_path / "reports").exists()
