"""Where a SQLite run store lives, and a stamp of the blueprints it keeps, read without opening the store (the
standard library only: a stdio server's warm start keys its kept answers on it before anything else loads)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

STORE_FILE = "runs.sqlite3"


def sqlite_file(state_url: str | None, data_dir: Path) -> Path | None:
    """The SQLite file of `--state URL` (no URL: the data folder's), or None when the store is not SQLite or the
    URL names no file."""
    if not state_url:
        return data_dir / STORE_FILE
    scheme, _, rest = state_url.partition(":")
    path = rest.removeprefix("//")
    if scheme.lower() != "sqlite" or not path or path == "/":
        return None
    return Path(path).expanduser()


def kept_blueprints_stamp(path: Path) -> str | None:
    """Every version of every blueprint registered at run time that the store at `path` keeps (the `blueprints`
    table of store/sqlite.py), with its time and whether it was deleted; None when it cannot be read."""
    if not path.exists():
        return json.dumps([])  # as the store that will be created there will say
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT name, version, created_at, deleted FROM blueprints ORDER BY name, version")
            return json.dumps(rows.fetchall())
    except sqlite3.Error:
        return None
