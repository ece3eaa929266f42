"""The customer dashboard at `/dashboard`: one static page, its script and its style, served from
the package (no request leaves for a third party), over the management API's own JSON routes.
The script and style are bundles that `scripts/dashboard.sh` builds from `dashboard/src/` and
the npm lock file (the chart library, uPlot, inside), committed so that the package needs no
Node.js to serve them (docs/decisions.md).

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
from fastapi.responses import RedirectResponse

from chainrouter.api.deps import Context
from chainrouter.api.jsonio import respond

router = APIRouter(include_in_schema=False)

_ASSETS = Path(__file__).parent / "dashboard"
_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "billing.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.ico": "image/x-icon",
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


@router.get("/dashboard/favicon.ico")
async def dashboard_icon() -> Response:
    return _file("favicon.ico")


@router.get("/favicon.ico")
async def icon() -> Response:
    """Browsers ask for it at the root of any page they show, the API's docs too."""
    return _file("favicon.ico")


@router.get("/")
async def root() -> Response:
    """A person who opens the API's address lands on the dashboard."""
    return RedirectResponse("/dashboard", status_code=307)


@router.get("/dashboard/settings.json")
async def installation(ctx: Context) -> Response:
    """What the page needs to know of this installation: where customers reach the router, and
    whether it may offer sign-up."""
    configured = ctx.settings
    rpc = (
        configured.public_rpc_url or f"http://{configured.rpc_host}:{configured.rpc_port}"
    ).rstrip("/")
    body = {"rpc_url": rpc, "ws_url": ws_url(rpc), "signup_enabled": configured.signup_enabled}
    return respond(body, headers=_HEADERS)


def ws_url(rpc_url: str) -> str:
    """The router serves WebSocket clients at the HTTP URL's path (docs/websocket.md): the same
    address with `ws://` for `http://` and `wss://` for `https://`."""
    scheme, rest = rpc_url.split("://", 1)
    return f"{'wss' if scheme.lower() == 'https' else 'ws'}://{rest}"
