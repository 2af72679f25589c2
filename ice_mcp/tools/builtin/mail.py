"""email_send: a message (text, optional HTML, workspace files attached) over the operator's SMTP server.

The server is ICE_MCP_SMTP_URL (`smtp://user:pass@host:port`, STARTTLS when the server offers it, or
`smtps://` for TLS from the start) and the sender ICE_MCP_SMTP_FROM; the model chooses neither. The
Message-ID comes from the node attempt, so a run resumed after a crash sends a message its recipients'
systems can recognise as the same one.
"""

from __future__ import annotations

import mimetypes
import urllib.parse
from email.message import EmailMessage
from email.utils import formatdate
from typing import Annotated, Any

from pydantic import Field

from ice_mcp.errors import NodeFailure
from ice_mcp.tools.builtin.files import workspace_path
from ice_mcp.tools.context import current_call, current_settings

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024  # all attachments together (most servers refuse 25 MB messages)
TIMEOUT_SECONDS = 30.0


async def email_send(
    to: Annotated[list[str], Field(min_length=1, max_length=100, description="Recipients' addresses")],
    subject: Annotated[str, Field(max_length=998)],
    text: Annotated[str, Field(description="The plain-text body")],
    html: Annotated[str | None, Field(description="An HTML body shown instead of the text where supported")] = None,
    attachments: Annotated[list[str] | None, Field(description="Files to attach, relative to the workspace")] = None,
) -> dict[str, Any]:
    """Send an email through the configured SMTP server; refused recipients or a failed login are errors."""
    settings = current_settings()
    if not settings.smtp_url:
        raise NodeFailure("email is not configured: set ICE_MCP_SMTP_URL (smtp://user:pass@host:port or "
                          "smtps://...) and ICE_MCP_SMTP_FROM", code="not_configured", retryable=False)
    url = urllib.parse.urlsplit(settings.smtp_url)
    if url.scheme not in ("smtp", "smtps") or not url.hostname:
        raise NodeFailure("ICE_MCP_SMTP_URL must be smtp://[user:pass@]host[:port] or smtps://...",
                          code="not_configured", retryable=False)
    username = urllib.parse.unquote(url.username) if url.username else None
    sender = settings.smtp_from or username
    if not sender:
        raise NodeFailure("set ICE_MCP_SMTP_FROM, the address email is sent from", code="not_configured",
                          retryable=False)
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, ", ".join(to), subject
    message["Date"] = formatdate(localtime=False)
    call = current_call()
    host_part = sender.rpartition("@")[2] or "ice-mcp"
    if call is not None:
        message["Message-ID"] = f"<{call.idempotency_key.replace('/', '.')}@{host_part}>"
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    total = 0
    for relative in attachments or []:
        path = workspace_path(relative)
        if path.is_dir():
            raise NodeFailure(f"{relative!r} is a folder", code="invalid_arguments", retryable=False)
        data = path.read_bytes()
        total += len(data)
        if total > MAX_ATTACHMENT_BYTES:
            raise NodeFailure(f"attachments over {MAX_ATTACHMENT_BYTES // (1024 * 1024)} MiB in all",
                              code="invalid_arguments", retryable=False)
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        maintype, _, subtype = kind.partition("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=path.name)
    import aiosmtplib  # with its email parsers, ~3 ms of every server's start-up: loaded on the first send

    try:
        refused, response = await aiosmtplib.send(
            message, hostname=url.hostname, port=url.port, username=username,
            password=urllib.parse.unquote(url.password) if url.password else None,
            use_tls=url.scheme == "smtps", start_tls=None if url.scheme == "smtp" else False,
            timeout=TIMEOUT_SECONDS)
    except aiosmtplib.SMTPRecipientsRefused as exc:
        codes = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
        raise NodeFailure(f"the SMTP server refused every recipient ({codes})", code="smtp_refused",
                          retryable=False) from None
    except aiosmtplib.SMTPResponseException as exc:
        raise NodeFailure(f"the SMTP server answered {exc.code} {exc.message}", code="smtp_error",
                          retryable=400 <= exc.code < 500) from None
    except (aiosmtplib.SMTPException, OSError) as exc:
        raise NodeFailure(f"cannot reach the SMTP server {url.hostname}:{url.port or ''}: {exc}",
                          code="smtp_unavailable", retryable=True) from None
    if refused:
        codes = "; ".join(f"{who}: {answer.code} {answer.message}" for who, answer in refused.items())
        raise NodeFailure(f"the SMTP server refused some recipients ({codes}); the others were sent the message",
                          code="smtp_refused", retryable=False)
    return {"sent": True, "to": to, "message_id": message["Message-ID"], "response": response}
