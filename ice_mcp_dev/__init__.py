"""What a source checkout has beside the product, never in the wheel: the MCP conformance suite's fixtures
(`serve --conformance-fixtures`) and the dev cluster (`ice-mcp dev-cluster`), both run by the tests.

The `ice-mcp` command reaches them through `ice_mcp.server.dev_tools`, which finds this folder beside the
`ice_mcp` package of a checkout (an editable install), and otherwise says where they come from."""
