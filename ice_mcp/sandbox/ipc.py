"""Frames between the host and its sandbox workers: a 4-byte length, then JSON."""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO, Final

HEADER: Final = struct.Struct(">I")
MAX_FRAME: Final = 256 * 1024 * 1024


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    message = json.loads(body)
    if not isinstance(message, dict):
        raise ValueError("a frame must hold a JSON object")
    return message


def read_frame(stream: BinaryIO) -> dict[str, Any] | None:
    """The next frame from a blocking stream, or None at end of stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes is too large")
    body = stream.read(size)
    if len(body) < size:
        return None
    return decode(body)
