"""Who sent a delivery: Standard Webhooks, GitHub, Stripe and bearer checks over the raw bytes, in constant time. Pure."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence

from ice_mcp.errors import IceError

TOLERANCE_SECONDS = 300  # a Standard Webhooks or Stripe timestamp further off than this is refused (replays)
SECRET_PREFIX = "whsec_"


class Unverified(IceError):
    """A delivery whose signature, timestamp or headers do not check out (answered 401, with no detail)."""

    code = "unverified"


def new_secret() -> str:
    """`whsec_` + base64 of 32 random bytes (Standard Webhooks' format; 24 to 64 bytes are allowed)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_problem(auth: str, secret: str) -> str | None:
    """Why a sender's own secret cannot sign `auth`'s deliveries (None: it can)."""
    if auth == "standard":
        try:
            key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        except ValueError:
            key = b""
        if not secret.startswith(SECRET_PREFIX) or not 24 <= len(key) <= 64:
            return "a Standard Webhooks secret is whsec_ and the base64 of 24 to 64 bytes"
    elif len(secret) < 16:
        return "at least 16 characters"
    return None


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def standard_signature(secret: str, delivery_id: str, timestamp: str, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by the secret's decoded bytes."""
    mac = hmac.new(_key(secret), f"{delivery_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def github_signature(secret: str, body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256 of the body>`, keyed by the secret string as given out (as GitHub does)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def stripe_signature(secret: str, timestamp: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of "timestamp.body", keyed by the secret string as given out (as Stripe does)."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def _stripe(secrets_: Sequence[str], headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    """`Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]` over "t.body"; the delivery id is the event's
    `id` (Stripe sends no delivery header; a redelivered event keeps its id)."""
    fields = [part.partition("=") for part in headers.get("stripe-signature", "").split(",")]
    timestamp = next((value for key, _, value in fields if key.strip() == "t"), "")
    offered = [value for key, _, value in fields if key.strip() == "v1"]
    if not timestamp.isdigit() or not offered:
        raise Unverified("missing or malformed Stripe-Signature")
    if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        raise Unverified("the timestamp is too far from now")
    expected = [stripe_signature(s, timestamp, body) for s in secrets_]
    if not any(hmac.compare_digest(o.encode(), e.encode()) for o in offered for e in expected):
        raise Unverified("no signature matches")
    try:
        event_id = json.loads(body).get("id")
    except (ValueError, AttributeError):  # verified, but no event object: the delivery has no id to dedupe on
        return None
    return event_id if isinstance(event_id, str) and event_id else None


def verify(auth: str, secrets_: Sequence[str], headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    """The delivery id of a genuine delivery (None: bearer without an Idempotency-Key); raises Unverified.
    `headers` have lower-case names; any of `secrets_` may have signed it (a rotation's overlap)."""
    if auth == "standard":
        delivery_id, timestamp = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
        offered = headers.get("webhook-signature", "").split()
        if not delivery_id or not timestamp.isdigit() or not offered:
            raise Unverified("missing webhook-id, webhook-timestamp or webhook-signature")
        if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
            raise Unverified("the timestamp is too far from now")
        expected = [standard_signature(s, delivery_id, timestamp, body) for s in secrets_]
        if not any(hmac.compare_digest(o.encode(), e.encode()) for o in offered for e in expected):
            raise Unverified("no signature matches")
        return delivery_id
    if auth == "github":
        offered_one = headers.get("x-hub-signature-256", "")
        delivery_id = headers.get("x-github-delivery", "")
        if not offered_one or not delivery_id:
            raise Unverified("missing X-Hub-Signature-256 or X-GitHub-Delivery")
        if not any(hmac.compare_digest(offered_one.encode(), github_signature(s, body).encode()) for s in secrets_):
            raise Unverified("no signature matches")
        return delivery_id
    if auth == "stripe":
        return _stripe(secrets_, headers, body, now)
    token = headers.get("authorization", "")
    if not any(hmac.compare_digest(token.encode(), f"Bearer {s}".encode()) for s in secrets_):
        raise Unverified("the bearer token does not match")
    return headers.get("idempotency-key") or None
