"""The bundled weekly_sales_report network end to end: its schedule is declared, a trigger runs csv_report then
sales_insights (an llm node, through the official SDK against aimock) and the report is emailed (aiosmtpd)."""

from __future__ import annotations

import email
import email.policy
import shutil
from pathlib import Path
from typing import Any

import yaml

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.llm import LLMService

ROOT = Path(__file__).resolve().parents[2]


async def test_the_weekly_report_is_written_and_emailed(tmp_path: Path, llm: LLMService,
                                                        smtp: tuple[Any, int]) -> None:
    inbox, port = smtp
    workspace = tmp_path / "ws"
    (workspace / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "sales.csv", workspace / "examples" / "sales.csv")
    orc = Orchestrator(registry=Registry(), llm=llm, settings=Settings(
        data_dir=tmp_path / "data", workspace=workspace, smtp_url=f"smtp://robot:s3cret@127.0.0.1:{port}",
        smtp_from="reports@example.org"))
    try:
        assert orc.load_blueprints(ROOT / "blueprints") == []
        manifest = yaml.safe_load((ROOT / "blueprints" / "networks" / "weekly_sales_report.yaml").read_text())
        manifest["global"]["email_to"] = ["sales@example.org"]  # what an operator writes in the manifest
        orc.register_network(manifest)
        assert orc.schedules.get("weekly_sales_report")["spec"]["cron"] == "0 9 * * MON"
        fired = await orc.schedules.trigger("weekly_sales_report")
        network = orc.get_network(fired["run_id"])
        assert network is not None
        result = await network.wait(60)
    finally:
        await orc.aclose()
    assert result["status"] == "succeeded", result
    insights = result["workflows"]["insights"]["outputs"]
    assert insights["emailed"] == 1 and "North leads" in insights["insights"]
    report = (workspace / "reports" / "weekly_sales.md").read_text()
    assert report.startswith(f"# Weekly sales report for {fired['slot']}") and "- total: 3108.0" in report
    [(sender, recipients, raw)] = inbox.messages
    assert (sender, recipients) == ("reports@example.org", ["sales@example.org"])
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert message["Subject"] == f"Weekly sales report for {fired['slot'][:10]}"
    assert "North leads" in message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    [attachment] = list(message.iter_attachments())
    assert attachment.get_filename() == "weekly_sales.md" and attachment.get_content() == report
