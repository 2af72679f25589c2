"""The compiled forms of blueprint values (constants, expressions, text, mappings, lists) and their rendering."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from jinja2 import ChainableUndefined, nodes
from jinja2.environment import TemplateExpression
from jinja2.exceptions import TemplateError

from ice_mcp.core.templates.budget import _budgeted
from ice_mcp.core.templates.environment import ENV
from ice_mcp.core.templates.limits import MAX_SEQUENCE_ITEMS, _measure
from ice_mcp.core.templates.scope import Scope
from ice_mcp.errors import NodeFailure


class TemplateFailure(NodeFailure):
    def __init__(self, message: str, *, source: str | None = None) -> None:
        details = {"template": source[:200]} if source else None
        super().__init__(message, code="template_error", retryable=False, details=details)


class Compiled:
    """A blueprint value compiled once: `render(scope)` gives its value for one run.

    `names` are the names it reads; `input_keys` the keys of `inputs` it reads by name.
    """

    names: frozenset[str] = frozenset()
    input_keys: frozenset[str] = frozenset()

    def prepare(self) -> None:
        """Generate whatever code rendering needs, ahead of the first render (in a worker thread, say)."""

    def render(self, scope: Scope) -> Any:
        raise NotImplementedError


@contextmanager
def _render_errors(what: str, source: str) -> Iterator[None]:
    """Any error while rendering becomes a TemplateFailure naming the template."""
    try:
        yield
    except TemplateError as exc:
        raise TemplateFailure(f"{what} failed: {exc}", source=source) from exc
    except RecursionError:
        raise TemplateFailure(f"{what} failed: data nested too deeply", source=source) from None
    except MemoryError:
        raise TemplateFailure(f"{what} failed: out of memory", source=source) from None
    except Exception as exc:  # a filter given the wrong kind of value (AttributeError...): the template's fault
        raise TemplateFailure(f"{what} failed: {type(exc).__name__}: {exc}", source=source) from exc


@dataclass(slots=True)
class Constant(Compiled):
    value: Any
    names: frozenset[str] = frozenset()

    def render(self, scope: Scope) -> Any:
        # A fresh copy per run: a tool that mutates its arguments must not change the blueprint.
        if isinstance(self.value, dict | list):
            return copy.deepcopy(self.value) if self.value else type(self.value)()
        return self.value


@dataclass(slots=True)
class Expression(Compiled):
    """A lone `{{ expr }}` or a bare expression: keeps the value's type.

    Compiling checks and parses it; its Python code is generated on first use (or by `prepare`),
    since generating code costs several times what checking does.
    """

    source: str
    function: Any
    names: frozenset[str]
    input_keys: frozenset[str] = frozenset()
    tree: nodes.Expr | None = None  # kept until the code is generated

    def prepare(self) -> None:
        if self.function is None and self.tree is not None:
            body = [nodes.Assign(nodes.Name("result", "store"), self.tree, lineno=1)]
            with _render_errors(f"expression {self.source!r}", self.source):
                self.function = TemplateExpression(ENV.from_string(nodes.Template(body, lineno=1)), False)
            self.tree = None

    def render(self, scope: Scope) -> Any:
        if self.function is None:
            self.prepare()
        with _render_errors(f"expression {self.source!r}", self.source), _budgeted():
            value = self.function(**scope.select(self.names))
            if isinstance(value, ChainableUndefined):
                return None
            _measure(value, boundary=True)  # the whole value, as the run store will write it
        return list(value) if isinstance(value, tuple) else value


_JSON_VALUES = (str, int, float, bool, type(None), dict, list, tuple)


def _check_passed_value(value: Any, source: str) -> Any:
    """A path's value is data that already exists: checked one level deep, not re-measured."""
    if isinstance(value, list | tuple) and len(value) > MAX_SEQUENCE_ITEMS:
        raise TemplateFailure(f"expression {source!r} failed: result longer than {MAX_SEQUENCE_ITEMS} items",
                              source=source)
    if isinstance(value, tuple):
        value = list(value)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else (value,)
    for item in items:
        if not isinstance(item, _JSON_VALUES):
            raise TemplateFailure(f"expression {source!r} gives a {type(item).__name__}, not JSON data",
                                  source=source)
    return value


@dataclass(slots=True)
class Text(Compiled):
    """Any other string with `{{ }}` in it: renders as text."""

    source: str
    template: Any
    names: frozenset[str]
    input_keys: frozenset[str] = frozenset()
    tree: nodes.Template | None = None  # kept until the code is generated (first use, or `prepare`)

    def prepare(self) -> None:
        if self.template is None and self.tree is not None:
            with _render_errors("template", self.source):
                self.template = ENV.from_string(self.tree)
            self.tree = None

    def render(self, scope: Scope) -> Any:
        if self.template is None:
            self.prepare()
        with _render_errors("template", self.source), _budgeted():
            return self.template.render(scope.select(self.names))  # each piece sized by _finalize


@dataclass(slots=True)
class MappingValue(Compiled):
    items: dict[str, Compiled]
    names: frozenset[str]
    input_keys: frozenset[str] = frozenset()

    def prepare(self) -> None:
        for value in self.items.values():
            value.prepare()

    def render(self, scope: Scope) -> Any:
        return {key: value.render(scope) for key, value in self.items.items()}


@dataclass(slots=True)
class SequenceValue(Compiled):
    items: list[Compiled]
    names: frozenset[str]
    input_keys: frozenset[str] = frozenset()

    def prepare(self) -> None:
        for value in self.items:
            value.prepare()

    def render(self, scope: Scope) -> Any:
        return [value.render(scope) for value in self.items]
