"""The house rules hold: pyproject's import contracts, modules of a readable size, a command line that starts
without the SDKs it does not need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 600
# Loaded only by the commands that use them (serve, workers, an engine, a provider); wasmtime is not here
# because `ice-mcp warmup` is added only when the sandbox's runtime imports.
HEAVY = ("mcp", "mcp_types", "starlette", "uvicorn", "temporalio", "redis", "openai", "anthropic")


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-logo", "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 kept, 0 broken" in done.stdout


def test_no_module_is_over_600_lines() -> None:
    sizes = {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
             for path in (ROOT / "ice_mcp").rglob("*.py")}
    assert len(sizes) > 100
    assert {path: lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES} == {}


def test_the_command_line_starts_without_the_heavy_sdks() -> None:
    probe = ("import json, sys\nfrom ice_mcp.cli import build_parser\nbuild_parser()\n"
             f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_a_stdio_server_can_answer_from_its_warm_start_before_the_engine_loads() -> None:
    # What `ice-mcp serve` imports before a warm start's kept answers go out (ice_mcp/server/warm_start.py).
    engine = ("ice_mcp.orchestrator", "ice_mcp.engines", "ice_mcp.core.compiler", "ice_mcp.blueprint.models",
              "ice_mcp.server.protocol.server", "jinja2", "jsonschema")
    probe = ("import json, sys\nfrom ice_mcp.cli.main import build_parser\nbuild_parser('serve')\n"
             "import ice_mcp.server.cli, ice_mcp.server.stdio, ice_mcp.server.warm_start\n"
             f"print(json.dumps(sorted(set(sys.modules) & set({list(engine)!r}))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
