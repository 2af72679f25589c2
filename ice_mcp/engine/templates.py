"""Templates and expressions: Jinja2's immutable sandbox, compiled once per blueprint.

Blueprint templates are untrusted, so they are expressions only (`{{ ... }}`),
and every operation that could blow up in size or time is capped.
"""

from __future__ import annotations

import copy
import functools
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from jinja2 import ChainableUndefined, meta, nodes
from jinja2.exceptions import SecurityError, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ice_mcp.nodes.base import NodeFailure

MAX_SOURCE_CHARS = 64 * 1024
MAX_OUTPUT_CHARS = 1024 * 1024
MAX_SEQUENCE_ITEMS = 100_000
MAX_RANGE = 10_000
MAX_EXPONENT = 1_000
MAX_INT_BITS = 4_096

_LONE_EXPRESSION = re.compile(r"^\s*\{\{-?(?P<expr>.*?)-?\}\}\s*$", re.DOTALL)
# A width or precision of five digits or more in a %-format or a {}-format field.
_HUGE_FORMAT_WIDTH = re.compile(r"%[-#0 +]*\d{5,}|%[-#0 +]*\d*\.\d{5,}|\{[^{}]*:[^{}]*\d{5,}[^{}]*\}")


class TemplateFailure(NodeFailure):
    def __init__(self, message: str, *, source: str | None = None) -> None:
        details = {"template": source[:200]} if source else None
        super().__init__(message, code="template_error", retryable=False, details=details)


class TemplateCompileError(ValueError):
    """A template or expression that cannot be compiled; `code` is the validation code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check_size(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_OUTPUT_CHARS:
        raise SecurityError(f"result longer than {MAX_OUTPUT_CHARS} characters")
    if isinstance(value, list | tuple) and len(value) > MAX_SEQUENCE_ITEMS:
        raise SecurityError(f"result longer than {MAX_SEQUENCE_ITEMS} items")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise SecurityError(f"integer larger than {MAX_INT_BITS} bits")
    return value


def _safe_multiply(left: Any, right: Any) -> Any:
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(count, int):
            if len(seq) * max(count, 0) > (MAX_OUTPUT_CHARS if isinstance(seq, str) else MAX_SEQUENCE_ITEMS):
                raise SecurityError("repetition result too large")
    return _check_size(left * right)


def _safe_power(left: Any, right: Any) -> Any:
    if isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
        raise SecurityError(f"exponent larger than {MAX_EXPONENT}")
    if isinstance(left, int) and isinstance(right, int) and left.bit_length() * max(right, 0) > MAX_INT_BITS:
        raise SecurityError(f"power larger than {MAX_INT_BITS} bits")
    return left**right


def _safe_modulo(left: Any, right: Any) -> Any:
    if isinstance(left, str) and _HUGE_FORMAT_WIDTH.search(left):
        raise SecurityError("format width too large")
    return _check_size(left % right)


def _safe_range(*args: int) -> range:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise SecurityError(f"range longer than {MAX_RANGE}")
    return rng


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "*": _safe_multiply,
    "**": _safe_power,
    "%": _safe_modulo,
    "+": lambda a, b: _check_size(operator.add(a, b)),
}


class TemplateEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox blueprints render in: immutable, capped, dict keys before attributes."""

    intercepted_binops = frozenset(_BINOPS)

    def __init__(self) -> None:
        super().__init__(undefined=ChainableUndefined, autoescape=False, keep_trailing_newline=True)
        for name in ("lipsum", "cycler", "joiner", "namespace"):
            self.globals.pop(name, None)
        self.globals["range"] = _safe_range
        for name in ("center", "indent", "wordwrap", "truncate"):
            self.filters[name] = _width_capped(self.filters[name])
        self.filters["format"] = _format_capped(self.filters["format"])
        self.filters["replace"] = _replace_capped(self.filters["replace"])
        self.filters["join"] = _join_capped(self.filters["join"])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator in _BINOPS:
            return _BINOPS[operator](left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        # Methods of built-in values (`'a'.ljust(n)`, `s.replace(a, b)`) can build huge results in C.
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str | bytes | list | tuple | dict):
            _check_call_arguments(args, kwargs)
            name = getattr(__obj, "__name__", "")
            if name == "replace" and isinstance(owner, str) and len(args) >= 2:
                _check_replace(owner, args[0], args[1])
            elif name == "join" and isinstance(owner, str) and args:
                args = (_check_join(args[0], owner), *args[1:])
        return _check_size(super().call(__context, __obj, *args, **kwargs))

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # Fail loudly: an attempt at `__class__`, `__globals__`... is an error, not an empty string.
        raise SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe")

    def getattr(self, obj: Any, attribute: str) -> Any:
        # Node outputs are dicts: `node.items` must mean the key, not dict.items.
        if type(obj) is dict and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        if _HUGE_FORMAT_WIDTH.search(value.__self__):
            raise SecurityError("format width too large")
        return lambda *args, **kwargs: _check_size(wrapper(*args, **kwargs))


def _check_call_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_RANGE:
            raise SecurityError(f"argument larger than {MAX_RANGE}")


def _check_replace(text: str, old: Any, new: Any) -> None:
    if isinstance(old, str) and isinstance(new, str) and len(new) > len(old):
        occurrences = text.count(old) if old else len(text) + 1
        if len(text) + occurrences * (len(new) - len(old)) > MAX_OUTPUT_CHARS:
            raise SecurityError("replacement result too large")


def _check_join(items: Any, separator: Any) -> list[Any]:
    """The items to join, refused up front when the joined text would be too long."""
    items = list(items)[: MAX_SEQUENCE_ITEMS + 1]
    if len(items) > MAX_SEQUENCE_ITEMS:
        raise SecurityError(f"joining more than {MAX_SEQUENCE_ITEMS} items")
    size = len(str(separator or "")) * max(len(items) - 1, 0) + sum(len(str(i)) for i in items)
    if size > MAX_OUTPUT_CHARS:
        raise SecurityError("joined result too large")
    return items


def _join_capped(fn: Callable[..., Any]) -> Callable[..., Any]:
    def capped(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
        if attribute is None:
            value = _check_join(value, d)
        return _check_size(fn(eval_ctx, value, d, attribute))

    capped.jinja_pass_arg = fn.jinja_pass_arg  # type: ignore[attr-defined]
    return capped


def _replace_capped(fn: Callable[..., Any]) -> Callable[..., Any]:
    def capped(eval_ctx: Any, value: Any, old: Any, new: Any, count: int | None = None) -> Any:
        _check_replace(str(value), old, new)
        return fn(eval_ctx, value, old, new, count)

    capped.jinja_pass_arg = fn.jinja_pass_arg  # type: ignore[attr-defined]
    return capped


def _width_capped(fn: Callable[..., Any]) -> Callable[..., Any]:
    def capped(*args: Any, **kwargs: Any) -> Any:
        for value in (*args[1:], *kwargs.values()):
            if isinstance(value, int) and value > MAX_RANGE:
                raise SecurityError("width too large")
        return _check_size(fn(*args, **kwargs))

    return capped


def _format_capped(fn: Callable[..., Any]) -> Callable[..., Any]:
    def capped(value: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(value, str) and _HUGE_FORMAT_WIDTH.search(value):
            raise SecurityError("format width too large")
        return _check_size(fn(value, *args, **kwargs))

    return capped


ENV = TemplateEnvironment()
RESERVED_NAMES = frozenset(ENV.globals)


class Scope:
    """Names visible to templates: this level's variables, then the enclosing scope's."""

    __slots__ = ("parent", "vars")

    def __init__(self, vars: dict[str, Any] | None = None, parent: Scope | None = None) -> None:
        self.vars = vars if vars is not None else {}
        self.parent = parent

    def child(self, vars: Mapping[str, Any] | None = None) -> Scope:
        return Scope(dict(vars) if vars else {}, self)

    def lookup(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        raise KeyError(name)

    def select(self, names: frozenset[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name in names:
            try:
                found[name] = self.lookup(name)
            except KeyError:
                pass
        return found


class Compiled:
    """A blueprint value compiled once: `render(scope)` gives its value for one run."""

    names: frozenset[str] = frozenset()

    def render(self, scope: Scope) -> Any:
        raise NotImplementedError


@contextmanager
def _render_errors(what: str, source: str) -> Iterator[None]:
    """Any error while rendering becomes a TemplateFailure naming the template."""
    try:
        yield
    except TemplateError as exc:
        raise TemplateFailure(f"{what} failed: {exc}", source=source) from exc
    except (ArithmeticError, TypeError, ValueError, LookupError, RecursionError) as exc:
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
    """A lone `{{ expr }}` or a bare expression: keeps the value's type."""

    source: str
    function: Any
    names: frozenset[str]

    def render(self, scope: Scope) -> Any:
        with _render_errors(f"expression {self.source!r}", self.source):
            value = self.function(**scope.select(self.names))
        return None if isinstance(value, ChainableUndefined) else _check_result(value, self.source)


_JSON_VALUES = (str, int, float, bool, type(None), dict, list, tuple)


def _check_result(value: Any, source: str) -> Any:
    """A lone expression's value must be JSON data of bounded size (never a function, class or method)."""
    try:
        _check_size(value)
    except SecurityError as exc:
        raise TemplateFailure(f"expression {source!r} failed: {exc}", source=source) from exc
    if isinstance(value, tuple):
        value = list(value)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else (value,)
    for item in items:  # one level deep: deeper values come from node outputs, which are data
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

    def render(self, scope: Scope) -> Any:
        with _render_errors("template", self.source):
            text = self.template.render(scope.select(self.names))
        if len(text) > MAX_OUTPUT_CHARS:
            raise TemplateFailure(f"template output longer than {MAX_OUTPUT_CHARS} characters", source=self.source)
        return text


@dataclass(slots=True)
class MappingValue(Compiled):
    items: dict[str, Compiled]
    names: frozenset[str]

    def render(self, scope: Scope) -> Any:
        return {key: value.render(scope) for key, value in self.items.items()}


@dataclass(slots=True)
class SequenceValue(Compiled):
    items: list[Compiled]
    names: frozenset[str]

    def render(self, scope: Scope) -> Any:
        return [value.render(scope) for value in self.items]


def _parse(source: str, code: str) -> nodes.Template:
    if len(source) > MAX_SOURCE_CHARS:
        raise TemplateCompileError(code, f"longer than {MAX_SOURCE_CHARS} characters")
    try:
        return ENV.parse(source)
    except TemplateError as exc:
        raise TemplateCompileError(code, str(exc)) from exc
    except (RecursionError, MemoryError) as exc:
        raise TemplateCompileError(code, "nested too deeply") from exc


def _only_expressions(tree: nodes.Template, code: str) -> None:
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            raise TemplateCompileError(
                code, f"statement blocks ({{% ... %}}) are not allowed; found a {type(node).__name__.lower()} block"
            )


def _free_names(tree: nodes.Template) -> frozenset[str]:
    return frozenset(meta.find_undeclared_variables(tree)) - RESERVED_NAMES


@dataclass(slots=True)
class PathExpression(Expression):
    """`a.b[0].c`: a name and constant keys, looked up without building a Jinja context.

    Same semantics as the sandbox: dict keys first, then sandboxed attribute access;
    anything missing (or a skipped node, read as none) gives none.
    """

    root: str = ""
    keys: tuple[str | int, ...] = ()

    def render(self, scope: Scope) -> Any:
        try:
            value = scope.lookup(self.root)
        except KeyError:
            return None
        for key in self.keys:
            if type(value) is dict and key in value:
                value = value[key]
            elif type(value) is list and type(key) is int:
                value = value[key] if -len(value) <= key < len(value) else None
            elif value is None:
                return None
            else:
                with _render_errors(f"expression {self.source!r}", self.source):
                    value = ENV.getattr(value, key) if isinstance(key, str) else ENV.getitem(value, key)
                if isinstance(value, ChainableUndefined):
                    return None
        return _check_result(value, self.source)


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


@functools.lru_cache(maxsize=4096)
def compile_expression(source: str) -> Expression:
    """A bare expression (conditions, convergence); raises TemplateCompileError."""
    tree = _parse("{{ " + source + " }}", "expression_syntax")
    _only_expressions(tree, "expression_syntax")
    output = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(output, nodes.Output) and len(output.nodes) == 1:
        path = _path_of(output.nodes[0])
        if path is not None and path[0] not in RESERVED_NAMES:
            return PathExpression(source, None, _free_names(tree), path[0], path[1])
    try:
        function = ENV.compile_expression(source, undefined_to_none=False)
    except TemplateError as exc:
        raise TemplateCompileError("expression_syntax", str(exc)) from exc
    except (RecursionError, MemoryError, SyntaxError) as exc:
        raise TemplateCompileError("expression_syntax", "nested too deeply") from exc
    return Expression(source, function, _free_names(tree))


def compile_value(value: Any) -> Compiled:
    """A blueprint value (string, mapping, list, scalar) with its templates compiled."""
    if isinstance(value, str):
        if "{{" not in value and "{%" not in value and "{#" not in value:
            return Constant(value)
        return _compile_string(value)
    if isinstance(value, Mapping):
        items = {str(k): compile_value(v) for k, v in value.items()}
        if all(isinstance(v, Constant) for v in items.values()):
            return Constant(dict(value))
        return MappingValue(items, frozenset().union(*(v.names for v in items.values())))
    if isinstance(value, list | tuple):
        compiled = [compile_value(v) for v in value]
        if all(isinstance(v, Constant) for v in compiled):
            return Constant(list(value))
        return SequenceValue(compiled, frozenset().union(*(v.names for v in compiled)))
    return Constant(value)


@functools.lru_cache(maxsize=4096)
def _compile_string(value: str) -> Compiled:
    # Compiled templates hold no run state, so equal sources (re-validation, registration) share one.
    lone = _LONE_EXPRESSION.match(value)
    if lone and "{{" not in lone["expr"] and "}}" not in lone["expr"]:
        try:
            return compile_expression(lone["expr"].strip())
        except TemplateCompileError as exc:
            raise TemplateCompileError("template_syntax", str(exc)) from exc
    tree = _parse(value, "template_syntax")
    _only_expressions(tree, "template_syntax")
    try:
        template = ENV.from_string(tree)
    except (RecursionError, MemoryError, SyntaxError) as exc:
        raise TemplateCompileError("template_syntax", "nested too deeply") from exc
    return Text(value, template, _free_names(tree))


def render_text(source: str, data: Mapping[str, Any]) -> Any:
    """Compile and render one template against plain data (the render_template tool)."""
    return compile_value(source).render(Scope(dict(data)))
