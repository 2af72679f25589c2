"""Two evaluations' reports side by side: which cases went from passing to failing and back, and the pass-rate
delta. Cases are matched by id; a case passes when every one of its attempts passed."""

from __future__ import annotations

from typing import Any


def _side(report: dict[str, Any]) -> dict[str, Any]:
    return {"eval_id": report.get("eval_id"), "target": (report.get("target") or {}).get("label"),
            "pass_rate": (report.get("summary") or {}).get("pass_rate"),
            "cases_passed": (report.get("summary") or {}).get("cases_passed"),
            "cost_usd": ((report.get("summary") or {}).get("cost_usd") or {}).get("total"),
            "latency_ms_p50": ((report.get("summary") or {}).get("latency_ms") or {}).get("p50")}


def compare_reports(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """What changed from `baseline` to `candidate`: every case whose verdict or pass rate moved, the ids that
    went pass→fail and fail→pass, the cases only one side ran, and the pass-rate delta."""
    before = {row["id"]: row for row in baseline.get("cases") or []}
    after = {row["id"]: row for row in candidate.get("cases") or []}
    changed: list[dict[str, Any]] = []
    pass_to_fail: list[str] = []
    fail_to_pass: list[str] = []
    for case_id, old in before.items():
        new = after.get(case_id)
        if new is None:
            continue
        if old["verdict"] == new["verdict"] and old["pass_rate"] == new["pass_rate"]:
            continue
        if old["passed"] and not new["passed"]:
            pass_to_fail.append(case_id)
            change = "pass_to_fail"
        elif new["passed"] and not old["passed"]:
            fail_to_pass.append(case_id)
            change = "fail_to_pass"
        else:
            change = "better" if new["pass_rate"] > old["pass_rate"] else "worse"
        changed.append({"id": case_id, "change": change, "inputs": new.get("inputs"),
                        "baseline": {"verdict": old["verdict"], "pass_rate": old["pass_rate"], "reason": old.get("reason"),
                                     "run_id": (old.get("runs") or [{}])[0].get("run_id")},
                        "candidate": {"verdict": new["verdict"], "pass_rate": new["pass_rate"], "reason": new.get("reason"),
                                      "run_id": (new.get("runs") or [{}])[0].get("run_id")}})
    order = {"pass_to_fail": 0, "worse": 1, "better": 2, "fail_to_pass": 3}
    changed.sort(key=lambda row: order[row["change"]])  # regressions first
    old_rate, new_rate = _side(baseline)["pass_rate"], _side(candidate)["pass_rate"]
    delta = None if old_rate is None or new_rate is None else round(new_rate - old_rate, 4)
    same_dataset = (baseline.get("dataset") or {}).get("sha256") == (candidate.get("dataset") or {}).get("sha256")
    return {
        "baseline": _side(baseline), "candidate": _side(candidate),
        "same_dataset": same_dataset, "pass_rate_delta": delta,
        "pass_to_fail": pass_to_fail, "fail_to_pass": fail_to_pass,
        "unchanged": sum(1 for case_id in before if case_id in after) - len(changed),
        "changed": changed,
        "only_in_baseline": sorted(set(before) - set(after)), "only_in_candidate": sorted(set(after) - set(before)),
        "verdict": ("worse" if pass_to_fail and not fail_to_pass else "better" if fail_to_pass and not pass_to_fail
                    else "mixed" if pass_to_fail else "same" if not changed else "worse" if (delta or 0) < 0
                    else "better" if (delta or 0) > 0 else "same"),
    }
