"""A blueprint document's values with their places in its text: ruamel.yaml's parse events made into a tree of
`Node`s, each with its plain value read as the engine reads it (PyYAML's YAML 1.1 for YAML text, JSON for JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelError
from ruamel.yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

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
    """The document's nodes from ruamel.yaml's parse events, with plain values resolved as the engine reads them."""
    stack: list[Node] = []
    pending_key: list[Node | None] = []
    anchors: dict[str, Node] = {}
    root: Node | None = None
    try:
        for event in YAML(typ="rt").parse(text):
            if isinstance(event, (MappingEndEvent, SequenceEndEvent)):
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
            if not isinstance(event, (MappingStartEvent, SequenceStartEvent, ScalarEvent, AliasEvent)):
                continue
            mark = event.start_mark
            if isinstance(event, AliasEvent):
                target = anchors.get(event.anchor)
                if target is None:
                    raise IceError(f"unknown alias *{event.anchor}", code="parse_error")
                node = Node(target.kind, mark.index, event.end_mark.index, mark.line, mark.column,
                            alias_of=target, value=target.value)
                root = _attach(node, stack, pending_key, root)
                continue
            if isinstance(event, ScalarEvent):
                end = _scalar_end(text, mark.index, event.end_mark.index, event.style)
                node = Node("scalar", mark.index, end, mark.line, mark.column, style=event.style,
                            anchor=event.anchor, value=_scalar_value(event, text, mark.index, end, fmt))
                if event.anchor:
                    anchors[event.anchor] = node
                root = _attach(node, stack, pending_key, root)
                continue
            kind: Literal["map", "seq"] = "map" if isinstance(event, MappingStartEvent) else "seq"
            node = Node(kind, mark.index, mark.index, mark.line, mark.column, flow=bool(event.flow_style),
                        anchor=event.anchor)
            if event.anchor:
                anchors[event.anchor] = node
            stack.append(node)
            pending_key.append(None)
    except RuamelError as exc:
        raise IceError(f"the blueprint is not valid JSON or YAML: {exc}", code="parse_error") from None
    return root


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


def _scalar_value(event: ScalarEvent, text: str, start: int, end: int, fmt: Format) -> Any:
    if fmt == "json":
        return json.loads(text[start:end]) if event.style == '"' else json.loads(event.value)
    tag = event.tag
    if tag in (None, "!"):
        if event.style is not None or not event.implicit[0]:
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


