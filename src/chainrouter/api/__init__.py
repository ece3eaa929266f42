"""The management API (FastAPI/Starlette); this foundation serves its health route."""
