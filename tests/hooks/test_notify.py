"""Notifications out: a receiver answering 500, 500, then 200 gets three attempts with one webhook-id, each
accepted by the reference `standardwebhooks` verifier; 410 disables the target; the cloud metadata address is
refused before any connection; only matching runs and endings are sent."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.errors import IceError

FAILS = {"name": "fails", "nodes": [{"id": "f", "type": "code", "code": "raise ValueError('no sales file')",
                                     "retries": 0}]}
WORKS = {"name": "works", "nodes": [{"id": "w", "type": "tool", "tool_name": "render_template",
                                     "tool_args": {"template": "fine"}}], "outputs": {"text": "{{ w.text }}"}}


@pytest.fixture
async def orc(tmp_path: Path) -> Any:
    settings = Settings(data_dir=tmp_path / "data", workspace=tmp_path, allow_net=("127.0.0.1",),
                        notify_backoff=(0.3, 0.6, 1.0, 1.0))
    orchestrator = Orchestrator(registry=Registry(), settings=settings)
    orchestrator.register_blueprint(FAILS)
    orchestrator.register_blueprint(WORKS)
    orchestrator.notifications.start_loop()
    yield orchestrator
    await orchestrator.aclose()


async def wait_for(check: Any, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.05)


async def test_retries_until_a_2xx_with_one_webhook_id_each_signature_verified(orc: Orchestrator,
                                                                                 make_receiver: Any) -> None:
    with make_receiver([500, 500]) as (got, url):
        target = orc.notifications.set(workflow="fails", url=url, on=["failed"])
        other = orc.notifications.set(workflow="works", url=url, on=["failed"])  # works never fails: nothing
        record = await orc.run("fails", {})
        assert record.status == "failed"
        await orc.run("works", {})
        await wait_for(lambda: len(got.received) == 3)
        await asyncio.sleep(0.5)
        assert len(got.received) == 3
    ids = {headers["webhook-id"] for headers, _, _ in got.received}
    assert ids == {f"evt_{record.run_id}_failed"}
    verifier = Webhook(target["secret"])
    for headers, body, _ in got.received:
        event = verifier.verify(body, headers)  # the reference verifier accepts every attempt
        assert event["type"] == "run.failed" and event["data"]["run_id"] == record.run_id
        assert event["data"]["workflow"] == "fails" and "no sales file" in event["data"]["error"]["message"]
    history = orc.notifications.history(target["id"])["deliveries"]
    assert [(d["state"], [a["status"] for a in d["attempts"]]) for d in history] == [("delivered", [500, 500, 200])]
    assert orc.notifications.history(other["id"])["deliveries"] == []


async def test_a_410_disables_the_target_and_the_metadata_address_is_refused(orc: Orchestrator,
                                                                              make_receiver: Any) -> None:
    with make_receiver([410]) as (got, url):
        gone = orc.notifications.set(workflow="works", url=url, on=["succeeded"])
        await orc.run("works", {})
        await wait_for(lambda: orc.notifications.history(gone["id"])["deliveries"][0]["state"] == "disabled")
        await orc.run("works", {})
        await asyncio.sleep(0.5)
        assert len(got.received) == 1 and orc.notifications.list()["targets"][0]["disabled"] is True
    metadata = orc.notifications.set(workflow="fails", url="http://169.254.169.254/latest/meta-data", on=["failed"])
    await orc.run("fails", {})
    await wait_for(lambda: (orc.notifications.history(metadata["id"])["deliveries"] or [{}])[0].get("state") == "failed")
    [delivery] = orc.notifications.history(metadata["id"])["deliveries"]
    [attempt] = delivery["attempts"]
    assert "status" not in attempt and "refused to connect to 169.254.169.254" in attempt["error"]


async def test_an_idle_outbox_loop_looks_once_a_second_before_and_after_a_retry(
        orc: Orchestrator, make_receiver: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop waits on its wake-up or its next look, never 0 s: it used to spin (a core per idle server)
    from its start until a retry was scheduled, and again once that retry's time had passed."""
    looks = 0
    claim_due = orc.store.claim_due

    def counted(now: float, lease: float) -> Any:
        nonlocal looks
        looks += 1
        return claim_due(now, lease)

    monkeypatch.setattr(orc.store, "claim_due", counted)
    await asyncio.sleep(1.2)
    assert looks <= 3  # at most one look a second (a spinning loop made thousands)
    with make_receiver([500]) as (got, url):
        target = orc.notifications.set(workflow="fails", url=url, on=["failed"])
        await orc.run("fails", {})
        await wait_for(lambda: [d["state"] for d in orc.notifications.history(target["id"])["deliveries"]]
                       == ["delivered"])
        looks = 0
        await asyncio.sleep(1.2)  # the retry's time is past now
        assert looks <= 3 and len(got.received) == 2


async def test_bad_targets_are_refused_with_every_problem(orc: Orchestrator) -> None:
    with pytest.raises(IceError) as raised:
        orc.notifications.set(workflow="nope", url="ftp://x", on=["exploded"], secret="plain")
    assert raised.value.code == "invalid_notify"
    assert [e["path"] for e in raised.value.details["errors"]] == ["url", "workflow", "on", "secret"]
    assert orc.notifications.list() == {"targets": []}


def test_the_default_backoff_retries_within_10_s_and_a_minute_at_least_five_times() -> None:
    from random import Random

    from ice_mcp.notify.desk import backoff

    delays = Settings().notify_backoff
    for seed in range(50):
        rng = Random(seed)
        waits = []
        while (wait := backoff(len(waits) + 1, delays, rng)) is not None:
            waits.append(wait)
        assert waits[0] <= 10 and waits[0] + waits[1] <= 60 and len(waits) + 1 >= 5


async def test_a_workflow_target_runs_once_with_the_event_as_its_inputs(orc: Orchestrator) -> None:
    orc.register_blueprint({
        "name": "on_failure", "inputs": {"type": "object", "properties": {
            "type": {"type": "string"}, "timestamp": {"type": "string"}, "data": {"type": "object"}},
            "required": ["type", "data"]},
        "nodes": [{"id": "n", "type": "tool", "tool_name": "render_template",
                   "tool_args": {"template": "{{ inputs.type }} {{ inputs.data.run_id }} {{ trigger.kind }}"}}],
        "outputs": {"text": "{{ n.text }}"}})
    target = orc.notifications.set(workflow="fails", workflow_target="on_failure", on=["failed"])
    assert target["workflow_target"] == "on_failure" and "url" not in target
    failed = await orc.run("fails", {})
    await wait_for(lambda: any(r.workflow == "on_failure" and r.status == "succeeded" for r in orc.list_runs()))
    [run] = [r for r in orc.list_runs() if r.workflow == "on_failure"]
    assert run.outputs == {"text": f"run.failed {failed.run_id} notification"}
    [delivery] = orc.notifications.history(target["id"])["deliveries"]
    assert delivery["state"] == "delivered" and delivery["attempts"][0]["run_id"] == run.run_id
    with pytest.raises(IceError):
        orc.notifications.set(workflow="fails", url="http://127.0.0.1/x", workflow_target="on_failure")


async def test_an_event_no_process_put_in_the_outbox_is_sent_by_the_next_sweep(tmp_path: Path,
                                                                               make_receiver: Any) -> None:
    """The process that saw the run end died before its event reached the outbox (here: it never watched):
    the next server's sweep finds the ended run and sends its event, once, though it sweeps again."""
    settings = Settings(data_dir=tmp_path / "data", workspace=tmp_path, allow_net=("127.0.0.1",))
    gone = Orchestrator(registry=Registry(), settings=settings)
    gone.register_blueprint(FAILS)
    with make_receiver([]) as (got, url):
        gone.notifications.set(workflow="fails", url=url, on=["failed"])
        record = await gone.run("fails", {})
        await gone.aclose()
        assert got.received == []
        later = Orchestrator(registry=Registry(), settings=settings)
        later.register_blueprint(FAILS)
        try:
            later.notifications.start_loop()
            await wait_for(lambda: len(got.received) == 1)
            later.notifications.sweep()  # a sweep finds the event kept: nothing more is sent
            await asyncio.sleep(1.5)
        finally:
            await later.aclose()
    assert [headers["webhook-id"] for headers, _, _ in got.received] == [f"evt_{record.run_id}_failed"]
