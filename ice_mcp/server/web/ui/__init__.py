"""The browser run view served at `/ui`: runs, one run's live graph, node details, the workflow catalogue.

The package imports nothing itself: `ice-mcp ui` is listed by the command line without loading Starlette.
"""
