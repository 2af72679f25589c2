"""Versioned schema migrations of the SQL run stores, as SQL files in a folder per store."""
