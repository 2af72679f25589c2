"""The toy node types' blueprint, and their module imported from a package of its own (outside ice_mcp), shared by
the embedded and the Temporal toy tests."""

from __future__ import annotations

import importlib
import shutil
import sys
import uuid
from pathlib import Path
from types import ModuleType

SOURCE = Path(__file__).with_name("toy_node_module.py")
# A shout at the top, one in a loop's body and two in the toy container's: both kinds of sub-graph hold toy nodes.
TOY = {
    "name": "toy",
    "inputs": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    "outputs": {"top": "{{ s.text }}", "each": "{{ each.results }}", "rounds": "{{ t.results }}"},
    "nodes": [
        {"id": "s", "type": "shout", "text": "{{ inputs.word }}", "times": 2},
        {"id": "each", "type": "loop", "items": ["a", "b"], "body": [
            {"id": "inner", "type": "shout", "text": "{{ item }}{{ index }}", "voice": "soft"}]},
        {"id": "t", "type": "twice", "body": [
            {"id": "r", "type": "shout", "text": "round {{ round }} of {{ s.text }}"},
            {"id": "tail", "type": "tool", "tool_name": "render_template",
             "tool_args": {"template": "{{ r.text }}"}}]},
    ],
}


def import_toy(root: Path) -> ModuleType:
    """The toy module, copied into a package of its own under `root` and imported from there."""
    package = f"toy_nodes_{uuid.uuid4().hex[:8]}"
    (root / package).mkdir()
    (root / package / "__init__.py").write_text('"""Node types of someone else\'s."""\n')
    shutil.copy(SOURCE, root / package / "nodes.py")
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(f"{package}.nodes")
    finally:
        sys.path.remove(str(root))
