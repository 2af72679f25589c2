"""The spans of a Temporal run no activity makes: the nodes its workflow runs itself (conditions, containers,
`human` nodes), made by the worker that journals their end, since the workflow is replayed and never emits."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from ice_mcp.observability import tracing
from ice_mcp.store.events import Event
from ice_mcp.store.vocabulary import EventType

_NODE_OUTCOMES = frozenset({EventType.NODE_SUCCEEDED, EventType.NODE_FAILED})  # the events that end a span
_INDEX = re.compile(r"\[\d+\]$")  # a loop item's or a parallel branch's label: `fan[0]`


def parent_span(traceparent: str, node_path: str) -> str:
    """The span id the node at `node_path` hangs under: the run's (in `traceparent`) for a top-level node, else
    its container's (first attempt: a container's own retries are not told to the nodes inside it)."""
    if "." not in node_path:
        return tracing.parent_span_of(traceparent)
    container = _INDEX.sub("", node_path.rpartition(".")[0])
    return tracing.node_span_id(parent_span(traceparent, container), container, 1)


def trace_workflow_nodes(traceparent: str | None, events: Iterable[Event], activity_types: Collection[str]) -> None:
    """A span for each node the workflow ran itself that this journal batch ends (not one reused by a retry, nor
    one of `activity_types`, whose activities made theirs)."""
    if not tracing.ENABLED or traceparent is None:
        return
    for event in events:
        if event.type not in _NODE_OUTCOMES or event.node_id is None:
            continue
        data = event.data
        node_type = str(data.get("type"))
        if node_type in activity_types or "reused_from" in data:
            continue
        attempt = event.attempt or 1
        started = event.ts - float(data.get("duration_ms") or 0.0) / 1000
        error = data.get("error") if event.type == EventType.NODE_FAILED else None
        parent = parent_span(traceparent, event.node_id)
        tracing.finished_node_span(tracing.traceparent_of(traceparent, parent),
                                   tracing.node_span_id(parent, event.node_id, attempt), event.node_id,
                                   node_type, attempt, started, event.ts, error or None)
