"""Flatten JSON Schemas into the shape every MCP client accepts."""

from __future__ import annotations

import copy
from typing import Any

_MAX_DEPTH = 32


def _resolve_pointer(root: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _inline(node: Any, root: dict[str, Any], depth: int, seen: tuple[str, ...]) -> Any:
    if depth > _MAX_DEPTH:
        return {}
    if isinstance(node, list):
        return [_inline(item, root, depth + 1, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve_pointer(root, ref)
        if target is None or ref in seen:
            # Unresolvable or recursive: accept anything rather than break the client.
            merged: dict[str, Any] = {}
        else:
            merged = _inline(copy.deepcopy(target), root, depth + 1, (*seen, ref))
        extra = {k: _inline(v, root, depth + 1, seen) for k, v in node.items() if k != "$ref"}
        return {**merged, **extra} if isinstance(merged, dict) else extra
    return {
        k: _inline(v, root, depth + 1, seen)
        for k, v in node.items()
        if k not in ("$defs", "definitions", "$schema", "$id")
    }


def _merge_variants(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace a top-level oneOf/anyOf/allOf with one object schema that admits every variant."""
    for key in ("allOf", "anyOf", "oneOf"):
        variants = schema.pop(key, None)
        if not isinstance(variants, list):
            continue
        properties: dict[str, Any] = dict(schema.get("properties") or {})
        required: set[str] | None = None
        for variant in variants:
            if not isinstance(variant, dict):
                continue
            properties.update(variant.get("properties") or {})
            names = set(variant.get("required") or [])
            if key == "allOf":
                required = (required or set()) | names
            else:
                required = names if required is None else required & names
        schema["properties"] = properties
        merged_required = sorted(set(schema.get("required") or []) | (required or set()))
        if merged_required:
            schema["required"] = merged_required
    return schema


def flatten_schema(schema: Any) -> dict[str, Any]:
    """An object-rooted schema with `$ref`s inlined and no `$defs`, `$schema` or top-level combinators."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    root = copy.deepcopy(schema)
    flat = _inline(root, root, 0, ())
    flat = _merge_variants(flat)
    if flat.get("type") != "object":
        flat = {
            "type": "object",
            "properties": dict(flat.get("properties") or {}),
            **({"required": flat["required"]} if isinstance(flat.get("required"), list) else {}),
        }
    flat.setdefault("properties", {})
    return flat
