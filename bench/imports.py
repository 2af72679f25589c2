"""The package's import graph: modules, the largest ones, runtime import cycles and in-function imports.

Runtime imports are every import Python executes (module level and inside functions), not those
under `if TYPE_CHECKING:`. A cycle is a strongly connected component of more than one module.
Run: `PYTHONPATH=. .venv/bin/python bench/imports.py [--package ice_mcp]`.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

import grimp


def package_root(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, package
    return Path(next(iter(spec.submodule_search_locations)))


def module_files(package: str) -> dict[str, Path]:
    root = package_root(package)
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def in_function_imports(package: str, files: dict[str, Path]) -> list[tuple[str, int, str]]:
    """Imports of the package's own modules made inside a function body."""
    found = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == package:
                    found.append((module, node.lineno, node.module or ""))
                elif isinstance(node, ast.ImportFrom) and node.level > 0:
                    found.append((module, node.lineno, "." * node.level + (node.module or "")))
                elif isinstance(node, ast.Import):
                    found.extend((module, node.lineno, a.name) for a in node.names if a.name.split(".")[0] == package)
    return sorted(set(found))


def cycles(graph: grimp.ImportGraph, modules: list[str]) -> list[list[str]]:
    """Strongly connected components (Tarjan) with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="ice_mcp")
    args = parser.parse_args()
    files = module_files(args.package)
    graph = grimp.build_graph(args.package, exclude_type_checking_imports=True, cache_dir=None)
    modules = sorted(m for m in graph.modules if m.split(".")[0] == args.package)
    sizes = sorted(((len(files[m].read_text(encoding="utf-8").splitlines()), m) for m in files), reverse=True)
    print(f"modules: {len(files)}, lines: {sum(s for s, _ in sizes)}")
    print("largest: " + ", ".join(f"{m} ({s})" for s, m in sizes[:6]))
    inner = in_function_imports(args.package, files)
    print(f"in-function imports of {args.package}'s own modules: {len(inner)}")
    for module, line, target in inner:
        print(f"  {module}:{line} -> {target}")
    found = cycles(graph, modules)
    print(f"runtime import cycles: {len(found)}" + (f" (largest: {max(map(len, found))} modules)" if found else ""))
    for component in found:
        print(f"  {len(component)} modules: " + ", ".join(component))


if __name__ == "__main__":
    main()
