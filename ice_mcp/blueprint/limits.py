"""Size limits on blueprint and manifest documents, checked before any parsing work proportional to them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
    max_depth, max_bytes, max_templates = limits.max_depth, limits.max_bytes, limits.max_templates
    size = VALUE_OVERHEAD
    templates = 0
    # Each container's members, last first (the order a stack of values visits them); a value taken from
    # the top iterator is as deep as the stack is tall. Exact types first: isinstance on ABCs is slow.
    stack: list[Iterator[Any]] = [iter((raw,))]
    while stack:
        depth = len(stack)
        for value in stack[-1]:
            if depth > max_depth:
                return too_large(f"the {what} is nested deeper than {max_depth} levels (max_blueprint_depth)")
            kind = type(value)
            if kind is str or (kind is not dict and kind is not list and isinstance(value, str)):
                size += len(value)
                if "{" in value and ("{{" in value or "{%" in value or "{#" in value):  # TEMPLATE_MARKERS
                    templates += 1
                    if templates > max_templates:
                        return too_large(f"the {what} has more than {max_templates} templated strings "
                                         "(max_blueprint_templates)")
                if size > max_bytes:
                    return _over_bytes(what, limits)
                continue
            if kind is dict or (kind is not list and isinstance(value, Mapping)):
                # Charge every member before visiting any, so a huge container is refused without a walk.
                size += len(value) * VALUE_OVERHEAD * 2
                if size > max_bytes:
                    return _over_bytes(what, limits)
                if kind is dict:
                    for key in value:
                        size += len(key) if type(key) is str else len(str(key))
                    members: Iterator[Any] = reversed(value.values())
                else:
                    items = list(value.items())
                    for key, _ in items:
                        size += len(str(key))
                    members = (item for _, item in reversed(items))
            elif kind is list or isinstance(value, list | tuple):
                size += len(value) * VALUE_OVERHEAD
                if size > max_bytes:
                    return _over_bytes(what, limits)
                members = reversed(value)
            else:
                continue  # numbers, booleans, null: their overhead was charged with their container
            if size > max_bytes:
                return _over_bytes(what, limits)
            stack.append(members)
            break
        else:
            stack.pop()
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
