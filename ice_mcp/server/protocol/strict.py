"""OpenAI's strict function schemas from our tools' input schemas, and the arguments a strict caller sends read back.

Strict mode (OpenAI structured outputs, `strict: true` tools) takes a subset of JSON Schema in which every object
lists all its properties in `required` and allows no others. `strict_schema` converts an input schema by these
rules, and `read_strict` is the server's side of them, so a converted tool stays callable with its defaults:

1. Every object says `additionalProperties: false` and lists every property in `required`.
2. A property the tool does not require (optional, or with a `default`) stays optional the only way the format
   allows: it may be null. The server takes a null it would refuse as "not given", so the default applies.
3. A free-form object (no `properties`, or a map whose keys are not known: a workflow's `inputs`, a question's
   `answer`, headers) has no strict form: it becomes a string holding the object as JSON text, which the server
   parses back where the tool's own schema wants an object.
4. A value of any type (`{}`) becomes a string, number, boolean or null (strict mode has no "any").
5. Keywords strict mode lacks (`default`, `minLength`, `maxLength`, `uniqueItems`, `oneOf` as such, ...) are left
   out (`oneOf` becomes `anyOf`); the server still checks every argument against the tool's own schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# What strict mode takes besides the structure (type, properties, required, additionalProperties, items, anyOf).
KEPT = frozenset({"description", "title", "enum", "const", "pattern", "format", "minimum", "maximum",
                  "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"})
FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
SCALARS: list[dict[str, Any]] = [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
JSON_TEXT = "JSON text of an object"
_NULL = {"type": "null"}
_MAX_DEPTH = 32


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    return [kind] if isinstance(kind, str) else [t for t in kind if isinstance(t, str)] if isinstance(kind, list) \
        else []


def _branches(schema: Mapping[str, Any]) -> list[Any] | None:
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return list(schema[key])
    return None


def free_form(schema: Any) -> bool:
    """An object whose keys a schema does not list: no properties, and others not forbidden."""
    return (isinstance(schema, Mapping) and "object" in _types(schema) and not schema.get("properties")
            and schema.get("additionalProperties", True) is not False)


def accepts(schema: Any, kind: str, depth: int = 0) -> bool:
    """Whether a schema may take some value of JSON type `kind` (no type, enum or const: any)."""
    if schema is True or not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return schema is True
    if (branches := _branches(schema)) is not None:
        return any(accepts(branch, kind, depth + 1) for branch in branches)
    if "const" in schema:
        return (kind == "null" and schema["const"] is None) or (kind == "string" and isinstance(schema["const"], str))
    types = _types(schema)
    if not types:
        if "enum" in schema and isinstance(schema["enum"], list):
            return any((v is None) if kind == "null" else isinstance(v, str) if kind == "string" else False
                       for v in schema["enum"])
        return True
    return kind in types or (kind == "integer" and "number" in types)


# -- the conversion ---------------------------------------------------------------------------------------------


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An input schema in OpenAI's strict form, by the rules above (the root stays an object)."""
    converted = _convert(schema, 0)
    if converted.get("type") != "object":  # a free-form root: the tool then takes no argument a model can send
        converted = {"type": "object", "properties": {}}
    converted.setdefault("properties", {})
    converted["required"] = list(converted["properties"])
    converted["additionalProperties"] = False
    return converted


def _kept(schema: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in schema.items() if k in KEPT}
    if kept.get("format") not in FORMATS:
        kept.pop("format", None)
    return kept


def _described(schema: Mapping[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
    if isinstance(schema.get("description"), str) and "description" not in converted:
        converted["description"] = schema["description"]
    return converted


def _bare(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "description"}


def _text(schema: Mapping[str, Any]) -> dict[str, Any]:
    described = schema.get("description")
    return {"type": "string", "description": f"{described} ({JSON_TEXT})" if described else JSON_TEXT}


def _convert(schema: Any, depth: int) -> dict[str, Any]:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return {"anyOf": [dict(s) for s in SCALARS]}
    if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        merged = {**schema["allOf"][0], **{k: v for k, v in schema.items() if k != "allOf"}}
        return _convert(merged, depth + 1)
    types = _types(schema)
    if (branches := _branches(schema)) is not None and not types and "properties" not in schema:
        converted: list[dict[str, Any]] = []
        for branch in branches:
            one = _convert(branch, depth + 1)
            for part in one["anyOf"] if set(one) <= {"anyOf", "description"} and "anyOf" in one else [one]:
                if _bare(part) not in [_bare(seen) for seen in converted]:  # object text and a string: one string
                    converted.append(part)
        if len(converted) == 1:
            return _described(schema, {k: v for k, v in converted[0].items() if k != "description"}
                              if "description" in schema else converted[0])
        return _described(schema, {"anyOf": converted})
    if types == ["null"]:
        return {"type": "null"}
    if not types and "enum" not in schema and "const" not in schema:
        return _described(schema, {"anyOf": [dict(s) for s in SCALARS]})
    solid = [t for t in types if t != "null"]
    if len(solid) > 1:  # ["object", "string"]: one branch per type
        return _convert({"anyOf": [{**schema, "type": t} for t in solid] + ([_NULL] if "null" in types else [])},
                        depth + 1)
    kind = solid[0] if solid else None
    if kind == "object":
        out = _text(schema) if free_form(schema) else _object(schema, depth)
    elif kind == "array":
        out = {"type": "array", **_kept(schema)}
        out["items"] = _convert(schema.get("items", {}), depth + 1)
    else:
        out = _kept(schema)
        if kind is not None:
            out["type"] = kind
    return nullable(out) if "null" in types else out


def _object(schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
    required = set(schema.get("required") or ())
    properties = {}
    for key, sub in (schema.get("properties") or {}).items():
        converted = _convert(sub, depth + 1)
        properties[key] = converted if key in required else nullable(converted)
    return {**_kept(schema), "type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` that also takes null (how strict mode says "optional")."""
    if accepts(schema, "null"):
        return schema
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], dict(_NULL)]}
    kind = schema.get("type")
    if isinstance(kind, str) and "const" not in schema:
        out = {**schema, "type": [kind, "null"]}
        if isinstance(out.get("enum"), list):
            out["enum"] = [*out["enum"], None]
        return out
    description = schema.get("description")
    inner = {k: v for k, v in schema.items() if k != "description"}
    return {"anyOf": [inner, dict(_NULL)], **({"description": description} if description else {})}


# -- the server's side ------------------------------------------------------------------------------------------

_PLANS: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
_DROP, _PARSE = 1, 2


def _plan(schema: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """What to read back per property: drop a null it refuses (optional), parse text into an object, go inside."""
    plan: dict[str, Any] = {}
    required = set(schema.get("required") or ())
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or depth > _MAX_DEPTH:
        return plan
    for key, sub in properties.items():
        if not isinstance(sub, Mapping):
            continue
        flags = 0
        if key not in required and not accepts(sub, "null"):
            flags |= _DROP
        if _wants_object(sub) and not accepts(sub, "string"):
            flags |= _PARSE
        inner = _plan(sub, depth + 1) if isinstance(sub.get("properties"), Mapping) else {}
        items = sub.get("items")
        item_plan = _item_plan(items, depth) if isinstance(items, Mapping) else None
        if flags or inner or item_plan:
            plan[key] = (flags, inner, item_plan)
    return plan


def _item_plan(items: Mapping[str, Any], depth: int) -> tuple[int, dict[str, Any]] | None:
    flags = _PARSE if _wants_object(items) and not accepts(items, "string") else 0
    inner = _plan(items, depth + 1) if isinstance(items.get("properties"), Mapping) else {}
    return (flags, inner) if flags or inner else None


def _wants_object(schema: Mapping[str, Any]) -> bool:
    if (branches := _branches(schema)) is not None:
        return any(isinstance(b, Mapping) and _wants_object(b) for b in branches)
    return free_form(schema)


def read_strict(schema: Mapping[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments as a strict caller sends them, read back for the tool's own schema: a null the schema refuses for
    an optional property is left out (its default applies), JSON text where it wants a free-form object is parsed."""
    found = _PLANS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_PLANS) > 1024:
            _PLANS.clear()
        found = _PLANS[id(schema)] = (schema, _plan(schema))
    plan = found[1]
    return _read(plan, arguments) if plan and arguments else arguments


def _read(plan: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    out = value
    for key, (flags, inner, item_plan) in plan.items():
        if key not in value:
            continue
        item = value[key]
        if item is None and flags & _DROP:
            out = dict(out) if out is value else out
            del out[key]
            continue
        changed = _one(item, flags, inner)
        if item_plan is not None and isinstance(changed, list):
            elements = [_one(element, *item_plan) for element in changed]
            if any(new is not old for new, old in zip(elements, changed, strict=True)):
                changed = elements
        if changed is not item:
            out = dict(out) if out is value else out
            out[key] = changed
    return out


def _one(item: Any, flags: int, inner: dict[str, Any]) -> Any:
    if isinstance(item, str) and flags & _PARSE:
        try:
            parsed = json.loads(item)
        except ValueError:
            return item  # not JSON: the tool's own schema says what is wrong
        return parsed if isinstance(parsed, dict) else item
    if inner and isinstance(item, dict):
        return _read(inner, item)
    return item
