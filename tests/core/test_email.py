"""email_send against a real SMTP server on loopback (aiosmtpd): the message arrives whole (subject, text, HTML,
attachment) over STARTTLS with a login; refusals, a failed login, no server and no configuration are errors."""

from __future__ import annotations

import email
import email.policy
import socket
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry, Settings

SEND = {"name": "mail", "inputs": {"type": "object", "properties": {
    "to": {"type": "array", "items": {"type": "string"}}, "attachments": {"type": "array"}}},
    "nodes": [{"id": "send", "type": "tool", "tool_name": "email_send", "retries": 0, "tool_args": {
        "to": "{{ inputs.to }}", "subject": "Weekly sales", "text": "Total: 3108.0",
        "html": "<p>Total: <b>3108.0</b></p>", "attachments": "{{ inputs.attachments or [] }}"}}],
    "outputs": {"sent": "{{ send }}"}}


def mailer(tmp_path: Path, url: str | None) -> Orchestrator:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "reports").mkdir(exist_ok=True)
    (workspace / "reports" / "weekly.md").write_text("# Weekly sales\n\n- total: 3108.0\n")
    orc = Orchestrator(registry=Registry(), settings=Settings(
        data_dir=tmp_path / "data", workspace=workspace, smtp_url=url, smtp_from="ice@example.org"))
    orc.register_blueprint(SEND)
    return orc


async def test_the_message_arrives_with_subject_bodies_and_attachment(tmp_path: Path,
                                                                      smtp: tuple[Any, int]) -> None:
    inbox, port = smtp
    orc = mailer(tmp_path, f"smtp://robot:s3cret@127.0.0.1:{port}")
    try:
        record = await orc.run("mail", {"to": ["ada@example.org", "bob@example.org"],
                                        "attachments": ["reports/weekly.md"]})
    finally:
        await orc.aclose()
    assert record.status == "succeeded", record.error
    sent = record.outputs["sent"]  # type: ignore[index]
    assert sent["sent"] is True and sent["message_id"].startswith(f"<{record.run_id}.send.1@")
    [(sender, recipients, raw)] = inbox.messages
    assert sender == "ice@example.org" and recipients == ["ada@example.org", "bob@example.org"]
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert message["Subject"] == "Weekly sales" and message["Message-ID"] == sent["message_id"]
    assert message.get_body(("plain",)).get_content().strip() == "Total: 3108.0"  # type: ignore[union-attr]
    assert "<b>3108.0</b>" in message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    [attachment] = list(message.iter_attachments())
    assert attachment.get_filename() == "weekly.md"
    assert attachment.get_content() == "# Weekly sales\n\n- total: 3108.0\n"


@pytest.mark.parametrize(("url", "code", "words"), [
    ("smtp://robot:wrong@127.0.0.1:{port}", "smtp_error", "535"),
    ("smtp://robot:s3cret@127.0.0.1:{port}", "smtp_refused", "550"),
    ("smtp://127.0.0.1:{closed}", "smtp_unavailable", "cannot reach"),
    (None, "not_configured", "ICE_MCP_SMTP_URL"),
])
async def test_failures_are_errors_the_model_can_read(tmp_path: Path, smtp: tuple[Any, int], url: str | None,
                                                      code: str, words: str) -> None:
    inbox, port = smtp
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens there once the probe closed
    orc = mailer(tmp_path, url.format(port=port, closed=closed) if url else None)
    try:
        record = await orc.run("mail", {"to": ["nobody@example.org"]})
    finally:
        await orc.aclose()
    assert record.status == "failed" and record.error is not None
    node = record.nodes["send"].error
    assert node is not None and node["code"] == code and words in node["message"], node
    assert inbox.messages == []
