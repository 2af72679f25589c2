"""A run's trace rebuilt from its journal and record, as OTLP/JSON (`ice-mcp trace export`).

The output is the protobuf-JSON encoding of an OTLP `ExportTraceServiceRequest` (the OTLP/HTTP JSON
body): hex ids, nanosecond times and 64-bit integers as strings, enums as integers. It needs only the
standard library and orjson, so it works for runs recorded with tracing off and without the `[otel]` extra.

The spans carry the names and attributes the live tracing (`ice_mcp.observability.tracing`) uses:

- `invoke_workflow {workflow}` (INTERNAL, no parent): the run; `gen_ai.operation.name`, `ice.run.id`,
  `ice.workflow`, `ice.trigger.kind`, `ice.run.status`, the run's tokens and cost. Its trace id and span id
  are the record's `traceparent` when it has one (the live run span's context, so an export lines up with
  the live trace), else derived from the run id.
- `node {path}` (INTERNAL), one per attempt that ran: `ice.node.id` (the node path, `loop[2].fetch`),
  `ice.node.type`, `ice.node.attempt` (and `gen_ai.tool.name` on a `tool` node's); status unset, or ERROR
  with `error.type` = the error code. A node inside
  a loop, parallel branch, recursive iteration or nested workflow is a child of its container's attempt.
  Nodes that a resumed run or a retry only replayed from the journal get no span; an attempt in flight when
  its process stopped (it ran again after the resume) is kept, ended at the journal's last sign of life,
  with `error.type` `interrupted`.
- `chat {model}` (CLIENT) under an `llm` attempt, one per model turn under an `agent` attempt:
  `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model`,
  `gen_ai.usage.input_tokens`/`output_tokens`, `gen_ai.usage.cost` and `ice.cost_usd` when the journal
  has them. `execute_tool {tool}` (INTERNAL, `gen_ai.tool.name`) for each tool an agent called.

Privacy: no inputs, prompts, answers, tool arguments, outputs or error messages go into the trace unless
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`. Error messages are left out too because they
often quote inputs: by default a failure's status message is its error code. With the variable set, the
root gets `ice.run.inputs`/`ice.run.outputs`, each successful attempt `ice.node.output`, chat spans
`gen_ai.output.messages`, an agent's tool calls `gen_ai.tool.call.arguments` (each cut at `CONTENT_LIMIT`
characters), and statuses the error messages.

Ids: a node attempt's span id is `node_span_id(parent span id, node path, attempt)`, the live tracing's own
(a top-level node's parent is `run_span_id(run id)`; a node inside a container derives from that container
attempt's id, so each attempt of a retried container gives its nodes ids of their own). Two exports of one
journal are byte-identical and match the live spans. When the journal shows the same attempt running twice
(in flight at a crash and run again), the last run takes that id and the earlier ones ids derived from it.
Chat and tool spans derive theirs from their node span's id.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from ice_mcp.observability.tracing import (
    CAPTURE_VARIABLE,
    CONTENT_CHARS,
    capture_content,
    gen_ai_provider,
    node_span_id,
    parse_traceparent,
    run_span_id,
    workflow_operation,
)
from ice_mcp.store.records import RunRecord, iso, trigger_kind
from ice_mcp.store.vocabulary import EventType, NodeEventKind

CONTENT_ENV = CAPTURE_VARIABLE
CONTENT_LIMIT = CONTENT_CHARS  # characters of one content attribute, so one big output cannot swamp a viewer
SCOPE_NAME = "ice_mcp"
DEFAULT_SERVICE_NAME = "ice-mcp"
DEFAULT_OPERATION = "invoke_workflow"
__all__ = ["capture_content", "dumps_trace", "export_trace", "node_span_id", "run_span_id", "workflow_operation"]

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_ERROR = 2


_OUTCOMES = (EventType.NODE_SUCCEEDED, EventType.NODE_FAILED)  # the ends that say a node's type
_FINISHED = (*_OUTCOMES, EventType.NODE_CANCELLED)  # the ends of an attempt's span (a skipped node has none)
# Model calls tried again inside an attempt: span events of its node (tuples: a journal's values may be any JSON).
_RETRIES = (NodeEventKind.LLM_RETRYING, NodeEventKind.LLM_REPAIRING, NodeEventKind.AGENT_RETRYING)
INTERRUPTED = {"code": "interrupted"}  # an attempt the journal never ended: its process stopped mid-attempt
CANCELLED = {"code": "cancelled"}

# (model, provider or None) -> ice_mcp's provider name for that model, or None
ProviderResolver = Callable[[str, str | None], str | None]
# a workflow's name -> its blueprint document (for nested workflow nodes), or None
WorkflowSource = Callable[[str], Mapping[str, Any] | None]


# -- names and ids (the live tracing makes the same) ---------------------------------------------------------


def run_span_name(workflow: str, operation: str = DEFAULT_OPERATION) -> str:
    return f"{operation} {workflow}"


def node_span_name(node_path: str) -> str:
    return f"node {node_path}"


def chat_span_name(model: str | None) -> str:
    return f"chat {model}" if model else "chat"


def tool_span_name(tool: str | None) -> str:
    return f"execute_tool {tool}" if tool else "execute_tool"


def genai_provider(provider: str | None) -> str | None:
    return None if provider is None else gen_ai_provider(provider)


def derived_trace_id(run_id: str) -> str:
    """A trace id for a run that has no `traceparent` (it was not traced live)."""
    digest = hashlib.sha256(f"ice_mcp trace\x00{run_id}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return digest if digest != "0" * 32 else "0" * 31 + "1"


def _hex_id(text: str) -> str:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return digest if digest != "0" * 16 else "0" * 15 + "1"


# -- the export ----------------------------------------------------------------------------------------------


def export_trace(record: RunRecord, events: Iterable[Mapping[str, Any]], *,
                 blueprint: Mapping[str, Any] | None = None, workflows: WorkflowSource | None = None,
                 resolve_provider: ProviderResolver | None = None, content: bool = False,
                 service_name: str = DEFAULT_SERVICE_NAME, operation: str = DEFAULT_OPERATION,
                 scope_version: str | None = None) -> dict[str, Any]:
    """The run's trace as an `ExportTraceServiceRequest` in OTLP/JSON form.

    `events`: the run's journal (event dicts in order). `blueprint`: the document the run ran, where node
    specs (tool names, models) are read; `workflows` finds nested workflows' documents. `resolve_provider`
    names the provider of a model whose blueprint does not. `content`: see the module's privacy note."""
    builder = _Builder(record, blueprint, workflows, resolve_provider, content)
    spans = builder.build(list(events), operation)
    scope: dict[str, Any] = {"name": SCOPE_NAME}
    if scope_version:
        scope["version"] = scope_version
    resource = {"attributes": _attributes([("service.name", service_name)])}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": spans}]}]}


def dumps_trace(trace: Mapping[str, Any]) -> bytes:
    """The export as bytes: compact JSON and a final newline."""
    return orjson.dumps(trace, option=orjson.OPT_APPEND_NEWLINE)


@dataclass(slots=True, eq=False)
class _Span:
    parent: _Span | None
    name: str
    kind: int
    start: float
    end: float | None = None
    attributes: list[tuple[str, Any]] = field(default_factory=list)
    events: list[tuple[float, str, list[tuple[str, Any]]]] = field(default_factory=list)
    status: int = STATUS_UNSET
    message: str = ""
    span_id: str = ""  # given once every span is known (see _Builder._assign_ids)
    key: tuple[str, int] | None = None  # a node attempt's (path, attempt)
    child: tuple[str, int] | None = None  # a chat or tool span's (kind, index) under its node span

    def fail(self, error: Mapping[str, Any], content: bool) -> None:
        code = str(error.get("code") or "error")
        self.status = STATUS_ERROR
        self.message = _cut(str(error.get("message") or code)) if content else code
        self.attributes.append(("error.type", code))

    def to_json(self, trace_id: str) -> dict[str, Any]:
        start = _nanos(self.start)
        end = max(start, _nanos(self.end if self.end is not None else self.start))
        span: dict[str, Any] = {"traceId": trace_id, "spanId": self.span_id}
        if self.parent is not None:
            span["parentSpanId"] = self.parent.span_id
        span.update(name=self.name, kind=self.kind, startTimeUnixNano=str(start), endTimeUnixNano=str(end),
                    attributes=_attributes(self.attributes))
        if self.events:
            span["events"] = [{"timeUnixNano": str(_nanos(ts)), "name": name, "attributes": _attributes(attrs)}
                              for ts, name, attrs in self.events]
        status: dict[str, Any] = {"code": self.status}
        if self.message:
            status["message"] = self.message
        span["status"] = status
        return span


@dataclass(slots=True)
class _Attempt:
    """One attempt of one node, open between its start and the event that ends it."""

    path: str
    attempt: int
    span: _Span
    node_events: list[Mapping[str, Any]] = field(default_factory=list)


class _Builder:
    """One walk over a journal: node attempts opened and closed as its events say, then ids and JSON."""

    def __init__(self, record: RunRecord, blueprint: Mapping[str, Any] | None, workflows: WorkflowSource | None,
                 resolve_provider: ProviderResolver | None, content: bool) -> None:
        self.record, self.blueprint, self.workflows = record, blueprint, workflows
        self.resolve_provider, self.content = resolve_provider, content
        self.root = _Span(None, "", SPAN_KIND_INTERNAL, 0.0)
        self.spans: list[_Span] = [self.root]
        self.open: dict[str, _Attempt] = {}
        # After a retry the next attempt starts when its backoff ends; no event marks it, so it is opened
        # when an event of that attempt shows it ran: {path: (attempt, earliest start)}.
        self.pending: dict[str, tuple[int, float]] = {}
        self.types: dict[str, str] = {}
        self.specs: dict[str, Mapping[str, Any] | None] = {}

    # -- the walk over the journal -------------------------------------------------------------

    def build(self, events: list[Mapping[str, Any]], operation: str) -> list[dict[str, Any]]:
        record = self.record
        for event in events:  # a node's type is on the events that end it: known before its first attempt ends
            data = event.get("data") or {}
            if event.get("type") in _OUTCOMES and isinstance(data.get("type"), str):
                self.types.setdefault(str(event.get("node_id")), data["type"])
        times = [float(e["ts"]) for e in events if isinstance(e.get("ts"), int | float)]
        started = _as_kept(record.started_at)
        first = min([t for t in (started, *times[:1]) if t is not None], default=0.0)
        last = times[-1] if times else first
        previous = first
        for event in events:
            ts = float(event["ts"]) if isinstance(event.get("ts"), int | float) else previous
            self._event(event, ts, previous)
            previous = ts
        for path in list(self.open):  # still open when the journal ends: a finished run's process stopped first
            self._close(self.open.pop(path), last, INTERRUPTED if record.done else None, None)
        self._root(operation, first, last)
        ids = parse_traceparent(record.traceparent)
        trace_id, self.root.span_id = ids[:2] if ids is not None else (derived_trace_id(record.run_id),
                                                                       run_span_id(record.run_id))
        self._assign_ids()
        return [span.to_json(trace_id) for span in self.spans]

    def _root(self, operation: str, first: float, last: float) -> None:
        record, root = self.record, self.root
        root.name = run_span_name(record.workflow, operation)
        root.start = first
        finished = _as_kept(record.finished_at)
        root.end = max(finished, last) if record.done and finished is not None else last
        root.attributes = [("gen_ai.operation.name", operation), ("ice.run.id", record.run_id),
                           ("ice.workflow", record.workflow), ("ice.trigger.kind", trigger_kind(record.trigger)),
                           ("ice.run.status", record.status),
                           ("gen_ai.usage.input_tokens", record.usage.input_tokens),
                           ("gen_ai.usage.output_tokens", record.usage.output_tokens),
                           ("gen_ai.usage.cost", float(record.cost_usd)), ("ice.cost_usd", float(record.cost_usd)),
                           ("ice.run.retry_of", record.retry_of)]
        if self.content:
            root.attributes.append(("ice.run.inputs", _json_text(record.inputs)))
            if record.outputs is not None:
                root.attributes.append(("ice.run.outputs", _json_text(record.outputs)))
        if record.done and record.status != "succeeded":
            root.fail(record.error or {"code": record.status}, self.content)

    def _assign_ids(self) -> None:
        """Node attempts level by level, each from the span it hangs under, as the live tracing derives them (the
        last run of an attempt takes that id, earlier runs ids derived from it); then the spans beneath them.
        Top-level nodes derive from the run's own id, whatever `traceparent` the record was given."""
        levels: dict[int, list[_Span]] = defaultdict(list)
        for span in self.spans:
            if span.key is not None:
                levels[self._depth(span)].append(span)
        run_key = run_span_id(self.record.run_id)
        for depth in sorted(levels):
            runs: dict[str, list[_Span]] = defaultdict(list)
            for span in levels[depth]:
                assert span.key is not None
                above = run_key if span.parent is None or span.parent is self.root else span.parent.span_id
                runs[node_span_id(above, *span.key)].append(span)
            for span_id, same in runs.items():
                *earlier, last = same
                last.span_id = span_id
                for index, span in enumerate(earlier):
                    span.span_id = _hex_id(f"{span_id}\x00earlier\x00{index}")
        for span in self.spans:
            if span.child is not None and span.parent is not None:
                span.span_id = _hex_id(f"{span.parent.span_id}\x00{span.child[0]}\x00{span.child[1]}")

    def _depth(self, span: _Span) -> int:
        """How many spans lie between `span` and the run's."""
        depth, parent = 0, span.parent
        while parent is not None and parent is not self.root:
            depth, parent = depth + 1, parent.parent
        return depth

    def _event(self, event: Mapping[str, Any], ts: float, previous: float) -> None:
        kind, path = event.get("type"), event.get("node_id")
        data: Mapping[str, Any] = event.get("data") or {}
        if kind == EventType.RUN_RESUMED:
            for open_path in list(self.open):  # in flight when the run stopped: it runs again after this
                self._close(self.open.pop(open_path), previous, INTERRUPTED, None)
            self.pending.clear()
            self.root.events.append((ts, str(EventType.RUN_RESUMED),
                                     [("ice.run.finished_nodes", data.get("finished_nodes"))]))
            return
        if not isinstance(path, str):
            return
        number = int(event.get("attempt") or 1)
        if kind == EventType.NODE_STARTED:
            self.pending.pop(path, None)
            if path in self.open:  # started again without an end (a cancelled node that runs again)
                self._close(self.open.pop(path), ts, INTERRUPTED, None)
            self._open(path, number, ts)
        elif kind == EventType.NODE_RETRYING:
            attempt = self._take(path, number, ts)
            if attempt is not None:
                error = data.get("error")
                self._close(attempt, ts, error if isinstance(error, Mapping) else {"code": "error"}, None)
            delay = data.get("delay_seconds")
            self.pending[path] = (number + 1, ts + (float(delay) if isinstance(delay, int | float) else 0.0))
        elif kind in _FINISHED:
            if data.get("reused_from"):  # a retry's node taken from the run it retries: it did not run here
                return
            attempt = self._take(path, number, ts)
            self.pending.pop(path, None)
            if attempt is None:
                return
            if kind == EventType.NODE_SUCCEEDED:
                self._close(attempt, ts, None, data)
            else:
                error = data.get("error") if kind == EventType.NODE_FAILED else CANCELLED
                self._close(attempt, ts, error if isinstance(error, Mapping) else {"code": "error"}, data)
        elif kind == EventType.NODE_EVENT:
            attempt = self._current(path, number, ts)
            if attempt is not None:
                attempt.node_events.append({**event, "ts": ts})

    def _open(self, path: str, number: int, start: float) -> _Attempt:
        node_type = self._type(path)
        attributes: list[tuple[str, Any]] = [("ice.node.id", path), ("ice.node.type", node_type),
                                             ("ice.node.attempt", number)]
        tool = (self._spec(path) or {}).get("tool_name") if node_type == "tool" else None
        if isinstance(tool, str):  # a tool node's span names its tool, as the live one does
            attributes.append(("gen_ai.tool.name", tool))
        span = _Span(self._parent(path, start), node_span_name(path), SPAN_KIND_INTERNAL, start,
                     attributes=attributes, key=(path, number))
        self.spans.append(span)
        attempt = self.open[path] = _Attempt(path, number, span)
        return attempt

    def _parent(self, path: str, ts: float) -> _Span:
        """The open attempt of the nearest enclosing node (`loop[2].fetch` → `loop`), else the run."""
        prefix = path
        while True:
            cut = max(prefix.rfind("."), prefix.rfind("["))
            if cut < 0:
                return self.root
            prefix = prefix[:cut]
            attempt = self._current(prefix, None, ts)
            if attempt is not None:
                return attempt.span

    def _current(self, path: str, number: int | None, ts: float) -> _Attempt | None:
        """The open attempt of `path` (of that number), opening the attempt a retry left pending."""
        attempt = self.open.get(path)
        if attempt is not None:
            return attempt if number is None or attempt.attempt == number else None
        pending = self.pending.get(path)
        if pending is None or (number is not None and pending[0] != number):
            return None
        del self.pending[path]
        return self._open(path, pending[0], min(pending[1], ts))

    def _take(self, path: str, number: int, ts: float) -> _Attempt | None:
        attempt = self._current(path, number, ts)
        if attempt is not None:
            del self.open[path]
        return attempt

    def _close(self, attempt: _Attempt, ts: float, error: Mapping[str, Any] | None,
               data: Mapping[str, Any] | None) -> None:
        span = attempt.span
        span.end = max(ts, span.start)
        if error is not None:
            span.fail(error, self.content)
        elif data is not None:  # succeeded: the status stays unset, as the live span's (OTel's advice)
            if self.content and "output" in data:
                span.attributes.append(("ice.node.output", _json_text(data.get("output"))))
        self._children(attempt, error, data)

    # -- the spans inside an attempt -----------------------------------------------------------

    def _children(self, attempt: _Attempt, error: Mapping[str, Any] | None, data: Mapping[str, Any] | None) -> None:
        for event in attempt.node_events:
            what = (event.get("data") or {}).get("event")
            if what in _RETRIES:
                failure = (event.get("data") or {}).get("error")
                code = failure.get("code") if isinstance(failure, Mapping) else failure
                attempt.span.events.append((event["ts"], str(what), [("error.type", code)]))
        node_type = self._type(attempt.path)
        if node_type == "llm":
            output = (data or {}).get("output")
            text = output.get("text") if isinstance(output, Mapping) else None
            provider = output.get("provider") if isinstance(output, Mapping) else None
            self._chat(attempt, 0, attempt.span.start, attempt.span.end, self._llm_usage(error, data), error,
                       self._response_model(data), text, provider if isinstance(provider, str) else None)
        elif node_type == "agent":
            self._agent(attempt, error)

    def _agent(self, attempt: _Attempt, error: Mapping[str, Any] | None) -> None:
        """A chat span per model turn and a tool span per tool call, each from the end of the one before."""
        cursor, index, answered = attempt.span.start, 0, False
        for event in attempt.node_events:
            data = event.get("data") or {}
            ts = float(event["ts"])
            if data.get("event") == NodeEventKind.AGENT_TURN:
                usage = data.get("usage")
                model, provider = data.get("model"), data.get("provider")  # the model that answered the turn
                self._chat(attempt, index, cursor, ts, (usage if isinstance(usage, Mapping) else None,
                                                        data.get("cost_usd")), None,
                           model if isinstance(model, str) else None, data.get("text"),
                           provider if isinstance(provider, str) else None)
                answered = not data.get("tool_calls")
            elif data.get("event") == NodeEventKind.AGENT_TOOL_CALL:
                failed = data.get("error") if data.get("ok") is False else None
                name = data.get("tool")
                self._tool(attempt, index, cursor, ts, name if isinstance(name, str) else None,
                           failed if isinstance(failed, Mapping) or failed is None else {"code": "error"},
                           data.get("arguments") if self.content else None)
                answered = False
            else:
                continue
            cursor, index = ts, index + 1
        if error is not None and not answered:  # the failure came from the turn in flight
            self._chat(attempt, index, cursor, attempt.span.end, None, error, None, None)

    def _chat(self, attempt: _Attempt, index: int, start: float, end: float | None,
              usage: tuple[Mapping[str, Any] | None, Any] | None, error: Mapping[str, Any] | None,
              response_model: str | None, text: Any, answered_by: str | None = None) -> None:
        model, provider = self._model(attempt.path)
        provider = provider or genai_provider(answered_by)
        span = self._child(attempt, "chat", index, chat_span_name(model or response_model), SPAN_KIND_CLIENT,
                           start, end)
        tokens, cost = usage if usage is not None else (None, None)
        span.attributes += [("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", provider),
                            ("gen_ai.request.model", model or response_model),
                            ("gen_ai.response.model", response_model)]
        if tokens is not None:
            span.attributes += [("gen_ai.usage.input_tokens", int(tokens.get("input_tokens") or 0)),
                                ("gen_ai.usage.output_tokens", int(tokens.get("output_tokens") or 0))]
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            span.attributes += [("gen_ai.usage.cost", float(cost)), ("ice.cost_usd", float(cost))]
        if self.content and isinstance(text, str):
            span.attributes.append(("gen_ai.output.messages", _cut(text)))
        if error is not None:
            span.fail(error, self.content)

    def _tool(self, attempt: _Attempt, index: int, start: float, end: float | None, tool: str | None,
              error: Mapping[str, Any] | None, arguments: Any) -> None:
        span = self._child(attempt, "tool", index, tool_span_name(tool), SPAN_KIND_INTERNAL, start, end)
        span.attributes += [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", tool)]
        if arguments is not None:
            span.attributes.append(("gen_ai.tool.call.arguments", _json_text(arguments)))
        if error is not None:
            span.fail(error, self.content)

    def _child(self, attempt: _Attempt, what: str, index: int, name: str, kind: int, start: float,
               end: float | None) -> _Span:
        span = _Span(attempt.span, name, kind, start, end, child=(what, index))
        self.spans.append(span)
        return span

    @staticmethod
    def _llm_usage(error: Mapping[str, Any] | None, data: Mapping[str, Any] | None
                   ) -> tuple[Mapping[str, Any] | None, Any] | None:
        """Tokens and cost of an llm attempt: its result's, or what a failed call still reported."""
        source = (error or {}).get("details") if error is not None else data
        if not isinstance(source, Mapping):
            return None
        usage = source.get("usage")
        return (usage if isinstance(usage, Mapping) else None, source.get("cost_usd"))

    @staticmethod
    def _response_model(data: Mapping[str, Any] | None) -> str | None:
        output = (data or {}).get("output")
        model = output.get("model") if isinstance(output, Mapping) else None
        return model if isinstance(model, str) and model else None

    # -- what the blueprint says about a node --------------------------------------------------

    def _type(self, path: str) -> str:
        known = self.types.get(path)
        if known is not None:
            return known
        spec = self._spec(path) or {}
        if isinstance(spec.get("type"), str):
            return str(spec["type"])
        return "tool" if "tool_name" in spec else "unknown"  # a builder's document may leave the default type out

    def _model(self, path: str) -> tuple[str | None, str | None]:
        """(requested model, `gen_ai.provider.name`) of an llm node or an inline agent."""
        spec = self._spec(path) or {}
        agent = spec.get("agent")
        holder: Mapping[str, Any] = agent if isinstance(agent, Mapping) else spec
        model = holder.get("model") if isinstance(holder.get("model"), str) else None
        provider = holder.get("provider") if isinstance(holder.get("provider"), str) else None
        if model and provider is None and self.resolve_provider is not None:
            try:
                provider = self.resolve_provider(model, None)
            except Exception:  # a provider's name is a nicety: an odd LLM configuration must not stop the export
                provider = None
        return model, genai_provider(provider)

    def _spec(self, path: str) -> Mapping[str, Any] | None:
        if path not in self.specs:
            self.specs[path] = self._find_spec(path)
        return self.specs[path]

    def _find_spec(self, path: str) -> Mapping[str, Any] | None:
        """The node's spec in the blueprint, through loop bodies, branches and nested workflows."""
        if self.blueprint is None:
            return None
        segments = [(name, index.rstrip("]") if index else None)
                    for name, _, index in (part.partition("[") for part in path.split("."))]
        nodes: Any = self.blueprint.get("nodes")
        depth = 0
        while depth < len(segments):
            node_id, index = segments[depth]
            found = [n for n in nodes if isinstance(n, Mapping) and n.get("id") == node_id] \
                if isinstance(nodes, list) else []
            if not found or depth == len(segments) - 1:
                return found[0] if found else None
            if "agent" in found[0] and index is None:  # an agent's workflow tool: `agent.workflow.node`
                depth += 1
                document = self.workflows(segments[depth][0]) if self.workflows is not None else None
                nodes = document.get("nodes") if document is not None else None
            else:
                nodes = self._inside(found[0], index)
            depth += 1
        return None

    def _inside(self, spec: Mapping[str, Any], index: str | None) -> Any:
        """The node list a container runs (its branch `index` for a parallel node)."""
        branches = spec.get("branches")
        if index is not None and index.isdigit() and isinstance(branches, list):
            return branches[int(index)] if int(index) < len(branches) else None
        if isinstance(spec.get("body"), list):
            return spec["body"]
        ref = spec.get("workflow_ref")
        if isinstance(ref, str) and self.workflows is not None:
            document = self.workflows(ref)
            return document.get("nodes") if document is not None else None
        return None


def _as_kept(ts: float | None) -> float | None:
    """A record's time as the store keeps it (milliseconds), so a live record and a stored one export alike."""
    kept = iso(ts)
    return None if kept is None else datetime.fromisoformat(kept).timestamp()


def _nanos(ts: float) -> int:
    return round(ts * 1_000_000) * 1000  # microseconds: what a float of Unix seconds holds exactly


def _attributes(pairs: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for key, value in pairs:
        if value is None:
            continue
        if isinstance(value, bool):
            encoded: dict[str, Any] = {"boolValue": value}
        elif isinstance(value, int):
            encoded = {"intValue": str(value)}  # int64 in protobuf JSON is a string
        elif isinstance(value, float):
            encoded = {"doubleValue": value}
        else:
            encoded = {"stringValue": str(value)}
        out.append({"key": key, "value": encoded})
    return out


def _json_text(value: Any) -> str:
    try:
        text = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # integers beyond 64 bits
        text = json.dumps(value, default=str, ensure_ascii=False)
    return _cut(text)


def _cut(text: str) -> str:
    return text if len(text) <= CONTENT_LIMIT else text[:CONTENT_LIMIT] + f"... [{len(text)} characters]"
