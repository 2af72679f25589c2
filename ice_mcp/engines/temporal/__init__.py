"""The Temporal engine: runs as workflows on a fleet of workers (client.py for servers, worker.py for workers)."""
