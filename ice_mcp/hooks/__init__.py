"""Webhooks: signed deliveries that start workflows (signing.py pure, desk.py on the run store)."""
