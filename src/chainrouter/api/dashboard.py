"""The customer dashboard at `/dashboard`: one static page, its script and its style, served from
the package (no build step, no request leaves for a third party), over the management API's own
JSON routes.

How it stays safe, in the browser (docs/dashboard.md):
- the management token is sent in the `X-Api-Key` header by the page's script, never in a URL,
  a cookie or a form field the browser would submit: no cross-site request can carry it, so
  there is nothing to forge (no CSRF), and it never reaches a log;
- the script keeps it in the tab's session storage (gone when the tab closes) and writes every
  value it shows as text, never as HTML;
- the content security policy lets the page load only its own script and style and talk only
  to its own origin, and no other site may frame it.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Response

from chainrouter.api.deps import Context
from chainrouter.api.jsonio import respond

router = APIRouter(include_in_schema=False)

_ASSETS = Path(__file__).parent / "dashboard"
_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "billing.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
# Read once: the files are part of the package and never change while it runs.
_FILES = {name: (_ASSETS / name).read_bytes() for name in _TYPES}
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def _file(name: str) -> Response:
    return Response(_FILES[name], media_type=_TYPES[name], headers=_HEADERS)


@router.get("/dashboard")
async def page() -> Response:
    return _file("index.html")


@router.get("/dashboard/app.js")
async def script() -> Response:
    return _file("app.js")


@router.get("/dashboard/billing.js")
async def billing_script() -> Response:
    return _file("billing.js")


@router.get("/dashboard/app.css")
async def style() -> Response:
    return _file("app.css")


@router.get("/dashboard/settings.json")
async def installation(ctx: Context) -> Response:
    """What the page needs to know of this installation: where customers reach the router, and
    whether it may offer sign-up."""
    configured = ctx.settings
    rpc = configured.public_rpc_url or f"http://{configured.rpc_host}:{configured.rpc_port}"
    # `ws_url` stays null until the router serves WebSocket clients (issue 31): the page shows
    # no address that would not answer.
    body = {"rpc_url": rpc.rstrip("/"), "ws_url": None, "signup_enabled": configured.signup_enabled}
    return respond(body, headers=_HEADERS)
