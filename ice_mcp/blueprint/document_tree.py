"""A blueprint document's values with their places in its text: parse events made into a tree of `Node`s, each with
its plain value read as the engine reads it (PyYAML's YAML 1.1 for YAML text, JSON for JSON).

The events come from libyaml (PyYAML's C parser, the engine's own: 5 ms for a 200-node blueprint) when it is there
and accepts the text, else from ruamel.yaml's parser (pure Python, about 50 times slower); both give the same marks."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from ruamel.yaml import YAML
from ruamel.yaml import events as ruamel_events
from ruamel.yaml.error import YAMLError as RuamelError

from ice_mcp.errors import IceError

Format = Literal["yaml", "json"]
_YAML11 = yaml.SafeLoader("")  # PyYAML's resolver and constructors: the engine's own reading of a plain scalar


@dataclass(slots=True, eq=False)
class Node:
    """One value of the document: what it holds (`value`, plain data) and where its text is (`start`..`end`)."""

    kind: Literal["map", "seq", "scalar"]
    start: int  # its first character (an anchor or tag included)
    end: int  # just past its last content character (a block collection: its last child's end)
    line: int  # 0-based, of `start`
    column: int
    flow: bool = False
    style: str | None = None  # a scalar's: None (plain), "'", '"', "|", ">"
    anchor: str | None = None
    alias_of: Node | None = None  # an alias: the anchored node it repeats; start..end is the `*name` text
    keys: list[Node] = field(default_factory=list)
    values: list[Node] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)
    value: Any = None

    def pairs(self) -> list[tuple[Node, Node]]:
        return list(zip(self.keys, self.values, strict=True))


def locate(root: Node | None, path: Sequence[str | int]) -> tuple[int, int] | None:
    """The 1-based (line, column) of the value at `path` (mapping keys and list indexes); a mapping key's own
    place when the path ends on one; the deepest place reached when the path goes on past the text."""
    node = root
    if node is None:
        return None
    place = (node.line, node.column)
    for part in path:
        node = node.alias_of or node
        if node.kind == "map":
            found = next(((k, v) for k, v in node.pairs() if k.value == part or str(k.value) == str(part)), None)
            if found is None:
                break
            place, node = (found[0].line, found[0].column), found[1]
        elif node.kind == "seq" and isinstance(part, int) and 0 <= part < len(node.items):
            node = node.items[part]
            place = (node.line, node.column)
        else:
            break
    return place[0] + 1, place[1] + 1


def detect_format(text: str) -> Format:
    """JSON when the text is a JSON object or array, else YAML (JSON is YAML too, but it is kept JSON)."""
    if text.lstrip().startswith(("{", "[")):
        try:
            json.loads(text)
        except ValueError:
            return "yaml"
        return "json"
    return "yaml"


def build_tree(text: str, fmt: Format) -> Node | None:
    """The document's nodes from its parse events, with plain values resolved as the engine reads them.
    Raises IceError(parse_error)."""
    if yaml.__with_libyaml__:
        try:
            return _build(yaml.parse(text, Loader=yaml.CSafeLoader), text, fmt)
        except yaml.YAMLError:
            pass  # JSON that YAML 1.1 does not read (libyaml's error): ruamel's YAML 1.2 parser reads it
    try:
        return _build(YAML(typ="rt").parse(text), text, fmt)
    except RuamelError as exc:
        raise IceError(f"the blueprint is not valid JSON or YAML: {exc}", code="parse_error") from None


def _build(events: Iterable[Any], text: str, fmt: Format) -> Node | None:
    stack: list[Node] = []
    pending_key: list[Node | None] = []
    anchors: dict[str, Node] = {}
    root: Node | None = None
    for event in events:
        kind_name = type(event).__name__
        if kind_name in ("MappingEndEvent", "SequenceEndEvent"):
            done = stack.pop()
            pending_key.pop()
            if done.flow:
                done.end = event.end_mark.index
            else:
                last = done.values[-1] if done.kind == "map" and done.values else done.items[-1] if done.items else None
                done.end = last.end if last is not None else event.start_mark.index
            _finish(done)
            root = _attach(done, stack, pending_key, root)
            continue
        if kind_name not in _NODE_EVENTS:
            continue
        mark = event.start_mark
        if kind_name == "AliasEvent":
            target = anchors.get(event.anchor)
            if target is None:
                raise IceError(f"unknown alias *{event.anchor}", code="parse_error")
            node = Node(target.kind, mark.index, event.end_mark.index, mark.line, mark.column,
                        alias_of=target, value=target.value)
            root = _attach(node, stack, pending_key, root)
            continue
        if kind_name == "ScalarEvent":
            style = event.style or None  # libyaml's plain style is "", ruamel's None
            end = _scalar_end(text, mark.index, event.end_mark.index, style)
            node = Node("scalar", mark.index, end, mark.line, mark.column, style=style,
                        anchor=event.anchor, value=_scalar_value(event, text, mark.index, end, fmt))
            if event.anchor:
                anchors[event.anchor] = node
            root = _attach(node, stack, pending_key, root)
            continue
        kind: Literal["map", "seq"] = "map" if kind_name == "MappingStartEvent" else "seq"
        node = Node(kind, mark.index, mark.index, mark.line, mark.column, flow=bool(event.flow_style),
                    anchor=event.anchor)
        if event.anchor:
            anchors[event.anchor] = node
        stack.append(node)
        pending_key.append(None)
    return root


_NODE_EVENTS = ("MappingStartEvent", "SequenceStartEvent", "ScalarEvent", "AliasEvent")
assert all(hasattr(ruamel_events, name) and hasattr(yaml.events, name) for name in _NODE_EVENTS)


def _attach(node: Node, stack: list[Node], pending_key: list[Node | None], root: Node | None) -> Node | None:
    if not stack:
        return node if root is None else root
    parent = stack[-1]
    if parent.kind == "seq":
        parent.items.append(node)
    elif pending_key[-1] is None:
        pending_key[-1] = node
    else:
        key = pending_key[-1]
        parent.keys.append(key)
        parent.values.append(node)
        pending_key[-1] = None
    return root


def _finish(node: Node) -> None:
    """A collection's plain value, once its children are read (YAML merge keys `<<` applied as PyYAML does)."""
    if node.kind == "seq":
        node.value = [item.value for item in node.items]
        return
    merged: dict[Any, Any] = {}
    explicit: dict[Any, Any] = {}
    for key, value in node.pairs():
        if key.value == "<<" and key.style is None and key.kind == "scalar":
            sources = value.value if isinstance(value.value, list) else [value.value]
            for source in reversed(sources):
                if isinstance(source, dict):
                    merged.update(source)
            continue
        k = key.value
        explicit[_hashable(k)] = value.value
    node.value = {**merged, **explicit}


def _hashable(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    if isinstance(key, dict):
        return tuple((k, _hashable(v)) for k, v in key.items())
    return key


def _scalar_end(text: str, start: int, end: int, style: str | None) -> int:
    """A block scalar's end without the blank lines the parser counts in it; other scalars end where they end."""
    if style not in ("|", ">"):
        return end
    lines = text[start:end].split("\n")
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    return start + len("\n".join(lines))


def _scalar_value(event: Any, text: str, start: int, end: int, fmt: Format) -> Any:
    if fmt == "json":
        return json.loads(text[start:end]) if event.style == '"' else json.loads(event.value)
    tag = event.tag
    if tag in (None, "!"):
        if event.style or not event.implicit[0]:
            return event.value
        tag = _YAML11.resolve(yaml.ScalarNode, event.value, (True, False))
        if tag == "tag:yaml.org,2002:merge":
            return event.value  # `<<`: the mapping that holds it merges (`_finish`)
    constructor = _YAML11.yaml_constructors.get(tag)
    if constructor is None or tag.endswith((":map", ":seq", ":omap", ":pairs", ":set")):
        raise IceError(f"the tag {tag} is not a plain value the engine reads", code="parse_error")
    return constructor(_YAML11, yaml.ScalarNode(tag, event.value, style=event.style))


def same(a: Any, b: Any) -> bool:
    """Equal as data: booleans are not numbers, 1 equals 1.0, mappings ignore key order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


