"""Files the server offers: blueprint templates, docs, prompt files; and blueprint text parsing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ice_mcp.blueprint.loading import parse_text
from ice_mcp.errors import IceError

MAX_DOCUMENT_BYTES = 1024 * 1024
BLUEPRINT_SUFFIXES = (".json", ".yaml", ".yml")


class DocumentError(IceError, ValueError):
    """A blueprint or manifest argument that is not a JSON/YAML object (or too large to read)."""

    code = "invalid_document"


def parse_document(value: Any, what: str = "blueprint") -> dict[str, Any]:
    """An object, or JSON/YAML text holding one; too large or an alias bomb: IceError with a clear code."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise DocumentError(f"{what} must be an object or JSON/YAML text")
    try:
        parsed = parse_text(value, what, MAX_DOCUMENT_BYTES)
    except IceError as exc:
        if exc.code == "yaml_too_complex":
            raise
        raise DocumentError(exc.message, code=None if exc.code == "parse_error" else exc.code) from None
    if not isinstance(parsed, dict):
        raise DocumentError(f"{what} must be a JSON/YAML object")
    return parsed


def _files(folder: Path, suffixes: tuple[str, ...]) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix in suffixes and not path.name.startswith("."):
            found.setdefault(path.stem, path)
    return found


def blueprint_files(folder: Path) -> dict[str, Path]:
    return _files(folder, BLUEPRINT_SUFFIXES)


def doc_files(folder: Path) -> dict[str, Path]:
    return _files(folder, (".md",))


def read_blueprint_file(path: Path) -> dict[str, Any]:
    return parse_document(path.read_text(encoding="utf-8"), str(path.name))


def blueprint_json(path: Path) -> str:
    return json.dumps(read_blueprint_file(path), indent=2, ensure_ascii=False)


def first_line(path: Path) -> str:
    """A doc's title: its first Markdown heading or line."""
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                return line.lstrip("# ").strip()
    except OSError:
        pass
    return path.stem
