"""Plain paths (`a.b[0]`) and text made only of them, read and rendered without a Jinja template."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from jinja2 import ChainableUndefined, nodes
from jinja2.exceptions import SecurityError

from ice_mcp.core.templates.environment import ENV, RESERVED_NAMES
from ice_mcp.core.templates.limits import (
    MAX_OUTPUT_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TREE_DEPTH,
    _text_size,
)
from ice_mcp.core.templates.rendering import (
    Compiled,
    Expression,
    _check_passed_value,
    _render_errors,
)
from ice_mcp.core.templates.scope import Scope

_NO_NAMES: frozenset[str] = frozenset()
_MISSING = object()  # a path that leads nowhere (a text template renders it as nothing)
# Words the expression parser reads as constants or operators, never as names.
_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "if", "else", "true", "false", "none", "True", "False",
                       "None", "recursive", "with", "without", "context", "import", "as", "from", "ignore",
                       "missing", "scoped", "required", "pluck"})
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_PLAIN_PATH = re.compile(rf"\s*({_IDENTIFIER})((?:\.{_IDENTIFIER}|\[(?:0|[1-9][0-9]{{0,17}})\]"
                         rf"|\['[^'\\]*'\]|\[\"[^\"\\]*\"\])*)\s*")
_PATH_STEP = re.compile(rf"\.({_IDENTIFIER})|\[(?:([0-9]+)|'([^']*)'|\"([^\"]*)\")\]")
_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def _plain_path(source: str) -> PathExpression | None:
    """`a.b[0]['c']` read straight from the text, as the parser would read it; None for anything else."""
    match = _PLAIN_PATH.fullmatch(source)
    if match is None or len(source) > MAX_SOURCE_CHARS:
        return None
    root, steps = match[1], match[2]
    keys: list[str | int] = []
    if "[" not in steps:
        keys.extend(steps.split(".")[1:])
        if not _KEYWORDS.isdisjoint(keys):
            return None
    else:
        for step in _PATH_STEP.finditer(steps):
            attribute, index, single, double = step.groups()
            keys.append(int(index) if index is not None else attribute or single or double or "")
            if attribute in _KEYWORDS:
                return None
    if root in _KEYWORDS or root in RESERVED_NAMES or len(keys) + 3 > MAX_TREE_DEPTH:
        return None
    input_keys = frozenset((keys[0],)) if root == "inputs" and keys and type(keys[0]) is str else _NO_NAMES
    return PathExpression(source, None, frozenset((root,)), input_keys, root=root, keys=tuple(keys))


@functools.lru_cache(maxsize=4096)
def _path_part(source: str) -> PathExpression | None:
    """`_plain_path` of one `{{ }}` of a text, kept by its text: the same path (`inputs.x`) recurs across a
    blueprint's texts, and a path holds no run state."""
    return _plain_path(source)


def _path_text(source: str) -> PathText | None:
    """Text whose every `{{ }}` holds a plain path, as a PathText; None when any does not."""
    if "{%" in source or "{#" in source:
        return None
    parts = _TAG.split(source)
    pieces: list[str | PathExpression] = []
    names: set[str] = set()
    keys: set[str] = set()
    for index, part in enumerate(parts):
        if index % 2 == 0:
            if "{{" in part:
                return None
            if part:
                pieces.append(part)
            continue
        path = _path_part(part)
        if path is None:
            return None
        pieces.append(path)
        names.add(path.root)
        keys.update(path.input_keys)
    return PathText(source, tuple(pieces), frozenset(names), frozenset(keys))


@dataclass(slots=True)
class PathExpression(Expression):
    """`a.b[0].c`: a name and constant keys, looked up without building a Jinja context.

    Same semantics as the sandbox: dict keys first, then sandboxed attribute access;
    anything missing (or a skipped node, read as none) gives none.
    """

    root: str = ""
    keys: tuple[str | int, ...] = ()

    def resolve(self, scope: Scope) -> Any:
        """The value at the path, or _MISSING when the path leads nowhere."""
        try:
            value = scope.lookup(self.root)
        except KeyError:
            return _MISSING
        for key in self.keys:
            if type(value) is dict and key in value:
                value = value[key]
            elif type(value) is list and type(key) is int:
                value = value[key] if -len(value) <= key < len(value) else _MISSING
            elif value is None:
                return _MISSING
            else:
                with _render_errors(f"expression {self.source!r}", self.source):
                    value = ENV.getattr(value, key) if isinstance(key, str) else ENV.getitem(value, key)
                if isinstance(value, ChainableUndefined):
                    return _MISSING
            if value is _MISSING:
                return value
        return value

    def render(self, scope: Scope) -> Any:
        value = self.resolve(scope)
        return None if value is _MISSING else _check_passed_value(value, self.source)


@dataclass(slots=True)
class PathText(Compiled):
    """Text whose every `{{ }}` is a plain path (`{{ inputs.x }}-{{ a.b[0] }}`): rendered as Jinja would
    (a missing value as nothing, anything else as `str()`), without a Jinja template."""

    source: str
    pieces: tuple[str | PathExpression, ...]
    names: frozenset[str]
    input_keys: frozenset[str] = frozenset()

    def render(self, scope: Scope) -> Any:
        values: list[Any] = []
        size = 0
        with _render_errors("template", self.source):
            for piece in self.pieces:
                value = piece if isinstance(piece, str) else piece.resolve(scope)
                if value is _MISSING:
                    continue
                size += _text_size(value, MAX_OUTPUT_CHARS - size + 1)
                if size > MAX_OUTPUT_CHARS:
                    raise SecurityError(f"template output longer than {MAX_OUTPUT_CHARS} characters")
                values.append(value)
            return "".join(value if type(value) is str else str(value) for value in values)


def _path_of(node: nodes.Node) -> tuple[str, tuple[str | int, ...]] | None:
    """(name, keys) when `node` is a plain attribute/constant-index path, else None."""
    keys: list[str | int] = []
    while True:
        if isinstance(node, nodes.Getattr):
            keys.append(node.attr)
            node = node.node
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) \
                and type(node.arg.value) in (str, int):
            keys.append(node.arg.value)
            node = node.node
        elif isinstance(node, nodes.Name) and node.ctx == "load":
            return node.name, tuple(reversed(keys))
        else:
            return None
