"""File tools confined to the configured workspace folder: csv_reader, file_read, file_write."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Annotated, Any

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
        raise NodeFailure(f"no file {relative!r} in the workspace {root} (paths are relative to it; "
                          f"{CHANGE_WORKSPACE})", code="not_found", retryable=False,
                          details={"path": relative, "workspace": str(root)})
    return resolved


def _outside(relative: str, root: Path) -> NodeFailure:
    return NodeFailure(f"path {relative!r} is outside the workspace {root} (file tools use only that folder; "
                       f"{CHANGE_WORKSPACE})", code="forbidden", retryable=False,
                       details={"path": relative, "workspace": str(root)})


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
