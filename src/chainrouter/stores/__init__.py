"""State behind small interfaces; `sql` is the durable store (SQLite or PostgreSQL)."""
