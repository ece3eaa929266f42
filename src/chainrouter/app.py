"""The one place that wires settings, storage and the web layers into runnable applications."""

from __future__ import annotations

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.routing import Route

from chainrouter.api.health import health


def build_api_app(engine: Engine) -> Starlette:
    app = Starlette(routes=[Route("/health", health, methods=["GET"])])
    app.state.engine = engine
    return app
