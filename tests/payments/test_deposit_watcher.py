"""The deposit watcher, reading a real anvil chain through a served router: a transfer to a
customer's deposit address is credited at the exact rate once its block is final, and only then;
exactly once whatever rounds, watchers, restarts and reorgs there are; never when its block left
the chain before it was final; and transfers to addresses of no customer are ignored."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx
import pytest

from chainrouter.domain.deposits import DepositState, deposit_reference
from chainrouter.stores.sql import payments
from tests.anvil import node_result
from tests.payments.conftest import (
    FINALITY,
    PAY_CHAIN,
    Shop,
    mine,
    send,
    send_token,
    start_router,
)
from tests.served import serve, stop

pytestmark = pytest.mark.anyio

ETHER = 10**18
NANO = 10**9


async def test_a_native_transfer_is_credited_once_final_at_the_exact_rate(shop: Shop) -> None:
    address = shop.address("alice")
    async with httpx.AsyncClient() as client:
        watcher = shop.watcher(client)
        await watcher.run_round()  # the chain is watched from here on
        tx = send(shop.node, address, ETHER // 2 + 1)  # 0.5 ETH and one wei
        report = await watcher.run_round()
        assert report.failures == []
        assert shop.states("alice") == [DepositState.PENDING]
        assert shop.balance("alice") == 0

        mine(shop.node, FINALITY - 1)  # one block short of final
        await watcher.run_round()
        assert shop.states("alice") == [DepositState.PENDING]
        assert shop.balance("alice") == 0

        mine(shop.node, 1)
        report = await watcher.run_round()
        assert report.credited == 1
        # 0.5 ETH at 2000 credits: 1000 credits; the extra wei is worth 2e-15 credits, which
        # rounds down to nothing at the nano-credit.
        assert shop.balance("alice") == 1000 * NANO
        assert shop.purchases("alice") == [(deposit_reference(PAY_CHAIN, tx, -1), 1000 * NANO)]
        [deposit] = shop.deposits("alice")
        assert (deposit.state, deposit.amount, deposit.credits_nano) == (
            DepositState.CREDITED,
            ETHER // 2 + 1,
            1000 * NANO,
        )

        mine(shop.node, 5)
        for _ in range(3):
            await watcher.run_round()
    assert shop.balance("alice") == 1000 * NANO  # once
    assert len(shop.purchases("alice")) == 1


async def test_an_erc20_transfer_is_credited_at_its_rate_with_the_contracts_decimals(
    shop: Shop,
) -> None:
    address = shop.address("bob")
    async with httpx.AsyncClient() as client:
        watcher = shop.watcher(client)
        await watcher.run_round()
        tx = send_token(shop.node, shop.token, address, 12_345_678)  # 12.345678 TUSD
        receipt = node_result(shop.node, "eth_getTransactionReceipt", [tx])
        await watcher.run_round()
        assert shop.states("bob") == [DepositState.PENDING]
        mine(shop.node, FINALITY)
        await watcher.run_round()
        await watcher.run_round()
    assert shop.balance("bob") == 12_345_678_000  # 12.345678 credits, exactly
    log_index = int(receipt["logs"][0]["logIndex"], 16)
    assert shop.purchases("bob") == [(deposit_reference(PAY_CHAIN, tx, log_index), 12_345_678_000)]


async def test_a_transfer_reorged_out_before_it_is_final_is_never_credited(shop: Shop) -> None:
    address = shop.address("alice")
    async with httpx.AsyncClient() as client:
        watcher = shop.watcher(client)
        await watcher.run_round()
        tx = send(shop.node, address, ETHER)
        mine(shop.node, 2)
        await watcher.run_round()
        assert shop.states("alice") == [DepositState.PENDING]

        # The last three blocks, the transfer's among them, are replaced by empty ones.
        node_result(shop.node, "anvil_reorg", [3, []])
        assert node_result(shop.node, "eth_getTransactionReceipt", [tx]) is None
        mine(shop.node, FINALITY + 2)
        for _ in range(3):
            await watcher.run_round()
    assert shop.states("alice") == [DepositState.REORGED]
    assert shop.balance("alice") == 0
    assert shop.purchases("alice") == []


async def test_transfers_to_addresses_of_no_customer_are_ignored(shop: Shop) -> None:
    shop.address("alice")  # watched, but paid nothing
    # Bob's address under this key exists, but was never shown to him: no one's deposit address.
    from chainrouter.domain.deposit_address import derive_deposit_address

    unshown = derive_deposit_address(shop.xpub, shop.customers["bob"])
    async with httpx.AsyncClient() as client:
        watcher = shop.watcher(client)
        await watcher.run_round()
        send(shop.node, "0x" + "77" * 20, ETHER)
        send(shop.node, unshown, ETHER)
        send_token(shop.node, shop.token, "0x" + "78" * 20, 10**6)
        mine(shop.node, FINALITY)
        await watcher.run_round()
    assert shop.deposits() == []
    assert shop.balance("alice") == shop.balance("bob") == 0


async def test_a_deposit_below_the_minimum_is_recorded_and_not_credited(shop: Shop) -> None:
    address = shop.address("alice")
    async with httpx.AsyncClient() as client:
        watcher = shop.watcher(client)
        await watcher.run_round()
        send(shop.node, address, ETHER // 1000 - 1)  # just under 0.001 ETH
        send(shop.node, address, ETHER // 1000)  # 0.001 ETH: at the minimum, credited
        mine(shop.node, FINALITY)
        await watcher.run_round()
    states = sorted(d.state for d in shop.deposits("alice"))
    assert states == [DepositState.BELOW_MINIMUM, DepositState.CREDITED]
    assert shop.balance("alice") == 2 * NANO  # 0.001 ETH at 2000


async def test_two_watchers_at_once_credit_each_deposit_once(shop: Shop) -> None:
    addresses = [shop.address("alice"), shop.address("bob")]
    async with httpx.AsyncClient() as client:
        watchers = [shop.watcher(client), shop.watcher(client)]
        await watchers[0].run_round()
        for n in range(6):
            send(shop.node, addresses[n % 2], ETHER // 100)
            send_token(shop.node, shop.token, addresses[n % 2], 10**6)
        mine(shop.node, FINALITY)
        for _ in range(3):
            await asyncio.gather(*(w.run_round() for w in watchers))
    for customer in ("alice", "bob"):
        assert shop.states(customer) == [DepositState.CREDITED] * 6
        references = [reference for reference, _ in shop.purchases(customer)]
        assert len(references) == len(set(references)) == 6
        assert shop.balance(customer) == 3 * (20 * NANO + NANO)


async def test_the_watcher_reads_only_through_the_router(shop: Shop) -> None:
    address = shop.address("alice")
    async with httpx.AsyncClient() as client:
        watcher = shop.watcher(client)
        await watcher.run_round()
        send(shop.node, address, ETHER)
        mine(shop.node, FINALITY)
        stop(shop.processes)  # the router is gone; the node is up
        report = await watcher.run_round()
        assert report.failures
        assert "router did not answer" in report.failures[0]
        assert shop.balance("alice") == 0
        shop.processes.clear()
        shop.router = start_router(shop)
        watcher = shop.watcher(client)
        await watcher.run_round()
    assert shop.balance("alice") == 2000 * NANO


def _watch_process(shop: Shop, name: str) -> object:
    return serve(
        "watcher",
        shop.env(
            CHAINROUTER_DEPOSIT_WATCH_API_KEY=shop.watcher_key,
            CHAINROUTER_DEPOSIT_WATCH_RPC_URL=shop.router,
            CHAINROUTER_DEPOSIT_WATCH_INTERVAL_S="0.1",
        ),
        shop.tmp / f"{name}.log",
    )


def _until(check: object, timeout_s: float = 30.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_served_watchers_killed_and_restarted_credit_each_deposit_once(shop: Shop) -> None:
    address = shop.address("alice")
    first = _watch_process(shop, "watcher-1")
    second = _watch_process(shop, "watcher-2")
    shop.processes += [first, second]  # type: ignore[list-item]
    with shop.engine.connect() as connection:
        _until(lambda: (PAY_CHAIN, "native") in payments.cursors(connection))
    for _ in range(5):
        send(shop.node, address, ETHER // 10)  # 200 credits each
    mine(shop.node, FINALITY // 2)
    os.kill(first.pid, signal.SIGKILL)  # type: ignore[attr-defined]
    mine(shop.node, FINALITY // 2)
    _until(lambda: shop.balance("alice") == 1000 * NANO)
    restarted = _watch_process(shop, "watcher-3")
    shop.processes.append(restarted)  # type: ignore[arg-type]
    for _ in range(3):
        send(shop.node, address, ETHER // 10)
    mine(shop.node, FINALITY)
    _until(lambda: shop.balance("alice") == 1600 * NANO)
    time.sleep(1.0)  # more rounds of both: nothing more
    assert shop.balance("alice") == 1600 * NANO
    assert shop.states("alice") == [DepositState.CREDITED] * 8
    assert len({reference for reference, _ in shop.purchases("alice")}) == 8
