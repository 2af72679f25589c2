"""Payloads over ~256 KB (a big tool output, a long blueprint) travel by reference: a Temporal payload codec
keeps them in the shared store and puts their content hash in the workflow history instead (claim check)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from ice_mcp.store.base import Blobs

CLAIM_CHECK = b"ice_mcp/claim-check"
THRESHOLD_BYTES = 256 * 1024


class ClaimCheckCodec(PayloadCodec):
    """Moves payloads larger than `threshold` bytes into `blobs` (the run store every server and worker of a
    cluster shares), keyed by their SHA-256."""

    def __init__(self, blobs: Blobs, threshold: int = THRESHOLD_BYTES) -> None:
        self.blobs, self.threshold = blobs, threshold

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        encoded = []
        for payload in payloads:
            if payload.ByteSize() <= self.threshold:
                encoded.append(payload)
                continue
            data = payload.SerializeToString()
            key = hashlib.sha256(data).hexdigest()
            await asyncio.to_thread(self.blobs.put_blob, key, data)
            encoded.append(Payload(metadata={"encoding": CLAIM_CHECK}, data=key.encode()))
        return encoded

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for payload in payloads:
            if payload.metadata.get("encoding") != CLAIM_CHECK:
                decoded.append(payload)
                continue
            key = payload.data.decode()
            if len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
                raise ValueError(f"not a payload reference: {key[:80]!r}")
            data = await asyncio.to_thread(self.blobs.get_blob, key)
            original = Payload()
            original.ParseFromString(data)
            decoded.append(original)
        return decoded
