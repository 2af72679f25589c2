"""Built-in tools: csv_reader, json_query, file_read/file_write (workspace-confined), http_request, etc."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator, Settings
from ice_mcp.store.records import NodeRecord

from .helpers import blueprint, tool

BUILTINS = {"csv_reader", "file_read", "file_write", "json_query", "render_template", "http_request", "sleep"}


async def call(orc: Orchestrator, name: str, **args: Any) -> NodeRecord:
    record = await orc.run(blueprint(tool("t", name, args)))
    return record.nodes["t"]


async def call_at_run_time(orc: Orchestrator, name: str, **args: Any) -> NodeRecord:
    """The arguments reach the tool only when the run renders them (validation cannot see them)."""
    record = await orc.run(blueprint(tool("t", name, {key: f"{{{{ inputs.{key} }}}}" for key in args})), args)
    return record.nodes["t"]


def refused_at_validation(orc: Orchestrator, name: str, **args: Any) -> list[tuple[str, str | None]]:
    return [(e.code, e.field) for e in orc.validate(blueprint(tool("t", name, args))).errors]


def test_builtins_are_registered_with_annotations(orc: Orchestrator) -> None:
    assert set(orc.registry.tools) >= BUILTINS
    assert orc.registry.tools["file_read"].annotations.read_only
    assert orc.registry.tools["file_write"].annotations.destructive
    assert orc.registry.tools["http_request"].annotations.open_world
    assert orc.registry.tools["csv_reader"].blocking


def test_builtins_can_be_left_out(registry: Any, settings: Settings) -> None:
    settings.persist_runs = False
    Orchestrator(registry=registry, settings=settings, builtin_tools=False)
    assert registry.tools == {}


# -- csv_reader -------------------------------------------------------------


async def test_csv_reader(orc: Orchestrator, settings: Settings) -> None:
    (settings.workspace / "data").mkdir()
    (settings.workspace / "data" / "s.csv").write_text("week,amount\nw1,10\nw2,20.5\nw1,5\n")
    node = await call(orc, "csv_reader", path="data/s.csv")
    assert node.status == "succeeded"
    assert node.output == {"rows": [{"week": "w1", "amount": "10"}, {"week": "w2", "amount": "20.5"},
                                    {"week": "w1", "amount": "5"}],
                           "columns": ["week", "amount"], "count": 3}
    node = await call(orc, "csv_reader", path="data/s.csv", limit=1)
    assert node.output["rows"] == [{"week": "w1", "amount": "10"}]
    assert node.output["count"] == 1
    (settings.workspace / "semi.csv").write_text("a;b\n1;2\n")
    node = await call(orc, "csv_reader", path="semi.csv", delimiter=";")
    assert node.output["rows"] == [{"a": "1", "b": "2"}]


async def test_csv_reader_missing_file(orc: Orchestrator, settings: Settings) -> None:
    node = await call(orc, "csv_reader", path="nope.csv")
    assert node.status == "failed"
    # The folder by its absolute path and how to choose another: no dead end (issue 28).
    workspace = str(settings.workspace.resolve())
    assert node.error == {"code": "not_found", "message": (
        f"no file 'nope.csv' in the workspace {workspace} (paths are relative to it; "
        "the server's --workspace DIR or ICE_MCP_WORKSPACE sets another; file_list lists its files)"),
        "details": {"path": "nope.csv", "workspace": workspace}}


async def test_a_remote_servers_file_errors_name_no_folder(orc: Orchestrator, settings: Settings) -> None:
    settings.name_workspace = False  # as `serve --http` sets it: callers are remote
    node = await call(orc, "csv_reader", path="nope.csv")
    assert node.error == {"code": "not_found", "message": (
        "no file 'nope.csv' in the server's workspace (paths are relative to it; "
        "the server's --workspace DIR or ICE_MCP_WORKSPACE sets another; file_list lists its files)"),
        "details": {"path": "nope.csv"}}
    node = await call(orc, "file_read", path="../secret.txt")
    assert node.error is not None and node.error["details"] == {"path": "../secret.txt"}
    assert str(settings.workspace.resolve()) not in node.error["message"]


async def test_file_list_lists_the_workspace_relative_to_it(orc: Orchestrator, settings: Settings) -> None:
    (settings.workspace / "in" / "deep").mkdir(parents=True)
    (settings.workspace / "in" / "a.csv").write_text("x\n1\n")
    (settings.workspace / "in" / "deep" / "b.csv").write_text("x\n")
    (settings.workspace / "in" / "notes.txt").write_text("hello")
    node = await call(orc, "file_list", folder="in", pattern="*.csv")
    assert node.output == {"files": [{"path": "in/a.csv", "bytes": 4}, {"path": "in/deep/b.csv", "bytes": 2}],
                           "truncated": False}
    assert (await call(orc, "file_list", folder="../")).error["code"] == "forbidden"  # type: ignore[index]
    assert (await call(orc, "file_list", folder="in/notes.txt")).error["code"] == "invalid_arguments"  # type: ignore[index]


# -- json_query -------------------------------------------------------------


async def test_json_query(orc: Orchestrator) -> None:
    data = {"orders": [{"id": 1, "total": 50}, {"id": 2, "total": 150}, {"id": 3, "total": 300}]}
    node = await call(orc, "json_query", data=data, path="orders[?total > `100`].id")
    assert node.output == {"result": [2, 3]}
    node = await call(orc, "json_query", data=json.dumps(data), path="length(orders)")
    assert node.output == {"result": 3}
    node = await call(orc, "json_query", data=data, path="missing")
    assert node.output == {"result": None}


@pytest.mark.parametrize(("args", "start"), [
    ({"data": {"a": 1}, "path": "a[?"}, "invalid path 'a[?'"),
    ({"data": "{not json", "path": "a"}, "data is not JSON"),
])
async def test_json_query_errors(orc: Orchestrator, args: dict[str, Any], start: str) -> None:
    node = await call(orc, "json_query", **args)
    assert node.error["code"] == "invalid_arguments"
    assert node.error["message"].startswith(start)
    assert node.attempts == 1


# -- file_read / file_write -------------------------------------------------


async def test_file_write_then_read(orc: Orchestrator, settings: Settings) -> None:
    node = await call(orc, "file_write", path="out/notes.txt", text="héllo\n")
    assert node.output == {"path": "out/notes.txt", "bytes": 7, "appended": False}
    node = await call(orc, "file_write", path="out/notes.txt", text="more", append=True)
    assert node.output == {"path": "out/notes.txt", "bytes": 4, "appended": True}
    assert (settings.workspace / "out" / "notes.txt").read_text() == "héllo\nmore"
    node = await call(orc, "file_read", path="out/notes.txt")
    assert node.output == {"path": "out/notes.txt", "text": "héllo\nmore", "bytes": 11}
    inside = str((settings.workspace / "out" / "notes.txt").resolve())
    node = await call(orc, "file_read", path=inside)
    assert node.output["text"] == "héllo\nmore"


@pytest.fixture
def outside(tmp_path: Path, settings: Settings) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (settings.workspace / "link_file").symlink_to(secret)
    (settings.workspace / "link_dir").symlink_to(tmp_path)
    return secret


@pytest.mark.parametrize("name", ["file_read", "csv_reader"])
@pytest.mark.parametrize("path", ["ABSOLUTE", "../secret.txt", "sub/../../secret.txt", "link_file",
                                  "link_dir/secret.txt", "/etc/passwd"])
async def test_reads_outside_the_workspace_are_forbidden(orc: Orchestrator, outside: Path, name: str,
                                                         path: str, settings: Settings) -> None:
    path = str(outside) if path == "ABSOLUTE" else path
    node = await call(orc, name, path=path)
    assert node.status == "failed"
    workspace = str(settings.workspace.resolve())
    assert node.error == {"code": "forbidden", "message": (
        f"path {path!r} is outside the workspace {workspace} (file tools use only that "
        "folder; the server's --workspace DIR or ICE_MCP_WORKSPACE sets another)"),
        "details": {"path": path, "workspace": workspace}}


@pytest.mark.parametrize("path", ["ABSOLUTE", "../escaped.txt", "link_file", "link_dir/escaped.txt"])
async def test_writes_outside_the_workspace_are_forbidden(orc: Orchestrator, outside: Path, tmp_path: Path,
                                                          path: str) -> None:
    path = str(tmp_path / "escaped.txt") if path == "ABSOLUTE" else path
    node = await call(orc, "file_write", path=path, text="pwned")
    assert node.error["code"] == "forbidden"
    assert not (tmp_path / "escaped.txt").exists()
    assert outside.read_text() == "top secret"


async def test_file_read_a_folder_and_bad_encoding(orc: Orchestrator, settings: Settings) -> None:
    (settings.workspace / "folder").mkdir()
    node = await call(orc, "file_read", path="folder")
    assert node.error == {"code": "invalid_arguments", "message": "'folder' is a folder"}
    (settings.workspace / "bin.dat").write_bytes(b"\xff\xfe\xfa")
    node = await call(orc, "file_read", path="bin.dat")
    assert node.error["code"] == "invalid_file"


# -- http_request -----------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    release = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/json"):
            self._send(200, json.dumps({"hello": "world", "path": self.path}).encode())
        elif self.path == "/text":
            self._send(200, b"plain text", "text/plain; charset=utf-8")
        elif self.path == "/big":
            self._send(200, b"x" * 10_000, "text/plain")
        elif self.path == "/slow":
            self.release.wait(5)
            self._send(200, b"late", "text/plain")
        elif self.path == "/fail":
            self._send(503, b"down", "text/plain")
        elif self.path == "/missing":
            self._send(404, b"no", "text/plain")
        else:
            self._send(400, b"?", "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        self._send(201, json.dumps({"got": json.loads(body), "auth": self.headers.get("X-Token")}).encode())


@pytest.fixture
def server(settings: Settings) -> Iterator[str]:
    settings.allow_net = ("127.0.0.1",)  # the egress guard refuses loopback unless the operator allows it
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False
    Handler.release.clear()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    Handler.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


async def test_http_get_json(orc: Orchestrator, server: str) -> None:
    node = await call(orc, "http_request", url=f"{server}/json", params={"q": "1"})
    assert node.status == "succeeded"
    assert node.output["status"] == 200
    assert node.output["json"] == {"hello": "world", "path": "/json?q=1"}
    assert node.output["headers"]["content-type"] == "application/json"
    node = await call(orc, "http_request", url=f"{server}/text")
    assert node.output["text"] == "plain text"
    assert "json" not in node.output


async def test_http_post_json_body_and_headers(orc: Orchestrator, server: str) -> None:
    node = await call(orc, "http_request", url=f"{server}/post", method="POST", json_body={"a": [1, 2]},
                      headers={"X-Token": "t0k"})
    assert node.output["status"] == 201
    assert node.output["json"] == {"got": {"a": [1, 2]}, "auth": "t0k"}


async def test_http_4xx_is_returned_5xx_fails(orc: Orchestrator, server: str) -> None:
    node = await call(orc, "http_request", url=f"{server}/missing")
    assert node.status == "succeeded"
    assert node.output["status"] == 404
    node = await call(orc, "http_request", url=f"{server}/fail")
    assert node.error == {"code": "http_status", "message": f"GET {server}/fail answered 503",
                          "details": {"status": 503, "body": "down"}}


async def test_http_size_cap(orc: Orchestrator, server: str, settings: Settings) -> None:
    node = await call(orc, "http_request", url=f"{server}/big", max_bytes=100)
    assert node.error == {"code": "too_large", "message": "response larger than 100 bytes"}
    settings.http_max_bytes = 1000  # the server-wide cap wins over a larger request
    node = await call(orc, "http_request", url=f"{server}/big", max_bytes=1_000_000)
    assert node.error == {"code": "too_large", "message": "response larger than 1000 bytes"}


async def test_http_timeout(orc: Orchestrator, server: str) -> None:
    node = await call(orc, "http_request", url=f"{server}/slow", timeout_seconds=0.05)
    assert node.error == {"code": "timeout", "message": f"request to {server}/slow timed out"}


async def test_http_connection_refused(orc: Orchestrator, server: str) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    node = await call(orc, "http_request", url=f"http://127.0.0.1:{port}/")
    assert node.error["code"] == "http_error"
    assert node.error["message"].startswith(f"request to http://127.0.0.1:{port}/ failed:")


async def test_http_refuses_non_http_urls(orc: Orchestrator) -> None:
    # regression: Annotated[..., Field(pattern=...)] constraints used to be dropped from tool schemas
    assert orc.registry.tools["http_request"].input_schema["properties"]["url"]["pattern"] == "^https?://"
    node = await call_at_run_time(orc, "http_request", url="file:///etc/passwd")
    assert node.error["code"] == "invalid_arguments"
    assert node.attempts == 1
    assert refused_at_validation(orc, "http_request", url="file:///etc/passwd") == [("invalid_tool_args",
                                                                                      "tool_args.url")]


# -- render_template and sleep ----------------------------------------------


async def test_render_template(orc: Orchestrator) -> None:
    # the blueprint renders tool_args first: the tool receives "Hi {{ name }}"
    node = await call(orc, "render_template", template="Hi {{ '{{' }} name {{ '}}' }}", data={"name": "Ada"})
    assert node.output == {"text": "Hi Ada"}
    entry = orc.registry.tools["render_template"]
    assert await entry.invoke({"template": "Hi {{ name }}", "data": {"name": "Ada"}}) == {"text": "Hi Ada"}
    assert await entry.invoke({"template": "{{ xs | sum }}", "data": {"xs": [1, 2]}}) == {"text": 3}


@pytest.mark.parametrize("template", ["{% for x in y %}{% endfor %}", "{{ oops "])
async def test_render_template_refuses_bad_templates(orc: Orchestrator, template: str) -> None:
    entry = orc.registry.tools["render_template"]
    from ice_mcp import NodeFailure

    with pytest.raises(NodeFailure) as info:
        await entry.invoke({"template": template})
    assert info.value.code == "invalid_arguments"
    assert info.value.message.startswith("invalid template:")


async def test_render_template_abuse_fails(orc: Orchestrator) -> None:
    from ice_mcp import NodeFailure

    with pytest.raises(NodeFailure) as info:
        await orc.registry.tools["render_template"].invoke({"template": "{{ 'a' * 10**10 }}"})
    assert info.value.code == "template_error"


async def test_sleep_tool(orc: Orchestrator) -> None:
    node = await call(orc, "sleep", seconds=0)
    assert node.output == {"slept": 0.0}
    node = await call_at_run_time(orc, "sleep", seconds="soon")
    assert node.error["code"] == "invalid_arguments"
    assert refused_at_validation(orc, "sleep", seconds="soon") == [("invalid_tool_args", "tool_args.seconds")]


@pytest.mark.parametrize("seconds", [-1, 301])
async def test_sleep_tool_bounds(orc: Orchestrator, seconds: float) -> None:
    entry = orc.registry.tools["sleep"]
    assert entry.input_schema["properties"]["seconds"]["maximum"] == 300
    assert entry.input_schema["properties"]["seconds"]["minimum"] == 0
    node = await call_at_run_time(orc, "sleep", seconds=seconds)
    assert node.error["code"] == "invalid_arguments"
    assert refused_at_validation(orc, "sleep", seconds=seconds) == [("invalid_tool_args", "tool_args.seconds")]


async def test_sleep_tool_is_cancellable(orc: Orchestrator) -> None:
    record = await asyncio.wait_for(orc.run(blueprint(tool("t", "sleep", {"seconds": 10}, timeout_seconds=0.05))), 5)
    assert record.nodes["t"].error == {"code": "timeout", "message": "attempt timed out after 0.05 s"}
