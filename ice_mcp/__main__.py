import sys

from ice_mcp.cli import main

sys.exit(main())
