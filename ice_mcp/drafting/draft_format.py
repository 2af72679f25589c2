"""The Draft format: blueprint YAML that may still say what it does not know, read into a blueprint and its
assumptions.

A Draft is a blueprint (JSON or YAML) with three allowances, none of which reaches the validator:

- a value `<PLACEHOLDER: what is missing>` (alone, or inside a string), for what the goal did not say: a
  recipient's address, an API's URL. It stays in the blueprint as text (it validates wherever a string may
  be) and is listed under `placeholders`, with where it is. It needs no quotes: each is read as a token first,
  so YAML never sees its `: `;
- `# TODO ...` comments, for what should be checked before it runs for real, listed under `todos`;
- a top-level `assumptions` mapping, taken out before validation: `missing_tools` (tools the goal needs that
  the catalogue does not have: the draft works around them or leaves a placeholder), `invented_inputs`
  (inputs the goal did not name), `notes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ice_mcp.blueprint.loading import parse_text
from ice_mcp.errors import IceError

PLACEHOLDER = re.compile(r"<PLACEHOLDER:\s*([^>\n]*)>")
_TOKEN = re.compile(r"ICEPLACEHOLDER(\d+)X")
_TODO = re.compile(r"#\s*TODO\b:?\s*(.*)$", re.MULTILINE)
_FENCE = re.compile(r"```(?:ya?ml|json)?\s*\n(.*?)```", re.DOTALL)
ASSUMPTION_KEYS = ("missing_tools", "invented_inputs", "notes")


@dataclass(slots=True)
class Assumptions:
    """What a draft still assumes: tools the catalogue lacks, inputs nobody asked for, blanks and to-dos."""

    missing_tools: list[str] = field(default_factory=list)
    invented_inputs: list[str] = field(default_factory=list)
    placeholders: list[dict[str, str]] = field(default_factory=list)  # {path, what}
    todos: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"missing_tools": self.missing_tools, "invented_inputs": self.invented_inputs,
                "placeholders": self.placeholders, "todos": self.todos, "notes": self.notes}


@dataclass(slots=True)
class Draft:
    """A model's answer read as a Draft: its text (fences taken off), the blueprint in it, its assumptions."""

    text: str
    blueprint: dict[str, Any]
    assumptions: Assumptions


def draft_text(answer: str) -> str:
    """The Draft in a model's answer: the first fenced block, else the whole answer."""
    found = _FENCE.search(answer)
    return (found.group(1) if found else answer).strip() + "\n"


def read_draft(answer: str, goal: str = "") -> Draft:
    """A model's answer as a Draft; raises IceError(`draft_syntax`) when it holds no JSON/YAML object."""
    text = draft_text(answer)
    blanks: list[str] = []

    def token(found: re.Match[str]) -> str:
        blanks.append(found.group(0))
        return f"ICEPLACEHOLDER{len(blanks) - 1}X"

    try:
        value = _restore(parse_text(PLACEHOLDER.sub(token, text), "draft"), blanks)
    except IceError as exc:
        raise IceError(exc.message, code="draft_syntax") from None
    if not isinstance(value, dict):
        raise IceError("the draft must be one YAML (or JSON) mapping: a blueprint", code="draft_syntax")
    declared = value.pop("assumptions", None)
    assumptions = Assumptions(todos=[t.strip() for t in _TODO.findall(text) if t.strip()])
    if isinstance(declared, dict):
        for key in ASSUMPTION_KEYS:
            items = declared.get(key) or []
            getattr(assumptions, key).extend(str(item) for item in (items if isinstance(items, list) else [items]))
    _find_placeholders(value, "", assumptions.placeholders)
    for name, default in _inputs(value):
        if name not in assumptions.invented_inputs and not _mentioned(name, default, goal):
            assumptions.invented_inputs.append(name)
    return Draft(text, value, assumptions)


def _restore(value: Any, blanks: list[str]) -> Any:
    """The placeholders put back where their tokens are (in keys and values)."""
    if isinstance(value, str):
        return _TOKEN.sub(lambda m: blanks[int(m.group(1))], value) if blanks else value
    if isinstance(value, dict):
        return {_restore(key, blanks): _restore(item, blanks) for key, item in value.items()}
    if isinstance(value, list):
        return [_restore(item, blanks) for item in value]
    return value


def _find_placeholders(value: Any, path: str, found: list[dict[str, str]]) -> None:
    if isinstance(value, str):
        found.extend({"path": path or "/", "what": m.group(1).strip()} for m in PLACEHOLDER.finditer(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _find_placeholders(item, f"{path}/{key}", found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _find_placeholders(item, f"{path}/{index}", found)


def _inputs(blueprint: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each declared input's name and default."""
    inputs = blueprint.get("inputs")
    properties = inputs.get("properties") if isinstance(inputs, dict) else None
    if not isinstance(properties, dict):
        return []
    return [(str(name), prop.get("default") if isinstance(prop, dict) else None) for name, prop in properties.items()]


def _mentioned(name: str, default: Any, goal: str) -> bool:
    """Whether the goal gives an input: its default's value appears in it, or every word of its name does
    (`csv_path`: "csv", "path")."""
    text = goal.lower()
    if isinstance(default, str | int | float) and not isinstance(default, bool) and str(default).lower() in text:
        return not PLACEHOLDER.search(str(default))
    words = [w for w in re.split(r"[_\W]+", name.lower()) if w]
    return bool(words) and all(w in text or w.rstrip("s") in text for w in words)
