"""An evaluation's dataset: cases of inputs and expectations read from JSONL, CSV or a list, every bad line named.

A JSONL line (or a list item) is `{"inputs": {...}, "expected": {...}, "id": "...", "metadata": {...}}`: only
`inputs` is required. A CSV's header names the columns `inputs.NAME`, `expected.NAME` and `id` (a bare `NAME`
is an input too; `inputs.a.b` nests); a cell is read as JSON when it is JSON (`42`, `true`, `[1, 2]`,
`"007"`), else as text, and an empty cell is left out.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ice_mcp.errors import IceError

MAX_CASES = 10_000
MAX_DATASET_BYTES = 20 * 1024 * 1024
MAX_REPORTED = 20  # bad lines listed in one error
CASE_KEYS = ("id", "inputs", "expected", "metadata")
Format = Literal["jsonl", "csv"]


@dataclass(frozen=True, slots=True)
class Case:
    """One case: the target's inputs and what its outputs should be; `line`: where it was read (1-based)."""

    id: str
    inputs: dict[str, Any]
    expected: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "inputs": self.inputs, "expected": self.expected,
                **({"metadata": self.metadata} if self.metadata else {})}


@dataclass(frozen=True, slots=True)
class Dataset:
    """The cases in file order, and a digest of them (two evals on the same digest ran the same cases)."""

    name: str
    cases: tuple[Case, ...]
    sha256: str

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "cases": len(self.cases), "sha256": self.sha256}


class _Problems:
    """The bad lines found so far: all of them are reported at once, as `invalid_dataset`."""

    def __init__(self) -> None:
        self.found: list[dict[str, Any]] = []

    def add(self, line: int, message: str) -> None:
        self.found.append({"line": line, "message": message})

    def raise_any(self, name: str) -> None:
        if not self.found:
            return
        first = self.found[0]
        more = f" (and {len(self.found) - 1} more problems)" if len(self.found) > 1 else ""
        raise IceError(f"dataset {name}: line {first['line']}: {first['message']}{more}", code="invalid_dataset",
                       details={"errors": self.found[:MAX_REPORTED], "count": len(self.found)})


def _case(item: Any, line: int, index: int, problems: _Problems) -> Case | None:
    if not isinstance(item, dict):
        problems.add(line, f"a case is a JSON object with `inputs`, not {type(item).__name__}")
        return None
    unknown = sorted(set(item) - set(CASE_KEYS))
    if unknown:
        problems.add(line, f"unknown key {unknown[0]!r}: a case has only {', '.join(CASE_KEYS)}")
        return None
    parts = {"inputs": item.get("inputs"), "expected": item.get("expected", {}), "metadata": item.get("metadata", {})}
    for key, value in parts.items():
        if not isinstance(value, dict):
            what = "missing" if value is None else f"a {type(value).__name__}"
            problems.add(line, f"`{key}` must be a JSON object ({what})")
            return None
    case_id = item.get("id", index)
    if not isinstance(case_id, str | int) or isinstance(case_id, bool) or str(case_id) == "":
        problems.add(line, "`id` must be a non-empty string or an integer")
        return None
    return Case(str(case_id), dict(parts["inputs"] or {}), dict(parts["expected"] or {}),
                dict(parts["metadata"] or {}), line)


def _finish(name: str, cases: list[Case], problems: _Problems) -> Dataset:
    seen: dict[str, int] = {}
    for case in cases:
        if case.id in seen:
            problems.add(case.line, f"id {case.id!r} again (first on line {seen[case.id]})")
        seen.setdefault(case.id, case.line)
    if not cases and not problems.found:
        problems.add(0, "no cases")
    if len(cases) > MAX_CASES:
        problems.add(cases[MAX_CASES].line, f"more than {MAX_CASES} cases")
    problems.raise_any(name)
    text = json.dumps([case.to_dict() for case in cases], sort_keys=True, default=str)
    return Dataset(name, tuple(cases), hashlib.sha256(text.encode()).hexdigest())


def from_items(items: Sequence[Any], name: str = "inline") -> Dataset:
    """A dataset given as a list of case objects (a tool call's `dataset` array)."""
    problems = _Problems()
    cases = [c for i, item in enumerate(items, 1) if (c := _case(item, i, i, problems)) is not None]
    return _finish(name, cases, problems)


def from_jsonl(text: str, name: str = "inline") -> Dataset:
    problems = _Problems()
    cases: list[Case] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(number, f"not JSON: {exc.msg} at column {exc.colno}")
            continue
        if (case := _case(item, number, len(cases) + 1, problems)) is not None:
            cases.append(case)
    return _finish(name, cases, problems)


def _cell(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _put(target: dict[str, Any], path: list[str], value: Any) -> bool:
    """Set target[a][b]... = value; False when a part is already a value, not an object."""
    for part in path[:-1]:
        inner = target.setdefault(part, {})
        if not isinstance(inner, dict):
            return False
        target = inner
    target[path[-1]] = value
    return True


def from_csv(text: str, name: str = "inline") -> Dataset:
    problems = _Problems()
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        problems.add(1, "no header row")
        problems.raise_any(name)
        return Dataset(name, (), "")  # not reached
    columns: list[tuple[str, list[str]]] = []  # (where: id/inputs/expected, path)
    for column in header:
        column = column.strip()
        where, _, rest = column.partition(".")
        if column == "id":
            columns.append(("id", []))
        elif not rest:
            columns.append(("inputs", [column]) if column else ("", []))
        elif where in ("inputs", "expected", "metadata") and all(rest.split(".")):
            columns.append((where, rest.split(".")))
        else:
            problems.add(1, f"column {column!r}: name columns id, inputs.NAME, expected.NAME or metadata.NAME")
    problems.raise_any(name)
    cases: list[Case] = []
    for row in reader:
        number = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(columns):
            problems.add(number, f"{len(row)} cells for {len(columns)} columns")
            continue
        item: dict[str, Any] = {"inputs": {}, "expected": {}, "metadata": {}}
        for (where, path), cell in zip(columns, row, strict=False):
            if cell == "" or not where:
                continue
            if where == "id":
                item["id"] = cell
            elif not _put(item[where], path, _cell(cell)):
                problems.add(number, f"{where}.{'.'.join(path)}: its parent column already holds a value")
        if (case := _case(item, number, len(cases) + 1, problems)) is not None:
            cases.append(case)
    return _finish(name, cases, problems)


def guess_format(text: str, name: str = "") -> Format:
    """`csv` for a .csv name or text whose first line is not a JSON object; else `jsonl`."""
    if name.lower().endswith(".csv"):
        return "csv"
    if name.lower().endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    first = next((line for line in text.splitlines() if line.strip()), "")
    return "jsonl" if first.lstrip().startswith("{") else "csv"


def load_dataset(source: str | Sequence[Any], *, format: Format | None = None, name: str = "inline") -> Dataset:
    """Cases from JSONL or CSV text (`format`, or guessed) or a list of case objects; raises
    IceError(invalid_dataset) naming every bad line (up to MAX_REPORTED)."""
    if not isinstance(source, str):
        return from_items(source, name)
    if len(source.encode()) > MAX_DATASET_BYTES:
        raise IceError(f"dataset {name}: larger than {MAX_DATASET_BYTES // (1024 * 1024)} MB", code="invalid_dataset")
    kind = format or guess_format(source, name)
    return from_csv(source, name) if kind == "csv" else from_jsonl(source, name)
