"""Validation issues pinned to where they are: a JSON pointer to the node and field each concerns in the document,
and the line and column of that place in the document's text when the blueprint was given as text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ice_mcp.blueprint.document_tree import Node, build_tree, detect_format, locate
from ice_mcp.blueprint.issues import ValidationIssue, ValidationReport
from ice_mcp.errors import IceError

# The document itself was refused (unreadable, too large, an alias bomb): its issues have no place to pin, and
# reading it again here would undo the refusal (a 2**30-string alias bomb walked in full).
UNREAD = frozenset({"parse_error", "document_too_large", "yaml_too_complex", "blueprint_too_large"})


def pin(report: ValidationReport, document: Mapping[str, Any] | str | None) -> ValidationReport:
    """`report` with each issue's `path` (and `line`/`column` for text), read from the document it is about."""
    if not (report.errors or report.warnings) or document is None or any(e.code in UNREAD for e in report.errors):
        return report
    root: Node | None = None
    raw: Any = document
    if isinstance(document, str):
        try:
            root = build_tree(document, detect_format(document))
        except IceError:
            return report
        raw = root.value if root is not None else None
    nodes = node_paths(raw)

    def placed(issue: ValidationIssue) -> ValidationIssue:
        parts = issue_path(issue, nodes)
        if parts is None:
            return issue
        update: dict[str, Any] = {"path": pointer(parts)}
        where = locate(root, parts)
        if where is not None:
            update["line"], update["column"] = where
        return issue.model_copy(update=update)

    return report.model_copy(update={"errors": [placed(i) for i in report.errors],
                                     "warnings": [placed(i) for i in report.warnings]})


def issue_path(issue: ValidationIssue, nodes: dict[str, list[str | int]]) -> list[str | int] | None:
    """The document path an issue concerns: its node's (found by id, sub-graphs included) and then its field."""
    base: list[str | int] = []
    if issue.node_id is not None:
        found = nodes.get(issue.node_id)
        if found is None:
            return None
        base = list(found)
    if issue.field:
        base.extend(int(part) if part.isdigit() else part for part in issue.field.split("."))
    return base if (base or issue.node_id is not None) else None


def node_paths(raw: Any) -> dict[str, list[str | int]]:
    """Every node's path in a blueprint document by its id (a mapping with `id` and `type` inside a list), the
    first of a repeated id; a walk of the whole document, sub-graphs (loop bodies, branches) included."""
    found: dict[str, list[str | int]] = {}
    stack: list[tuple[Any, list[str | int]]] = [(raw, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, [*path, k]) for k, v in reversed(list(value.items())) if isinstance(v, (dict, list)))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict) and isinstance(item.get("id"), str) and "type" in item:
                    found.setdefault(item["id"], [*path, i])
            stack.extend((item, [*path, i]) for i, item in reversed(list(enumerate(value)))
                         if isinstance(item, (dict, list)))
    return found


def pointer(parts: list[str | int]) -> str:
    """A JSON pointer (RFC 6901)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)
