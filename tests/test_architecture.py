"""The house rules hold: pyproject's import contracts, modules of a readable size, a command line that starts
without the SDKs it does not need."""

from __future__ import annotations

import ast
import inspect
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
    assert "8 kept, 0 broken" in done.stdout


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


def test_events_are_named_only_through_the_vocabulary() -> None:
    # Every event type and node_event kind is a member of ice_mcp/store/vocabulary.py; a string equal to one
    # anywhere else in the package is an event named by hand. Not counted: docstrings, and the error codes that
    # share a name with an event (GraphFailed's `node_failed`, a UI refusal's `run_finished`; errors.py sits
    # below the store and cannot import the vocabulary), told apart by where they stand: a `code=` argument, or
    # a comparison with a code looked up (`error.get("code") == ...`, `error["code"] == ...`).
    from ice_mcp.store.vocabulary import EventType, NodeEventKind

    names = {str(member) for member in (*EventType, *NodeEventKind)}
    vocabulary = ROOT / "ice_mcp" / "store" / "vocabulary.py"
    found = []
    for path in sorted((ROOT / "ice_mcp").rglob("*.py")):
        if path == vocabulary:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        other = _docstrings_and_error_codes(tree)
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in names and id(node) not in other]
    assert found == [], "name events by the vocabulary's members (ice_mcp.store.vocabulary)"


def _docstrings_and_error_codes(tree: ast.Module) -> set[int]:
    """The ids of the string constants in `tree` that are docstrings or error codes, not event names."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.add(id(first.value))
        elif isinstance(node, ast.keyword) and node.arg == "code":
            skipped.add(id(node.value))
        elif isinstance(node, ast.Compare) and any(map(_is_code_lookup, (node.left, *node.comparators))):
            skipped.update(id(side) for side in (node.left, *node.comparators))
    return skipped


def _is_code_lookup(node: ast.expr) -> bool:
    """`x.get("code")` or `x["code"]`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        key: ast.expr | None = node.args[0] if node.args else None
    elif isinstance(node, ast.Subscript):
        key = node.slice
    else:
        return False
    return isinstance(key, ast.Constant) and key.value == "code"


def test_no_desk_or_engine_imports_the_orchestrator_even_for_type_checking() -> None:
    # Each desk and engine is typed with a narrow protocol of what it uses (beside it, or in ice_mcp/desks.py), which
    # the orchestrator satisfies: none imports the orchestrator back, not even under TYPE_CHECKING.
    package = ROOT / "ice_mcp"
    modules = [path for room in ("schedules", "hooks", "notify", "engines") for path in (package / room).rglob("*.py")]
    modules += [package / "answers.py", package / "network.py", package / "desks.py"]
    assert len(modules) > 20
    found = [f"{path.relative_to(ROOT)}:{line}" for path in modules for line, name in _imported_names(path)
             if name == "ice_mcp.orchestrator" or name.startswith("ice_mcp.orchestrator.")]
    assert found == [], "type the orchestrator as a protocol of what this module uses of it"


def _imported_names(path: Path) -> list[tuple[int, str]]:
    """Every module (and `from` name) a module imports, relative imports made absolute, with its line."""
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    package = module.removesuffix(".__init__").split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])]
                            ) if node.level else str(node.module)
            names += [(node.lineno, base), *((node.lineno, f"{base}.{alias.name}") for alias in node.names)]
    return names


def test_each_store_implements_every_part_of_the_run_storage() -> None:
    # RunStorage is the union of its parts, one Protocol per kind of record, and declares nothing of its own; the
    # SQLite and Redis stores implement every member of every part, with the part's parameters, and every public
    # method both stores have belongs to a part (none fell out of the interface when it was split).
    from typing import Protocol

    from ice_mcp.store.base import RunStorage
    from ice_mcp.store.redis import RedisRunStore
    from ice_mcp.store.sqlite import RunStore

    parts = [base for base in RunStorage.__bases__ if base is not Protocol]
    assert len(parts) > 5 and all(getattr(part, "_is_protocol", False) for part in parts)
    assert _declared(RunStorage) == set()
    members = {part: _declared(part) for part in parts}
    every = [name for names in members.values() for name in names]
    assert len(every) == len(set(every)) > 60, "each member in one part"
    for store in (RunStore, RedisRunStore):
        data = _data_attributes(store)
        missing = [f"{part.__name__}.{name}" for part, names in members.items() for name in sorted(names)
                   if not (hasattr(store, name) or name in data)]
        assert missing == [], f"{store.__name__} does not implement {missing}"
        differ = [f"{part.__name__}.{name}" for part, names in members.items() for name in sorted(names)
                  if callable(getattr(part, name, None))
                  and _parameters(inspect.signature(getattr(part, name)))
                  != _parameters(inspect.signature(getattr(store, name)))]
        assert differ == [], f"{store.__name__} takes other parameters in {differ}"
    public = [{name for name in dir(store) if not name.startswith("_") and callable(getattr(store, name))}
              for store in (RunStore, RedisRunStore)]
    assert (public[0] & public[1]) - set(every) == set()


def _declared(protocol: type) -> set[str]:
    """The public members a class body declares: its methods, properties and annotated attributes."""
    return ({name for name in vars(protocol) if not name.startswith("_")}
            | {name for name in vars(protocol).get("__annotations__", {}) if not name.startswith("_")})


def _data_attributes(store: type) -> set[str]:
    """The attributes a store's classes (ours, in its MRO) declare or set on `self`."""
    names: set[str] = set()
    for klass in store.__mro__:
        if not klass.__module__.startswith("ice_mcp."):
            continue
        names |= set(vars(klass).get("__annotations__", {}))
        for node in ast.walk(ast.parse(inspect.getsource(klass))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) \
                    and node.value.id == "self":
                names.add(node.attr)
    return names


def _parameters(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]
