"""The runtime cache: verification, the warmup path a server takes, and a compile from scratch."""

from __future__ import annotations

import filecmp
import os
import stat
import sys
from pathlib import Path

import pytest

from ice_mcp.sandbox import Sandbox, SandboxConfig, warmup_cli
from ice_mcp.sandbox import artifacts as A
from ice_mcp.sandbox.cache import CacheLayout, cache_key, ensure_cache

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_carrier_matches_its_pinned_digests(sandbox_cache: None) -> None:
    carrier = A.verified_carrier()
    assert A.sha256_file(carrier.snapshot) == A.PINNED_SHA256[A.SNAPSHOT_NAME]


async def test_cache_files_are_private(sandbox_cache: None) -> None:
    layout = CacheLayout.at()
    assert layout.ready()
    for path in (layout.cwasm, layout.stdlib_zip, layout.driver):
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))
    assert stat.S_IMODE(os.lstat(layout.root).st_mode) == 0o700
    assert layout.root.name == cache_key()


async def test_a_server_fills_a_partial_cache_in_a_child_process(sandbox_cache: None, tmp_path: Path) -> None:
    """With the compiled module present, the rest (stdlib copy, driver) is made on first use."""
    source = CacheLayout.at()
    target = CacheLayout.at(tmp_path / "cache")
    A.ensure_private_dir(target.root)
    try:
        os.link(source.cwasm, target.cwasm)  # 286 MB: share it rather than copy it
    except OSError:
        pytest.skip("the test cache is on another file system than the real one")
    assert not target.ready()
    box = Sandbox(SandboxConfig(workers=1, cache_dir=tmp_path / "cache"))
    try:
        assert (await box.run_code("return 'warm'", {})).result == "warm"
    finally:
        await box.aclose()
    assert target.ready()


async def test_the_environments_cache_copies_a_runtime_compiled_per_user(
        sandbox_cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module compiled before into ~/.cache is copied into the environment's folder, not compiled again."""
    per_user = CacheLayout.at(tmp_path / "user")
    A.ensure_private_dir(per_user.root)
    os.link(CacheLayout.at().cwasm, per_user.cwasm)
    monkeypatch.delenv(A.CACHE_ENV, raising=False)
    assert A.cache_dirs()[0].is_relative_to(sys.prefix)  # this user's venv: found whatever HOME a launch has
    monkeypatch.setattr(A, "cache_dirs", lambda: (tmp_path / "venv", tmp_path / "user"))
    layout = ensure_cache()
    assert layout.root == tmp_path / "venv" / cache_key() and layout.ready()
    assert filecmp.cmp(layout.cwasm, per_user.cwasm, shallow=False)


async def test_a_cwasm_writable_by_others_is_not_trusted(sandbox_cache: None, tmp_path: Path) -> None:
    layout = CacheLayout.at(tmp_path / "cache")
    A.ensure_private_dir(layout.lib)
    for path in (layout.cwasm, layout.stdlib_zip, layout.driver):
        path.write_bytes(b"not really")
        path.chmod(0o600)
    assert layout.ready()
    layout.cwasm.chmod(0o666)
    assert not layout.ready()
    layout.cwasm.unlink()
    layout.cwasm.symlink_to(CacheLayout.at().cwasm)
    assert not layout.ready()  # a link is never followed


@pytest.mark.slow
async def test_warmup_compiles_from_an_empty_cache(tmp_path: Path) -> None:
    """The full first-time path: ~1 minute and ~2.3 GB of memory. In a new environment `make test`'s set-up has
    just taken it (`ice-mcp sandbox warmup` into the environment's empty cache, which records so): the test checks
    what that made rather than compiling the same module a second time; elsewhere it compiles into a new folder."""
    made = CacheLayout.at().made()
    if made is not None and made.get("made") == "compiled" and made.get("from_empty_folder"):
        cache_dir = None
        assert made["seconds"] > 0
    else:
        cache_dir = tmp_path / "fresh"
        assert warmup_cli([str(cache_dir)]) == 0
        assert (CacheLayout.at(cache_dir).made() or {}).get("from_empty_folder") is True
    layout = ensure_cache(cache_dir)
    assert layout.ready()
    box = Sandbox(SandboxConfig(workers=1, cache_dir=cache_dir))
    try:
        assert (await box.run_code("return 6 * 7", {})).result == 42
    finally:
        await box.aclose()
