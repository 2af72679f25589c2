"""Validation and compilation entry points: a blueprint in, a report and (when clean) a plan out."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ice_mcp.blueprint.issues import ValidationIssue, ValidationReport
from ice_mcp.blueprint.limits import BlueprintLimits
from ice_mcp.blueprint.loading import Unparsed, parse_blueprint
from ice_mcp.blueprint.models import Blueprint
from ice_mcp.core.compiler import Compiler
from ice_mcp.core.executor import NodeType, node_models
from ice_mcp.core.plan import Plan
from ice_mcp.errors import BlueprintInvalid

if TYPE_CHECKING:
    from ice_mcp.services import Services

RESERVED_IDS = frozenset({"inputs", "global", "trigger", "item", "index", "iteration", "previous"})
Source = Blueprint | str | Path | Mapping[str, Any]


def check_blueprint(source: Source, services: Services, node_types: Mapping[str, NodeType],
                    unavailable: Mapping[str, str] | None = None) -> tuple[ValidationReport, Plan | None]:
    """Every problem at once, plus the cost estimate; never raises."""
    try:
        return _check(source, services, node_types, unavailable)
    except Exception as exc:  # validation must never raise past its caller
        issue = ValidationIssue(code="internal_error", message=f"validation failed unexpectedly: {type(exc).__name__}: {exc}")
        return ValidationReport(ok=False, errors=[issue]), None


def _check(source: Source, services: Services, node_types: Mapping[str, NodeType],
           unavailable: Mapping[str, str] | None) -> tuple[ValidationReport, Plan | None]:
    parsed = parse_blueprint(source, BlueprintLimits.from_settings(services.settings), node_models(node_types.values()))
    compiler = Compiler(services, node_types, unavailable)
    compiler.issues.extend(parsed.issues)
    raw = parsed.raw
    _check_reserved_ids(parsed.nodes, compiler)
    bp = parsed.blueprint
    plan, estimate = compiler.compile(
        bp,
        parsed.nodes,
        inputs_schema=bp.inputs if bp else raw.get("inputs", {"type": "object"}),
        outputs=bp.outputs if bp else raw.get("outputs"),
        budget_usd=bp.budget_usd if bp else _number(raw.get("budget_usd")),
        max_parallel=bp.max_parallel if bp else 16,
    )
    report = ValidationReport(ok=not compiler.issues, errors=compiler.issues, warnings=compiler.warnings,
                              estimate=estimate)
    return report, plan


def _check_reserved_ids(nodes: list[Any], compiler: Compiler) -> None:
    """A `reserved_id` issue for each node named like a run name or variable, sub-graphs' nodes included
    (each node, then the nodes inside it)."""
    for node in nodes:
        if node.id in RESERVED_IDS and not isinstance(node, Unparsed):
            compiler.issue("reserved_id", f"node id {node.id!r} is a reserved name", node.id, "id")
        if not getattr(node, "subgraph_fields", ()):
            continue  # most nodes have no sub-graph
        for _, body in node.inner_graphs():
            _check_reserved_ids(body, compiler)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def compile_plan(source: Source, services: Services, node_types: Mapping[str, NodeType],
                 unavailable: Mapping[str, str] | None = None) -> Plan:
    """The plan of a valid blueprint; raises BlueprintInvalid with every problem."""
    report, plan = check_blueprint(source, services, node_types, unavailable)
    if plan is None:
        raise BlueprintInvalid(report)
    return plan
