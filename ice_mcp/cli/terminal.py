"""At the terminal: a run's live node table, and answers to a `human` node's questions typed at the prompt."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ice_mcp.errors import AnswerInvalid, NotWaiting
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.store.events import Event
from ice_mcp.store.node_states import NodeStates
from ice_mcp.store.vocabulary import EventType


class Progress:
    """A live table of node states on the terminal (stderr), fed by run events."""

    STYLES = {"running": "yellow", "retrying": "magenta", "waiting": "cyan", "succeeded": "green", "failed": "red",
              "skipped": "dim", "cancelled": "red"}

    def __init__(self, node_ids: Sequence[str]) -> None:
        from rich.console import Console
        from rich.live import Live

        self.states = dict.fromkeys(node_ids, "pending")
        self.nodes = NodeStates()  # the top-level nodes', as their events tell
        self.live = Live(self._table(), console=Console(stderr=True), refresh_per_second=12, transient=False)

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(show_header=True, header_style="bold")
        table.add_column("node")
        table.add_column("state")
        for node_id, state in self.states.items():
            table.add_row(node_id, f"[{self.STYLES.get(state, 'white')}]{state}[/]")
        return table

    def __call__(self, event: Event) -> None:
        if not event.top_level or event.node_id not in self.states:
            return
        state = self.nodes.apply(event)
        if state is not None:
            self.states[event.node_id] = state.phase
            self.live.update(self._table())


class TerminalAnswers:
    """Answers a run's `human` questions from this terminal: a prompt per question when stdin is a
    terminal, else one JSON object per line of stdin (`echo '{"approved": true}' | ice-mcp run gate.yaml`)."""

    def __init__(self, orchestrator: Orchestrator, progress: Progress | None) -> None:
        self._orc = orchestrator
        self._progress = progress
        self._interactive = sys.stdin.isatty()
        self._asked: asyncio.Queue[Event] = asyncio.Queue()

    def on_event(self, event: Event) -> None:
        if event.type == EventType.NODE_WAITING:
            self._asked.put_nowait(event)

    async def serve(self) -> None:
        """Answer questions as they come, one at a time (until cancelled)."""
        while True:
            event = await self._asked.get()
            if self._progress is not None:
                self._progress.live.stop()
            try:
                await self._answer(event)
            finally:
                if self._progress is not None:
                    self._progress.live.start()

    async def _answer(self, event: Event) -> None:
        path, data = str(event.node_id), event.data
        print(f"\n{path} asks: {data.get('question')}", file=sys.stderr)
        while True:
            try:
                answer = await _in_daemon_thread(lambda: self._read(data))
            except EOFError:
                # Nobody else can answer a question of this process: without a deadline, it is declined.
                waits = data.get("deadline") is not None
                print(f"no answer for {path} on stdin: " + ("it waits for its timeout" if waits else "declined"),
                      file=sys.stderr)
                if not waits:
                    await self._orc.respond(event.run_id, path, None, by="terminal", declined=True)
                return
            except ValueError as exc:
                print(f"  not an answer: {exc}", file=sys.stderr)
                if not self._interactive:
                    return
                continue
            try:
                await self._orc.respond(event.run_id, path, answer, by="terminal")
                return
            except NotWaiting:
                return  # timed out or cancelled meanwhile
            except AnswerInvalid as exc:
                print("  " + "; ".join(exc.problems), file=sys.stderr)
                if not self._interactive:
                    return

    def _read(self, data: dict[str, Any]) -> Any:
        """One answer: prompts on a terminal, else a JSON line. Raises ValueError (unreadable), EOFError."""
        if not self._interactive:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return json.loads(line)
        schema = data.get("schema") or {}
        if data.get("approval"):
            approved = _yes(input("  approve? [y/n] "))
            return {"approved": approved, "reason": input("  reason: " if not approved else "  note (optional): ")}
        properties = schema.get("properties") or {}
        if not properties or any(not isinstance(p, dict) or p.get("type") in ("object", "array", None)
                                 for p in properties.values()):
            return json.loads(input("  answer (a JSON object): "))
        answer: dict[str, Any] = {}
        for name, prop in properties.items():
            choices = f" {prop['enum']}" if isinstance(prop.get("enum"), list) else ""
            text = input(f"  {prop.get('title') or name} ({prop.get('type')}){choices}: ").strip()
            if text or name in (schema.get("required") or []):
                answer[name] = _typed(text, str(prop.get("type")))
        return answer


async def _in_daemon_thread(read: Callable[[], Any]) -> Any:
    """`read()` in a daemon thread: a prompt nobody answers never keeps the process from exiting."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def deliver(value: Any, error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(value)

    def work() -> None:
        try:
            value, error = read(), None
        except BaseException as exc:  # handed to the awaiting task
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(deliver, value, error)
        except RuntimeError:
            pass  # the loop closed: nobody waits any more

    threading.Thread(target=work, name="ice_mcp-terminal-answer", daemon=True).start()
    return await done


def _yes(text: str) -> bool:
    return text.strip().lower() in ("y", "yes", "true", "1", "ok")


def _typed(text: str, kind: str) -> Any:
    if kind == "boolean":
        return _yes(text)
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    return text
