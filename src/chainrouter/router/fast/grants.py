"""Grants: the credits held aside for a customer's calls that the native server serves under
decisions, so that it spends without asking Python (design notes, "The fast path").

A grant is held in the customer's balance like a call in flight (`CreditView.hold`) and handed
to the server's memo, which spends from it call by call (native/src/memo.rs); the ledger then
settles what was spent as it books the calls (router/ledger.py). It is topped up when a
decision is made or its calls are booked and less than half of `calls` calls' worth is left;
the pipeline takes it back (`reclaim`) when a call of its own finds the balance short. So the
balance a customer sees is never spent twice, and at most one grant's worth of it is out of the
pipeline's reach at a time.
"""

from __future__ import annotations

from chainrouter.router.metering import CreditView
from chainrouter.router.native_api import Memo

GRANT_CALLS = 16_384  # a grant holds this many calls' worth, at the price of the decision made


class Grants:
    def __init__(self, memo: Memo, credits: CreditView, calls: int = GRANT_CALLS) -> None:
        self.memo = memo  # the native server's, which spends the grants
        self._credits = credits
        self._calls = calls

    def top_up(self, customer_id: int, spend_nano: int) -> None:
        """Calls that spend `spend_nano` each are served under decisions for the customer:
        hold more for them if less than half of a grant's worth is left (as much as the
        balance allows)."""
        if spend_nano <= 0:
            return
        want = spend_nano * self._calls
        left = self.memo.granted(customer_id)
        if left >= want // 2:
            return
        more = min(want - left, self._credits.available(customer_id))
        if more > 0 and self._credits.hold(customer_id, more):
            self.memo.grant(customer_id, more)

    def reclaim(self, customer_id: int) -> int:
        """Take back what is left of the customer's grant (its hold released); how much."""
        left = self.memo.reclaim(customer_id)
        if left:
            self._credits.settle(customer_id, left, 0)
        return left
