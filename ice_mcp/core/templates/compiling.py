"""Blueprint values compiled into their compiled forms, once per source text."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ice_mcp.core.templates.environment import RESERVED_NAMES
from ice_mcp.core.templates.limits import MAX_SOURCE_CHARS
from ice_mcp.core.templates.parsing import _inspect, _parse, _parse_expression
from ice_mcp.core.templates.paths import PathExpression, _path_of, _path_text, _plain_path
from ice_mcp.core.templates.rendering import (
    Compiled,
    Constant,
    Expression,
    MappingValue,
    SequenceValue,
    Text,
)
from ice_mcp.core.templates.scope import Scope
from ice_mcp.errors import TemplateCompileError

_LONE_EXPRESSION = re.compile(r"^\s*\{\{-?(?P<expr>.*?)-?\}\}\s*$", re.DOTALL)


@functools.lru_cache(maxsize=4096)
def compile_expression(source: str) -> Expression:
    """A bare expression (conditions, convergence); raises TemplateCompileError."""
    plain = _plain_path(source)
    if plain is not None:
        return plain
    tree = _parse_expression(source)
    reads = _inspect(tree, "expression_syntax")
    path = _path_of(tree)
    if path is not None and path[0] not in RESERVED_NAMES:
        return PathExpression(source, None, reads.names, reads.input_keys, root=path[0], keys=path[1])
    return Expression(source, None, reads.names, reads.input_keys, tree)


_SCALARS = (int, float, bool, type(None))
_EMPTY_OBJECT = Constant({})  # shared: rendering a constant gives a fresh copy, never this value


def _templated(value: Any) -> bool:
    """True when `value` holds a template somewhere (what compile_value would not keep constant)."""
    kind = type(value)
    if kind is str:
        return "{" in value and ("{{" in value or "{%" in value or "{#" in value)
    if kind in _SCALARS:
        return False
    # map() rather than a generator: constant arguments are walked member by member, a frame less each.
    if kind is dict or isinstance(value, Mapping):
        return any(map(_templated, value.values()))
    if kind is list or isinstance(value, list | tuple):
        return any(map(_templated, value))
    return isinstance(value, str) and _templated(str(value))


def _constant(value: Any) -> Constant:
    if isinstance(value, Mapping):
        return Constant(dict(value))
    return Constant(list(value) if isinstance(value, list | tuple) else value)


def compile_value(value: Any) -> Compiled:
    """A blueprint value (string, mapping, list, scalar) with its templates compiled."""
    kind = type(value)
    if kind is str:
        return _compile_string(value) if "{" in value and _templated(value) else Constant(value)
    if kind in _SCALARS:
        return Constant(value)
    if kind is dict and not value:
        return _EMPTY_OBJECT  # a node's empty arguments: no walk, no ABC check
    if isinstance(value, str):
        return _compile_string(value) if _templated(value) else Constant(value)
    if kind is dict or isinstance(value, Mapping):
        items = {key if type(key) is str else str(key): _compile_part(item) for key, item in value.items()}
        reads = _reads(items.values())
        return MappingValue(items, *reads) if reads is not None else Constant(dict(value))
    if isinstance(value, list | tuple):
        parts = [_compile_part(item) for item in value]
        reads = _reads(parts)
        return SequenceValue(parts, *reads) if reads is not None else Constant(list(value))
    return Constant(value)


def _compile_part(value: Any) -> Compiled:
    if type(value) is str:  # the usual member: checked for a template once, not twice
        return _compile_string(value) if "{" in value and _templated(value) else Constant(value)
    return compile_value(value) if _templated(value) else _constant(value)


def _reads(parts: Iterable[Compiled]) -> tuple[frozenset[str], frozenset[str]] | None:
    """The names and `inputs` keys the parts read; None when every part is a constant."""
    templated = [part for part in parts if type(part) is not Constant]
    if not templated:
        return None
    if len(templated) == 1:  # one templated member (a tool's one templated argument): its sets as they are
        return templated[0].names, templated[0].input_keys
    names: set[str] = set()
    keys: set[str] = set()
    for part in templated:
        names |= part.names
        keys |= part.input_keys
    return frozenset(names), frozenset(keys)


@functools.lru_cache(maxsize=4096)
def _compile_string(value: str) -> Compiled:
    # Compiled templates hold no run state, so equal sources (re-validation, registration) share one.
    # A lone expression has one `{{` (a second would be inside it): text with more skips the regex.
    lone = _LONE_EXPRESSION.match(value) if value.count("{{") == 1 else None
    if lone and "{{" not in lone["expr"] and "}}" not in lone["expr"]:
        try:
            return compile_expression(lone["expr"].strip())
        except TemplateCompileError as exc:
            raise TemplateCompileError("template_syntax", str(exc)) from exc
    fast = _path_text(value) if len(value) <= MAX_SOURCE_CHARS else None
    if fast is not None:
        return fast
    tree = _parse(value, "template_syntax")
    reads = _inspect(tree, "template_syntax")
    return Text(value, None, reads.names, reads.input_keys, tree)


def render_text(source: str, data: Mapping[str, Any]) -> Any:
    """Compile and render one template against plain data (the render_template tool)."""
    return compile_value(source).render(Scope(dict(data)))
