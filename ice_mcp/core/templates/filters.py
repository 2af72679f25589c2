"""Method calls on built-in values and Jinja's filters: arguments checked, inputs metered, results sized."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jinja2 import Undefined
from jinja2.exceptions import SecurityError
from jinja2.filters import ignore_case, make_attrgetter, make_multi_attrgetter

from ice_mcp.core.templates.budget import _checked, _metered, _spend
from ice_mcp.core.templates.limits import (
    MAX_OUTPUT_CHARS,
    MAX_RANGE,
    MAX_SEQUENCE_ITEMS,
    MAX_SLOW_FILTER_INPUT,
    MAX_TOJSON_INDENT,
    _measure,
    _refuse_over,
    _text_size,
)
from ice_mcp.core.templates.operators import _check_format

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
