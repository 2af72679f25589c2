"""`python -m ice_mcp.cli`: the same as the `ice-mcp` command."""

import sys

from ice_mcp.cli.main import main

sys.exit(main())
