"""The names templates can see in a run: each level's variables, then the enclosing level's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Scope:
    """Names visible to templates: this level's variables, then the enclosing scope's."""

    __slots__ = ("parent", "vars")

    def __init__(self, vars: dict[str, Any] | None = None, parent: Scope | None = None) -> None:
        self.vars = vars if vars is not None else {}
        self.parent = parent

    def child(self, vars: Mapping[str, Any] | None = None) -> Scope:
        return Scope(dict(vars) if vars else {}, self)

    def lookup(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        raise KeyError(name)

    def select(self, names: frozenset[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name in names:
            try:
                found[name] = self.lookup(name)
            except KeyError:
                pass
        return found
