"""Advertised tool names and canonical ids (`workflow_<name>` / `workflow:<name>`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container

KINDS = ("workflow", "tool", "agent")
PORTABLE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def canonical_id(kind: str, name: str) -> str:
    return f"{kind}:{name}"


def parse_canonical(value: str) -> tuple[str, str] | None:
    """`workflow:sales` -> ("workflow", "sales"); None when it is not a canonical id."""
    kind, sep, name = value.partition(":")
    if sep and kind in KINDS and name:
        return kind, name
    return None


def shorten(name: str, limit: int) -> str:
    """`name` if it fits, else a deterministic prefix plus a hash of the whole name."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[: limit - len(digest) - 1]}_{digest}"


def advertised_name(kind: str, name: str, *, limit: int = 64, canonical: bool = False,
                    reserved: Container[str] = ()) -> str:
    """The name clients see: portable characters only, at most `limit` long, stable across calls, none of
    the `reserved` names (a built-in tool's)."""
    raw = canonical_id(kind, name) if canonical else f"{kind}_{name}"
    safe = raw if canonical else _UNSAFE.sub("_", raw)
    if safe != raw or safe in reserved:
        # Replacing characters could make two names collide, and a reserved name is taken: a hash sets it apart.
        digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
        safe = f"{safe}_{digest}"
    return shorten(safe, limit)
