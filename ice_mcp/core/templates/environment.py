"""The sandboxed Jinja2 environment blueprints render in, and its one shared instance."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from jinja2 import ChainableUndefined
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ice_mcp.core.templates.budget import _checked, _spend
from ice_mcp.core.templates.filters import (
    _REFUSED_METHODS,
    _VALUE_TYPES,
    _bounded_filter,
    _check_method,
    _make_join,
    _make_sum,
    _make_tojson,
    _sort,
)
from ice_mcp.core.templates.operators import (
    _BINOPS,
    _HUGE_FORMAT_WIDTH,
    _BoundedCodeGenerator,
    _check_format,
    _concat,
    _finalize,
    _safe_range,
)


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
