"""Blueprints of the browser tests: a run to watch, one that fails inside a loop, one that prints HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STEP = 0.8  # seconds per node of `progress`: long enough to see each state in the browser


def hold(node_id: str, seconds: float, *deps: str) -> dict[str, Any]:
    return {"id": node_id, "type": "tool", "tool_name": "hold", "tool_args": {"label": node_id, "seconds": seconds},
            **({"dependencies": list(deps)} if deps else {})}


def layered(name: str, layers: int, width: int, seconds: float) -> dict[str, Any]:
    """`layers` x `width` nodes, each reading two nodes of the layer above (1,000 nodes at 20 x 50)."""
    nodes = []
    for layer in range(layers):
        for i in range(width):
            deps = [] if layer == 0 else sorted({f"n{layer - 1}_{i}", f"n{layer - 1}_{(i * 7 + 3) % width}"})
            nodes.append(hold(f"n{layer}_{i}", seconds, *deps))
    return {"name": name, "description": f"{layers * width} nodes in {layers} layers", "max_parallel": 64,
            "nodes": nodes}


BLUEPRINTS: list[dict[str, Any]] = [
    {"name": "progress", "description": "Three steps in a row, slowly.",
     "nodes": [hold("a", STEP), hold("b", STEP, "a"), hold("c", STEP, "b")],
     "outputs": {"last": "{{ c.label }}"}},
    {"name": "fails", "description": "A loop whose third item fails.",
     "nodes": [hold("prepare", 0.05),
               {"id": "each", "type": "loop", "items": "{{ [0, 1, 2, 3] }}", "item_var": "item",
                "dependencies": ["prepare"],
                "body": [{"id": "check", "type": "tool", "tool_name": "check",
                          "tool_args": {"item": "{{ item }}", "bad": 2}}]},
               hold("after", 0.05, "each")]},
    {"name": "long", "description": "Waits a minute (to be cancelled).", "nodes": [hold("wait", 60)]},
    {"name": "html_out", "description": "A node whose output is HTML.",
     "nodes": [{"id": "render", "type": "tool", "tool_name": "render_template",
                "tool_args": {"template": "<script>window.__pwned = 1</script><b id='bold'>bold</b>"}}]},
    {"name": "greeting", "description": "Greets whoever the form names.",
     "inputs": {"type": "object", "required": ["name"], "properties": {
         "name": {"type": "string", "description": "who to greet"},
         "times": {"type": "integer", "default": 1, "minimum": 1, "maximum": 5},
         "loud": {"type": "boolean", "default": False},
         "style": {"type": "string", "enum": ["plain", "fancy"], "default": "plain"}}},
     "nodes": [{"id": "greet", "type": "tool", "tool_name": "greet",
                "tool_args": {"name": "{{ inputs.name }}", "times": "{{ inputs.times }}",
                              "loud": "{{ inputs.loud }}", "style": "{{ inputs.style }}"}}],
     "outputs": {"text": "{{ greet.text }}"}},
    layered("big", 20, 50, 0.0),
    {"name": "inner", "description": "Says hi.", "inputs": {"type": "object", "properties": {"who": {"type": "string"}}},
     "nodes": [hold("hi", 0.05)]},
    {"name": "containers", "description": "One of each container.", "nodes": [
        hold("start", 0.05),
        {"id": "both", "type": "parallel", "dependencies": ["start"],
         "branches": [[hold("left", 0.05)], [hold("right", 0.05), hold("after_right", 0.05, "right")]]},
        {"id": "call", "type": "workflow", "workflow_ref": "inner", "inputs": {"who": "{{ start.label }}"}},
        {"id": "again", "type": "recursive", "max_iterations": 2, "convergence_condition": "iteration >= 2",
         "body": [hold("step", 0.05)]}]},
]


def write_blueprints(folder: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for blueprint in [*BLUEPRINTS, *(extra or [])]:
        (folder / f"{blueprint['name']}.json").write_text(json.dumps(blueprint))
    (folder / "networks").mkdir(exist_ok=True)
    (folder / "networks" / "ui_pair.json").write_text(json.dumps(NETWORK))
    return folder


# A network served by name from the folder's networks/ (schedules can run it).
NETWORK = {"api_version": "network.v0", "name": "ui_pair", "workflows": [
    {"id": "one", "ref": "inner", "inputs": {"who": "{{ trigger.kind }}"}},
    {"id": "two", "ref": "inner", "after": "one"}]}
