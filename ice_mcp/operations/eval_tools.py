"""The evaluation tools: run a workflow over a dataset and score it, compare two versions, show and list.

Each is one `BuiltinTool` entry and one handler over the evaluation desk (`ice_mcp.evals.Evals`); the work is
there, here only arguments become a target, a dataset and scorers.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ice_mcp.errors import IceError
from ice_mcp.evals.limits import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_REPETITIONS,
    SCORER_KINDS,
)
from ice_mcp.operations.documents import parse_document
from ice_mcp.operations.run_ids import resolve_run_id
from ice_mcp.operations.tool_table import (
    BLUEPRINT_SCHEMA,
    READ_ONLY,
    Answer,
    BuiltinCall,
    BuiltinTool,
    Hints,
    Reply,
    obj_schema,
)

if TYPE_CHECKING:
    from ice_mcp.evals.desk import Evals, EvalTarget

DEFAULT_SCORERS: list[dict[str, Any]] = [{"kind": "exact"}]  # every field a case expects, equal

_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_SPREAD = obj_schema({"p50": _NUM_OR_NULL, "p95": _NUM_OR_NULL, "max": _NUM_OR_NULL, "total": _NUM_OR_NULL})
_BY_K = {"type": "object", "additionalProperties": _NUM_OR_NULL, "description": "by k, 1..repetitions"}
SUMMARY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "cases": {"type": "integer"}, "attempts": {"type": "integer"}, "passed_attempts": {"type": "integer"},
    "pass_rate": _NUM, "cases_passed": {"type": "integer"}, "cases_failed": {"type": "integer"},
    "cases_flaky": {"type": "integer"}, "runs_not_succeeded": {"type": "integer"},
    "pass_at_k": _BY_K, "pass_hat_k": _BY_K, "cost_usd": _SPREAD, "latency_ms": _SPREAD},
    "required": ["cases", "attempts", "passed_attempts", "pass_rate", "pass_at_k", "pass_hat_k", "cost_usd",
                 "latency_ms"]}
_CASE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "id": {"type": "string"}, "inputs": {"type": "object"}, "expected": {"type": "object"},
    "verdict": {"type": "string", "enum": ["failed", "flaky", "passed"]}, "passed": {"type": "boolean"},
    "passes": {"type": "integer"}, "attempts": {"type": "integer"}, "pass_rate": _NUM,
    "reason": {"type": ["string", "null"]},
    "runs": {"type": "array", "items": {"type": "object", "properties": {
        "repetition": {"type": "integer"}, "run_id": {"type": ["string", "null"]}, "status": {"type": "string"},
        "passed": {"type": "boolean"}, "outputs": {}, "error": {"type": ["object", "null"]},
        "scores": {"type": "array", "items": {"type": "object", "properties": {
            "scorer": {"type": "string"}, "passed": {"type": "boolean"}, "score": _NUM,
            "reason": {"type": "string"}}}},
        "cost_usd": _NUM, "duration_ms": _NUM_OR_NULL}}}},
    "required": ["id", "verdict", "passed", "passes", "attempts", "runs"]}
REPORT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "eval_id": {"type": "string"}, "status": {"type": "string", "enum": ["succeeded", "failed"]},
    "target": {"type": "object", "properties": {"label": {"type": "string"}}},
    "dataset": {"type": "object", "properties": {"name": {"type": "string"}, "cases": {"type": "integer"},
                                                 "sha256": {"type": "string"}}},
    "scorers": {"type": "array", "items": {"type": "object"}}, "repetitions": {"type": "integer"},
    "summary": SUMMARY_SCHEMA,
    "cases": {"type": "array", "items": _CASE_SCHEMA, "description": "failing cases first, then flaky, then passing"},
    "started_at": {"type": ["string", "null"]}, "duration_ms": _NUM_OR_NULL},
    "required": ["eval_id", "status", "target", "dataset", "summary", "cases"]}
_SIDE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "eval_id": {"type": ["string", "null"]}, "target": {"type": ["string", "null"]}, "pass_rate": _NUM_OR_NULL,
    "cases_passed": {"type": ["integer", "null"]}, "cost_usd": _NUM_OR_NULL, "latency_ms_p50": _NUM_OR_NULL}}
_IDS = {"type": "array", "items": {"type": "string"}}
COMPARE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "baseline": _SIDE_SCHEMA, "candidate": _SIDE_SCHEMA, "same_dataset": {"type": "boolean"},
    "pass_rate_delta": _NUM_OR_NULL, "pass_to_fail": _IDS, "fail_to_pass": _IDS, "unchanged": {"type": "integer"},
    "changed": {"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "string"},
        "change": {"type": "string", "enum": ["pass_to_fail", "worse", "better", "fail_to_pass"]}}}},
    "only_in_baseline": _IDS, "only_in_candidate": _IDS,
    "verdict": {"type": "string", "enum": ["better", "worse", "mixed", "same"]}},
    "required": ["baseline", "candidate", "pass_rate_delta", "pass_to_fail", "fail_to_pass", "changed", "verdict"]}
EVAL_LIST_SCHEMA = obj_schema({"evals": {"type": "array", "items": {"type": "object", "properties": {
    "eval_id": {"type": "string"}, "target": {"type": "string"}, "status": {"type": "string"},
    "started_at": {"type": ["string", "null"]}, "pass_rate": _NUM_OR_NULL, "cases": {"type": ["integer", "null"]},
    "cases_failed": {"type": ["integer", "null"]}, "cost_usd": _NUM_OR_NULL}}}}, ["evals"])

SCORER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "exact | contains (value) | regex (pattern) | number (tolerance, relative) | json_schema "
                   "(schema) | llm_judge (rubric, threshold, model, provider); field: a dotted output path, "
                   "compared with the same path in `expected` (none: every expected field)",
    "properties": {
        "kind": {"type": "string", "enum": list(SCORER_KINDS)}, "field": {"type": "string"}, "name": {"type": "string"},
        "value": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "pattern": {"type": "string"}, "ignore_case": {"type": "boolean"}, "strip": {"type": "boolean"},
        "tolerance": {"type": "number", "minimum": 0}, "relative": {"type": "boolean"},
        "schema": {"type": "object"}, "rubric": {"type": "string"},
        "threshold": {"type": "number", "minimum": 0, "maximum": 1},
        "model": {"type": "string"}, "provider": {"type": "string"}},
    "required": ["kind"],
    "additionalProperties": False,
}
DATASET_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "array", "items": {"type": "object"}}, {"type": "string"}],
    "description": "The cases: an array of {inputs, expected, id}, or JSONL text of them, or CSV text with "
                   "columns inputs.NAME, expected.NAME, id",
}
_RUN_PROPERTIES: dict[str, Any] = {
    "dataset": DATASET_SCHEMA,
    "dataset_format": {"type": "string", "enum": ["jsonl", "csv"], "description": "of dataset text (default: guessed)"},
    "dataset_name": {"type": "string", "description": "a name for the dataset in the results (e.g. its file)"},
    "scorers": {"type": "array", "items": SCORER_SCHEMA, "description": 'default [{"kind": "exact"}]'},
    "repetitions": {"type": "integer", "minimum": 1, "maximum": MAX_REPETITIONS,
                    "description": "runs per case (pass@k, pass^k for k up to it; default 1)"},
    "concurrency": {"type": "integer", "minimum": 1, "maximum": 32,
                    "description": f"runs at once (default {DEFAULT_CONCURRENCY})"},
    "timeout_seconds": {"type": "number", "exclusiveMinimum": 0,
                        "description": f"a run not ended by then fails its attempt (default {DEFAULT_TIMEOUT_SECONDS:g})"},
}
_TARGET_PROPERTIES: dict[str, Any] = {
    "workflow": {"type": "string", "description": "a registered workflow's name"},
    "version": {"type": "integer", "minimum": 1, "description": "a version of it the run store keeps (default current)"},
    "blueprint": BLUEPRINT_SCHEMA,
}
_SIDE_INPUT: dict[str, Any] = {**obj_schema({**_TARGET_PROPERTIES, "eval_id": {
    "type": "string", "description": "a kept evaluation (its id, or the start of it) instead of running one"}}),
    "description": "one of: {workflow, version}, {blueprint}, {eval_id}"}
# An evaluation runs whatever its target does: the hints of the most a workflow may do.
RUNS_WORKFLOWS = Hints(read_only=False, destructive=True, idempotent=False, open_world=True)


def _desk(call: BuiltinCall) -> Evals:
    from ice_mcp.evals.desk import Evals  # the desk and scorers load with the first evaluation call

    return Evals(call.orc)


def _target(desk: Evals, args: dict[str, Any]) -> EvalTarget:
    blueprint = args.get("blueprint")
    if blueprint is not None and args.get("version") is not None:
        raise IceError("version goes with workflow, not blueprint", code="invalid_arguments")
    return desk.target(workflow=args.get("workflow"), version=args.get("version"),
                       blueprint=parse_document(blueprint) if blueprint is not None else None)


async def _evaluate(call: BuiltinCall, desk: Evals, target: EvalTarget) -> dict[str, Any]:
    args = call.args
    if args.get("dataset") is None:
        raise IceError("dataset: the cases to run (required unless comparing kept evaluations)",
                       code="invalid_arguments")
    from ice_mcp.evals import load_dataset, make_scorers

    dataset = await asyncio.to_thread(load_dataset, args["dataset"], format=args.get("dataset_format"),
                                      name=args.get("dataset_name") or "inline")
    scorers = make_scorers(args.get("scorers") or DEFAULT_SCORERS)
    return await desk.run(target, dataset, scorers, repetitions=int(args.get("repetitions") or 1),
                          concurrency=int(args.get("concurrency") or DEFAULT_CONCURRENCY),
                          timeout_seconds=float(args.get("timeout_seconds") or DEFAULT_TIMEOUT_SECONDS),
                          caller=call.caller)


async def eval_run(call: BuiltinCall) -> Answer:
    desk = _desk(call)
    target = await asyncio.to_thread(_target, desk, call.args)
    return Reply(await _evaluate(call, desk, target))


def _eval_id(call: BuiltinCall, text: str) -> str:
    try:
        return resolve_run_id(call.orc, text)
    except IceError as exc:
        if exc.code == "unknown_run":
            raise IceError(f"unknown evaluation {text!r}", code="unknown_eval") from None
        raise


async def eval_compare(call: BuiltinCall) -> Answer:
    desk = _desk(call)
    reports = []
    for side in ("baseline", "candidate"):
        given = dict(call.args[side])
        if given.get("eval_id"):
            if len(given) > 1:
                raise IceError(f"{side}: eval_id goes alone", code="invalid_arguments")
            reports.append(desk.show(_eval_id(call, given["eval_id"])))
        else:
            target = await asyncio.to_thread(_target, desk, given)
            reports.append(await _evaluate(call, desk, target))
    from ice_mcp.evals.compare import compare_reports

    return Reply(compare_reports(reports[0], reports[1]))


async def eval_show(call: BuiltinCall) -> Answer:
    return Reply(_desk(call).show(_eval_id(call, call.args["eval_id"])))


async def eval_list(call: BuiltinCall) -> Answer:
    args = call.args
    return Reply(await asyncio.to_thread(_desk(call).list, target=args.get("target"), limit=int(args.get("limit") or 20)))


EVAL_TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        "eval_run", "Evaluate a workflow (registered, or a blueprint) on a dataset: each case runs as a normal run "
        "(repetitions times), its outputs are scored (exact, contains, regex, number, json_schema, llm_judge), "
        "and the answer has the pass rate, pass@k, pass^k, cost and latency percentiles and a per-case table, "
        "failing cases first. The evaluation is kept: eval_show, eval_list.",
        obj_schema({**_TARGET_PROPERTIES, **_RUN_PROPERTIES}, ["dataset"]),
        RUNS_WORKFLOWS, eval_run, scope="run", output_schema=REPORT_SCHEMA, rpc="eval.run", cli=("eval",)),
    BuiltinTool(
        "eval_compare", "Compare two versions of a workflow (or two blueprints, or two kept evaluations) on one "
        "dataset: which cases went pass→fail and fail→pass, and the pass-rate delta.",
        obj_schema({"baseline": _SIDE_INPUT, "candidate": _SIDE_INPUT, **_RUN_PROPERTIES},
                   ["baseline", "candidate"]),
        RUNS_WORKFLOWS, eval_compare, scope="run", output_schema=COMPARE_SCHEMA, rpc="eval.compare",
        cli=("evals", "compare")),
    BuiltinTool(
        "eval_show", "A kept evaluation's report: summary and per-case table, failing cases first.",
        obj_schema({"eval_id": {"type": "string", "description": "its id, or the start of it"}}, ["eval_id"]),
        READ_ONLY, eval_show, output_schema=REPORT_SCHEMA, rpc="eval.show", cli=("evals", "show")),
    BuiltinTool(
        "eval_list", "The newest kept evaluations, each with its pass rate.",
        obj_schema({"target": {"type": "string", "description": "only those of this target (name, or name@vN)"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200}}),
        READ_ONLY, eval_list, output_schema=EVAL_LIST_SCHEMA, rpc="eval.list", cli=("evals", "list")),
)
