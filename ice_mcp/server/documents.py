"""Files the server offers: blueprint templates, docs, prompt files; and blueprint text parsing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

MAX_DOCUMENT_BYTES = 1024 * 1024
BLUEPRINT_SUFFIXES = (".json", ".yaml", ".yml")


class DocumentError(ValueError):
    """A blueprint or manifest argument that is not a JSON/YAML object."""


def parse_document(value: Any, what: str = "blueprint") -> dict[str, Any]:
    """An object, or JSON/YAML text holding one."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise DocumentError(f"{what} must be an object or JSON/YAML text")
    if len(value.encode()) > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"{what} is larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise DocumentError(f"{what} is not valid JSON or YAML{where}") from None
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
