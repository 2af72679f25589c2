"""One real sandbox (real wasmtime, real worker processes) shared by a test module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ice_mcp.sandbox import Sandbox, SandboxConfig
from ice_mcp.sandbox.artifacts import RuntimeMissing
from ice_mcp.sandbox.cache import ensure_cache


@pytest.fixture(scope="session")
def sandbox_cache() -> None:
    """Build the cache once (a no-op after scripts/setup_sandbox.sh)."""
    try:
        ensure_cache(quiet=False)
    except RuntimeMissing as e:
        pytest.fail(f"sandbox runtime missing, run scripts/setup_sandbox.sh: {e}")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A host folder shown read-only at /data, with links that point out of it."""
    root = tmp_path_factory.mktemp("sandbox-data")
    (root / "hello.txt").write_text("hello from the host\n")
    (root / "sub").mkdir()
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "etc").symlink_to("/etc")
    (root / "sub" / "up").symlink_to("../..")
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox(sandbox_cache: None, data_dir: Path) -> AsyncIterator[Sandbox]:
    box = Sandbox(
        SandboxConfig(
            workers=2,
            default_timeout_seconds=1.0,
            max_timeout_seconds=2.0,
            default_memory_mb=128,
            max_memory_mb=256,
            max_stdout_bytes=64 * 1024,
            max_result_bytes=256 * 1024,
            readonly_dirs=((data_dir, "/data"),),
        )
    )
    await box.warmup()
    yield box
    await box.aclose()
