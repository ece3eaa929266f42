"""A local stand-in for Stripe's API, the one place the tests use one: Stripe cannot be reached
from the test machines (docs/billing.md). The official `stripe` library is pointed at it through
its API base (`CHAINROUTER_STRIPE_API_BASE`) and speaks to it exactly as to Stripe: form-encoded
POSTs with the secret key as a bearer token. It answers what Stripe documents for creating a
Checkout Session, and records each request for the tests to read."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl


class StripeStandIn:
    def __init__(self, secret_key: str) -> None:
        self.secret_key = secret_key
        self.sessions: list[dict[str, str]] = []  # the form fields of each session created
        self.fail_with: int | None = None  # answer this status with Stripe's error shape
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                del format, args

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                form = dict(parse_qsl(self.rfile.read(length).decode()))
                if self.headers.get("authorization") != f"Bearer {standin.secret_key}":
                    self._answer(401, _error("invalid_request_error", "Invalid API Key"))
                elif self.path != "/v1/checkout/sessions":
                    self._answer(404, _error("invalid_request_error", "Unrecognized request"))
                elif standin.fail_with is not None:
                    self._answer(standin.fail_with, _error("api_error", "try later"))
                else:
                    standin.sessions.append(form)
                    self._answer(200, standin.session(form))

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", f"req_{len(standin.sessions)}")
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def session(self, form: dict[str, str]) -> dict[str, Any]:
        number = len(self.sessions)
        session_id = f"cs_test_{number:04d}"
        return {
            "id": session_id,
            "object": "checkout.session",
            "mode": form.get("mode"),
            "amount_total": int(form["line_items[0][price_data][unit_amount]"]),
            "currency": form["line_items[0][price_data][currency]"],
            "client_reference_id": form.get("client_reference_id"),
            "payment_status": "unpaid",
            "status": "open",
            "url": f"https://checkout.stripe.com/c/pay/{session_id}",
        }

    def __enter__(self) -> StripeStandIn:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message}}


def signed(payload: bytes, secret: str, *, at: int | None = None) -> str:
    """A `Stripe-Signature` header by Stripe's scheme: `t=TIMESTAMP,v1=HMAC-SHA256(secret,
    "TIMESTAMP.PAYLOAD")` in hex."""
    stamp = int(time.time()) if at is None else at
    mac = hmac.new(secret.encode(), f"{stamp}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={mac}"
