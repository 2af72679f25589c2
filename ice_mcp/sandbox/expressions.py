"""Condition and convergence expressions evaluated inside the WebAssembly sandbox (opt-in).

In-process evaluation is fast and capped; operators who want the hard boundary
of a fresh guest per expression turn on `Settings.sandbox_expressions`. The
guest imports Jinja2 from a read-only zip (zipimport opens one file; the guest
may not list folders), and evaluates the same expression language.
"""

from __future__ import annotations

import importlib.util
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ice_mcp.sandbox.artifacts import default_cache_dir
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


def library_zip(cache_dir: Path) -> Path:
    """A zip of the pure-Python Jinja2 and MarkupSafe sources (built once, kept in the cache)."""
    target = cache_dir / "expressions" / "expressions.zip"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in LIBRARIES:
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                raise RuntimeError(f"{name} is not installed")
            root = Path(next(iter(spec.submodule_search_locations)))
            for source in sorted(root.rglob("*.py")):
                archive.write(source, f"{name}/{source.relative_to(root)}")
    partial.replace(target)
    return target


class ExpressionSandbox:
    """Evaluates expressions in fresh guests; names are passed as JSON."""

    def __init__(self, cache_dir: Path | None = None, timeout_seconds: float = 5.0) -> None:
        lib = library_zip(cache_dir or default_cache_dir())
        self.sandbox = Sandbox(SandboxConfig(readonly_dirs=((lib.parent, GUEST_LIB),), cache_dir=cache_dir))
        self.timeout_seconds = timeout_seconds

    async def evaluate(self, expression: str, names: Mapping[str, Any]) -> Any:
        outcome = await self.sandbox.run_code(GUEST_EVALUATOR, {"expression": expression, "names": dict(names)},
                                              timeout_seconds=self.timeout_seconds)
        return outcome.result

    async def aclose(self) -> None:
        await self.sandbox.aclose()
