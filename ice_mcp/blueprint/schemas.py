"""The one JSON Schema validator factory: bounded schemas, RE2 (linear-time) regexes, no remote `$ref`."""

from __future__ import annotations

import copy
import functools
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import re2
from jsonschema import FormatChecker, SchemaError, ValidationError, validators
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from ice_mcp.errors import IceError

MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_ELEMENTS = 5_000
MAX_PATTERN_CHARS = 500
MAX_PATTERNS = 16  # compiling one costs up to ~7 ms at the memory cap below

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # RE2 would print every refused pattern to stderr
_RE2_OPTIONS.max_mem = 8 << 20  # RE2's default: bounds the program; a smaller DFA cache makes matching far slower

# Keywords whose value is a subschema, a list of them, or a map of name → subschema.
_SUBSCHEMA = frozenset({"items", "additionalItems", "additionalProperties", "unevaluatedItems",
                        "unevaluatedProperties", "contains", "propertyNames", "not", "if", "then", "else"})
_SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions",
                             "dependentSchemas", "dependencies"})


class SchemaInvalid(IceError):
    """A JSON Schema refused before use; `path` (JSON pointer-ish) says where in the schema."""

    code = "invalid_schema"

    def __init__(self, message: str, *, code: str, path: str = "") -> None:
        super().__init__(message, code=code, details={"path": path} if path else None)
        self.path = path


def compile_pattern(pattern: str) -> Any:
    """An RE2 regex; raises re2.error for what RE2 refuses (backreferences, lookaround, too large)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise re2.error(f"longer than {MAX_PATTERN_CHARS} characters")
    return re2.compile(pattern, _RE2_OPTIONS)


def _why(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


def _search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None


# -- keywords that run regexes, on RE2 --------------------------------------------------------


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        matched = _search(pattern, instance)
    except re2.error as exc:
        yield ValidationError(f"pattern {pattern[:100]!r} is not supported: {_why(exc)}")
        return
    if not matched:
        yield ValidationError(f"{instance[:200]!r} does not match {pattern[:200]!r}")


def _pattern_properties(validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
                        ) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        try:
            regex = compile_pattern(pattern)
        except re2.error as exc:
            yield ValidationError(f"pattern {pattern[:100]!r} is not supported: {_why(exc)}")
            continue
        for key, value in instance.items():
            if regex.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any
                           ) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    try:
        regexes = [compile_pattern(p) for p in schema.get("patternProperties", {})]
    except re2.error as exc:
        yield ValidationError(f"a patternProperties pattern is not supported: {_why(exc)}")
        return
    extras = [k for k in instance if k not in known and not any(r.search(k) for r in regexes)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        shown = ", ".join(repr(k[:100]) for k in sorted(extras)[:20])
        yield ValidationError(f"additional properties are not allowed ({shown} unexpected)")


def _unresolvable_as_error(keyword: Any) -> Any:
    """A `$ref` keyword that reports an unresolvable reference as a validation error, not an exception."""

    def resolve(validator: Any, ref: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
        try:
            yield from keyword(validator, ref, instance, schema)
        except Unresolvable:
            yield ValidationError(f"$ref {str(ref)[:200]!r} cannot be resolved")

    return resolve


_FORMATS = FormatChecker()


@_FORMATS.checks("regex", raises=re2.error)
def _is_regex(value: object) -> bool:
    return not isinstance(value, str) or compile_pattern(value) is not None


@functools.cache
def _safe_class(base: type[Validator]) -> type[Validator]:
    """`base` (one JSON Schema draft) with its regex keywords on RE2."""
    overrides = {"pattern": _pattern, "patternProperties": _pattern_properties,
                 "additionalProperties": _additional_properties}
    for ref in ("$ref", "$dynamicRef"):
        if ref in base.VALIDATORS:
            overrides[ref] = _unresolvable_as_error(base.VALIDATORS[ref])
    return validators.extend(base, {k: v for k, v in overrides.items() if k in base.VALIDATORS})


# jsonschema adds the drafts' meta-schemas; unlike its default, this registry never fetches remote `$ref`s.
_REGISTRY: Registry[Any] = Registry()


# -- the factory ------------------------------------------------------------------------------


def schema_validator(schema: Mapping[str, Any] | bool) -> Validator:
    """A validator for `schema`, refused up front when it is too large, invalid or needs a non-RE2 regex.

    Raises SchemaInvalid with code `schema_too_large`, `unsupported_pattern`,
    `unsupported_schema` or `invalid_schema`.
    """
    check_schema(schema)
    cls = _safe_class(validators.validator_for(schema))
    return cls(schema, registry=_REGISTRY)


_SHARED_VALIDATORS: OrderedDict[str, Validator] = OrderedDict()
MAX_SHARED_VALIDATORS = 256
_JSON_SCALARS = (str, int, bool, type(None))


def shared_validator(schema: Mapping[str, Any]) -> Validator:
    """`schema_validator(schema)`, made once per distinct schema and kept for the next blueprint that declares
    the same one (checking a schema costs ~0.25 ms, more than compiling a small blueprint). Raises SchemaInvalid
    as it does. Only plain JSON is kept, under its JSON text, so two schemas share a validator only when equal."""
    key = json.dumps(schema, allow_nan=False) if _plain_json(schema, MAX_SCHEMA_DEPTH) else None
    found = _SHARED_VALIDATORS.get(key) if key is not None else None
    if found is not None:
        _SHARED_VALIDATORS.move_to_end(key)  # type: ignore[arg-type]
        return found
    # Its own copy: a later change to the caller's schema cannot reach a validator that others share.
    validator = schema_validator(copy.deepcopy(dict(schema)))
    if key is not None:
        _SHARED_VALIDATORS[key] = validator
        while len(_SHARED_VALIDATORS) > MAX_SHARED_VALIDATORS:
            _SHARED_VALIDATORS.popitem(last=False)
    return validator


def _plain_json(value: Any, depth: int) -> bool:
    """True when `value` is made only of dicts (string keys), lists, strings, finite numbers, booleans and null,
    the values whose JSON text tells them apart (a tuple, NaN or a custom type may not be kept)."""
    kind = type(value)
    if kind in _JSON_SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth <= 0:
        return False
    if kind is dict:
        return all(type(key) is str and _plain_json(item, depth - 1) for key, item in value.items())
    if kind is list:
        return all(_plain_json(item, depth - 1) for item in value)
    return False


def check_schema(schema: Any) -> None:
    """Raise SchemaInvalid for the first problem of `schema` (size, regexes, then the meta-schema)."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise SchemaInvalid("a JSON Schema must be an object or a boolean", code="invalid_schema")
    _check_size(schema)
    uses_unevaluated = False
    uses_patterns = False
    pattern_count = 0
    for path, keyword, value in _keywords(schema):
        if keyword == "unevaluatedProperties":
            uses_unevaluated = True
        if keyword in ("$ref", "$dynamicRef") and not (isinstance(value, str) and value.startswith("#")):
            raise SchemaInvalid(f"{path or '(root)'}: only local references ('#/...') are supported, "
                                f"not {str(value)[:100]!r}", code="unsupported_schema", path=path)
        patterns: list[Any] = []
        if keyword == "pattern":
            patterns = [value]
        elif keyword == "patternProperties" and isinstance(value, Mapping):
            patterns = list(value)
            uses_patterns = uses_patterns or bool(value)
        pattern_count += len(patterns)
        if pattern_count > MAX_PATTERNS:
            raise SchemaInvalid(f"the schema has more than {MAX_PATTERNS} regex patterns",
                                code="schema_too_large", path=path)
        for pattern in patterns:
            if not isinstance(pattern, str):
                continue
            try:
                compile_pattern(pattern)
            except re2.error as exc:
                raise SchemaInvalid(
                    f"{path or '(root)'}: pattern {pattern[:100]!r} is not supported ({_why(exc)}); "
                    "patterns run on RE2: no backreferences or lookaround",
                    code="unsupported_pattern", path=path) from None
    if uses_unevaluated and uses_patterns:
        # jsonschema evaluates patternProperties for unevaluatedProperties with the backtracking `re`.
        raise SchemaInvalid("unevaluatedProperties together with patternProperties is not supported",
                            code="unsupported_schema")
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(dict(schema), format_checker=_FORMATS)  # type: ignore[call-arg]
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise SchemaInvalid(f"{where or '(root)'}: {exc.message[:300]}", code="invalid_schema",
                            path=where) from None
    except RecursionError:
        raise SchemaInvalid("the schema is nested too deeply", code="schema_too_large") from None


def _check_size(schema: Mapping[str, Any]) -> None:
    """Count every value and the nesting depth, stopping at the first limit crossed."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_SCHEMA_ELEMENTS:
            raise SchemaInvalid(f"the schema has more than {MAX_SCHEMA_ELEMENTS} values",
                                code="schema_too_large")
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaInvalid(f"the schema is nested deeper than {MAX_SCHEMA_DEPTH} levels",
                                code="schema_too_large")
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _keywords(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(path, keyword, value) for every keyword of `schema` and of its subschemas."""
    for keyword, value in schema.items():
        yield path, keyword, value
        where = f"{path}/{keyword}"
        if keyword in _SUBSCHEMA and isinstance(value, Mapping):
            yield from _keywords(value, where)
        if keyword in _SUBSCHEMA_LISTS and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    yield from _keywords(item, f"{where}/{i}")
        if keyword in _SUBSCHEMA_MAPS and isinstance(value, Mapping):
            for name, item in value.items():
                if isinstance(item, Mapping):
                    yield from _keywords(item, f"{where}/{name}")


# -- a shortcut for the simplest schemas ---------------------------------------------------------

# Keywords that never fail an instance.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "$comment", "$schema"})
_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "number": lambda v: type(v) in (int, float),
    "integer": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
}


def _type_check(schema: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """The check of a subschema that holds nothing but `type` (a name or a list of names) and annotations."""
    if not set(schema) <= _ANNOTATIONS | {"type"}:
        return None
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else None
    if kinds is None:
        return lambda _value: True
    if names is None or not all(isinstance(n, str) and n in _TYPES for n in names):
        return None
    checks = [_TYPES[name] for name in names]
    return checks[0] if len(checks) == 1 else lambda value: any(check(value) for check in checks)


def quick_check(schema: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool] | None:
    """For an object schema of typed properties, `required` and `additionalProperties: false` only: a check
    that says True exactly when the schema would accept the object (much cheaper than the validator).
    None for any other schema. A False answer is for the validator to explain."""
    if not set(schema) <= _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"} \
            or schema.get("type", "object") != "object" or schema.get("additionalProperties", True) not in (True, False):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    checks = {}
    for name, subschema in properties.items():
        check = _type_check(subschema) if isinstance(subschema, Mapping) else None
        if check is None:
            return None
        checks[name] = check
    closed = schema.get("additionalProperties", True) is False
    needed = tuple(required)

    def accepts(instance: Mapping[str, Any]) -> bool:
        if type(instance) is not dict or any(name not in instance for name in needed):
            return False
        for name, value in instance.items():
            check = checks.get(name)
            if check is None:
                if closed:
                    return False
            elif not check(value):
                return False
        return True

    return accepts
