"""A compiled workflow as a Mermaid flowchart: the edges the scheduler follows, read from the plan."""

from __future__ import annotations

from ice_mcp.blueprint.models import Shape
from ice_mcp.core.plan import Graph, Plan, PlanNode

# Each node type's `drawing.shape`, in Mermaid's brackets.
_BRACKETS: dict[Shape, tuple[str, str]] = {
    "rect": ("[", "]"),
    "rhombus": ("{", "}"),
    "subroutine": ("[[", "]]"),
    "parallelogram": ("[/", "/]"),
    "stadium": ("([", "])"),
}


def _label(node: PlanNode) -> str:
    detail = node.spec.drawing.detail(node.spec)
    text = f"{node.id}<br/>{node.type}" + (f": {detail}" if detail else "")
    return text.replace('"', "'")


def _graph(graph: Graph, prefix: str, lines: list[str], indent: str) -> None:
    shape = graph.shape
    for node_id in shape.order:
        node = graph.nodes[node_id]
        left, right = _BRACKETS[node.spec.drawing.shape]
        key = f"{prefix}{node_id}"
        lines.append(f'{indent}{key}{left}"{_label(node)}"{right}')
        branches = node.spec.drawing.inside == "branch"
        for name, subgraph in node.subgraphs.items():
            if branches:  # `branch0`: "branch 0", keyed `_b0`
                suffix = "_b" + name.removeprefix("branch")
                lines.append(f'{indent}subgraph {key}{suffix}["{name.replace("branch", "branch ")}"]')
            else:
                suffix = f"_{name}"
                lines.append(f'{indent}subgraph {key}{suffix}["{node_id} {name}"]')
            _graph(subgraph, f"{key}__" if name == "body" else f"{key}_{suffix}__", lines, indent + "  ")
            lines.append(f"{indent}end")
            lines.append(f"{indent}{key} -.-> {key}{suffix}")
    for node_id in shape.order:
        gates = dict(shape.gates.get(node_id, ()))
        for dep in shape.deps[node_id]:
            label = f"|{str(gates[dep]).lower()}|" if dep in gates else ""
            lines.append(f"{indent}{prefix}{dep} -->{label} {prefix}{node_id}")


def mermaid(plan: Plan) -> str:
    lines = ["flowchart TD"]
    _graph(plan.graph, "", lines, "  ")
    return "\n".join(lines) + "\n"
