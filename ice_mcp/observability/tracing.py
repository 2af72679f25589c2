"""OpenTelemetry tracing of runs, optional: off (and the SDK never imported) unless the standard OTEL_* variables
turn it on; then one trace per run, a span per node attempt, model calls and tool calls beneath.

Span ids are derived: a run's from its id, a node attempt's from the span it hangs under (the run's, or its
container attempt's), its path and its attempt. So every process that runs part of a run (a resumed server, any
Temporal worker) hangs its spans under the same parents, a replayed attempt that was exported before keeps its
id, and the nodes of each attempt of a retried container have ids of their own. The run's own context is kept in
its record.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import logging
import os
import queue
import secrets
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

if TYPE_CHECKING:
    from ice_mcp.store.records import RunRecord

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Read before any span work: tracing off costs one test of this flag per node (the no-op API costs ~6 µs a span).
ENABLED = False
# Prompts, answers, tool arguments and outputs (and error messages, which can quote them) go out only when asked.
CAPTURE_CONTENT = False
_tracer: Any = None


class _Api(NamedTuple):
    """The API calls a node span makes, bound once: an import statement in a node's path costs ~1 µs each."""

    attach: Callable[[Any], object]
    detach: Callable[[Any], None]
    set_span_in_context: Callable[..., Any]
    get_current_span: Callable[..., Any]
    placeholder: Callable[[int, int, int], Any]  # (trace id, span id, flags) -> a span context's stand-in


_api: _Api
# The ids the span being made now takes (set and read in one synchronous step, so per thread is enough).
_forced = threading.local()
_shutdown: Any = None
_parents: dict[str, Any] = {}  # parent contexts by traceparent
PARENTS_KEPT = 4096

CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# OpenTelemetry's GenAI names for our providers (custom names pass through).
GEN_AI_PROVIDERS = {"gemini": "gcp.gemini", "google": "gcp.gemini", "local": "llama.cpp"}
CONTENT_CHARS = 4096  # a captured prompt, answer or output is cut here


# -- ids and trace context (pure: the Temporal workflow computes them too) ---------------------------------------

def run_span_id(run_id: str) -> str:
    """A run's span id."""
    return _derived(f"{run_id}\x00\x000")


def node_span_id(parent_span_id: str, path: str, attempt: int) -> str:
    """The span id of one attempt of the node at `path`, under the span `parent_span_id`: the run's for a
    top-level node (`run_span_id`), its container attempt's inside a container."""
    return _derived(f"{parent_span_id}\x00{path}\x00{attempt}")


def parent_span_of(traceparent: str) -> str:
    """The span id part of a W3C `traceparent`."""
    return traceparent[36:52]


def _derived(text: str) -> str:
    """16 hex digits, never all zero."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    return digest if digest != "0" * 16 else "0" * 15 + "1"


def traceparent_of(traceparent: str, span_id: str) -> str:
    """The context of span `span_id` in the trace of `traceparent` (same trace id and flags)."""
    return f"{traceparent[:36]}{span_id}{traceparent[52:]}"


def parse_traceparent(value: object) -> tuple[str, str, str] | None:
    """(trace id, span id, flags) of a W3C `traceparent`, or None when malformed (ignored, never an error)."""
    if not isinstance(value, str) or len(value) != 55 or value[2] != "-" or value[35] != "-" or value[52] != "-":
        return None
    version, trace_id, span_id, flags = value[:2], value[3:35], value[36:52], value[53:]
    try:
        int(version, 16), int(trace_id, 16), int(span_id, 16), int(flags, 16)
    except ValueError:
        return None
    if version == "ff" or trace_id == "0" * 32 or span_id == "0" * 16 or value != value.lower():
        return None
    return trace_id, span_id, flags


def trace_id_of(record: RunRecord) -> str | None:
    parsed = parse_traceparent(record.traceparent)
    return parsed[0] if parsed else None


# -- set-up --------------------------------------------------------------------------------------------------------

def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard variables ask for traces (the SDK reads OTEL_TRACES_EXPORTER only in its private
    auto-configuration, so it is read here)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()}
    if exporters:
        return exporters != {"none"}
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def configure(environ: Mapping[str, str] = os.environ, *, stdio: bool = False) -> bool:
    """Turn tracing on when the environment asks for it (once per process); True when it is on.
    `stdio`: stdout carries JSON-RPC, so a console exporter writes to stderr."""
    if ENABLED or not wanted(environ):
        return ENABLED
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        logger.warning("tracing is asked for (OTEL_*) but its packages are missing: pip install 'ice_mcp[otel]'")
        return False
    names = [e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if e.strip()]
    exporters: list[Any] = []
    for name in names:
        if name == "otlp":
            protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", ""))
            if protocol.strip() not in ("", "http/protobuf"):
                logger.warning("OTLP protocol %r is not supported here; traces go over http/protobuf", protocol)
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter(endpoint=_traces_endpoint(environ)))
        elif name == "console":
            exporters.append(ConsoleSpanExporter(out=sys.stderr) if stdio else ConsoleSpanExporter())
        elif name != "none":
            logger.warning("unknown traces exporter %r (OTEL_TRACES_EXPORTER): use otlp, console or none", name)
    if not exporters:
        return False
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; ours is the default name.
    resource = Resource.create({} if environ.get("OTEL_SERVICE_NAME") else {"service.name": "ice-mcp"})
    provider = TracerProvider(resource=resource, id_generator=_id_generator())
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider, capture_content=capture_content(environ))
    return True


def _traces_endpoint(environ: Mapping[str, str]) -> str | None:
    """OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, or OTEL_EXPORTER_OTLP_ENDPOINT with `/v1/traces` (the spec's
    rule), read from `environ` rather than the process's environment."""
    if traces := environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return traces
    if base := environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return base.rstrip("/") + "/v1/traces"
    return None


def install(provider: Any, *, capture_content: bool = False) -> None:
    """Trace with `provider` (an SDK TracerProvider built with `id_generator()`; tests pass an in-memory one)."""
    global ENABLED, CAPTURE_CONTENT, _tracer, _shutdown, _api
    from opentelemetry import context, trace

    if trace.get_tracer_provider() is not provider:
        trace.set_tracer_provider(provider)  # the SDK's request spans use it too (set once per process)
    _tracer = provider.get_tracer("ice_mcp")

    def placeholder(trace_id: int, span_id: int, flags: int) -> Any:
        return trace.NonRecordingSpan(trace.SpanContext(trace_id, span_id, is_remote=False,
                                                        trace_flags=trace.TraceFlags(flags)))

    _api = _Api(context.attach, context.detach, trace.set_span_in_context, trace.get_current_span, placeholder)
    CAPTURE_CONTENT = capture_content
    ENABLED = True
    if _shutdown is None:
        _shutdown = provider.shutdown
        atexit.register(shutdown)


def disable() -> None:
    """Stop tracing runs (tests; the provider, set once per process, stays for the SDK's own spans)."""
    global ENABLED
    ENABLED = False


def shutdown() -> None:
    """Export what is queued (at exit, and when a stdio session ends)."""
    flush()
    if _shutdown is not None:
        with contextlib.suppress(Exception):
            _shutdown()


def id_generator() -> Any:
    """The SDK id generator with our derived ids: random unless a span id was chosen for the span being made."""
    return _id_generator()


def _id_generator() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class DerivedIds(RandomIdGenerator):
        def generate_span_id(self) -> int:
            return getattr(_forced, "span_id", None) or super().generate_span_id()

        def generate_trace_id(self) -> int:
            return getattr(_forced, "trace_id", None) or super().generate_trace_id()

    return DerivedIds()


@contextlib.contextmanager
def _ids(trace_id: str | None, span_id: str) -> Iterator[None]:
    _forced.trace_id, _forced.span_id = (int(trace_id, 16) if trace_id else None), int(span_id, 16)
    try:
        yield
    finally:
        _forced.trace_id = _forced.span_id = None


def _parent(traceparent: str | None) -> Any:
    """An OTel context whose current span is the remote span `traceparent` names (None: a new root); kept, since
    every node of a graph level shares its parent."""
    context = _parents.get(traceparent) if traceparent is not None else None
    if context is not None:
        return context
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    parsed = parse_traceparent(traceparent)
    if parsed is None:
        return None
    trace_id, span_id, flags = parsed
    remote = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)))
    if len(_parents) >= PARENTS_KEPT:
        _parents.clear()
    context = _parents[traceparent] = trace.set_span_in_context(NonRecordingSpan(remote))  # type: ignore[index]
    return context


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1e9)


# -- runs ------------------------------------------------------------------------------------------------------------

def begin_run(record: RunRecord) -> None:
    """Give a new run its trace context: under the span current now (the SDK's `tools/call` span, which follows
    the request's `_meta.traceparent`), or a trace of its own. A run that already has one keeps it."""
    if not ENABLED or record.traceparent is not None:
        return
    from opentelemetry import trace

    current = trace.get_current_span().get_span_context()
    span_id = run_span_id(record.run_id)
    if current.is_valid:
        record.traceparent = f"00-{current.trace_id:032x}-{span_id}-{int(current.trace_flags):02x}"
        record.trace_parent_span = f"{current.span_id:016x}"
    else:
        record.traceparent = f"00-{secrets.token_hex(16)}-{span_id}-01"


def annotate_request(record: RunRecord) -> None:
    """Name the run on the span current now: the SDK's `tools/call` span (reused, never a second one)."""
    from opentelemetry import trace

    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({"ice.run.id": record.run_id, "ice.workflow": record.workflow,
                             "ice.trigger.kind": str((record.trigger or {}).get("kind") or "call")})


@contextlib.contextmanager
def continuing(traceparent: str | None) -> Iterator[None]:
    """Runs started inside go on in the sender's trace (a webhook's W3C `traceparent` header); a malformed
    one is ignored, as the W3C spec asks."""
    parent = _parent(traceparent) if ENABLED and traceparent else None
    if parent is None:
        yield
        return
    from opentelemetry import context as otel_context

    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


def workflow_operation(environ: Mapping[str, str] = os.environ) -> str:
    """`invoke_workflow`, or `invoke_agent` for the newer GenAI conventions (OTEL_SEMCONV_STABILITY_OPT_IN)."""
    opt_in = environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "")
    return "invoke_agent" if "gen_ai_latest_experimental" in opt_in else "invoke_workflow"


def capture_content(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether prompts, answers, tool arguments, outputs and error messages may leave the process."""
    return environ.get(CAPTURE_VARIABLE, "").strip().lower() == "true"


def end_run(record: RunRecord) -> None:
    """The run's span, made once when the run ends, from its record (start and end times included): a run
    that outlives its server, waits for days or moves between Temporal workers keeps no span open meanwhile."""
    if not ENABLED or _tracer is None or not record.done:
        return
    flush()  # its nodes' spans first
    parsed = parse_traceparent(record.traceparent)
    if parsed is None:
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    trace_id, span_id, flags = parsed
    parent = _parent(f"00-{trace_id}-{record.trace_parent_span}-{flags}") if record.trace_parent_span else None
    operation = workflow_operation()
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation, "ice.run.id": record.run_id, "ice.workflow": record.workflow,
        "ice.trigger.kind": str((record.trigger or {}).get("kind") or "call"), "ice.run.status": record.status,
        "gen_ai.usage.input_tokens": record.usage.input_tokens,
        "gen_ai.usage.output_tokens": record.usage.output_tokens,
        "gen_ai.usage.cost": record.cost_usd, "ice.cost_usd": record.cost_usd}
    if record.retry_of:
        attributes["ice.run.retry_of"] = record.retry_of
    with _ids(None if parent is not None else trace_id, span_id):
        span = _tracer.start_span(f"{operation} {record.workflow}", context=parent, kind=SpanKind.INTERNAL,
                                  attributes=attributes, start_time=_ns(record.started_at))
    if record.status != "succeeded":
        error = record.error or {}
        span.set_attribute("error.type", str(error.get("code") or record.status))
        span.set_status(Status(StatusCode.ERROR, _message(error)))
    span.end(end_time=_ns(record.finished_at))
    logger.info("run %s (%s) %s: trace %s", record.run_id, record.workflow, record.status, trace_id)


def _failed(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    # A timed-out attempt ends as a `timeout` NodeFailure inside its span; a cancellation is the run's stop.
    code = "cancelled" if isinstance(exc, asyncio.CancelledError) else str(getattr(exc, "code", "") or
                                                                           type(exc).__name__)
    span.set_attribute("error.type", code)
    span.set_status(Status(StatusCode.ERROR, str(exc)[:CONTENT_CHARS] if CAPTURE_CONTENT else code))


def _message(error: Mapping[str, Any]) -> str | None:
    if CAPTURE_CONTENT:
        return str(error.get("message", ""))[:CONTENT_CHARS]
    return str(error.get("code") or "error")


# -- node attempts -----------------------------------------------------------------------------------------------

class _Attempt(NamedTuple):
    """A node attempt that ended, as its span will say: made off the node's path (`_SpanBuilder`)."""

    name: str
    parent: Any  # the OTel context it hangs under
    span_id: int
    attributes: dict[str, Any]
    start_ns: int
    end_ns: int
    error: BaseException | None


class _SpanBuilder:
    """Makes the SDK spans of ended node attempts in a daemon thread of its own, one at a time (the GIL is let go
    between spans), so a node's path pays for a tuple on a queue, not for the SDK's span (~40 µs: sampler,
    attribute checks, processor hooks). `flush()` makes what is left at once (a run's end, shutdown)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Attempt] = queue.SimpleQueue()
        self._lock = threading.Lock()  # one span made at a time: a flush waits for the one being made
        self._thread: threading.Thread | None = None

    def put(self, attempt: _Attempt) -> None:
        self._queue.put(attempt)
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="ice-mcp-node-spans", daemon=True)
            self._thread.start()

    def _serve(self) -> None:
        while True:
            attempt = self._queue.get()
            with self._lock:
                _make_span(attempt)
            time.sleep(0)  # lets the GIL go: the event loop waits for no queue of spans

    def flush(self) -> None:
        with self._lock:
            while True:
                try:
                    attempt = self._queue.get_nowait()
                except queue.Empty:
                    return
                _make_span(attempt)


def _make_span(attempt: _Attempt) -> None:
    try:
        _forced.span_id = attempt.span_id
        try:
            span = _tracer.start_span(attempt.name, context=attempt.parent, attributes=attempt.attributes,
                                      start_time=attempt.start_ns)
        finally:
            _forced.span_id = None
        if attempt.error is not None:
            _failed(span, attempt.error)
        span.end(end_time=attempt.end_ns)
    except Exception:  # tracing must never break what it traces
        logger.exception("node span %s not made", attempt.name)


_builder = _SpanBuilder()


def flush() -> None:
    """Make the spans of the node attempts that ended so far (before a run's own span, and at shutdown)."""
    _builder.flush()


def _level(parent: str) -> tuple[Any, int, int] | None:
    """The OTel context of `parent` with its trace id and flags (kept with the context), or None (malformed)."""
    context = _parent(parent)
    if context is None:
        return None
    found = _levels.get(parent)
    if found is None or found[0] is not context:
        span_context = _api.get_current_span(context).get_span_context()
        found = _levels[parent] = (context, span_context.trace_id, int(span_context.trace_flags))
        if len(_levels) >= PARENTS_KEPT:
            _levels.clear()
    return found


_levels: dict[str, tuple[Any, int, int]] = {}


async def node_attempt(work: Awaitable[T], parent: str, span_id: str, node_id: str, node_type: str,
                       attempt: int, tool: str | None = None) -> T:
    """Await one attempt of one node as span `node {id}`: its id is current while it runs (so model calls, an
    agent's tool calls and upstream MCP requests hang beneath it), and the span itself is made once the attempt
    ends, from its start and end times, by `_SpanBuilder` (off the node's path). A `tool` node's span names its
    tool itself (`gen_ai.tool.name`): an `execute_tool` span under it would say the same again.
    A success leaves the status unset, as OTel advises."""
    attributes: dict[str, Any] = {"ice.node.id": node_id, "ice.node.type": node_type, "ice.node.attempt": attempt}
    if tool is not None:
        attributes["gen_ai.tool.name"] = tool
    level = _level(parent)
    if level is None:  # a malformed parent: a root span of its own, made here as before
        return await _node_span_now(work, int(span_id, 16), f"node {node_id}", attributes)
    context, trace_id, flags = level
    own = int(span_id, 16)
    token = _api.attach(_api.set_span_in_context(_api.placeholder(trace_id, own, flags)))
    start = time.time_ns()
    error: BaseException | None = None
    try:
        return await work
    except BaseException as exc:
        error = exc
        raise
    finally:
        _api.detach(token)
        _builder.put(_Attempt(f"node {node_id}", context, own, attributes, start, time.time_ns(), error))


async def _node_span_now(work: Awaitable[T], span_id: int, name: str, attributes: dict[str, Any]) -> T:
    _forced.span_id = span_id
    try:
        span = _tracer.start_span(name, attributes=attributes)
    finally:
        _forced.span_id = None
    token = _api.attach(_api.set_span_in_context(span))
    try:
        return await work
    except BaseException as exc:
        _failed(span, exc)
        raise
    finally:
        _api.detach(token)
        span.end()


def finished_node_span(parent: str, span_id: str, node_id: str, node_type: str, attempt: int,
                       start: float, end: float, error: Mapping[str, Any] | None) -> None:
    """The span of a node attempt that ran in a Temporal workflow (a condition, a container), made by the worker
    that journals its end: the workflow itself never emits (it is replayed)."""
    if not ENABLED or _tracer is None:
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    with _ids(None, span_id):
        span = _tracer.start_span(f"node {node_id}", context=_parent(parent), kind=SpanKind.INTERNAL, attributes={
            "ice.node.id": node_id, "ice.node.type": node_type, "ice.node.attempt": attempt},
            start_time=_ns(start))
    if error is not None:
        span.set_attribute("error.type", str(error.get("code") or "error"))
        span.set_status(Status(StatusCode.ERROR, _message(error)))
    span.end(end_time=_ns(end))


# -- model and tool calls (inside a node span) ------------------------------------------------------------------------

def gen_ai_provider(provider: str) -> str:
    return GEN_AI_PROVIDERS.get(provider, provider)


@contextlib.contextmanager
def chat_span(provider: str, model: str) -> Iterator[Any]:
    """A `chat {model}` client span around one model call; the caller records usage on what this yields."""
    from opentelemetry.trace import SpanKind

    span = _tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": gen_ai_provider(provider),
        "gen_ai.request.model": model})
    try:
        yield span
    except GeneratorExit:  # a stream its reader stopped early
        raise
    except BaseException as exc:
        _failed(span, exc)
        raise
    finally:
        span.end()


def record_completion(span: Any, model: str, input_tokens: int, output_tokens: int, cost_usd: float,
                      text: str | None = None) -> None:
    span.set_attributes({"gen_ai.response.model": model, "gen_ai.usage.input_tokens": input_tokens,
                         "gen_ai.usage.output_tokens": output_tokens, "gen_ai.usage.cost": cost_usd,
                         "ice.cost_usd": cost_usd})
    if CAPTURE_CONTENT and text is not None:
        span.set_attribute("gen_ai.output.messages", text[:CONTENT_CHARS])


@contextlib.contextmanager
def tool_span(tool: str, arguments: Any = None) -> Iterator[Any]:
    """An `execute_tool {tool}` span around one tool call."""
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if CAPTURE_CONTENT and arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _json(arguments)
    span = _tracer.start_span(f"execute_tool {tool}", kind=SpanKind.INTERNAL, attributes=attributes)
    try:
        yield span
    except BaseException as exc:
        _failed(span, exc)
        raise
    finally:
        span.end()


def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value, default=str)[:CONTENT_CHARS]
    except (TypeError, ValueError):
        return repr(value)[:CONTENT_CHARS]


def current_trace_id() -> str | None:
    """The trace id of the span current now (logs), or None."""
    if not ENABLED:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None
