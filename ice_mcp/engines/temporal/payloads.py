"""Payloads over ~256 KB (a big tool output, a long blueprint) travel by reference: a Temporal payload codec
keeps them in the shared store and puts their content hash in the workflow history instead (claim check)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

CLAIM_CHECK = b"ice_mcp/claim-check"
THRESHOLD_BYTES = 256 * 1024


class BlobFolder:
    """Blobs by content hash in a folder every process of the cluster reaches (the data folder)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def put(self, key: str, data: bytes) -> None:
        path = self.folder / key[:2] / key
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{key}.{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(path)  # atomic: a reader never sees half a blob

    def get(self, key: str) -> bytes:
        if len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"not a payload reference: {key[:80]!r}")
        return (self.folder / key[:2] / key).read_bytes()


class ClaimCheckCodec(PayloadCodec):
    """Moves payloads larger than `threshold` bytes into `blobs`, keyed by their SHA-256."""

    def __init__(self, blobs: BlobFolder, threshold: int = THRESHOLD_BYTES) -> None:
        self.blobs, self.threshold = blobs, threshold

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        encoded = []
        for payload in payloads:
            if payload.ByteSize() <= self.threshold:
                encoded.append(payload)
                continue
            data = payload.SerializeToString()
            key = hashlib.sha256(data).hexdigest()
            await asyncio.to_thread(self.blobs.put, key, data)
            encoded.append(Payload(metadata={"encoding": CLAIM_CHECK}, data=key.encode()))
        return encoded

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for payload in payloads:
            if payload.metadata.get("encoding") != CLAIM_CHECK:
                decoded.append(payload)
                continue
            data = await asyncio.to_thread(self.blobs.get, payload.data.decode())
            original = Payload()
            original.ParseFromString(data)
            decoded.append(original)
        return decoded
