"""The management API (FastAPI): customers' keys and usage, administration, public lists,
submissions. Route modules map HTTP to `chainrouter.management`; nothing here touches SQL."""
