"""Templates and expressions: Jinja2's immutable sandbox, compiled once per blueprint.

Blueprint templates are untrusted, so they are expressions only (`{{ ... }}`), nested
only so deep, and every operation that could grow memory or time has its result size
predicted and refused before it runs; each render also has a work budget and a deadline.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2 import ChainableUndefined, Undefined, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError
from jinja2.filters import ignore_case, make_attrgetter, make_multi_attrgetter
from jinja2.lexer import (
    Token,
    TokenStream,
    float_re,
    integer_re,
    name_re,
    operator_re,
    string_re,
    whitespace_re,
)
from jinja2.lexer import operators as OPERATORS
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ice_mcp.errors import NodeFailure, TemplateCompileError

MAX_SOURCE_CHARS = 64 * 1024
MAX_OUTPUT_CHARS = 1024 * 1024
MAX_SEQUENCE_ITEMS = 100_000
MAX_RANGE = 10_000
MAX_EXPONENT = 1_000
MAX_INT_BITS = 4_096
MAX_BRACKET_DEPTH = 32  # ( [ { inside one another: the parser recurses ~12 frames per level
MAX_TOKENS = 1_000  # compiling costs ~50 µs a token (a 64 KB comparison chain took seconds); blueprints use < 40
MAX_TREE_DEPTH = 48  # expression tree depth (power towers, operator chains): the compiler recurses per level
MAX_WORK_CHARS = 8 * MAX_OUTPUT_CHARS  # characters (or items) all operations of one render may build
MAX_RENDER_SECONDS = 0.025  # renders run on the event loop: a legitimate one takes microseconds
MAX_SLOW_FILTER_INPUT = 20_000  # characters into filters written in Python (wordwrap, urlize, title...)
MAX_TOJSON_INDENT = 16
JSON_INT_RANGE = range(-(2**63), 2**64)  # what orjson (the run store) can write

_LONE_EXPRESSION = re.compile(r"^\s*\{\{-?(?P<expr>.*?)-?\}\}\s*$", re.DOTALL)
# A width or precision of five digits or more in a %-format or a {}-format field.
_HUGE_FORMAT_WIDTH = re.compile(r"%[-#0 +]*\d{5,}|%[-#0 +]*\d*\.\d{5,}|\{[^{}]*:[^{}]*\d{5,}[^{}]*\}")


class TemplateFailure(NodeFailure):
    def __init__(self, message: str, *, source: str | None = None) -> None:
        details = {"template": source[:200]} if source else None
        super().__init__(message, code="template_error", retryable=False, details=details)


# --- sizes: predicted from operands, before anything is built -------------------------------

_SCALAR_SIZE = {float: 24, bool: 5, type(None): 4}


def _measure(value: Any, limit: int = MAX_OUTPUT_CHARS, *, boundary: bool = False) -> int:
    """The size of `value` as JSON text, counting shared parts each time they appear.

    Stops early past `limit` or past MAX_SEQUENCE_ITEMS values (raising), so it costs at most
    that many steps. At a `boundary`, only JSON data with integers orjson can write passes.
    """
    total = visited = 0
    stack = [value]
    while stack:
        item = stack.pop()
        visited += 1
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, int):
            if boundary and not isinstance(item, bool) and item not in JSON_INT_RANGE:
                raise SecurityError(f"integer of {item.bit_length()} bits is too large for JSON (64 bits at most)")
            total += item.bit_length() // 3 + 1
        elif isinstance(item, list | tuple):
            total += len(item) + 1
            stack.extend(item)
        elif isinstance(item, dict):
            total += 2 * len(item) + 1
            for key, inner in item.items():
                stack.append(key)
                stack.append(inner)
        elif type(item) in _SCALAR_SIZE:
            total += _SCALAR_SIZE[type(item)]
        elif isinstance(item, Undefined) and not boundary:
            pass
        elif boundary:
            raise SecurityError(f"the result holds a {type(item).__name__}, not JSON data")
        else:
            total += 64  # an object the template cannot grow (a range, a generator): its repr
        if total > limit:
            raise SecurityError(f"result larger than {limit} characters")
        if visited > MAX_SEQUENCE_ITEMS:
            raise SecurityError(f"result holds more than {MAX_SEQUENCE_ITEMS} values")
    return total


def _text_size(value: Any, limit: int = MAX_OUTPUT_CHARS) -> int:
    """How long `str(value)` would be, without building it."""
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() // 3 + 2
    return _measure(value, limit)


def _refuse_over(size: int, limit: int, what: str) -> None:
    if size > limit:
        raise SecurityError(f"{what} would be longer than {limit} characters")


# --- the per-render budget: work done and time taken ----------------------------------------

@dataclass(slots=True)
class RenderBudget:
    """What one render may still do: characters to build, output to write, time to take."""

    deadline: float
    work_left: int = MAX_WORK_CHARS
    output_left: int = MAX_OUTPUT_CHARS

    def spend(self, units: int) -> None:
        self.work_left -= units
        if self.work_left < 0:
            raise SecurityError(f"template builds more than {MAX_WORK_CHARS} characters in all")
        if time.monotonic() > self.deadline:
            raise SecurityError(f"template took longer than {int(MAX_RENDER_SECONDS * 1000)} ms")


_BUDGET: ContextVar[RenderBudget | None] = ContextVar("ice_mcp_render_budget", default=None)


def _spend(units: int) -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.spend(units)


@contextmanager
def _budgeted() -> Iterator[None]:
    token = _BUDGET.set(RenderBudget(time.monotonic() + MAX_RENDER_SECONDS))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _metered(values: Iterable[Any]) -> Iterator[Any]:
    """`values`, one at a time, charging each to the budget (filters loop in Python over these)."""
    for count, item in enumerate(values):
        if count >= MAX_SEQUENCE_ITEMS:
            raise SecurityError(f"more than {MAX_SEQUENCE_ITEMS} items")
        if not count & 127:
            _spend(128)
        yield item


def _checked(value: Any) -> Any:
    """A freshly built value, refused when over the caps and charged to the budget."""
    if isinstance(value, str):
        if len(value) > MAX_OUTPUT_CHARS:
            raise SecurityError(f"result longer than {MAX_OUTPUT_CHARS} characters")
        _spend(len(value))
    elif isinstance(value, list | tuple | dict):
        if len(value) > MAX_SEQUENCE_ITEMS:
            raise SecurityError(f"result longer than {MAX_SEQUENCE_ITEMS} items")
        _spend(len(value))
    elif isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise SecurityError(f"integer larger than {MAX_INT_BITS} bits")
    elif isinstance(value, Iterator):
        return _metered(value)
    else:
        _spend(1)
    return value


# --- operators ------------------------------------------------------------------------------

def _safe_add(left: Any, right: Any) -> Any:
    if isinstance(left, str) and isinstance(right, str):
        _refuse_over(len(left) + len(right), MAX_OUTPUT_CHARS, "result")
    elif isinstance(left, list | tuple) and isinstance(right, list | tuple) \
            and len(left) + len(right) > MAX_SEQUENCE_ITEMS:
        raise SecurityError(f"result longer than {MAX_SEQUENCE_ITEMS} items")
    return _checked(left + right)


def _safe_multiply(left: Any, right: Any) -> Any:
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, str | bytes | list | tuple) and isinstance(count, int) and count > 0:
            if isinstance(seq, str | bytes):
                if len(seq) * count > MAX_OUTPUT_CHARS:
                    raise SecurityError("repetition result too large")
            elif len(seq) * count > MAX_SEQUENCE_ITEMS or _measure(seq) * count > MAX_OUTPUT_CHARS:
                raise SecurityError("repetition result too large")
    if isinstance(left, int) and isinstance(right, int) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
        raise SecurityError(f"product larger than {MAX_INT_BITS} bits")
    return _checked(left * right)


def _safe_power(left: Any, right: Any) -> Any:
    if isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
        raise SecurityError(f"exponent larger than {MAX_EXPONENT}")
    if isinstance(left, int) and isinstance(right, int) and left.bit_length() * max(right, 0) > MAX_INT_BITS:
        raise SecurityError(f"power larger than {MAX_INT_BITS} bits")
    return _checked(left**right)


def _check_format(template: str, args: Iterable[Any]) -> None:
    """`template % args` or `template.format(*args)`: each field may repeat an argument."""
    if _HUGE_FORMAT_WIDTH.search(template):
        raise SecurityError("format width too large")
    fields = template.count("%") + template.count("{")
    largest = max((_text_size(a) for a in args), default=0)
    _refuse_over(len(template) + fields * largest, MAX_OUTPUT_CHARS, "formatted result")


def _format_arguments(value: Any) -> Iterable[Any]:
    if isinstance(value, tuple):
        return value
    return value.values() if isinstance(value, dict) else (value,)


def _safe_modulo(left: Any, right: Any) -> Any:
    if isinstance(left, str):
        _check_format(left, _format_arguments(right))
    return _checked(left % right)


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "*": _safe_multiply,
    "**": _safe_power,
    "%": _safe_modulo,
    "+": _safe_add,
}


def _safe_range(*args: int) -> range:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise SecurityError(f"range longer than {MAX_RANGE}")
    return rng


def _concat(parts: tuple[Any, ...]) -> str:
    """`a ~ b ~ c`, sized before it is joined."""
    _refuse_over(sum(_text_size(p) for p in parts), MAX_OUTPUT_CHARS, "concatenation")
    return _checked("".join(map(str, parts)))


def _finalize(value: Any) -> Any:
    """Each `{{ }}` of a text template, sized before it is turned into text."""
    budget = _BUDGET.get()
    if budget is not None:
        size = _text_size(value) if not isinstance(value, Undefined) else 0
        budget.output_left -= size
        if budget.output_left < 0:
            raise SecurityError(f"template output longer than {MAX_OUTPUT_CHARS} characters")
        budget.spend(size)
    return value


class _BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with `~` going through the sized concatenation."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


# --- method calls and filters ---------------------------------------------------------------

_VALUE_TYPES = (str, bytes, list, tuple, dict, int, float)
_REFUSED_METHODS = frozenset({"translate", "maketrans"})  # a table can turn each character into a long text


def _check_numbers(args: Iterable[Any], kwargs: Mapping[str, Any]) -> None:
    """Counts, widths and sizes given to methods and filters stay small."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_RANGE:
            raise SecurityError(f"argument larger than {MAX_RANGE}")


def _check_replace(text: Any, old: Any, new: Any) -> None:
    if isinstance(text, str | bytes) and type(old) is type(text) and type(new) is type(text) \
            and len(new) > len(old):
        haystack: Any = text  # str or bytes, with a needle of the same type
        occurrences = haystack.count(old) if old else len(text) + 1
        if len(text) + occurrences * (len(new) - len(old)) > MAX_OUTPUT_CHARS:
            raise SecurityError("replacement result too large")


def _joinable(items: Any, separator: Any) -> list[Any]:
    """The items to join, refused up front when the joined text would be too long."""
    listed = list(_metered(items))
    size = _text_size(separator or "") * max(len(listed) - 1, 0) + sum(_text_size(i) for i in listed)
    if size > MAX_OUTPUT_CHARS:
        raise SecurityError("joined result too large")
    return listed


def _check_method(owner: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A method of a built-in value (`s.replace(a, b)`, `sep.join(xs)`): its result sized first."""
    _check_numbers(args, kwargs)
    if isinstance(owner, str | bytes):
        if name == "replace" and len(args) >= 2:
            _check_replace(owner, args[0], args[1])
        elif name == "join" and args:
            return (_joinable(args[0], owner), *args[1:])
        elif name == "expandtabs":
            tab_size = args[0] if args else kwargs.get("tabsize", 8)
            tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
            _refuse_over(len(owner) + tabs * tab_size, MAX_OUTPUT_CHARS, "expanded text")
    return args


_DATA_ARGUMENT_FILTERS = frozenset({"default", "d", "sum"})  # numbers given to these are values, not sizes
_ITERATING_FILTERS = frozenset({"map", "select", "reject", "selectattr", "rejectattr", "unique", "list", "batch",
                                "slice", "groupby", "sort", "min", "max"})
_TEXT_FILTERS = frozenset({"capitalize", "center", "e", "escape", "forceescape", "format", "indent", "lower",
                           "pprint", "replace", "safe", "string", "striptags", "title", "trim", "truncate", "upper",
                           "urlencode", "urlize", "wordcount", "wordwrap"})
_SLOW_TEXT_FILTERS = frozenset({"pprint", "striptags", "title", "urlencode", "urlize", "wordwrap"})  # loops in Python


def _check_indent(value: Any, width: Any = 4, *args: Any, **kwargs: Any) -> None:
    pad = len(width) if isinstance(width, str) else int(width)
    _refuse_over(_text_size(value) + pad * (str(value).count("\n") + 1), MAX_OUTPUT_CHARS, "indented text")


def _check_wordwrap(value: Any, width: int = 79, break_long_words: bool = True,
                    wrapstring: str | None = None, *args: Any, **kwargs: Any) -> None:
    size = _text_size(value)
    _refuse_over(size + (size + 1) * len(wrapstring or "\n"), MAX_OUTPUT_CHARS, "wrapped text")


def _check_replace_filter(value: Any, old: Any, new: Any, *args: Any, **kwargs: Any) -> None:
    _check_replace(str(value), old, new)


def _check_format_filter(value: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str):
        _check_format(value, (*args, *kwargs.values()))


def _check_dictsort(value: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, dict) and len(value) > MAX_RANGE:  # its sort key is Python, once per item
        raise SecurityError(f"dictsort of more than {MAX_RANGE} items")


_FILTER_CHECKS: dict[str, Callable[..., None]] = {
    "dictsort": _check_dictsort,
    "indent": _check_indent,
    "wordwrap": _check_wordwrap,
    "replace": _check_replace_filter,
    "format": _check_format_filter,
}


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` with its arguments checked, its input metered and its result sized."""
    skip = 1 if hasattr(fn, "jinja_pass_arg") else 0  # a context or environment comes first
    check = _FILTER_CHECKS.get(name)
    text_limit = MAX_SLOW_FILTER_INPUT if name in _SLOW_TEXT_FILTERS else MAX_OUTPUT_CHARS if name in _TEXT_FILTERS \
        else None
    iterates = name in _ITERATING_FILTERS
    checks_numbers = name not in _DATA_ARGUMENT_FILTERS

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _spend(1)
        value, rest = args[skip], args[skip + 1:]
        if checks_numbers:
            _check_numbers(rest, kwargs)
        if text_limit is not None:
            _refuse_over(_text_size(value, text_limit), text_limit, f"input to {name}")
        if check is not None:
            check(value, *rest, **kwargs)
        if iterates and not isinstance(value, Undefined):
            value = _metered(value)
        return _checked(fn(*args[:skip], value, *rest, **kwargs))

    return bounded


def _indentation(value: Any, indent: int) -> int:
    """Characters `json.dumps(value, indent=indent)` spends on line breaks and indentation."""
    total, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        total += 1 + indent * depth
        if total > MAX_OUTPUT_CHARS:
            raise SecurityError(f"indented JSON would be longer than {MAX_OUTPUT_CHARS} characters")
        if isinstance(item, list | tuple):
            stack.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, dict):
            stack.extend((inner, depth + 1) for inner in item.values())
    return total


def _make_tojson(original: Callable[..., Any]) -> Callable[..., Any]:
    def tojson(eval_ctx: Any, value: Any, indent: int | None = None) -> Any:
        if indent is None:
            _measure(value)
        else:
            if not isinstance(indent, int) or not 0 <= indent <= MAX_TOJSON_INDENT:
                raise SecurityError(f"tojson indent must be a whole number from 0 to {MAX_TOJSON_INDENT}")
            # json indents in Python, not C: a smaller input
            _indentation(value, indent) + _measure(value, MAX_SLOW_FILTER_INPUT)
        return original(eval_ctx, value, indent)

    tojson.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    return tojson


def _make_join(original: Callable[..., Any]) -> Callable[..., Any]:
    def join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
        if attribute is not None:
            value = map(make_attrgetter(eval_ctx.environment, attribute), value)
        return original(eval_ctx, _joinable(value, d), d)

    join.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    return join


def _metered_calls(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, charging the budget as it is called (sorted() calls its key after reading all items)."""
    calls = itertools.count()

    def metered(*args: Any) -> Any:
        if not next(calls) & 127:
            _spend(128)
        return fn(*args)

    return metered


def _sort(environment: Any, value: Any, reverse: bool = False, case_sensitive: bool = False,
          attribute: Any = None) -> list[Any]:
    key = make_multi_attrgetter(environment, attribute, postprocess=None if case_sensitive else ignore_case)
    return sorted(value, key=_metered_calls(key), reverse=reverse)


def _make_sum(original: Callable[..., Any]) -> Callable[..., Any]:
    def sum_(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
        """Numbers add up; lists or tuples chain in one pass (adding them pairwise is quadratic)."""
        if attribute is not None:
            iterable = map(make_attrgetter(environment, attribute), iterable)
        items = list(_metered(iterable))
        if isinstance(start, list | tuple) and all(type(item) is type(start) for item in items):
            if len(start) + sum(len(item) for item in items) > MAX_SEQUENCE_ITEMS:
                raise SecurityError(f"sum longer than {MAX_SEQUENCE_ITEMS} items")
            return type(start)(itertools.chain(start, *items))
        if all(isinstance(item, int | float) for item in (start, *items)):
            return sum(items, start)
        raise SecurityError("sum adds up numbers, or lists (or tuples) onto a start list")

    sum_.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    return sum_


class TemplateEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox blueprints render in: immutable, capped, dict keys before attributes."""

    intercepted_binops = frozenset(_BINOPS)
    code_generator_class = _BoundedCodeGenerator

    def __init__(self) -> None:
        super().__init__(undefined=ChainableUndefined, autoescape=False, keep_trailing_newline=True,
                         finalize=_finalize)
        for name in ("lipsum", "cycler", "joiner", "namespace"):
            self.globals.pop(name, None)
        self.globals["range"] = _safe_range
        self.bounded_concat = _concat
        filters = self.filters
        filters.update(tojson=_make_tojson(filters["tojson"]), join=_make_join(filters["join"]),
                       sum=_make_sum(filters["sum"]))
        filters["sort"] = functools.wraps(filters["sort"])(_sort)  # keeps jinja's pass_environment
        self.filters = {name: _bounded_filter(name, fn) for name, fn in filters.items()}

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator in _BINOPS:
            return _BINOPS[operator](left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        # Methods of built-in values (`'a'.ljust(n)`, `s.replace(a, b)`) can build huge results in C.
        _spend(1)
        name = getattr(__obj, "__name__", "")
        if name in _REFUSED_METHODS:
            raise SecurityError(f"method {name!r} is not allowed in templates")
        if isinstance(getattr(__obj, "__self__", None), _VALUE_TYPES):
            args = _check_method(__obj.__self__, name, args, kwargs)
        return _checked(super().call(__context, __obj, *args, **kwargs))

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # Fail loudly: an attempt at `__class__`, `__globals__`... is an error, not an empty string.
        raise SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe")

    def getattr(self, obj: Any, attribute: str) -> Any:
        _spend(1)  # filters (sort, groupby, map) look attributes up once per item: keep the deadline
        # Node outputs are dicts: `node.items` must mean the key, not dict.items.
        if type(obj) is dict and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _spend(1)
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        template = value.__self__
        if _HUGE_FORMAT_WIDTH.search(template):
            raise SecurityError("format width too large")

        def bounded(*args: Any, **kwargs: Any) -> str:
            mapping = args[0].values() if value.__name__ == "format_map" and args else ()
            _check_format(template, (*args, *kwargs.values(), *mapping))
            return _checked(wrapper(*args, **kwargs))

        return bounded


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


# Jinja's expression rules, in Jinja's order, as one regex: one match per token instead of one per rule.
_EXPRESSION_TOKEN = re.compile("|".join(f"(?P<{kind}>{regex.pattern})" for kind, regex in (
    ("whitespace", whitespace_re), ("float", float_re), ("integer", integer_re), ("name", name_re),
    ("string", string_re), ("operator", operator_re))), re.IGNORECASE | re.VERBOSE | re.DOTALL)
_CLOSING = {"(": ")", "[": "]", "{": "}"}


def _expression_tokens(source: str) -> list[tuple[int, str, str]] | None:
    """The raw tokens Jinja's lexer yields for a bare expression, scanned in one regex per token; None
    for anything unusual (an end tag, a carriage return, unbalanced brackets), which Jinja's lexer handles."""
    if "\r" in source or "}}" in source:
        return None
    tokens: list[tuple[int, str, str]] = []
    expected: list[str] = []
    pos, lineno, end = 0, 1, len(source)
    match = _EXPRESSION_TOKEN.match
    while pos < end:
        found = match(source, pos)
        if found is None or found.end() == pos:
            return None
        kind, text = found.lastgroup or "", found.group()
        if kind == "operator":
            if text in _CLOSING:
                expected.append(_CLOSING[text])
            elif text in (")", "]", "}") and (not expected or expected.pop() != text):
                return None
        tokens.append((lineno, kind, text))
        lineno += text.count("\n")
        pos = found.end()
    return tokens


def _wrap(raw: list[tuple[int, str, str]]) -> list[Token] | None:
    """The tokens Jinja's `wrap` makes of scanned names, operators, whole numbers and plain strings (brackets
    nested at most MAX_BRACKET_DEPTH deep); None for anything else, which Jinja's `wrap` converts."""
    tokens: list[Token] = []
    depth = deepest = 0
    for lineno, kind, text in raw:
        if kind == "whitespace":
            continue
        if kind == "operator":
            if text in _CLOSING:
                depth += 1
                deepest = max(deepest, depth)
            elif text in (")", "]", "}"):
                depth -= 1
            tokens.append(Token(lineno, OPERATORS[text], text))
        elif kind == "name" and text.isidentifier():
            tokens.append(Token(lineno, "name", text))
        elif kind == "integer" and text.isdigit():
            tokens.append(Token(lineno, "integer", int(text)))  # type: ignore[arg-type]  # as Jinja does
        elif kind == "string" and "\\" not in text and "\n" not in text:
            tokens.append(Token(lineno, "string", text[1:-1]))
        else:
            return None
    return tokens if deepest <= MAX_BRACKET_DEPTH else None


def _tokens(source: str, code: str, state: str | None) -> TokenStream:
    """The source's tokens, lexed once; too many, or brackets nested too deep, are refused before the
    (recursive) parser sees them."""
    if len(source) > MAX_SOURCE_CHARS:
        raise TemplateCompileError(code, f"longer than {MAX_SOURCE_CHARS} characters")
    raw: list[tuple[int, str, str]] = []
    depth = 0
    scanned = _expression_tokens(source) if state == "variable" and len(source) < 4 * MAX_TOKENS else None
    if scanned is not None and len(scanned) <= MAX_TOKENS and (wrapped := _wrap(scanned)) is not None:
        return TokenStream(iter(wrapped), None, None)
    for count, token in enumerate(scanned if scanned is not None else ENV.lexer.tokeniter(source, None, None, state)):
        if count >= MAX_TOKENS:
            raise TemplateCompileError(code, f"more than {MAX_TOKENS} tokens")
        raw.append(token)
        if token[1] != "operator":
            continue
        if token[2] in ("(", "[", "{"):
            depth += 1
            if depth > MAX_BRACKET_DEPTH:
                raise TemplateCompileError(code, f"nested too deeply (more than {MAX_BRACKET_DEPTH} brackets)")
        elif token[2] in (")", "]", "}"):
            depth -= 1
    return TokenStream(ENV.lexer.wrap(iter(raw)), None, None)


@contextmanager
def _syntax(code: str) -> Iterator[None]:
    try:
        yield
    except TemplateCompileError:
        raise
    except TemplateError as exc:
        raise TemplateCompileError(code, str(exc)) from exc
    except (RecursionError, MemoryError) as exc:
        raise TemplateCompileError(code, "nested too deeply") from exc


def _parse(source: str, code: str) -> nodes.Template:
    """A template of `{{ }}` expressions (statement blocks refused)."""
    with _syntax(code):
        parser = Parser(ENV, "")
        parser.stream = _tokens(source, code, None)
        tree = parser.parse()
    _only_expressions(tree, code)
    return tree


def _parse_expression(source: str) -> nodes.Expr:
    """One bare expression, as Jinja's compile_expression reads it."""
    with _syntax("expression_syntax"):
        parser = Parser(ENV, "", state="variable")
        parser.stream = _tokens(source, "expression_syntax", "variable")
        expr = parser.parse_expression()
        if not parser.stream.eos:
            raise TemplateSyntaxError("chunk after expression", parser.stream.current.lineno, None, None)
    return expr


@dataclass(slots=True)
class _Reads:
    """What a parsed template reads: free names, and the keys of `inputs` it reads by name."""

    names: frozenset[str]
    input_keys: frozenset[str]


def _inspect(tree: nodes.Node, code: str) -> _Reads:
    """One walk of the tree (without recursion): its depth, the names it reads, the `inputs` keys it reads,
    and filters and tests it names that do not exist (errors Jinja would raise only when generating code)."""
    names: set[str] = set()
    keys: set[str] = set()
    called: set[int] = set()  # `inputs.get(...)` is a method, not a key
    stack: list[tuple[nodes.Node, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise TemplateCompileError(code, f"nested too deeply (more than {MAX_TREE_DEPTH} levels)")
        kind = type(node)
        if kind is nodes.Name:
            if node.ctx == "load":  # type: ignore[attr-defined]
                names.add(node.name)  # type: ignore[attr-defined]
        elif kind is nodes.Call:
            called.add(id(node.node))  # type: ignore[attr-defined]
        elif kind is nodes.Filter and node.name not in ENV.filters:  # type: ignore[attr-defined]
            raise TemplateCompileError(code, f"No filter named {node.name!r}.")  # type: ignore[attr-defined]
        elif kind is nodes.Test and node.name not in ENV.tests:  # type: ignore[attr-defined]
            raise TemplateCompileError(code, f"No test named {node.name!r}.")  # type: ignore[attr-defined]
        elif kind in (nodes.Getattr, nodes.Getitem) and id(node) not in called:
            target = node.node  # type: ignore[attr-defined]
            if type(target) is nodes.Name and target.name == "inputs":
                key = node.attr if kind is nodes.Getattr else getattr(node.arg, "value", None)  # type: ignore[attr-defined]
                if isinstance(key, str) and (kind is nodes.Getattr or type(node.arg) is nodes.Const):  # type: ignore[attr-defined]
                    keys.add(key)
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())
    return _Reads(frozenset(names) - RESERVED_NAMES, frozenset(keys))


def _only_expressions(tree: nodes.Template, code: str) -> None:
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            raise TemplateCompileError(
                code, f"statement blocks ({{% ... %}}) are not allowed; found a {type(node).__name__.lower()} block"
            )


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
        path = _plain_path(part)
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


def _templated(value: Any) -> bool:
    """True when `value` holds a template somewhere (what compile_value would not keep constant)."""
    kind = type(value)
    if kind is str:
        return "{" in value and ("{{" in value or "{%" in value or "{#" in value)
    if kind in _SCALARS:
        return False
    if isinstance(value, Mapping):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_templated(v) for v in value)
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
    if isinstance(value, str):
        return _compile_string(value) if _templated(value) else Constant(value)
    if isinstance(value, Mapping):
        items = {str(key): _compile_part(item) for key, item in value.items()}
        reads = _reads(items.values())
        return MappingValue(items, *reads) if reads is not None else Constant(dict(value))
    if isinstance(value, list | tuple):
        parts = [_compile_part(item) for item in value]
        reads = _reads(parts)
        return SequenceValue(parts, *reads) if reads is not None else Constant(list(value))
    return Constant(value)


def _compile_part(value: Any) -> Compiled:
    return compile_value(value) if _templated(value) else _constant(value)


def _reads(parts: Iterable[Compiled]) -> tuple[frozenset[str], frozenset[str]] | None:
    """The names and `inputs` keys the parts read; None when every part is a constant."""
    names: set[str] = set()
    keys: set[str] = set()
    templated = False
    for part in parts:
        if type(part) is not Constant:
            templated = True
            names |= part.names
            keys |= part.input_keys
    return (frozenset(names), frozenset(keys)) if templated else None


@functools.lru_cache(maxsize=4096)
def _compile_string(value: str) -> Compiled:
    # Compiled templates hold no run state, so equal sources (re-validation, registration) share one.
    lone = _LONE_EXPRESSION.match(value)
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
