"""The HTTP app: /mcp, /rpc, /ui and /healthz, and what stands in front of them (guard, sessions)."""
