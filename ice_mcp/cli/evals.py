"""`ice-mcp eval` and `ice-mcp evals compare`: a dataset file and scorers given at the terminal, the results as a
table (failing cases first) or as JSON. Imports only the standard library when it loads, as `main` does."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ice_mcp.errors import IceError

if TYPE_CHECKING:
    from ice_mcp.orchestrator import Orchestrator

# How a command builds its orchestrator from its arguments (cli.main's `make_orchestrator`, handed in).
MakeOrchestrator = Callable[[argparse.Namespace], Awaitable["Orchestrator"]]
WAIT_FOREVER = 365 * 24 * 3600.0  # an evaluation's runs are waited for to their end (each has --timeout)
VERSIONED = re.compile(r"^(?P<name>[a-z][a-z0-9_]*)@v?(?P<version>\d+)$")
SCORER_HELP = ('a scorer: KIND[:FIELD[:ARG]] (exact:answer, contains:verdict:Within, regex:verdict:^Above, '
               'number:total:0.01, json_schema needs JSON) or a JSON object {"kind": ...}; repeatable '
               '(default exact: every field a case expects)')


def _dataset_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument("--dataset", required=required, metavar="FILE", help="the cases: JSONL or CSV (by extension)")
    parser.add_argument("--format", choices=["jsonl", "csv"], help="the dataset's format (default: from its name)")
    parser.add_argument("--scorer", action="append", default=[], help=SCORER_HELP)
    parser.add_argument("--repetitions", "-n", type=int, default=1, metavar="N",
                        help="runs per case (pass@k and pass^k for k up to N; default 1)")
    parser.add_argument("--concurrency", type=int, default=4, metavar="N", help="runs at once (default 4)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="a run not ended by then fails (default 600)")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")


def eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET",
                        help="a registered workflow (NAME, or NAME@vN for a version the run store keeps; also the "
                             "bundled templates) or a blueprint file")
    _dataset_arguments(parser)


def compare_arguments(parser: argparse.ArgumentParser) -> None:
    for side in ("baseline", "candidate"):
        parser.add_argument(side, metavar=side.upper(),
                            help="NAME, NAME@vN, a blueprint file, or a kept evaluation's id")
    _dataset_arguments(parser, required=False)  # two kept evaluations need no dataset


def run_eval(args: argparse.Namespace, make_orchestrator: MakeOrchestrator) -> int:
    return asyncio.run(_main(args, make_orchestrator, compare=False))


def run_compare(args: argparse.Namespace, make_orchestrator: MakeOrchestrator) -> int:
    return asyncio.run(_main(args, make_orchestrator, compare=True))


def _names_a_file(text: str) -> bool:
    """A workflow name is one word: a slash or a blueprint's extension means a file was meant."""
    return "/" in text or os.sep in text or text.endswith((".json", ".yaml", ".yml"))


def _no_wait_limit(requested: Any) -> float:
    return WAIT_FOREVER


def _side(orchestrator: Orchestrator, text: str, *, evals_allowed: bool) -> dict[str, Any]:
    """What a TARGET names: a blueprint file, NAME@vN, a workflow (registered, or a bundled template), or
    (comparing) a kept evaluation."""
    from ice_mcp.bundled import bundled_dir

    path = Path(text)
    if text not in orchestrator.registry.workflows and path.is_file():
        return {"blueprint": path.read_text(encoding="utf-8")}
    if _names_a_file(text):
        raise IceError(f"file not found: {text} (looked for {path.resolve()})", code="not_found")
    versioned = VERSIONED.match(text)
    name = versioned["name"] if versioned else text
    if name not in orchestrator.registry.workflows:
        orchestrator.load_blueprints(bundled_dir("blueprints"))
    if name in orchestrator.registry.workflows:
        return {"workflow": name, **({"version": int(versioned["version"])} if versioned else {})}
    if evals_allowed and re.fullmatch(r"[0-9a-f]{4,32}", text):
        return {"eval_id": text}
    raise IceError(f"{text!r} is neither a blueprint file nor a workflow (registered, from --blueprints, or "
                   "bundled)", code="unknown_workflow")


def _scorers(texts: list[str]) -> list[dict[str, Any]] | None:
    from ice_mcp.evals import scorer_from_text

    return [scorer_from_text(text) for text in texts] or None


async def _main(args: argparse.Namespace, make_orchestrator: MakeOrchestrator, *, compare: bool) -> int:
    from ice_mcp.operations.builtins import BY_NAME
    from ice_mcp.operations.tool_table import BuiltinCall, settle

    params: dict[str, Any] = {"repetitions": args.repetitions, "concurrency": args.concurrency}
    if args.dataset is not None:
        dataset = Path(args.dataset)
        if not dataset.is_file():
            raise IceError(f"dataset not found: {args.dataset} (looked for {dataset.resolve()})", code="not_found")
        params.update(dataset=dataset.read_text(encoding="utf-8"), dataset_name=dataset.name,
                      dataset_format=args.format or ("csv" if dataset.suffix.lower() == ".csv" else "jsonl"))
    if args.timeout is not None:
        params["timeout_seconds"] = args.timeout
    if (scorers := _scorers(args.scorer)) is not None:
        params["scorers"] = scorers
    orchestrator = await make_orchestrator(args)
    try:
        if compare:
            params["baseline"] = _side(orchestrator, args.baseline, evals_allowed=True)
            params["candidate"] = _side(orchestrator, args.candidate, evals_allowed=True)
        else:
            params.update(_side(orchestrator, args.target, evals_allowed=False))
        tool = BY_NAME["eval_compare" if compare else "eval_run"]
        call = BuiltinCall(orchestrator, params, None, None, _no_wait_limit, "cli:" + " ".join(tool.cli or ()))
        try:
            data = await settle(await tool.handler(call), _no_wait_limit(None))
        except IceError as exc:
            _print_error(exc)
            return 1
    finally:
        await orchestrator.aclose()
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print(format_comparison(data) if compare else format_report(data))
    if compare:
        return 1 if data["pass_to_fail"] else 0
    return 0 if data["status"] == "succeeded" else 1


def _print_error(exc: IceError) -> None:
    print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
    for problem in exc.details.get("errors") or []:
        where = f"line {problem['line']}: " if isinstance(problem, dict) and "line" in problem else ""
        print(f"  {where}{problem['message'] if isinstance(problem, dict) else problem}", file=sys.stderr)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{value:.0%}"


def _ms(value: Any) -> str:
    return "—" if value is None else f"{value:.0f} ms"


def format_report(report: dict[str, Any]) -> str:
    """The report as a terminal reads it: what ran, the figures, then one line per case, failing first."""
    summary = report["summary"]
    reps = report.get("repetitions") or 1
    lines = [f"eval {report['eval_id'][:12]}  {report['target']['label']} on {report['dataset']['name']} "
             f"({summary['cases']} cases x {reps})  {report['status'].upper()}",
             f"  pass rate {_pct(summary['pass_rate'])} ({summary['passed_attempts']}/{summary['attempts']} runs); "
             f"cases passed {summary['cases_passed']}, failed {summary['cases_failed']}, flaky {summary['cases_flaky']}",
             "  " + "  ".join(f"pass@{k} {_pct(v)}" for k, v in summary["pass_at_k"].items())
             + "  " + "  ".join(f"pass^{k} {_pct(v)}" for k, v in summary["pass_hat_k"].items()),
             f"  latency p50 {_ms(summary['latency_ms']['p50'])}, p95 {_ms(summary['latency_ms']['p95'])}; "
             f"cost ${summary['cost_usd']['total'] or 0:.6f} (p50 ${summary['cost_usd']['p50'] or 0:.6f} a run)",
             ""]
    width = max((len(str(row["id"])) for row in report["cases"]), default=2)
    for row in report["cases"]:
        mark = {"passed": "PASS ", "failed": "FAIL ", "flaky": "FLAKY"}[row["verdict"]]
        run_id = (row["runs"][0].get("run_id") or "")[:12] if row["runs"] else ""
        reason = f"  {row['reason']}" if row.get("reason") else ""
        lines.append(f"  {mark} {str(row['id']).ljust(width)}  {row['passes']}/{row['attempts']}  run {run_id}{reason}")
    return "\n".join(lines)


def format_comparison(data: dict[str, Any]) -> str:
    before, after = data["baseline"], data["candidate"]
    delta = data["pass_rate_delta"]
    lines = [f"{before['target']} → {after['target']}: {data['verdict']} "
             f"(pass rate {_pct(before['pass_rate'])} → {_pct(after['pass_rate'])}"
             + (f", {delta:+.0%}" if delta is not None else "") + ")"]
    if not data["same_dataset"]:
        lines.append("  note: the two evaluations ran different datasets")
    for row in data["changed"]:
        lines.append(f"  {row['change']:<12} {row['id']}: {row['baseline']['verdict']} → {row['candidate']['verdict']}"
                     + (f"  ({row['candidate']['reason']})" if row["candidate"].get("reason") else ""))
    lines.append(f"  unchanged: {data['unchanged']}")
    return "\n".join(lines)
