"""The pure scheduler: decisions from node states alone, no asyncio."""

from __future__ import annotations

import pytest

from ice_mcp.core.scheduler import GraphShape, NodeState, Scheduler


def shape(deps: dict[str, list[str]], gates: dict[str, list[tuple[str, bool]]] | None = None,
          on_error: dict[str, str] | None = None) -> GraphShape:
    order = tuple(deps)
    return GraphShape(
        order=order,
        deps={n: tuple(d) for n, d in deps.items()},
        gates={n: tuple((gates or {}).get(n, ())) for n in order},
        on_error={n: (on_error or {}).get(n, "fail") for n in order},  # type: ignore[misc]
    )


def test_diamond_starts_each_node_when_its_own_deps_finish() -> None:
    s = Scheduler(shape({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}), max_parallel=16)
    assert s.initial_skips() == []
    assert s.take_ready() == ["a"]
    assert s.take_ready() == []
    assert s.succeeded("a") == []
    assert s.take_ready() == ["b", "c"]
    assert s.succeeded("b") == []
    assert s.take_ready() == []  # d still waits for c
    assert s.succeeded("c") == []
    assert s.take_ready() == ["d"]
    assert not s.finished
    s.succeeded("d")
    assert s.finished
    assert set(s.states.values()) == {NodeState.SUCCEEDED}


def test_not_level_by_level() -> None:
    # c depends only on a; it starts when a finishes even though b (same level as a) still runs.
    s = Scheduler(shape({"a": [], "b": [], "c": ["a"]}), max_parallel=16)
    assert s.take_ready() == ["a", "b"]
    s.succeeded("a")
    assert s.take_ready() == ["c"]
    assert s.states["b"] is NodeState.RUNNING


def test_max_parallel_bounds_running_nodes() -> None:
    s = Scheduler(shape({n: [] for n in "abcde"}), max_parallel=2)
    assert s.take_ready() == ["a", "b"]
    assert s.running == 2
    assert s.take_ready() == []
    s.succeeded("b")
    assert s.take_ready() == ["c"]
    s.succeeded("a")
    s.succeeded("c")
    assert s.take_ready() == ["d", "e"]
    assert s.running == 2


def test_condition_gates_skip_branch_not_taken_and_descendants() -> None:
    s = Scheduler(shape({"cond": [], "yes": ["cond"], "no": ["cond"], "after_no": ["no"], "deep": ["after_no"]},
                        gates={"yes": [("cond", True)], "no": [("cond", False)]}), max_parallel=16)
    assert s.take_ready() == ["cond"]
    skipped = s.succeeded("cond", branch=True)
    assert sorted(skipped) == ["after_no", "deep", "no"]
    assert s.take_ready() == ["yes"]
    assert s.states["no"] is NodeState.SKIPPED
    assert s.states["deep"] is NodeState.SKIPPED
    assert s.branch_taken == {"cond": True}


def test_join_runs_when_one_dep_skipped_and_one_done() -> None:
    s = Scheduler(shape({"cond": [], "yes": ["cond"], "no": ["cond"], "join": ["yes", "no"]},
                        gates={"yes": [("cond", True)], "no": [("cond", False)]}), max_parallel=16)
    s.take_ready()
    assert s.succeeded("cond", branch=False) == ["yes"]
    assert s.take_ready() == ["no"]
    assert s.succeeded("no") == []
    assert s.take_ready() == ["join"]


def test_all_deps_skipped_skips_the_node() -> None:
    s = Scheduler(shape({"cond": [], "x": ["cond"], "y": ["cond"], "join": ["x", "y"]},
                        gates={"x": [("cond", True)], "y": [("cond", True)]}), max_parallel=16)
    s.take_ready()
    assert sorted(s.succeeded("cond", branch=False)) == ["join", "x", "y"]
    assert s.take_ready() == []
    assert s.finished


def test_gate_on_node_without_deps_is_skipped_initially() -> None:
    # A gate whose condition can never have run before the node: decided at construction.
    deps = {"n": [], "m": ["n"]}
    s = Scheduler(shape(deps, gates={"n": [("ghost", True)]}), max_parallel=4)
    assert s.initial_skips() == ["n", "m"]
    assert s.initial_skips() == []  # handed out once
    assert s.take_ready() == []
    assert s.finished


def test_failure_with_fail_policy_stops_the_graph() -> None:
    s = Scheduler(shape({"a": [], "b": [], "c": ["a"]}), max_parallel=16)
    s.take_ready()
    assert s.failed("a") == []
    assert s.stopped and s.failed_node == "a"
    assert s.take_ready() == []
    assert s.stop() == ["c"]
    assert s.states["c"] is NodeState.CANCELLED
    s.cancelled("b")
    assert s.states["b"] is NodeState.CANCELLED
    assert s.finished


def test_failure_with_continue_lets_dependents_run() -> None:
    s = Scheduler(shape({"a": [], "b": ["a"]}, on_error={"a": "continue"}), max_parallel=16)
    s.take_ready()
    assert s.failed("a") == []
    assert not s.stopped
    assert s.take_ready() == ["b"]


def test_skip_dependents_policy_skips_only_descendants() -> None:
    s = Scheduler(shape({"a": [], "b": ["a"], "c": ["b"], "d": []}, on_error={"a": "skip_dependents"}),
                  max_parallel=16)
    assert s.take_ready() == ["a", "d"]
    assert sorted(s.failed("a")) == ["b", "c"]
    assert not s.stopped
    s.succeeded("d")
    assert s.finished
    assert s.states == {"a": NodeState.FAILED, "b": NodeState.SKIPPED, "c": NodeState.SKIPPED,
                        "d": NodeState.SUCCEEDED}


def test_finishing_a_node_that_is_not_running_is_an_error() -> None:
    s = Scheduler(shape({"a": []}), max_parallel=1)
    with pytest.raises(ValueError, match="not running"):
        s.succeeded("a")


def test_same_completions_give_same_decisions() -> None:
    def drive() -> list[list[str]]:
        s = Scheduler(shape({"a": [], "b": [], "c": ["a", "b"], "d": ["a"], "e": ["c", "d"]}), max_parallel=2)
        log = []
        while not s.finished:
            started = s.take_ready()
            log.append(started)
            for node in started:
                s.succeeded(node)
        return log

    assert drive() == drive() == [["a", "b"], ["d", "c"], ["e"]]
