"""Closing stage: every keyed call is booked in the one ledger (router/ledger.py), whatever ended
it: what it held released, what it cost charged, its usage metered, the head it tells noted."""

from __future__ import annotations

from chainrouter.router.context import CallContext
from chainrouter.router.ledger import Ledger


class Book:
    """Closing: hand the ended call to the ledger. The free tier is not booked."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def run(self, call: CallContext) -> None:
        self._ledger.book(call)
