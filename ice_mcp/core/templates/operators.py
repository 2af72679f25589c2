"""Operators, `range`, `~` and each `{{ }}` of text output, their results sized before they are built."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from jinja2 import Undefined, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError

from ice_mcp.core.templates.budget import _BUDGET, _checked
from ice_mcp.core.templates.limits import (
    MAX_EXPONENT,
    MAX_INT_BITS,
    MAX_OUTPUT_CHARS,
    MAX_RANGE,
    MAX_SEQUENCE_ITEMS,
    _measure,
    _refuse_over,
    _text_size,
)

# A width or precision of five digits or more in a %-format or a {}-format field.
_HUGE_FORMAT_WIDTH = re.compile(r"%[-#0 +]*\d{5,}|%[-#0 +]*\d*\.\d{5,}|\{[^{}]*:[^{}]*\d{5,}[^{}]*\}")


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
