"""The names of a run's events: every type a journal holds, and every kind a `node_event` carries.

Members are their strings (StrEnum), so journals already kept (SQLite, Redis, Temporal histories) read back
unchanged and compare equal; emitters and readers name events only through these members.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    """`Event.type`: what happened to the run or to one of its nodes (`node_id`: the node's path)."""

    # The run began (not a resume); data: workflow, and retry_of when it retries another run.
    RUN_STARTED = "run_started"
    # A run stopped earlier goes on from its journal; data: workflow, finished_nodes (outcomes it reuses).
    RUN_RESUMED = "run_resumed"
    # The run ended, whatever way; data: status (the record's), error (None or {code, message, ...}).
    RUN_FINISHED = "run_finished"
    # A node began to run: `attempt` is its first here (a resumed run's, the one it had reached); no data.
    NODE_STARTED = "node_started"
    # The attempt `attempt` failed and the next one follows after a delay; data: error, delay_seconds.
    NODE_RETRYING = "node_retrying"
    # The node ended well; data: type, duration_ms, cost_usd, tokens, usage, output, reused_from (a retry's).
    NODE_SUCCEEDED = "node_succeeded"
    # The node ended in failure after its last attempt; data: type, duration_ms, error, cost_usd.
    NODE_FAILED = "node_failed"
    # The node will not run (its branch was not taken, or what it depends on failed); no data, no attempt.
    NODE_SKIPPED = "node_skipped"
    # The node was stopped while it ran (a cancel, the run's budget or timeout, a failure elsewhere); no data.
    NODE_CANCELLED = "node_cancelled"
    # A `human` node asks a person; data: question, schema, asked_at, deadline, approval.
    NODE_WAITING = "node_waiting"
    # The person's answer was taken; data: answer, answered_by, answered_at, declined (when refused).
    NODE_ANSWERED = "node_answered"
    # Something inside a node's attempt; data: event (a NodeEventKind, or a tool's own name) and its fields.
    NODE_EVENT = "node_event"


class NodeEventKind(StrEnum):
    """`data["event"]` of a `node_event`: what happened inside one node's attempt."""

    # A model call failed and is tried again; data: error {code, message}, retry, delay_seconds.
    LLM_RETRYING = "llm_retrying"
    # A model's answer did not fit the output schema and is asked again; data: problems.
    LLM_REPAIRING = "llm_repairing"
    # An agent's model call failed and is tried again; data: attempt, error (its code), delay_seconds, agent.
    AGENT_RETRYING = "agent_retrying"
    # An agent's model answered one turn; data: iteration, text, tool_calls, usage, cost_usd, model, provider.
    AGENT_TURN = "agent_turn"
    # An agent called one tool; data: iteration, tool, arguments, ok, error (None when ok), agent.
    AGENT_TOOL_CALL = "agent_tool_call"
    # An upstream MCP tool reported progress; data: tool, progress, total, message.
    PROGRESS = "progress"


# The run's own events (no node_id).
RUN_EVENTS = frozenset({EventType.RUN_STARTED, EventType.RUN_RESUMED, EventType.RUN_FINISHED})
# The events that end a node's execution; each leaves the node in its final status for this execution.
NODE_ENDS = frozenset({EventType.NODE_SUCCEEDED, EventType.NODE_FAILED, EventType.NODE_SKIPPED,
                       EventType.NODE_CANCELLED})
# A `human` node's question and its answer.
QUESTION_EVENTS = frozenset({EventType.NODE_WAITING, EventType.NODE_ANSWERED})
# Every event that moves a node's state (all node events but the chatty node_event).
NODE_STATE_EVENTS = frozenset({EventType.NODE_STARTED, EventType.NODE_RETRYING, *NODE_ENDS, *QUESTION_EVENTS})
