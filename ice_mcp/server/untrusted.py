"""Strict checks of untrusted values at the server's edges: Host and Origin headers, lone surrogates."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"(?P<name>{_LABEL}(?:\.{_LABEL})*)|\[(?P<ipv6>[0-9A-Fa-f:.]{{2,45}})\]"
_HOST_PORT = re.compile(rf"(?:{_HOST})(?::(?P<port>[0-9]{{1,5}}))?")
_ORIGIN = re.compile(rf"(?:https?)://(?:{_HOST})(?::(?P<port>[0-9]{{1,5}}))?")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _well_formed(match: re.Match[str] | None) -> bool:
    if match is None:
        return False
    port = match.group("port")
    if port is not None and not 0 < int(port) <= 65535:
        return False
    ipv6 = match.group("ipv6")
    if ipv6 is not None:
        try:
            ipaddress.IPv6Address(ipv6)
        except ValueError:
            return False
    return True


def valid_host(value: str | None) -> bool:
    """`host[:port]` and nothing else: no userinfo (`@`), path, query, spaces or bad port."""
    return value is not None and _well_formed(_HOST_PORT.fullmatch(value))


def valid_origin(value: str | None) -> bool:
    """Absent, or `http(s)://host[:port]` exactly (an allow-list check follows)."""
    return value is None or _well_formed(_ORIGIN.fullmatch(value))


def lone_surrogate(value: Any, limit: int = 100_000) -> str | None:
    """Where in a decoded JSON value a string holds a lone UTF-16 surrogate (a path), else None."""
    stack: list[tuple[str, Any]] = [("", value)]
    seen = 0
    while stack and seen < limit:
        path, item = stack.pop()
        seen += 1
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path or "(value)"
        elif isinstance(item, dict):
            for key, child in item.items():
                shown = str(key).encode("utf-8", "backslashreplace").decode()  # printable even when bad
                where = f"{path}/{shown}" if path else shown
                if isinstance(key, str) and _SURROGATE.search(key):
                    return where
                stack.append((where, child))
        elif isinstance(item, list):
            stack.extend((f"{path}/{i}" if path else str(i), child) for i, child in enumerate(item))
    return None
