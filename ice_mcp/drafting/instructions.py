"""What the drafting model reads: the blueprint format, the node types' fields, the Draft format and the catalogue
(the tools this orchestrator can run, with their arguments, compactly), and the messages of the repair loop."""

from __future__ import annotations

import json
from typing import Any

from ice_mcp.blueprint.issues import ValidationIssue
from ice_mcp.bundled import bundled_dir
from ice_mcp.orchestrator import Orchestrator

MAX_DESCRIPTION = 160  # characters of a tool's description the model sees
_COMMON_FIELDS = {"id", "type", "description", "dependencies", "retries", "backoff_seconds", "backoff",
                  "timeout_seconds", "on_error", "metadata"}

DRAFT_RULES = """\
# Your task

Write ONE ice_mcp blueprint, in YAML, for the user's goal. Answer with the YAML only, in one ```yaml block.

Rules:
- Use only the tools listed under "Tools you may use" (by their exact names) in `tool` nodes, and only the
  arguments they list (`*` marks a required one). A tool the goal needs that is not listed: do not invent it;
  do the step another way (a `code` node, `http_request`, an `llm` node) or leave a placeholder, and name it
  under `assumptions.missing_tools`.
- `llm` nodes use `model: default` unless the user names a model.
- Every template (`{{ ... }}`) may read only `inputs`, nodes of its own scope by id, and loop/recursive
  variables. A node reading another node's output depends on it without listing it.
- Give the workflow `inputs` (JSON Schema with defaults where the goal gives values) and `outputs` (name ->
  template) holding what the goal asks for.
- What the goal does not say (an address, a URL, a threshold): a value `"<PLACEHOLDER: what is missing>"`.
  Things to check later: `# TODO: ...` comments. Optionally a top-level `assumptions:` mapping with
  `missing_tools`, `invented_inputs` and `notes` (lists of strings); it is removed before validation.
- When told about problems, answer with the whole corrected blueprint, not a diff.
"""


def _doc(name: str, cut: str | None = None) -> str:
    path = bundled_dir("docs") / f"{name}.md"
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    return text.split(cut)[0].rstrip() + "\n" if cut and cut in text else text


def _type_name(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"][:8])
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind if k != "null") or "any"
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"list[{_type_name(schema['items'])}]"
    if kind is None and ("anyOf" in schema or "oneOf" in schema):
        options = schema.get("anyOf") or schema.get("oneOf") or []
        return "|".join(_type_name(o) for o in options if isinstance(o, dict) and o.get("type") != "null") or "any"
    return str(kind or "any")


def tool_line(name: str, description: str, schema: dict[str, Any]) -> str:
    """`- name(arg*: type, arg: type): what it does` — one line per tool."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    args = ", ".join(f"{arg}{'*' if arg in required else ''}: {_type_name(prop if isinstance(prop, dict) else {})}"
                     for arg, prop in properties.items())
    text = " ".join((description or "").split())
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION - 1].rstrip() + "…"
    return f"- {name}({args}): {text}"


def catalogue_text(orc: Orchestrator) -> str:
    """The tools (the registry's and upstream MCP servers', `SERVER.TOOL`), workflows and agents, one line each."""
    registry = orc.registry
    lines = ["# Tools you may use (tool_name: arguments, * required)"]
    lines += [tool_line(name, entry.description, entry.input_schema) for name, entry in sorted(registry.tools.items())]
    if registry.workflows:
        lines.append("\n# Registered workflows (for `workflow` nodes' workflow_ref)")
        lines += [f"- {name}: {(entry.blueprint.description or '').strip()[:MAX_DESCRIPTION]}"
                  for name, entry in sorted(registry.workflows.items())]
    if registry.agents:
        lines.append("\n# Registered agents (for `agent` nodes)")
        lines += [f"- {name}: {entry.description[:MAX_DESCRIPTION]}" for name, entry in sorted(registry.agents.items())]
    return "\n".join(lines) + "\n"


def node_fields_text(orc: Orchestrator) -> str:
    """Each node type's own fields (those every node has are listed once), from its model: `*` required."""
    lines = ["# Node fields (all nodes: id*, type*, dependencies, retries, backoff_seconds, timeout_seconds, on_error)"]
    for name, model in orc.node_models.models.items():
        fields = [f"{field}{'*' if info.is_required() else ''}" for field, info in model.model_fields.items()
                  if field not in _COMMON_FIELDS]
        lines.append(f"- {name}: {', '.join(fields)}")
    return "\n".join(lines) + "\n"


def system_prompt(orc: Orchestrator) -> str:
    """The drafting model's instructions: the format, the node fields, the rules and the catalogue."""
    return "\n".join(part for part in (
        _doc("blueprint-format"), _doc("node-types", cut="## Built-in tools"), node_fields_text(orc), DRAFT_RULES,
        catalogue_text(orc)) if part)


def goal_message(goal: str, constraints: dict[str, Any]) -> str:
    text = f"Goal: {goal.strip()}\n"
    if constraints.get("name"):
        text += f"Name the workflow `{constraints['name']}`.\n"
    if constraints.get("notes"):
        text += f"Also: {constraints['notes']}\n"
    return text


def issue_dict(issue: ValidationIssue) -> dict[str, Any]:
    """An issue as the model and the caller see it: code, node, path, message, suggestion."""
    return {"code": issue.code, "node": issue.node_id, "path": issue.field, "message": issue.message,
            "suggestion": issue.suggestion}


def repair_message(issues: list[dict[str, Any]]) -> str:
    """The next user message: every problem, one JSON object a line, and what to do."""
    lines = [f"The validator found {len(issues)} problem(s) in that blueprint:"]
    lines += [json.dumps({k: v for k, v in issue.items() if v is not None}, ensure_ascii=False) for issue in issues]
    lines.append("Fix every one (use the suggestion where there is one) and answer with the whole corrected "
                 "blueprint in one ```yaml block.")
    return "\n".join(lines)
