"""Size limits on blueprint and manifest documents, checked before any parsing work proportional to them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ice_mcp.blueprint.issues import ValidationIssue

if TYPE_CHECKING:
    from ice_mcp.settings import Settings

TEMPLATE_MARKERS = ("{{", "{%", "{#")
VALUE_OVERHEAD = 2  # what a value costs beyond its text, like JSON quotes, a comma or a colon


@dataclass(frozen=True, slots=True)
class BlueprintLimits:
    """The largest document accepted (defaults as in Settings)."""

    max_nodes: int = 10_000
    max_depth: int = 64
    max_bytes: int = 4 * 1024 * 1024
    max_templates: int = 20_000

    @classmethod
    def from_settings(cls, settings: Settings) -> BlueprintLimits:
        return cls(settings.max_blueprint_nodes, settings.max_blueprint_depth,
                   settings.max_blueprint_bytes, settings.max_blueprint_templates)


def too_large(message: str) -> ValidationIssue:
    return ValidationIssue(code="blueprint_too_large", message=message)


def size_issue(raw: Mapping[str, Any], limits: BlueprintLimits, what: str = "blueprint"
               ) -> ValidationIssue | None:
    """The first limit `raw` crosses, or None; stops as soon as one is crossed, so its cost is bounded too."""
    for key in ("nodes", "workflows"):  # a long top-level list is refused before any walk
        listed = raw.get(key)
        if isinstance(listed, list) and len(listed) > limits.max_nodes:
            return too_large(f"the {what} has {len(listed)} {key}, more than {limits.max_nodes} (max_blueprint_nodes)")
    size = VALUE_OVERHEAD
    templates = 0
    stack: list[tuple[Any, int]] = [(raw, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limits.max_depth:
            return too_large(f"the {what} is nested deeper than {limits.max_depth} levels "
                             "(max_blueprint_depth)")
        if isinstance(value, Mapping | list | tuple):
            # Charge every member before visiting any, so a huge container is refused without a walk.
            size += len(value) * VALUE_OVERHEAD * (2 if isinstance(value, Mapping) else 1)
            if size > limits.max_bytes:
                return _over_bytes(what, limits)
        if isinstance(value, Mapping):
            for key, item in value.items():
                size += len(str(key))
                stack.append((item, depth + 1))
        elif isinstance(value, list | tuple):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            size += len(value)
            if any(marker in value for marker in TEMPLATE_MARKERS):
                templates += 1
                if templates > limits.max_templates:
                    return too_large(f"the {what} has more than {limits.max_templates} templated strings "
                                     "(max_blueprint_templates)")
        if size > limits.max_bytes:
            return _over_bytes(what, limits)
    nodes = count_nodes(raw.get("nodes")) + count_nodes(raw.get("workflows"))
    if nodes > limits.max_nodes:
        return too_large(f"the {what} has {nodes} nodes, more than {limits.max_nodes} (max_blueprint_nodes)")
    return None


def _over_bytes(what: str, limits: BlueprintLimits) -> ValidationIssue:
    return too_large(f"the {what} is larger than {limits.max_bytes} bytes (max_blueprint_bytes)")


def count_nodes(specs: Any) -> int:
    """Node specs in a list, sub-graphs (`body`, `branches`) included."""
    if not isinstance(specs, list):
        return 0
    total = 0
    for spec in specs:
        if not isinstance(spec, Mapping):
            continue
        total += 1 + count_nodes(spec.get("body"))
        branches = spec.get("branches")
        if isinstance(branches, list):
            total += sum(count_nodes(branch) for branch in branches)
    return total
