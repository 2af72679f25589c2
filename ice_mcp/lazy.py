"""What is made on first use: the names a package exports but imports when asked (PEP 562), so that importing the
package stays cheap, and objects an async factory makes once."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The package's module `__getattr__`: an exported name imported from its module (`exports[name]`) on first
    use and kept in the package's `namespace`; any other name is an AttributeError."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__


class MadeOnce(Generic[T]):
    """An object its async factory makes on first use, once however many callers ask at the same time."""

    def __init__(self, make: Callable[[], Awaitable[T]]) -> None:
        self._make = make
        self._value: T | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> T:
        async with self._lock:
            if self._value is None:
                self._value = await self._make()
            return self._value

    def take(self) -> T | None:
        """The object if it was made, forgotten here (the caller closes it; the next `get` makes another)."""
        value, self._value = self._value, None
        return value
