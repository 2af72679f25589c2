"""Scripted drafts for the drafting tests: what the LLM mock (aimock) answers, as fixtures written at test time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GOAL = "GOAL-REPAIR: read the sales CSV at sales.csv and count its rows"
HOPELESS = "GOAL-HOPELESS: teleport the report to the moon"

FIRST = '''Here is a first draft:
```yaml
name: count_rows
description: Read a sales CSV and count its rows.
inputs:
  type: object
  properties:
    path: {type: string, default: sales.csv}
    recipient: {type: string, default: <PLACEHOLDER: who reads the count>}
outputs:
  rows: "{{ count.result }}"
nodes:
  - id: read
    type: tool
    tool_name: csv_read   # TODO: check the delimiter
    tool_args: {path: "{{ inputs.pth }}"}
  - id: count
    type: code
    inputs: {rows: "{{ read.rows }}"}
    code: return len(inputs['rows'])
```'''

REPAIRED = '''```yaml
name: count_rows
description: Read a sales CSV and count its rows.
inputs:
  type: object
  properties:
    path: {type: string, default: sales.csv}
    recipient: {type: string, default: <PLACEHOLDER: who reads the count>}
outputs:
  rows: "{{ count.result }}"
nodes:
  - id: read
    type: tool
    tool_name: csv_reader   # TODO: check the delimiter
    tool_args: {path: "{{ inputs.path }}"}
  - id: count
    type: code
    inputs: {rows: "{{ read.rows }}"}
    code: return len(inputs['rows'])
assumptions:
  missing_tools: [a mailer for the recipient]
```'''

NEVER = '''```yaml
name: moon
nodes:
  - id: go
    type: tool
    tool_name: teleport
    tool_args: {to: moon}
```'''


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def fixtures() -> list[dict[str, Any]]:
    return [
        {"match": {"userMessage": "GOAL-REPAIR", "turnIndex": 0},
         "response": {"content": FIRST, "usage": usage(1500, 200)}},
        {"match": {"userMessage": "no tool named 'csv_read'", "turnIndex": 1},
         "response": {"content": REPAIRED, "usage": usage(1900, 180)}},
        # The hopeless goal's answer, and the same answer to every repair message about it.
        {"match": {"userMessage": "teleport"}, "response": {"content": NEVER, "usage": usage(1400, 60)}},
    ]


def write_fixtures(folder: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    path = folder / "aimock.json"
    path.write_text(json.dumps({"fixtures": [*fixtures(), *(extra or [])]}), encoding="utf-8")
    return path
