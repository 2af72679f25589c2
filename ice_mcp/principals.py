"""Whose runs a call may see: the principal acting now, set where a request enters (`acting_as`), read at the
orchestrator's lookups. The one ambient value of the package: a ContextVar, so it is per request and task."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

logger = logging.getLogger(__name__)
ADMIN_SCOPE = "ice:admin"


@dataclass(frozen=True, slots=True)
class Acting:
    """A principal whose own runs (and schedules, hooks, notification targets) are all it sees."""

    id: str
    scopes: frozenset[str] = frozenset()  # what its token grants (a /ui sign-in link carries exactly these)
    sees_all: bool = False  # an admin who asked for everyone's (`all_principals`); logged

    @property
    def admin(self) -> bool:
        """May ask to see every principal's records (`everyone()`)."""
        return ADMIN_SCOPE in self.scopes


# None (stdio, the command line, a server with a static token, the server's own loops): everything is seen.
ACTING: ContextVar[Acting | None] = ContextVar("ice_mcp_acting", default=None)


@contextlib.contextmanager
def acting_as(principal: str | None, *, scopes: frozenset[str] = frozenset()) -> Iterator[None]:
    """Within the block, lookups answer only what `principal` owns (None: everything)."""
    token = ACTING.set(None if principal is None else Acting(principal, scopes))
    try:
        yield
    finally:
        ACTING.reset(token)


@contextlib.contextmanager
def everyone() -> Iterator[None]:
    """Within the block an admin sees every principal's records (logged); PermissionError for anyone else."""
    acting = ACTING.get()
    if acting is None or acting.sees_all:
        yield
        return
    if not acting.admin:
        raise PermissionError("only an admin (ice:admin) may look at every principal's records")
    logger.info("principal %s looks at every principal's records", acting.id)
    token = ACTING.set(Acting(acting.id, acting.scopes, sees_all=True))
    try:
        yield
    finally:
        ACTING.reset(token)


def may_see(owner: str | None) -> bool:
    """Whether the acting principal may see a record owned by `owner` (another's looks like no record)."""
    acting = ACTING.get()
    return acting is None or acting.sees_all or owner == acting.id


def acting_id() -> str | None:
    """Who acts now (records made now are theirs), or None: the process itself."""
    acting = ACTING.get()
    return None if acting is None else acting.id


def isolated() -> str | None:
    """The principal whose records alone a listing should hold, or None for everyone's."""
    acting = ACTING.get()
    return None if acting is None or acting.sees_all else acting.id


def owned_key(key: str | None) -> str | None:
    """An idempotency key in the acting principal's own space: another's same key starts its own run."""
    owner = isolated()
    return key if key is None or owner is None else f"{owner}\x1f{key}"
