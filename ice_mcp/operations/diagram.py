"""A compiled workflow as a Mermaid flowchart: the edges the scheduler follows, read from the plan."""

from __future__ import annotations

from ice_mcp.core.plan import Graph, Plan, PlanNode

_SHAPES = {
    "condition": ("{", "}"),
    "loop": ("[[", "]]"),
    "parallel": ("[[", "]]"),
    "recursive": ("[[", "]]"),
    "workflow": ("[/", "/]"),
    "llm": ("([", "])"),
    "agent": ("([", "])"),
}


def _label(node: PlanNode) -> str:
    spec = node.spec
    agent = getattr(spec, "agent", None)
    detail = agent if isinstance(agent, str) else (
        getattr(spec, "tool_name", None) or getattr(spec, "workflow_ref", None) or getattr(spec, "model", None))
    text = f"{node.id}<br/>{node.type}" + (f": {detail}" if detail else "")
    return text.replace('"', "'")


def _graph(graph: Graph, prefix: str, lines: list[str], indent: str) -> None:
    shape = graph.shape
    for node_id in shape.order:
        node = graph.nodes[node_id]
        left, right = _SHAPES.get(node.type, ("[", "]"))
        key = f"{prefix}{node_id}"
        lines.append(f'{indent}{key}{left}"{_label(node)}"{right}')
        for name, subgraph in node.subgraphs.items():
            title, suffix = ("body", "_body") if name == "body" else (name.replace("branch", "branch "),
                                                                      "_b" + name.removeprefix("branch"))
            lines.append(f'{indent}subgraph {key}{suffix}["{node_id} {title}"]' if name == "body"
                         else f'{indent}subgraph {key}{suffix}["{title}"]')
            _graph(subgraph, f"{key}_{suffix}__" if name != "body" else f"{key}__", lines, indent + "  ")
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
