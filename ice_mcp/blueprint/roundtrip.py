"""The file is the truth: a blueprint's document text read with its layout, and edits written back into that text
changing only the lines whose data changed (comments, key order, quoting, anchors and blank lines stay).

`parse_document(text)` reads YAML or JSON text (ruamel.yaml's parser gives every value's place in the text) into a
`Document`: its plain data (`.blueprint`, read as the engine reads it: PyYAML's YAML 1.1 for YAML, JSON for JSON), the
places of its values (`locate`) and ruamel's round-trip tree (`.tree`). `apply_edit(text, blueprint)` compares the
text's data with `blueprint` and splices only the differences into the text (`roundtrip_edits.py`); what it wrote is
read back and must equal `blueprint`, or IceError(code="edit_not_representable") says so: a comment is never dropped
silently. What cannot be kept exactly is listed in `roundtrip_edits.py`'s docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ruamel.yaml import YAML

from ice_mcp.blueprint.document_tree import Format, Node, build_tree, detect_format, locate, same
from ice_mcp.blueprint.loading import parse_text
from ice_mcp.blueprint.roundtrip_edits import splice

__all__ = ["Document", "Format", "Node", "apply_edit", "detect_format", "parse_document", "same"]


@dataclass(eq=False)
class Document:
    """A blueprint's text as read: its format, plain data and the place of each value."""

    text: str
    format: Format
    blueprint: Any
    root: Node | None

    @cached_property
    def tree(self) -> Any:
        """ruamel.yaml's round-trip tree of the text (CommentedMap/CommentedSeq with comments and `.lc` places)."""
        return YAML(typ="rt").load(self.text)

    def locate(self, path: Sequence[str | int]) -> tuple[int, int] | None:
        """The 1-based (line, column) of the value at `path`; see `document_tree.locate`."""
        return locate(self.root, path)


def parse_document(text: str) -> Document:
    """YAML or JSON text → a Document. Raises IceError (`parse_error`, `document_too_large`, `yaml_too_complex`)."""
    parse_text(text)  # the engine's bounds (size, nesting, aliases) and its own reading must accept the text first
    fmt = detect_format(text)
    root = build_tree(text, fmt)
    return Document(text=text, format=fmt, blueprint=root.value if root is not None else None, root=root)


def apply_edit(text: str, blueprint: dict[str, Any]) -> str:
    """`text` with `blueprint` (the whole new blueprint, plain data) written into it, changing only what differs.

    Keys keep their order, new keys go at the end of their mapping, removed keys go with the comment lines right
    above them, list items that are mappings with an `id` are matched by id. Raises IceError
    (`edit_not_representable`) when the edit cannot be written without losing the document's comments.
    """
    document = parse_document(text)
    return splice(document.text, document.format, document.root, blueprint)
