import sys

from ice_mcp.server.cli import serve_main

sys.exit(serve_main(sys.argv[1:]))
