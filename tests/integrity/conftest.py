"""One real anvil chain for every proof test, made once: a block holding a transaction of each
type anvil signs (legacy, EIP-2930, EIP-1559 deploying a contract that stores and logs, EIP-7702
setting an account's code, a failing call, and a second contract that logs), then a block with
an EIP-4844 blob transaction, then an empty block.

Anvil's genesis header names the empty state root whatever its accounts hold: state is proven
at the blocks after it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import rlp  # type: ignore[import-untyped]
from eth_account import Account
from eth_hash.auto import keccak
from eth_keys.datatypes import PrivateKey

from tests.anvil import CHAIN_A, DEPLOY_LOGGING, LOG_TOPIC, start_anvil_nodes

# anvil's first dev accounts (its well-known test mnemonic); the third signs its authorization.
SENDER = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
OTHER = "0x70997970c51812dc3a010c7d01b09f812dc79c8a"
DELEGATOR = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"
DELEGATOR_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
BLOBBER = "0x90f79bf6eb2c4f870365e785982e1f101e93b906"
BLOBBER_KEY = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"
ABSENT = "0x" + "5a" * 20
# Init code: slot 0 := 0x2a, slot 1 := 0x1234, LOG1(LOG_TOPIC) over the word 42, then deploy a
# 10-byte contract (runtime copied from offset 0x42 of this code).
STORING = (
    "0x602a600055" + "611234600155" + "602a600052" + "7f" + LOG_TOPIC[2:] + "60206000a1"
    "600a6042600039" + "600a6000f3" + "602a60005260206000f3"
)
REVERTING = "0x60006000fd"  # init code that reverts: a receipt with status 0


@dataclass(eq=False)
class Chain:
    """The chain once made: reads of mined blocks never change, so each is asked once (`read`
    hands out a fresh copy that a test may change)."""

    url: str
    several: int  # the block with a transaction of each type
    blob: int  # the block with the blob transaction
    contract: str = ""
    hashes: dict[str, str] = field(default_factory=dict)  # kind -> transaction hash
    client: httpx.Client = field(default_factory=httpx.Client)
    _read: dict[str, bytes] = field(default_factory=dict)

    def rpc(self, method: str, params: list[Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self.client.post(self.url, json=body, timeout=30).json()["result"]

    def read(self, method: str, params: list[Any]) -> Any:
        key = json.dumps([method, params])
        if key not in self._read:
            self._read[key] = json.dumps(self.rpc(method, params)).encode()
        return json.loads(self._read[key])

    def block(self, number: int, full: bool = False) -> dict[str, Any]:
        block: dict[str, Any] = self.read("eth_getBlockByNumber", [hex(number), full])
        return block

    def receipts(self, number: int) -> list[dict[str, Any]]:
        receipts: list[dict[str, Any]] = self.read("eth_getBlockReceipts", [hex(number)])
        return receipts


def _send(chain: Chain, kind: str, tx: dict[str, Any]) -> None:
    chain.hashes[kind] = chain.rpc("eth_sendTransaction", [{"from": SENDER, **tx}])


def _fill(chain: Chain) -> None:
    chain.rpc("evm_setAutomine", [False])
    gas_price = "0x77359400"
    _send(chain, "legacy", {"to": OTHER, "value": "0x7", "type": "0x0", "gasPrice": gas_price})
    access = [{"address": OTHER, "storageKeys": ["0x" + "00" * 31 + "01"]}]
    _send(
        chain,
        "2930",
        {"to": OTHER, "value": "0x8", "type": "0x1", "gasPrice": gas_price, "accessList": access},
    )
    _send(chain, "1559", {"data": STORING, "type": "0x2"})
    _send(chain, "reverted", {"data": REVERTING, "type": "0x2", "gas": "0x30000"})
    signed = Account.from_key(DELEGATOR_KEY).sign_authorization(
        {"chainId": CHAIN_A, "address": OTHER, "nonce": 0}
    )
    authorization = {
        "chainId": hex(CHAIN_A),
        "address": OTHER,
        "nonce": "0x0",
        "yParity": hex(signed.y_parity),
        "r": hex(signed.r),
        "s": hex(signed.s),
    }
    _send(chain, "7702", {"to": OTHER, "type": "0x4", "authorizationList": [authorization]})
    _send(chain, "logging", {"data": DEPLOY_LOGGING, "type": "0x2"})
    chain.rpc("evm_mine", [])
    chain.several = int(chain.rpc("eth_blockNumber", []), 16)
    receipt = chain.rpc("eth_getTransactionReceipt", [chain.hashes["1559"]])
    chain.contract = receipt["contractAddress"]
    chain.hashes["4844"] = _send_blob(chain)
    chain.rpc("evm_mine", [])
    chain.blob = chain.several + 1
    chain.rpc("evm_mine", [])


def _send_blob(chain: Chain) -> str:
    """A blob transaction carrying the zero blob, signed here: the zero polynomial's KZG
    commitment and proof are both the point at infinity (0xc0 then zeros), so no trusted setup
    is loaded (cast and eth-account take seconds of CPU for it). It goes out in the network
    form, with its sidecar."""
    infinity = b"\xc0" + bytes(47)
    versioned_hash = b"\x01" + hashlib.sha256(infinity).digest()[1:]
    body = [CHAIN_A, 0, 1, 30 * 10**9, 30_000, bytes.fromhex(OTHER[2:]), 0, b"", [], 10]
    body.append([versioned_hash])
    signature = PrivateKey(bytes.fromhex(BLOBBER_KEY[2:])).sign_msg_hash(
        keccak(b"\x03" + rlp.encode(body))
    )
    signed = [*body, signature.v, signature.r, signature.s]
    raw = b"\x03" + rlp.encode([signed, [bytes(131_072)], [infinity], [infinity]])
    tx_hash: str = chain.rpc("eth_sendRawTransaction", ["0x" + raw.hex()])
    return tx_hash


@pytest.fixture(scope="session")
def chain() -> Iterator[Chain]:
    nodes = start_anvil_nodes((("proofs", CHAIN_A),))
    started = next(nodes)
    made = Chain(started.urls["proofs"], 0, 0)
    _fill(made)
    yield made
    made.client.close()
    nodes.close()
