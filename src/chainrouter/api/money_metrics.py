"""Money in, as Prometheus metrics on the management API's `/metrics`: deposits per chain, asset
and state, their amount and worth, the deposit watchers' progress, and card payments. Read from
the database at each scrape (a few grouped queries), so every API process answers the same."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine

from chainrouter.domain.deposits import DepositState, format_units
from chainrouter.domain.money import NANO_PER_CREDIT
from chainrouter.management import billing

log = logging.getLogger(__name__)


class MoneyInCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            found = billing.money_in(self._engine)
        except Exception:  # a scrape never fails for this: the other metrics still count
            log.exception("money-in metrics could not be read")
            return
        labels = ["chain_id", "asset", "symbol", "state"]
        deposits = GaugeMetricFamily(
            "chainrouter_deposits",
            "Deposits found on chain, by chain, asset and state (pending, credited, "
            "below_minimum, reorged).",
            labels=labels,
        )
        amounts = GaugeMetricFamily(
            "chainrouter_deposit_amount",
            "What those deposits moved, in whole units of the asset.",
            labels=labels,
        )
        worth = GaugeMetricFamily(
            "chainrouter_deposit_credits",
            "What those deposits are worth in credits (the credited ones were bought).",
            labels=labels,
        )
        blocks = GaugeMetricFamily(
            "chainrouter_deposit_watch_block",
            "The deposit watchers' progress per chain and asset: the chain's head and final "
            "block as last seen, and the next block to read for crediting.",
            labels=["chain_id", "asset", "block"],
        )
        age = GaugeMetricFamily(
            "chainrouter_deposit_watch_age_seconds",
            "Seconds since a watcher last read the chain for this asset.",
            labels=["chain_id", "asset"],
        )
        now = time.time()
        for asset in found.assets:
            chain = str(asset.chain_id)
            for state in DepositState:
                count, amount, nano = asset.counts.get(state, (0, 0, 0))
                values = [chain, asset.asset, asset.symbol, state.value]
                deposits.add_metric(values, count)
                if asset.decimals is not None:
                    amounts.add_metric(values, float(format_units(amount, asset.decimals)))
                worth.add_metric(values, nano / NANO_PER_CREDIT)
            for which, block in (
                ("head", asset.head_block),
                ("final", asset.final_block),
                ("next", asset.next_block),
            ):
                if block is not None:
                    blocks.add_metric([chain, asset.asset, which], block)
            if asset.checked_at is not None:
                age.add_metric([chain, asset.asset], max(now - asset.checked_at.timestamp(), 0))
        sessions = GaugeMetricFamily(
            "chainrouter_card_payments",
            "Card checkouts by state: open (not paid yet), paid, mismatch (not credited).",
            labels=["state"],
        )
        bought = GaugeMetricFamily(
            "chainrouter_card_payment_credits",
            "Credits of the card checkouts, by state (the paid ones were bought).",
            labels=["state"],
        )
        for card_state, (count, nano) in sorted(found.card.items()):
            sessions.add_metric([card_state], count)
            bought.add_metric([card_state], nano / NANO_PER_CREDIT)
        yield from (deposits, amounts, worth, blocks, age, sessions, bought)
