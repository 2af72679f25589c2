"""The orchestrator's parts a host protocol may ask for, one a protocol, so that each desk's or engine's host
protocol names the parts it uses instead of declaring them again.

`Orchestrator` has each of them as a read-only property. Every import here is for typing alone, so this module sits
at the bottom of the layers and any layer may build its host protocol from these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ice_mcp.core.questions import Questions
    from ice_mcp.core.runner import Runner
    from ice_mcp.engines.base import Engine
    from ice_mcp.services import Services
    from ice_mcp.settings import Settings
    from ice_mcp.store.base import Owner
    from ice_mcp.tools.registry import Registry


class HasSettings(Protocol):
    @property
    def settings(self) -> Settings: ...


class HasOwner(Protocol):
    """Who this process is, as a run's lease names it."""

    @property
    def owner(self) -> Owner: ...


class HasEngine(Protocol):
    @property
    def engine(self) -> Engine: ...


class HasServices(Protocol):
    @property
    def services(self) -> Services: ...


class HasRunner(Protocol):
    @property
    def runner(self) -> Runner: ...


class HasRegistry(Protocol):
    @property
    def registry(self) -> Registry: ...


class HasQuestions(Protocol):
    """Where the runs' questions wait for their answers."""

    @property
    def questions(self) -> Questions: ...
