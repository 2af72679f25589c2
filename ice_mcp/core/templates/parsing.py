"""Template sources lexed and parsed within the token, bracket and depth caps, and what they read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from jinja2 import nodes
from jinja2.exceptions import TemplateError, TemplateSyntaxError
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

from ice_mcp.core.templates.environment import ENV, RESERVED_NAMES
from ice_mcp.core.templates.limits import (
    MAX_BRACKET_DEPTH,
    MAX_SOURCE_CHARS,
    MAX_TOKENS,
    MAX_TREE_DEPTH,
)
from ice_mcp.errors import TemplateCompileError

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
