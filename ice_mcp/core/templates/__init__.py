"""Templates and expressions: Jinja2's immutable sandbox, compiled once per blueprint.

Blueprint templates are untrusted, so they are expressions only (`{{ ... }}`), nested
only so deep, and every operation that could grow memory or time has its result size
predicted and refused before it runs; each render also has a work budget and a deadline.
"""

from __future__ import annotations

from ice_mcp.core.templates.budget import RenderBudget
from ice_mcp.core.templates.compiling import compile_expression, compile_value, render_text
from ice_mcp.core.templates.environment import ENV, RESERVED_NAMES, TemplateEnvironment
from ice_mcp.core.templates.limits import (
    JSON_INT_RANGE,
    MAX_BRACKET_DEPTH,
    MAX_EXPONENT,
    MAX_INT_BITS,
    MAX_OUTPUT_CHARS,
    MAX_RANGE,
    MAX_RENDER_SECONDS,
    MAX_SEQUENCE_ITEMS,
    MAX_SLOW_FILTER_INPUT,
    MAX_SOURCE_CHARS,
    MAX_TOJSON_INDENT,
    MAX_TOKENS,
    MAX_TREE_DEPTH,
    MAX_WORK_CHARS,
)
from ice_mcp.core.templates.parsing import _expression_tokens, _wrap
from ice_mcp.core.templates.paths import PathExpression, PathText
from ice_mcp.core.templates.rendering import (
    Compiled,
    Constant,
    Expression,
    MappingValue,
    SequenceValue,
    TemplateFailure,
    Text,
)
from ice_mcp.core.templates.scope import Scope
from ice_mcp.errors import TemplateCompileError

__all__ = [
    "ENV",
    "JSON_INT_RANGE",
    "MAX_BRACKET_DEPTH",
    "MAX_EXPONENT",
    "MAX_INT_BITS",
    "MAX_OUTPUT_CHARS",
    "MAX_RANGE",
    "MAX_RENDER_SECONDS",
    "MAX_SEQUENCE_ITEMS",
    "MAX_SLOW_FILTER_INPUT",
    "MAX_SOURCE_CHARS",
    "MAX_TOJSON_INDENT",
    "MAX_TOKENS",
    "MAX_TREE_DEPTH",
    "MAX_WORK_CHARS",
    "RESERVED_NAMES",
    "Compiled",
    "Constant",
    "Expression",
    "MappingValue",
    "PathExpression",
    "PathText",
    "RenderBudget",
    "Scope",
    "SequenceValue",
    "TemplateCompileError",
    "TemplateEnvironment",
    "TemplateFailure",
    "Text",
    "_expression_tokens",
    "_wrap",
    "compile_expression",
    "compile_value",
    "render_text",
]
