"""The evaluation desk: runs a workflow over a dataset's cases, scores each run, and keeps the evaluation.

Each case x repetition is an ordinary run of the target (journaled, traced, in /ui), started with the trigger
`{"kind": "eval_case", "eval_id", "case", "repetition"}`; an llm_judge's verdict is a run too (`eval_judge`).
The evaluation itself is kept as a run record of the synthetic workflow `eval:<target>` with the trigger
`{"kind": "eval"}`: its inputs say what was evaluated, its outputs are the report (summary and per-case table),
its cost is that of every run it made, and it ends `failed` (code `cases_failed`) when an attempt failed. So
`run_list --trigger eval` lists evaluations, retention prunes them with the runs, and the trace of the
evaluation holds its cases' runs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.desks import RunLookups, RunStarter
from ice_mcp.errors import IceError
from ice_mcp.evals.dataset import Case, Dataset
from ice_mcp.evals.limits import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT_SECONDS, MAX_REPETITIONS
from ice_mcp.evals.scorers import JUDGE_SCHEMA, JUDGE_SYSTEM, Score, Scorer, Verdict
from ice_mcp.evals.stats import mean_over_cases, spread
from ice_mcp.observability.tracing import begin_run, continuing, end_run
from ice_mcp.run_handles import new_run_id
from ice_mcp.store.records import RunRecord, iso

if TYPE_CHECKING:
    from ice_mcp.core.plan import Plan
    from ice_mcp.store.base import RunStorage

EVAL_TRIGGER = "eval"  # the evaluation's own record
CASE_TRIGGER = "eval_case"  # a case's run
JUDGE_TRIGGER = "eval_judge"  # an llm_judge's run
EVAL_PREFIX = "eval:"  # the evaluation record's workflow: eval:<target>
MAX_ATTEMPTS = 10_000
MAX_OUTPUT_CHARS = 4_000  # an attempt's outputs kept in the report beyond this are cut (its run has them whole)


class EvalHost(RunStarter, RunLookups, Protocol):
    """What the desk asks of the orchestrator: start runs and read them, compile blueprints, its run store."""

    @property
    def store(self) -> RunStorage | None: ...
    def compile(self, source: Any) -> Plan: ...
    def workflow_plan(self, name: str) -> Plan: ...
    def runs_page(self, *, status: str | None = None, workflow: str | None = None, trigger: str | None = None,
                  limit: int = 50, cursor: str | None = None) -> tuple[list[dict[str, Any]], str | None]: ...


@dataclass(frozen=True, slots=True)
class EvalTarget:
    """What an evaluation runs: a plan, and how the report names it."""

    plan: Plan
    label: str  # csv_report, csv_report@v2, or the inline blueprint's name
    described: dict[str, Any]  # {"workflow": name, "version": n} or {"blueprint": name}


@dataclass(slots=True)
class Attempt:
    """One run of one case, and its scores."""

    repetition: int
    run_id: str | None
    status: str
    outputs: Any
    error: dict[str, Any] | None
    scores: list[Score]
    cost_usd: float
    duration_ms: float | None

    @property
    def passed(self) -> bool:
        return self.status == "succeeded" and all(score.passed for score in self.scores)

    def to_dict(self) -> dict[str, Any]:
        return {"repetition": self.repetition, "run_id": self.run_id, "status": self.status, "passed": self.passed,
                "outputs": _kept(self.outputs), "error": self.error, "scores": [s.to_dict() for s in self.scores],
                "cost_usd": round(self.cost_usd, 8),
                "duration_ms": None if self.duration_ms is None else round(self.duration_ms, 3)}


def _kept(outputs: Any) -> Any:
    text = json.dumps(outputs, default=str)
    return outputs if len(text) <= MAX_OUTPUT_CHARS else {"truncated": True, "preview": text[:MAX_OUTPUT_CHARS]}


def case_row(case: Case, attempts: list[Attempt]) -> dict[str, Any]:
    passes = sum(attempt.passed for attempt in attempts)
    verdict = "passed" if passes == len(attempts) else "failed" if passes == 0 else "flaky"
    failing = next((a for a in attempts if not a.passed), None)
    return {**case.to_dict(), "verdict": verdict, "passed": verdict == "passed", "passes": passes,
            "attempts": len(attempts), "pass_rate": round(passes / len(attempts), 4) if attempts else 0.0,
            "reason": None if failing is None else _reason(failing),
            "runs": [attempt.to_dict() for attempt in attempts]}


def _reason(attempt: Attempt) -> str:
    if attempt.status != "succeeded":
        error = attempt.error or {}
        return f"run {attempt.status}: {error.get('message') or error.get('code') or ''}".rstrip(": ")
    return "; ".join(f"{s.scorer}: {s.reason}" for s in attempt.scores if not s.passed)


VERDICT_ORDER = {"failed": 0, "flaky": 1, "passed": 2}


def summarise(rows: Sequence[dict[str, Any]], repetitions: int) -> dict[str, Any]:
    """The evaluation's figures from its case rows: pass rate over attempts, cases passed in every attempt,
    pass@k and pass^k for k = 1..repetitions, and the runs' cost and latency percentiles."""
    attempts = [run for row in rows for run in row["runs"]]
    counts = [(row["attempts"], row["passes"]) for row in rows]
    ks = range(1, repetitions + 1)
    passed = sum(run["passed"] for run in attempts)
    return {
        "cases": len(rows), "attempts": len(attempts), "passed_attempts": passed,
        "pass_rate": round(passed / len(attempts), 4) if attempts else 0.0,
        "cases_passed": sum(row["verdict"] == "passed" for row in rows),
        "cases_failed": sum(row["verdict"] == "failed" for row in rows),
        "cases_flaky": sum(row["verdict"] == "flaky" for row in rows),
        "runs_not_succeeded": sum(run["status"] != "succeeded" for run in attempts),
        "pass_at_k": {str(k): _round(mean_over_cases(counts, k, "at")) for k in ks},
        "pass_hat_k": {str(k): _round(mean_over_cases(counts, k, "hat")) for k in ks},
        "cost_usd": spread([run["cost_usd"] for run in attempts], 8),
        "latency_ms": spread([run["duration_ms"] for run in attempts if run["duration_ms"] is not None], 3),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class Evals:
    """Evaluations of one orchestrator: run one, show one, list them."""

    def __init__(self, host: EvalHost) -> None:
        self._host = host
        self._judges: dict[tuple[str, str | None], Plan] = {}

    # -- what is evaluated ---------------------------------------------------------------------------

    def target(self, *, workflow: str | None = None, version: int | None = None,
               blueprint: Mapping[str, Any] | None = None) -> EvalTarget:
        """A registered workflow (its current version, or a version the store keeps), or a blueprint."""
        if (workflow is None) == (blueprint is None):
            raise IceError("give exactly one of workflow or blueprint", code="invalid_arguments")
        if blueprint is not None:
            plan = self._host.compile(dict(blueprint))
            return EvalTarget(plan, plan.name, {"blueprint": plan.name})
        assert workflow is not None
        if version is None:
            plan = self._host.workflow_plan(workflow)  # UnknownName (unknown_workflow) with a suggestion
            label = workflow if plan.version is None else f"{workflow}@v{plan.version}"
            return EvalTarget(plan, label, {"workflow": workflow, "version": plan.version})
        store = self._host.store
        versions = store.blueprint_versions(workflow) if store is not None else []
        stored = next((v for v in versions if v.version == version), None)
        if stored is None:
            kept = ", ".join(f"v{v.version}" for v in versions) or "none"
            raise IceError(f"{workflow} has no version {version} in the run store (kept: {kept})",
                           code="unknown_version", details={"workflow": workflow, "versions": [v.version for v in versions]})
        plan = self._host.compile(stored.source)
        plan.version = stored.version
        return EvalTarget(plan, f"{workflow}@v{version}", {"workflow": workflow, "version": version})

    # -- running ----------------------------------------------------------------------------------------

    async def run(self, target: EvalTarget, dataset: Dataset, scorers: Sequence[Scorer], *, repetitions: int = 1,
                  concurrency: int = DEFAULT_CONCURRENCY, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
                  caller: str | None = None) -> dict[str, Any]:
        """Run every case `repetitions` times (at most `concurrency` runs at once), score each run, keep the
        evaluation as a run record and answer its report."""
        if not 1 <= repetitions <= MAX_REPETITIONS:
            raise IceError(f"repetitions: 1 to {MAX_REPETITIONS}", code="invalid_arguments")
        if len(dataset.cases) * repetitions > MAX_ATTEMPTS:
            raise IceError(f"{len(dataset.cases)} cases x {repetitions} repetitions is more than {MAX_ATTEMPTS} runs",
                           code="invalid_arguments")
        record = RunRecord(run_id=new_run_id(), workflow=EVAL_PREFIX + target.label, started_at=time.time(),
                           inputs={"target": target.described, "dataset": dataset.describe(),
                                   "scorers": [s.describe() for s in scorers], "repetitions": repetitions},
                           principal=caller)
        record.trigger = {"kind": EVAL_TRIGGER, "eval_id": record.run_id}  # as its cases' runs name it
        begin_run(record)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def attempt(case: Case, repetition: int) -> Attempt:
            async with gate:
                return await self._attempt(target, case, repetition, scorers, record, timeout_seconds, caller)

        with continuing(record.traceparent):  # the cases' runs go in the evaluation's trace
            tasks = [[asyncio.ensure_future(attempt(case, r)) for r in range(1, repetitions + 1)]
                     for case in dataset.cases]
            try:
                await asyncio.gather(*(t for row in tasks for t in row))
            except BaseException:
                for task in (t for row in tasks for t in row):
                    task.cancel()
                raise
        rows = [case_row(case, [t.result() for t in row]) for case, row in zip(dataset.cases, tasks, strict=True)]
        rows.sort(key=lambda row: VERDICT_ORDER[row["verdict"]])  # failing first; the dataset's order within
        summary = summarise(rows, repetitions)
        record.finished_at = time.time()
        record.duration_ms = (record.finished_at - (record.started_at or record.finished_at)) * 1000
        record.cost_usd = round(sum(run["cost_usd"] for row in rows for run in row["runs"]), 8)
        record.status = "succeeded" if summary["passed_attempts"] == summary["attempts"] else "failed"
        if record.status == "failed":
            failing = summary["cases_failed"] + summary["cases_flaky"]
            record.error = {"code": "cases_failed", "message": f"{failing} of {summary['cases']} cases failed an "
                            f"attempt (pass rate {summary['pass_rate']:.0%})"}
        report = {"eval_id": record.run_id, "target": {**target.described, "label": target.label},
                  "dataset": dataset.describe(), "scorers": [s.describe() for s in scorers],
                  "repetitions": repetitions, "status": record.status, "summary": summary, "cases": rows}
        record.outputs = report
        end_run(record)
        self._keep(record)
        return {**report, "started_at": iso(record.started_at), "duration_ms": round(record.duration_ms, 3)}

    def _keep(self, record: RunRecord) -> None:
        store = self._host.store
        if store is not None:
            store.save(record)
            store.flush()

    async def _attempt(self, target: EvalTarget, case: Case, repetition: int, scorers: Sequence[Scorer],
                       evaluation: RunRecord, timeout: float, caller: str | None) -> Attempt:
        trigger = {"kind": CASE_TRIGGER, "eval_id": evaluation.run_id, "case": case.id, "repetition": repetition}
        try:
            handle = await self._host.start(target.plan, case.inputs, caller=caller, trigger=trigger)
        except IceError as exc:  # the case's inputs do not fit the workflow, a limit turned it away...
            return Attempt(repetition, None, "not_started", None, exc.as_dict(), [], 0.0, None)
        run = await handle.wait(timeout)
        if not run.done:
            handle.cancel()
            run = await handle.wait(10.0)
            error = {"code": "eval_timeout", "message": f"the run did not end within {timeout:g} s"}
            return Attempt(repetition, run.run_id, "timed_out", run.outputs, error, [], run.cost_usd, run.duration_ms)
        scores: list[Score] = []
        if run.status == "succeeded":
            outputs = run.outputs if isinstance(run.outputs, Mapping) else {"value": run.outputs}

            async def judge(prompt: str, model: str, provider: str | None) -> Verdict:
                return await self._judge(prompt, model, provider, trigger, caller)

            for scorer in scorers:
                try:
                    scores.append(await scorer.score(case, outputs, judge))
                except IceError as exc:  # the judge's run failed: the attempt fails, saying why
                    scores.append(Score(scorer.label, False, 0.0, f"{exc.code}: {exc.message}"))
        cost = run.cost_usd + sum(score.cost_usd for score in scores)
        return Attempt(repetition, run.run_id, run.status, run.outputs, run.error, scores, cost, run.duration_ms)

    async def _judge(self, prompt: str, model: str, provider: str | None, case_trigger: Mapping[str, Any],
                     caller: str | None) -> Verdict:
        """An llm_judge's verdict, from a run of a one-node `llm` workflow (so it is journaled and priced)."""
        plan = self._judges.get((model, provider))
        if plan is None:
            node: dict[str, Any] = {"id": "judge", "type": "llm", "model": model, "system": JUDGE_SYSTEM,
                                    "prompt": "{{ inputs.prompt }}", "output_schema": JUDGE_SCHEMA, "temperature": 0}
            if provider is not None:
                node["provider"] = provider
            plan = self._judges[(model, provider)] = self._host.compile({
                "name": JUDGE_TRIGGER, "description": "An evaluation's LLM judge: scores one output against a rubric.",
                "inputs": {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
                "nodes": [node]})
        handle = await self._host.start(plan, {"prompt": prompt}, caller=caller,
                                        trigger={**case_trigger, "kind": JUDGE_TRIGGER})
        run = await handle.wait()
        judged = run.nodes.get("judge")
        answer = judged.output if judged is not None else None
        value = answer.get("json") if isinstance(answer, Mapping) else None
        if run.status != "succeeded" or not isinstance(value, Mapping):
            error = run.error or {}
            raise IceError(f"the judge's run {run.run_id} {run.status}: {error.get('message', '')}".rstrip(": "),
                           code="judge_failed", details={"run_id": run.run_id})
        return Verdict(float(value["score"]), str(value["reason"]), run.run_id, run.cost_usd)

    # -- reading ---------------------------------------------------------------------------------------

    def show(self, eval_id: str) -> dict[str, Any]:
        """A kept evaluation's report; raises IceError(unknown_eval)."""
        record = self._host.get_run(eval_id)
        if record is None or (record.trigger or {}).get("kind") != EVAL_TRIGGER or not isinstance(record.outputs, dict):
            where = "" if self._host.store is not None else " (this server keeps no run store)"
            raise IceError(f"unknown evaluation {eval_id!r}{where}", code="unknown_eval")
        return {**record.outputs, "started_at": iso(record.started_at),
                "duration_ms": None if record.duration_ms is None else round(record.duration_ms, 3)}

    def list(self, *, target: str | None = None, limit: int = 20) -> dict[str, Any]:
        """The newest evaluations (of one target label), each with its pass rate."""
        rows, _ = self._host.runs_page(trigger=EVAL_TRIGGER, limit=max(1, min(limit, 200)),
                                       workflow=None if target is None else EVAL_PREFIX + target)
        evals = []
        for row in rows:
            record = self._host.get_run(row["run_id"])
            report = record.outputs if record is not None and isinstance(record.outputs, dict) else {}
            summary = report.get("summary") or {}
            evals.append({"eval_id": row["run_id"], "target": row["workflow"].removeprefix(EVAL_PREFIX),
                          "status": row["status"], "started_at": row.get("started_at"),
                          "duration_ms": row.get("duration_ms"), "cost_usd": row.get("cost_usd", 0.0),
                          "dataset": report.get("dataset"), "repetitions": report.get("repetitions"),
                          "pass_rate": summary.get("pass_rate"), "cases": summary.get("cases"),
                          "cases_failed": summary.get("cases_failed")})
        return {"evals": evals}
