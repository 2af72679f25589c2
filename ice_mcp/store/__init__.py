"""The system of record: run records, their event journals, and the stores that keep them (SQLite, Redis)."""
