"""Webhooks: time to 202 for signed deliveries spread over several servers on one Redis, against a floor.

1. Ours: N `ice-mcp serve --http` on one redis-server the bench starts; one Standard Webhooks hook on a one-node
   workflow; D deliveries (distinct webhook-ids, signed by the reference `standardwebhooks` package), C in
   flight at a time, sent round-robin to the servers. Per delivery: the time from sending to the 202 (verify,
   dedupe in the store, map, validate, start the run and keep its delivery). Then every run is counted.
2. The floor (the peer): a bare Starlette app under uvicorn in one process, whose endpoint verifies the same
   deliveries with the reference package and answers 202 with nothing stored or run; the same D and C against
   one process. The ratio ours / floor is how much the durable, deduplicated start costs.
Run: `.venv/bin/python bench/webhooks.py [--servers 3] [--deliveries 1000] [--concurrency 20] [--keep DIR]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import httpx2
from standardwebhooks import Webhook

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ice_mcp_dev: in the checkout, not installed

from ice_mcp.store.sqlite import open_store
from ice_mcp_dev.cluster import Child, McpServer, RedisProcess, free_port

ONE_NODE = {"name": "received", "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "nodes": [{"id": "r", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "ok"}}]}
FLOOR_APP = '''
import sys
from standardwebhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

hook = Webhook(sys.argv[2])

async def receive(request):
    body = await request.body()
    try:
        hook.verify(body, dict(request.headers))
    except WebhookVerificationError:
        return JSONResponse({"error": "unverified"}, status_code=401)
    return JSONResponse({"accepted": request.headers["webhook-id"]}, status_code=202)

app = Starlette(routes=[Route("/hooks/floor", receive, methods=["POST"])])
if __name__ == "__main__":
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
'''


def pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def deliveries(secret: str, count: int) -> list[tuple[bytes, dict[str, str]]]:
    signer, made = Webhook(secret), []
    for n in range(count):
        body = json.dumps({"n": n}).encode()
        delivery, moment = f"msg_{uuid.uuid4().hex}", datetime.now(UTC)
        made.append((body, {"webhook-id": delivery, "webhook-timestamp": str(int(moment.timestamp())),
                            "webhook-signature": signer.sign(delivery, moment, body.decode()),
                            "content-type": "application/json"}))
    return made


async def send_all(urls: Sequence[str], signed: list[tuple[bytes, dict[str, str]]], concurrency: int
                   ) -> tuple[list[float], list[str], float]:
    """Seconds to each answer, the run ids (or statuses), and the wall time of the whole batch."""
    times: list[float] = []
    answers: list[str] = []
    queue = list(enumerate(signed))
    limits = httpx2.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2)
    async with httpx2.AsyncClient(timeout=30, limits=limits) as http:
        async def worker() -> None:
            while queue:
                number, (body, headers) = queue.pop()
                began = time.perf_counter()
                answer = await http.post(urls[number % len(urls)], content=body, headers=headers)
                times.append(time.perf_counter() - began)
                if answer.status_code == 202:
                    answers.append(str(answer.json().get("run_id") or answer.json().get("accepted")))
                else:
                    answers.append(f"status {answer.status_code}: {answer.text[:200]}")
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return times, answers, time.perf_counter() - began


def report(name: str, times: list[float], wall: float) -> None:
    print(f"  {name}: {len(times)} deliveries in {wall:.1f} s ({len(times) / wall:.0f}/s); time to 202 "
          f"p50 {pct(times, 50) * 1000:.1f} ms, p99 {pct(times, 99) * 1000:.1f} ms, "
          f"mean {statistics.fmean(times) * 1000:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--deliveries", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="work in this new folder and keep it (servers' logs)")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="ice-bench-webhooks-"))
    root.mkdir(parents=True, exist_ok=True)
    children: list[Child] = []
    try:
        redis = RedisProcess(root / "redis")
        children.append(redis)
        redis.start()
        (root / "blueprints").mkdir(exist_ok=True)
        (root / "blueprints" / "received.json").write_text(json.dumps(ONE_NODE))
        servers = []
        for number in range(args.servers):
            home = root / f"server{number}"
            home.mkdir(exist_ok=True)
            env = {**os.environ, "ICE_MCP_WORKSPACE": str(home)}
            server = McpServer(f"server {number}", root / "logs" / f"server{number}.log", 0,
                               ["--state", redis.url(), "--blueprints", str(root / "blueprints")], env)
            children.append(server)
            servers.append(server)
            server.start()
        reply = httpx2.post(f"{servers[0].url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "webhook.create",
                                                           "params": {"workflow": "received"}}).json()["result"]
        urls = [f"{server.url}/hooks/{reply['id']}" for server in servers]
        asyncio.run(send_all(urls, deliveries(reply["secret"], 20), 5))  # warm up: connections, first runs
        signed = deliveries(reply["secret"], args.deliveries)
        print(f"webhooks: {args.deliveries} signed deliveries, {args.concurrency} in flight, "
              f"{args.servers} servers on one Redis")
        times, answers, wall = asyncio.run(send_all(urls, signed, args.concurrency))
        report("ice_mcp (verify, dedupe, start a durable run)", times, wall)
        bad = [a for a in answers if a.startswith("status")]
        time.sleep(2)  # the servers write run records in batches: let the last ones land
        store = open_store(redis.url(), root)
        kept = sum(store.get(run_id) is not None for run_id in set(answers) - set(bad))
        store.close()
        print(f"  runs: {len(set(answers) - set(bad))} distinct run ids in the answers, {kept} of them in the store, "
              f"{len(bad)} answers not 202" + (f" (first: {bad[0]})" if bad else ""))

        port = free_port()
        floor_script = root / "floor_app.py"
        floor_script.write_text(FLOOR_APP)
        floor = Child("floor", [sys.executable, str(floor_script), str(port), reply["secret"]], root / "logs" / "floor.log")
        children.append(floor)
        floor.start()
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx2.post(f"http://127.0.0.1:{port}/hooks/floor", content=b"{}", timeout=1)
                break
            except httpx2.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        floor_urls = [f"http://127.0.0.1:{port}/hooks/floor"]
        asyncio.run(send_all(floor_urls, deliveries(reply["secret"], 20), 5))
        floor_times, _, floor_wall = asyncio.run(send_all(floor_urls, deliveries(reply["secret"], args.deliveries),
                                                          args.concurrency))
        report("floor (Starlette + the standardwebhooks verifier, nothing stored, one process)", floor_times, floor_wall)
        print(f"  ratio ours / floor: p50 {pct(times, 50) / pct(floor_times, 50):.1f}x, "
              f"p99 {pct(times, 99) / pct(floor_times, 99):.1f}x")
    finally:
        for child in reversed(children):
            try:
                child.stop()
            except Exception as exc:
                print(f"  (stopping {child.name}: {exc})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
