"""Condition and convergence expressions evaluated inside the WebAssembly sandbox (opt-in).

In-process evaluation is fast and capped; operators who want the hard boundary
of a fresh guest per expression turn on `Settings.sandbox_expressions`. The
guest imports Jinja2 from a read-only zip of bytecode compiled once by a guest
(zipimport opens one file; the guest may not list folders), and evaluates the
same expression language.
"""

from __future__ import annotations

import base64
import importlib.util
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ice_mcp.lazy import MadeOnce
from ice_mcp.sandbox.artifacts import default_cache_dir
from ice_mcp.sandbox.errors import UNAVAILABLE, SandboxError
from ice_mcp.sandbox.sandbox import Sandbox, SandboxConfig

GUEST_LIB = "/ice/lib"
LIBRARIES = ("jinja2", "markupsafe")

# The body of the guest's `main(inputs)`: the same language as the host's template sandbox.
GUEST_EVALUATOR = f"""
import sys
sys.path.insert(0, {GUEST_LIB + '/expressions.zip'!r})
from jinja2 import ChainableUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

class Environment(ImmutableSandboxedEnvironment):
    def getattr(self, obj, attribute):
        if type(obj) is dict and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

env = Environment(undefined=ChainableUndefined)
value = env.compile_expression(inputs["expression"], undefined_to_none=False)(**inputs["names"])
return None if isinstance(value, ChainableUndefined) else value
"""


def library_sources() -> dict[str, str]:
    """The pure-Python sources of Jinja2 and MarkupSafe, by path inside the zip."""
    sources: dict[str, str] = {}
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SandboxError(UNAVAILABLE, f"{name} is not installed")
        root = Path(next(iter(spec.submodule_search_locations)))
        for source in sorted(root.rglob("*.py")):
            sources[f"{name}/{source.relative_to(root)}"] = source.read_text(encoding="utf-8")
    return sources


# Run once in a guest: compile the library to the guest's own bytecode (its CPython differs from ours).
GUEST_COMPILER = """
import base64, importlib.util, marshal
code = {path: base64.b64encode(marshal.dumps(compile(text, path, "exec"))).decode()
        for path, text in inputs["sources"].items()}
return {"magic": base64.b64encode(importlib.util.MAGIC_NUMBER).decode(), "code": code}
"""


async def build_library_zip(sandbox: Sandbox, target: Path) -> Path:
    """A zip of .pyc files only (zipimport then skips compiling on every guest run)."""
    compiled = (await sandbox.run_code(GUEST_COMPILER, {"sources": library_sources()}, timeout_seconds=60)).result
    header = base64.b64decode(compiled["magic"]) + bytes(12)  # flags, mtime, size: unchecked without sources
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as archive:
        for path, code in sorted(compiled["code"].items()):
            archive.writestr(path[:-3] + ".pyc", header + base64.b64decode(code))
    partial.replace(target)
    return target


class ExpressionSandbox:
    """Evaluates expressions in fresh guests; names are passed as JSON."""

    def __init__(self, cache_dir: Path | None = None, timeout_seconds: float = 5.0) -> None:
        self.cache_dir = cache_dir
        self.library = (cache_dir or default_cache_dir()) / "expressions" / "expressions.zip"
        self.timeout_seconds = timeout_seconds
        self._sandbox = MadeOnce(self._make)

    async def _make(self) -> Sandbox:
        if not self.library.is_file():
            builder = Sandbox(SandboxConfig(workers=1, cache_dir=self.cache_dir, max_result_bytes=64 * 2**20,
                                            max_input_bytes=64 * 2**20))
            try:
                await build_library_zip(builder, self.library)
            finally:
                await builder.aclose()
        return Sandbox(SandboxConfig(readonly_dirs=((self.library.parent, GUEST_LIB),), cache_dir=self.cache_dir))

    async def _ready(self) -> Sandbox:
        return await self._sandbox.get()

    async def evaluate(self, expression: str, names: Mapping[str, Any]) -> Any:
        sandbox = await self._ready()
        outcome = await sandbox.run_code(GUEST_EVALUATOR, {"expression": expression, "names": dict(names)},
                                         timeout_seconds=self.timeout_seconds)
        return outcome.result

    async def aclose(self) -> None:
        if (sandbox := self._sandbox.take()) is not None:
            await sandbox.aclose()
