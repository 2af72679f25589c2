"""File tools confined to the configured workspace folder: csv_reader, file_read, file_write, file_list."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Annotated, Any, TypedDict

from pydantic import Field

from ice_mcp.errors import NodeFailure
from ice_mcp.tools.context import current_settings

MAX_READ_BYTES = 20 * 1024 * 1024


# How an operator points the file tools elsewhere: said with every refusal, so no error is a dead end.
CHANGE_WORKSPACE = "the server's --workspace DIR or ICE_MCP_WORKSPACE sets another"


def workspace_path(relative: str, *, must_exist: bool = True) -> Path:
    """`relative` inside the workspace; refuses absolute paths, `..` and symlinks that lead out."""
    root = current_settings().workspace.resolve()
    candidate = Path(relative)
    if candidate.is_absolute():
        try:
            candidate = candidate.relative_to(root)
        except ValueError:
            raise _outside(relative, root) from None
    resolved = (root / candidate).resolve()
    if not resolved.is_relative_to(root):
        raise _outside(relative, root)
    if must_exist and not resolved.exists():
        raise NodeFailure(f"no file {relative!r} in {_workspace(root)} (paths are relative to it; "
                          f"{CHANGE_WORKSPACE}; file_list lists its files)", code="not_found", retryable=False,
                          details=_details(relative, root))
    return resolved


def _workspace(root: Path) -> str:
    """The workspace as an error names it: its absolute path only where callers are local (stdio, the CLI)."""
    return f"the workspace {root}" if current_settings().name_workspace else "the server's workspace"


def _details(relative: str, root: Path) -> dict[str, str]:
    return {"path": relative, "workspace": str(root)} if current_settings().name_workspace else {"path": relative}


def _outside(relative: str, root: Path) -> NodeFailure:
    return NodeFailure(f"path {relative!r} is outside {_workspace(root)} (file tools use only that folder; "
                       f"{CHANGE_WORKSPACE})", code="forbidden", retryable=False, details=_details(relative, root))


def _read_text(path: Path, encoding: str) -> str:
    if path.is_dir():
        raise NodeFailure(f"{path.name!r} is a folder", code="invalid_arguments", retryable=False)
    if path.stat().st_size > MAX_READ_BYTES:
        raise NodeFailure(f"file larger than {MAX_READ_BYTES} bytes", code="too_large", retryable=False)
    try:
        return path.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise NodeFailure(f"cannot decode file as {encoding}: {exc.reason}", code="invalid_file", retryable=False) from None


def csv_reader(
    path: Annotated[str, Field(description="CSV file, relative to the workspace")],
    delimiter: Annotated[str, Field(min_length=1, max_length=1)] = ",",
    limit: Annotated[int | None, Field(ge=0, description="Read at most this many rows")] = None,
    encoding: str = "utf-8",
) -> dict[str, Any]:
    """Read a CSV file with a header row: rows as objects, the column names and the row count."""
    text = _read_text(workspace_path(path), encoding)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows: list[dict[str, Any]] = []
    for row in reader:
        if limit is not None and len(rows) >= limit:
            break
        rows.append({k: v for k, v in row.items() if k is not None})
    return {"rows": rows, "columns": list(reader.fieldnames or []), "count": len(rows)}


def file_read(
    path: Annotated[str, Field(description="File, relative to the workspace")],
    encoding: str = "utf-8",
) -> dict[str, Any]:
    """Read a text file from the workspace."""
    resolved = workspace_path(path)
    text = _read_text(resolved, encoding)
    return {"path": path, "text": text, "bytes": len(text.encode(encoding))}


def file_write(
    path: Annotated[str, Field(description="File, relative to the workspace")],
    text: str,
    append: bool = False,
    encoding: str = "utf-8",
) -> dict[str, Any]:
    """Write (or append) a text file in the workspace, creating folders as needed."""
    resolved = workspace_path(path, must_exist=False)
    if resolved.is_dir():
        raise NodeFailure(f"{path!r} is a folder", code="invalid_arguments", retryable=False)
    resolved.parent.mkdir(parents=True, exist_ok=True)
    with resolved.open("a" if append else "w", encoding=encoding) as handle:
        handle.write(text)
    return {"path": path, "bytes": len(text.encode(encoding)), "appended": append}


MAX_LISTED = 1000  # files one file_list answers; `truncated` says there were more


class ListedFile(TypedDict):
    path: str  # relative to the workspace
    bytes: int


class FileList(TypedDict):
    files: list[ListedFile]
    truncated: bool


def file_list(
    folder: Annotated[str, Field(description="Folder to list, relative to the workspace")] = ".",
    pattern: Annotated[str, Field(description="Glob the file names match, e.g. *.csv")] = "*",
) -> FileList:
    """List the workspace's files under `folder` (sub-folders included), paths relative to the workspace;
    at most 1000, in path order."""
    root = current_settings().workspace.resolve()
    base = workspace_path(folder)
    if not base.is_dir():
        raise NodeFailure(f"{folder!r} is not a folder", code="invalid_arguments", retryable=False)
    found: list[ListedFile] = []
    for path in sorted(base.rglob(pattern)):
        if not path.is_file() or not path.resolve().is_relative_to(root):  # a link out of the workspace: unlisted
            continue
        if len(found) == MAX_LISTED:
            return {"files": found, "truncated": True}
        found.append({"path": path.relative_to(root).as_posix(), "bytes": path.stat().st_size})
    return {"files": found, "truncated": False}
