"""The `ice-mcp` command line (`main`); its commands come from the built-in tools' table and the server."""

from ice_mcp.cli.main import build_parser, main, parse_inputs

__all__ = ["build_parser", "main", "parse_inputs"]
