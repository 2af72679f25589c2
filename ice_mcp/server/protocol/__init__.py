"""The MCP protocol: the catalogue of tools, resources and prompts, what a call does, tasks and notifications."""
