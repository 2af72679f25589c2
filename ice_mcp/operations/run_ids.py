"""Short run ids: a run found by a unique prefix of its id, as run lists show them (the first 12 characters)."""

from __future__ import annotations

from typing import Any

from ice_mcp.errors import IceError

MIN_PREFIX = 4  # shorter than this matches too much to mean one run
SHOWN = 10  # candidates an ambiguous prefix lists


def resolve_run_id(orc: Any, text: str) -> str:
    """The id of the run `text` names: itself when a run has that id, else the one run (that the caller may
    see) whose id starts with it. Raises IceError `unknown_run`, or `ambiguous_run_id` listing the candidates."""
    if orc.get_run(text) is not None:
        return text
    candidates = run_ids_with_prefix(orc, text) if len(text) >= MIN_PREFIX else []
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise IceError(f"unknown run {text!r}", code="unknown_run")
    listed = ", ".join(candidates[:SHOWN]) + (", ..." if len(candidates) > SHOWN else "")
    raise IceError(f"run id {text!r} is the start of {'more than ' if len(candidates) > SHOWN else ''}"
                   f"{min(len(candidates), SHOWN)} runs' ids ({listed}): give more of it",
                   code="ambiguous_run_id", details={"prefix": text, "candidates": candidates[:SHOWN]})


def run_ids_with_prefix(orc: Any, prefix: str) -> list[str]:
    """Ids starting with `prefix` of the runs the caller may see: from the store (every run is kept there before
    its id is handed out), or this process's runs when it keeps none."""
    if orc.store is not None:
        found = orc.store.run_ids(prefix, SHOWN + 1)
    else:
        found = [record.run_id for record in orc.list_runs(limit=10_000) if record.run_id.startswith(prefix)]
    # Another principal's run is an unknown one (OAuth): get_run answers as the caller.
    return sorted(run_id for run_id in found if orc.get_run(run_id) is not None)
