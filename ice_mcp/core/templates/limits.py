"""The caps on what a template may be and build, and the sizes of results predicted against them."""

from __future__ import annotations

from typing import Any

from jinja2 import Undefined
from jinja2.exceptions import SecurityError

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
