"""Serving an ASGI app on a socket bound up front, so a busy port fails before anything is announced."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from ice_mcp.errors import IceError


def bind_listener(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (as uvicorn binds it); a clear IceError when the address is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise IceError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            code="address_unavailable",
            details={"host": host, "port": port},
        ) from None
    listener.set_inheritable(True)
    return listener


# An idle connection outlives its client's own keep-alive (Node's fetch: 4 s; httpx: 5 s), so the client drops
# it first: at uvicorn's 5 s a client whose loop was busy past its timer sent on a socket the server had just
# closed ("fetch failed: other side closed", seen with the TypeScript SDK on a loaded machine).
KEEP_ALIVE_SECONDS = 75


async def serve_http(app: Any, listener: socket.socket, log_level: str,
                     on_started: Callable[[], None], forwarded_allow_ips: str | None = None) -> None:
    """Serve `app` with uvicorn on a bound socket; `on_started` runs once it accepts connections.
    `forwarded_allow_ips`: the proxies whose X-Forwarded-For/-Proto are believed (default: 127.0.0.1 only)."""
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                on_started()

    config = uvicorn.Config(app, log_level=log_level.lower(), lifespan="on", access_log=False,
                            proxy_headers=True, forwarded_allow_ips=forwarded_allow_ips,
                            timeout_keep_alive=KEEP_ALIVE_SECONDS)
    await AnnouncingServer(config).serve(sockets=[listener])
