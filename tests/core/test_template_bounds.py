"""Property: random compositions of filters, operators and methods on bounded inputs stay inside the caps.

Every render either gives a value within the size caps or raises the clear TemplateFailure /
TemplateCompileError, and ends quickly either way (the deadline is MAX_RENDER_SECONDS).
"""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ice_mcp.core.templates import (
    MAX_OUTPUT_CHARS,
    MAX_SEQUENCE_ITEMS,
    Scope,
    TemplateCompileError,
    TemplateFailure,
    compile_value,
)

DATA = {"s": "ab" * 500, "big": "a" * 100_000, "xs": list(range(50)), "rows": [{"n": i, "t": "x" * i} for i in range(30)],
        "n": 9999, "lines": "a\nb\n" * 200}
# Time for one render, far above the deadline: room for a loaded machine, far below the seconds.
SLOW_S = 0.5

numbers = st.sampled_from(["0", "1", "2", "7", "64", "999", "9999", "10**4", "n", "-3"])
texts = st.sampled_from(["'a'", "'ab'", "s", "big", "lines", "'{0}{0}'", "'%s%s'", "'\\t'"])
names = st.sampled_from(["xs", "rows", "range(n)", "range(100)", "[big, big]", "[s] * 3"])
FILTERS = [
    "center({w})", "indent({w})", "join", "join({t})", "list", "sort", "unique | list", "string", "tojson",
    "tojson(indent=2)", "upper", "replace('a', {t})", "map('string') | list", "map('center', {w}) | list", "sum",
    "length", "first", "reverse | list", "batch({w}) | list", "wordwrap({w})", "format({t}, {t})", "trim", "title",
    "e", "default({t})", "map(attribute='t') | list", "sum(start=[])", "slice(3) | list", "pprint", "urlize",
    "truncate({w})", "dictsort", "groupby('n') | list", "min", "max", "select('odd') | list", "int", "float",
]
OPERATORS = ["+", "-", "*", "**", "%", "~", "//", "and", "or", "==", "in"]
METHODS = ["center({w})", "split('a')", "join({e})", "replace('a', {t})", "format({e})", "upper()", "ljust({w})",
           "zfill({w})", "expandtabs({w})", "strip()", "count('a')"]


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> str:
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        return draw(st.one_of(numbers, texts, names))
    inner = draw(expressions(depth + 1))
    kind = draw(st.sampled_from(["filter", "filter", "operator", "method", "list"]))
    fill = {"w": draw(numbers), "t": draw(texts), "e": draw(expressions(depth + 1))}
    if kind == "filter":
        return f"({inner} | {draw(st.sampled_from(FILTERS)).format(**fill)})"
    if kind == "operator":
        return f"({inner} {draw(st.sampled_from(OPERATORS))} {draw(expressions(depth + 1))})"
    if kind == "method":
        return f"({inner}).{draw(st.sampled_from(METHODS)).format(**fill)}"
    return f"[{inner}, {fill['e']}]"


def check_size(value: Any) -> None:
    if isinstance(value, str):
        assert len(value) <= MAX_OUTPUT_CHARS
        return
    # the whole value as the run store writes it; JSON escapes may add a little to the counted size
    text = json.dumps(value, default=str)
    assert len(text) <= 2 * MAX_OUTPUT_CHARS
    if isinstance(value, list):
        assert len(value) <= MAX_SEQUENCE_ITEMS


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=expressions(), as_text=st.booleans())
def test_any_composition_ends_quickly_within_the_caps_or_fails_clearly(expression: str, as_text: bool) -> None:
    source = f"x{{{{ {expression} }}}}" if as_text else f"{{{{ {expression} }}}}"
    started = time.perf_counter()
    try:
        value = compile_value(source).render(Scope(dict(DATA)))
    except (TemplateFailure, TemplateCompileError) as exc:
        assert "Traceback" not in str(exc)
        value = None
    elapsed = time.perf_counter() - started
    assert elapsed < SLOW_S, f"{source} took {elapsed * 1000:.0f} ms"
    check_size(value)
