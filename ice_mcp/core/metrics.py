"""Metrics per node type, fed from run events: count, success rate, latency, cost, tokens."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ice_mcp.store.events import Event
from ice_mcp.store.vocabulary import EventType

# Read once, not per event: an enum's class attribute costs ~0.1 µs on 3.11, and every event passes here.
_SUCCEEDED_BY_END: dict[str, bool] = {EventType.NODE_SUCCEEDED: True, EventType.NODE_FAILED: False}
_RUN_FINISHED = EventType.RUN_FINISHED


@dataclass(slots=True)
class TypeMetrics:
    count: int = 0
    succeeded: int = 0
    failed: int = 0
    latency_ms_total: float = 0.0
    latency_ms_max: float = 0.0
    cost_usd: float = 0.0
    tokens: int = 0
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=1024))

    def to_dict(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        def pct(p: float) -> float | None:
            return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3) if ordered else None
        return {
            "count": self.count,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "success_rate": round(self.succeeded / self.count, 4) if self.count else None,
            "latency_ms": {"mean": round(self.latency_ms_total / self.count, 3) if self.count else None,
                           "p50": pct(0.5), "p95": pct(0.95), "max": round(self.latency_ms_max, 3)},
            "cost_usd": self.cost_usd,
            "tokens": self.tokens,
        }


class Metrics:
    """Aggregates node outcomes by node type; keeps the last 1,024 latencies per type for percentiles."""

    def __init__(self) -> None:
        self.by_type: dict[str, TypeMetrics] = {}
        self.runs: dict[str, int] = {}

    def observe(self, event: Event) -> None:
        kind = event.type
        succeeded = _SUCCEEDED_BY_END.get(kind)
        if succeeded is None:
            if kind == _RUN_FINISHED:
                status = str(event.data.get("status"))
                self.runs[status] = self.runs.get(status, 0) + 1
            return
        data = event.data
        node_type = str(data.get("type"))
        metrics = self.by_type.get(node_type)
        if metrics is None:
            metrics = self.by_type[node_type] = TypeMetrics()
        latency = float(data.get("duration_ms", 0.0))
        metrics.count += 1
        if succeeded:
            metrics.succeeded += 1
            metrics.cost_usd += float(data.get("cost_usd", 0.0))
            metrics.tokens += int(data.get("tokens", 0))
        else:
            metrics.failed += 1
        metrics.latency_ms_total += latency
        if latency > metrics.latency_ms_max:
            metrics.latency_ms_max = latency
        metrics.latencies.append(latency)

    def snapshot(self) -> dict[str, Any]:
        return {"runs": dict(self.runs), "node_types": {k: v.to_dict() for k, v in sorted(self.by_type.items())}}
