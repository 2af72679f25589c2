"""A blueprint as a Mermaid flowchart."""

from __future__ import annotations

import re
from typing import Any

_SHAPES = {
    "condition": ("{", "}"),
    "loop": ("[[", "]]"),
    "parallel": ("[[", "]]"),
    "recursive": ("[[", "]]"),
    "workflow": ("[/", "/]"),
    "llm": ("([", "])"),
    "agent": ("([", "])"),
}
_REF = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\.")


def _label(node: Any) -> str:
    kind = getattr(node, "type", "")
    detail = (
        getattr(node, "tool_name", None)
        or getattr(node, "workflow_ref", None)
        or getattr(node, "model", None)
    )
    agent = getattr(node, "agent", None)
    if isinstance(agent, str):
        detail = agent
    text = f"{node.id}<br/>{kind}" + (f": {detail}" if detail else "")
    return text.replace('"', "'")


def _refs(node: Any, ids: set[str]) -> set[str]:
    """Nodes read by the node's templates and expressions (implicit dependencies)."""
    dump = (
        node.model_dump(mode="json", exclude={"body", "branches"})
        if hasattr(node, "model_dump")
        else {}
    )
    text = repr(dump)
    return {m for m in _REF.findall(text) if m in ids and m != node.id}


def _graph(nodes: list[Any], prefix: str, lines: list[str], indent: str) -> None:
    ids = {n.id for n in nodes}
    for node in nodes:
        left, right = _SHAPES.get(getattr(node, "type", ""), ("[", "]"))
        key = f"{prefix}{node.id}"
        lines.append(f'{indent}{key}{left}"{_label(node)}"{right}')
        body = getattr(node, "body", None)
        branches = getattr(node, "branches", None)
        if isinstance(body, list) and body:
            lines.append(f'{indent}subgraph {key}_body["{node.id} body"]')
            _graph(body, f"{key}__", lines, indent + "  ")
            lines.append(f"{indent}end")
            lines.append(f"{indent}{key} -.-> {key}_body")
        elif isinstance(branches, list):
            for i, branch in enumerate(branches):
                lines.append(f'{indent}subgraph {key}_b{i}["branch {i}"]')
                _graph(branch, f"{key}__b{i}__", lines, indent + "  ")
                lines.append(f"{indent}end")
                lines.append(f"{indent}{key} -.-> {key}_b{i}")
    for node in nodes:
        key = f"{prefix}{node.id}"
        deps = set(getattr(node, "dependencies", []) or []) | _refs(node, ids)
        for dep in sorted(deps & ids):
            lines.append(f"{indent}{prefix}{dep} --> {key}")
        for target in getattr(node, "true_path", []) or []:
            if target in ids:
                lines.append(f"{indent}{key} -->|true| {prefix}{target}")
        for target in getattr(node, "false_path", []) or []:
            if target in ids:
                lines.append(f"{indent}{key} -->|false| {prefix}{target}")


def mermaid(blueprint: Any) -> str:
    lines = ["flowchart TD"]
    _graph(list(getattr(blueprint, "nodes", []) or []), "", lines, "  ")
    return "\n".join(lines) + "\n"
