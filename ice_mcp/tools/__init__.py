"""Tools: the registry (one per orchestrator), the `@tool` decorator, the built-in tools, the egress guard."""
