"""Transport-neutral operations, shared by MCP, /rpc, the command line and /ui: the built-in tools' table and
handlers, run changes, and the catalogue's answers."""
