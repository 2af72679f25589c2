"""Webhooks: signed deliveries that start workflows (checked by ice_mcp.signing), kept in the run store."""
