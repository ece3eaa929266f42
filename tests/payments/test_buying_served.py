"""Buying credits as a customer and an operator do it, with every part served: the router, the
management API and the deposit watcher as `chainrouter serve` processes. A customer reads its
deposit address from the API, pays it with `cast send`, sees the deposit pending with its
confirmations, and its balance rises by the exact amount within a second of finality; the
operator sees the money in through the admin API and the metrics."""

from __future__ import annotations

import subprocess
import time
from decimal import Decimal

import httpx

from chainrouter.domain.enums import Role
from chainrouter.management import admin
from tests.anvil import REPO_ROOT, free_port
from tests.domain.test_deposit_address import wallet_address
from tests.payments.conftest import FINALITY, PAY_CHAIN, SENDER, Shop, mine
from tests.served import serve, wait_healthy


def _cast_send(node: str, to: str, value: str) -> None:
    done = subprocess.run(
        [
            str(REPO_ROOT / "node_modules" / ".bin" / "cast"),
            "send",
            to,
            "--value",
            value,
            "--from",
            SENDER,
            "--unlocked",
            "--rpc-url",
            node,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_customer_tops_up_with_cast_send_and_sees_the_balance_rise_at_finality(
    shop: Shop,
) -> None:
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    log = shop.tmp / "api.log"
    env = shop.env(CHAINROUTER_API_PORT=str(port))
    shop.processes.append(process := serve("api", env, log))
    wait_healthy(api, process, log)
    watcher_env = shop.env(
        CHAINROUTER_DEPOSIT_WATCH_API_KEY=shop.watcher_key,
        CHAINROUTER_DEPOSIT_WATCH_RPC_URL=shop.router,
        CHAINROUTER_DEPOSIT_WATCH_INTERVAL_S="0.1",
    )
    shop.processes.append(serve("watcher", watcher_env, shop.tmp / "watcher.log"))
    token = admin.issue_token(shop.engine, shop.customers["alice"], label="t", role=Role.CUSTOMER)
    alice = {"X-Api-Key": token.secret}
    operator = shop.customers["operator"]
    root = {
        "X-Api-Key": admin.issue_token(
            shop.engine, operator, label="root", role=Role.ADMINISTRATOR
        ).secret
    }

    with httpx.Client(base_url=api, timeout=10) as client:
        options = client.get("/billing/options", headers=alice).json()
        assert [(a["asset"], a["symbol"]) for a in options["deposits"]] == [
            ("native", "ETH"),
            (shop.token, "TUSD"),
        ]
        found = client.get(
            "/billing/deposit-address", params={"chain_id": PAY_CHAIN}, headers=alice
        ).json()
        address = found["address"]
        # The address a wallet holding the operator's mnemonic derives for this customer.
        assert address == wallet_address(shop.customers["alice"])
        qr = client.get(
            "/billing/deposit-qr", params={"chain_id": PAY_CHAIN, "asset": "native"}, headers=alice
        )
        assert qr.headers["content-type"] == "image/svg+xml"
        assert qr.text.startswith("<svg")
        elsewhere = client.get("/billing/deposit-address", params={"chain_id": 1}, headers=alice)
        assert elsewhere.status_code == 422
        assert f"chains: {PAY_CHAIN}" in elsewhere.json()["error"]["message"]

        time.sleep(0.5)  # the watcher's first round has marked where the chain is
        _cast_send(shop.node, address, "0.25ether")
        deadline = time.monotonic() + 20
        while not (deposits := client.get("/billing/deposits", headers=alice).json()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        [pending] = deposits
        assert (pending["state"], pending["amount"], pending["credits"]) == ("pending", 0.25, 500)
        assert pending["confirmations"] >= 1
        assert pending["confirmations_needed"] is None  # until the block is finalized

        mine(shop.node, FINALITY)
        final_at = time.monotonic()
        while Decimal(str(client.get("/account", headers=alice).json()["balance"])) != 500:
            assert time.monotonic() - final_at < 10, "not credited"
            time.sleep(0.02)
        took = time.monotonic() - final_at
        assert took < 1.5, f"credited {took:.2f} s after finality"
        [credited] = client.get("/billing/deposits", headers=alice).json()
        assert credited["state"] == "credited"
        [purchase] = client.get("/billing/purchases", headers=alice).json()
        assert (purchase["kind"], purchase["amount"]) == ("purchase", 500)
        assert purchase["reference"] == credited["reference"]

        summary = client.get("/admin/billing/summary", headers=root).json()
        native = next(s for s in summary["deposits"] if s["asset"] == "native")
        assert native["credited"] == {"deposits": 1, "amount": 0.25, "credits": 500}
        assert native["pending"]["deposits"] == 0
        assert native["head_block"] >= native["final_block"] >= credited["block_number"]
        assert client.get("/admin/billing/summary", headers=alice).status_code == 403
        metrics = client.get("/metrics").text
        assert (
            f'chainrouter_deposits{{asset="native",chain_id="{PAY_CHAIN}",state="credited",'
            'symbol="ETH"} 1.0'
        ) in metrics
