"""`GET /health`: whether this process can serve, for load balancers and uptime checks."""

from __future__ import annotations

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse


def _database_reachable(engine: Engine) -> bool:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError:
        return False
    return True


async def health(request: Request) -> JSONResponse:
    engine: Engine = request.app.state.engine
    # The driver blocks; keep it off the event loop.
    if await run_in_threadpool(_database_reachable, engine):
        return JSONResponse({"status": "ok", "database": "ok"})
    return JSONResponse({"status": "unavailable", "database": "unreachable"}, status_code=503)
