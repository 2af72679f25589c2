"""The PostgreSQL run store's migrations: NNNN_name.sql, applied in order once each (store/postgres_room.py)."""
