"""aimock (@copilotkit/aimock): the LLM providers' APIs on a free loopback port, answering from a fixtures file,
so the official SDKs run their real code paths offline (scripts/setup_llm.sh installs it)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
AIMOCK_CLI = ROOT / ".tools" / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"
LLM_FIXTURES = ROOT / "tests" / "llm" / "fixtures" / "aimock.json"


class Aimock:
    """A running aimock: its URL, what it received, and the provider variables that point the SDKs at it."""

    def __init__(self, url: str) -> None:
        self.url = url

    def journal(self) -> list[dict[str, Any]]:
        """Every request aimock received, oldest first."""
        with urllib.request.urlopen(f"{self.url}/__aimock/journal", timeout=5) as answer:
            return list(json.loads(answer.read()))

    def env(self) -> dict[str, str]:
        return {
            "OPENAI_API_KEY": "test-openai",
            "OPENAI_BASE_URL": f"{self.url}/v1",
            "ANTHROPIC_API_KEY": "test-anthropic",
            "ANTHROPIC_BASE_URL": self.url,
            "GEMINI_API_KEY": "test-gemini",
            "GEMINI_BASE_URL": f"{self.url}/v1beta/openai/",
            "DEEPSEEK_API_KEY": "test-deepseek",
            "DEEPSEEK_BASE_URL": self.url,
        }


@contextlib.contextmanager
def serve_aimock(fixtures: Path = LLM_FIXTURES, *, strict_turns: bool = True) -> Iterator[Aimock]:
    """aimock answering from `fixtures` until the block ends; missing, a skip (a failure in CI: a missing
    install step must not pass as skipped tests). `strict_turns`: a fixture's turnIndex must match exactly."""
    node = shutil.which("node")
    cli = Path(os.environ.get("AIMOCK_CLI", AIMOCK_CLI))
    if node is None or not cli.is_file():
        missing = "aimock is not installed: run scripts/setup_llm.sh"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    env = {**os.environ, **({"AIMOCK_STRICT_TURN_INDEX": "1"} if strict_turns else {})}
    process = subprocess.Popen(
        [node, str(cli), "--port", "0", "--host", "127.0.0.1", "--fixtures", str(fixtures), "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert process.stdout is not None
    url: str | None = None
    for line in process.stdout:
        if found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", line):
            url = found.group(1)
            break
    if url is None:
        process.kill()
        raise RuntimeError("aimock did not start")
    # Keep draining its output so it never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        yield Aimock(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
