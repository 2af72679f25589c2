"""A registered workflow's versions (a mixin `Orchestrator` inherits): its history with the runs each version ran,
one version's source and document text, the difference between two, a rollback that makes an old version current
as a new version, and a save of document text that is refused when another save came first."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from ice_mcp.blueprint.issues import ValidationReport, nearest
from ice_mcp.blueprint.models import Blueprint
from ice_mcp.blueprint.pinning import pin
from ice_mcp.blueprint.roundtrip import parse_document
from ice_mcp.catalogue import Catalogue
from ice_mcp.errors import BlueprintInvalid, IceError, UnknownName
from ice_mcp.schedules.desk import Schedules
from ice_mcp.store.base import RunStorage, StoredBlueprint
from ice_mcp.store.records import iso
from ice_mcp.tools.registry import Registry

RUNS_SCANNED = 1000  # a history counts the runs of each version among the workflow's latest runs, this many


@dataclass(slots=True)
class VersionEntry:
    """One version in a workflow's history."""

    version: int
    created_at: str | None
    current: bool
    runs: int  # runs of this version among the latest RUNS_SCANNED runs of the workflow
    has_text: bool

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "created_at": self.created_at, "current": self.current, "runs": self.runs,
                "has_text": self.has_text}


@dataclass(slots=True)
class Saved:
    """What a save or a rollback did: the version now current, the one before it, and the report."""

    name: str
    version: int
    previous_version: int | None
    report: ValidationReport
    created: bool  # False: the same blueprint and text as the current version, kept as it is

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "previous_version": self.previous_version,
                "created": self.created, "report": self.report.model_dump(mode="json", exclude_none=True)}


class _Host(Protocol):
    """What the versions' calls use of the orchestrator."""

    registry: Registry
    _catalogue: Catalogue
    schedules: Schedules

    @property
    def store(self) -> RunStorage | None: ...


class BlueprintVersions:
    """The orchestrator's calls on the versions its run store keeps of workflows registered at run time."""

    def blueprint_history(self: _Host, name: str) -> list[VersionEntry]:
        """The versions of a workflow, newest first: when each was made, which is current, how many runs ran it."""
        versions = _versions(self, name)
        current = _current(self, name, versions)
        counts: dict[int, int] = {}
        store = self.store
        if store is not None and versions:
            for record in store.list(workflow=name, limit=RUNS_SCANNED):
                if record.workflow_version is not None:
                    counts[record.workflow_version] = counts.get(record.workflow_version, 0) + 1
        return [VersionEntry(v.version, iso(v.created_at), v.version == current, counts.get(v.version, 0),
                             v.text is not None) for v in reversed(versions)]

    def blueprint_version(self: _Host, name: str, version: int) -> StoredBlueprint:
        """One version of a workflow: its source and the document text it was saved from (None if none was)."""
        return _version(_versions(self, name), name, version)

    def blueprint_diff(self: _Host, name: str, a: int, b: int) -> dict[str, Any]:
        """A unified diff from version `a` to `b`: of their texts, or of both as canonical YAML when one has none."""
        versions = _versions(self, name)
        old, new = _version(versions, name, a), _version(versions, name, b)
        texts = old.text is not None and new.text is not None
        before, after = (old.text, new.text) if texts else (canonical(old.source), canonical(new.source))
        assert before is not None and after is not None
        lines = list(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                          fromfile=f"{name} v{a}", tofile=f"{name} v{b}"))
        return {"name": name, "from_version": a, "to_version": b, "compared": "text" if texts else "canonical",
                "diff": "".join(line if line.endswith("\n") else line + "\n" for line in lines),
                "changed_lines": sum(1 for line in lines if line[:1] in "+-" and not line.startswith(("+++", "---")))}

    def rollback_blueprint(self: _Host, name: str, version: int) -> Saved:
        """Make an old version current again, as a new version (runs keep naming the version they ran)."""
        versions = _versions(self, name)
        old = _version(versions, name, version)
        previous = _current(self, name, versions)
        report = self._catalogue.validate(old.source)
        if not report.ok:
            raise BlueprintInvalid(report)
        made = _register(self, old.source, old.text)
        return Saved(name, made, previous, report, created=made != previous)

    def save_blueprint_text(self: _Host, name: str, text: str, base_version: int | None = None) -> Saved:
        """Validate document text and register it as a new version of `name`, keeping the text. Refused with
        `version_conflict` when `base_version` is given and another version became current since; with
        BlueprintInvalid (issues pinned to their lines) when it is not valid."""
        document = parse_document(text)
        data = document.blueprint
        if not isinstance(data, dict):
            raise IceError("a blueprint must be a JSON/YAML object", code="parse_error")
        if data.get("name") != name:
            raise IceError(f"the text names the workflow {data.get('name')!r}, not {name!r}", code="name_mismatch",
                           details={"name": name, "text_name": data.get("name")})
        versions = self.store.blueprint_versions(name) if self.store is not None else []
        previous = _current(self, name, versions)
        if base_version is not None and base_version != previous:
            raise IceError(f"{name} is at version {previous} now, not {base_version}: someone saved it since; "
                           "read it again and merge", code="version_conflict",
                           details={"name": name, "base_version": base_version, "current_version": previous})
        report = pin(self._catalogue.validate(data), text)
        if not report.ok:
            raise BlueprintInvalid(report)
        made = _register(self, data, text)
        return Saved(name, made, previous, report, created=made != previous)


def canonical(source: dict[str, Any]) -> str:
    """A blueprint's source as YAML in one fixed layout (for a version kept without its text)."""
    return yaml.safe_dump(source, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)


def _register(host: _Host, source: dict[str, Any], text: str | None) -> int:
    blueprint: Blueprint = host._catalogue.register_blueprint(source, text=text)
    host.schedules.declare(blueprint.name, blueprint.schedules)
    entry = host.registry.workflows[blueprint.name]
    if entry.version is None:
        raise IceError("versions are kept in the run store: this orchestrator has none (persist_runs off)",
                       code="no_store")
    return entry.version


def _versions(host: _Host, name: str) -> list[StoredBlueprint]:
    versions = host.store.blueprint_versions(name) if host.store is not None else []
    if not versions and name not in host.registry.workflows:
        raise UnknownName("workflow", name, nearest(name, host.registry.workflows))
    return versions


def _version(versions: list[StoredBlueprint], name: str, version: int) -> StoredBlueprint:
    for stored in versions:
        if stored.version == version:
            return stored
    known = ", ".join(str(v.version) for v in versions) or "none"
    raise IceError(f"{name} has no version {version} (versions kept: {known})", code="unknown_version",
                   details={"name": name, "version": version})


def _current(host: _Host, name: str, versions: list[StoredBlueprint]) -> int | None:
    """The version registered now: the registry's, or the store's newest when this process has not taken it yet."""
    entry = host.registry.workflows.get(name)
    if entry is not None and entry.source == "runtime" and entry.version is not None:
        newest = versions[-1].version if versions else entry.version
        return max(entry.version, newest)
    if entry is not None:
        return None  # a file's workflow: no version of the store is current
    return versions[-1].version if versions else None
