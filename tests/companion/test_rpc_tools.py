"""The eleven RPC tools against live routers and anvil: each returns what the chain holds, with
the batchId of the router's answer; a router's JSON-RPC error reaches the model unchanged."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from chainrouter.companion.toolkit import MAX_RESULT_BYTES
from tests.anvil import CHAIN_A, CHAIN_B
from tests.companion.conftest import (
    ACCOUNT,
    LOG_TOPIC,
    Service,
    companion,
    companion_env,
    error_text,
    payload,
)

pytestmark = pytest.mark.anyio

BATCH_ID = re.compile(r"^[0-9a-f]{12}-[0-9a-f]+$")


async def _call(service: Service, tool: str, arguments: dict[str, Any]) -> Any:
    async with companion(companion_env(service)) as session:
        return await session.call_tool(tool, arguments)


async def test_every_rpc_tool_answers_from_the_chain_with_a_batch_id(service: Service) -> None:
    chain_a = service.chains[CHAIN_A]
    chain_b = service.chains[CHAIN_B]
    async with companion(companion_env(service)) as session:

        async def ok(tool: str, arguments: dict[str, Any]) -> Any:
            result = await session.call_tool(tool, arguments)
            assert not result.is_error, result.content
            answer = payload(result)
            assert BATCH_ID.match(answer["batchId"]), (tool, answer)
            return answer

        chains = await ok("rpc_list_chains", {})
        listed = [c["chain_id"] for c in chains["chains"]]
        assert listed[:2] == ["31337", "31338"]  # chains with HTTP nodes (and maybe the spare)

        called = await ok("rpc_call", {"chainId": CHAIN_A, "method": "eth_chainId"})
        assert called["result"] == hex(CHAIN_A)
        code = await ok(
            "rpc_call",
            {"chainId": CHAIN_A, "method": "eth_getCode", "params": [chain_a.contract, "latest"]},
        )
        assert code["result"] == "0x602a60005260206000f3"

        block = await ok("rpc_get_block", {"chainId": CHAIN_A, "blockTag": chain_a.block_number})
        assert block["result"]["transactions"] == [chain_a.tx_hash]
        by_hash = await ok(
            "rpc_get_block",
            {"chainId": CHAIN_A, "blockHash": block["result"]["hash"], "includeTransactions": True},
        )
        assert by_hash["result"]["transactions"][0]["hash"] == chain_a.tx_hash
        assert by_hash["transactions"] == {
            "total": 1, "offset": 0, "limit": 100, "returned": 1, "nextOffset": None
        }  # fmt: skip
        past_the_end = await ok(
            "rpc_get_block",
            {"chainId": CHAIN_A, "blockTag": chain_a.block_number, "limit": 1, "offset": 1},
        )
        assert past_the_end["result"]["transactions"] == []
        assert past_the_end["result"]["hash"] == block["result"]["hash"]
        assert past_the_end["transactions"]["total"] == 1
        latest = await ok("rpc_get_block", {"chainId": str(CHAIN_A)})
        assert int(latest["result"]["number"], 16) >= chain_a.block_number

        tx = await ok("rpc_get_transaction", {"chainId": CHAIN_A, "txHash": chain_a.tx_hash})
        assert tx["result"]["from"].lower() == ACCOUNT.lower()
        receipt = await ok(
            "rpc_get_transaction_receipt", {"chainId": CHAIN_A, "txHash": chain_a.tx_hash}
        )
        assert receipt["result"]["contractAddress"] == chain_a.contract

        logs = await ok("rpc_get_logs", {"chainId": CHAIN_A, "fromBlock": 0})
        assert [entry["topics"] for entry in logs["logs"]] == [[LOG_TOPIC]]
        filtered = await ok(
            "rpc_get_logs",
            {
                "chainId": CHAIN_A,
                "fromBlock": "0x0",
                "toBlock": "latest",
                "address": [chain_a.contract],
                "topics": [[LOG_TOPIC], None],
            },
        )
        assert filtered["total"] == 1
        other_topic = await ok(
            "rpc_get_logs", {"chainId": CHAIN_A, "fromBlock": 0, "topics": ["0x" + "00" * 32]}
        )
        assert other_topic["logs"] == []

        balance = await ok("rpc_get_balance", {"chainId": CHAIN_A, "address": chain_a.contract})
        assert balance["result"] == "0x0"
        assert (balance["wei"], balance["ether"]) == ("0", "0")
        rich = await ok(
            "rpc_get_balance", {"chainId": CHAIN_A, "address": ACCOUNT, "blockTag": "earliest"}
        )
        assert rich["ether"] == "10000"

        output = await ok(
            "rpc_call_contract", {"chainId": CHAIN_A, "to": chain_a.contract, "data": "0x"}
        )
        assert int(output["result"], 16) == 42

        gas = await ok(
            "rpc_estimate_gas",
            {
                "chainId": CHAIN_A,
                "transaction": {"from": ACCOUNT, "to": chain_a.contract, "value": "1000"},
            },
        )
        assert gas["gas"] > 21_000  # a transfer that also runs the contract's code

        fees = await ok("rpc_get_fee_data", {"chainId": CHAIN_A})
        assert int(fees["gasPrice"]["wei"]) > 0
        assert fees["maxPriorityFeePerGas"]["hex"].startswith("0x")
        assert len(fees["feeHistory"]["baseFeePerGas"]) == 2  # the block and the next one
        assert "errors" not in fees

        traced = await ok("rpc_trace_transaction", {"chainId": CHAIN_B, "txHash": chain_b.tx_hash})
        assert traced["traceMethod"] == "trace_transaction"
        assert "fallback" not in traced
        assert traced["result"][0]["action"]["from"].lower() == ACCOUNT.lower()


async def test_a_router_json_rpc_error_is_passed_through_unchanged(service: Service) -> None:
    unpriced = await _call(
        service, "rpc_call", {"chainId": CHAIN_A, "method": "eth_getStorageAt", "params": []}
    )
    assert "eth_getStorageAt failed: JSON-RPC error -32002" in error_text(unpriced)
    passed = payload(unpriced)
    assert BATCH_ID.match(passed["batchId"])
    assert passed["httpStatus"] == 422
    assert passed["error"] == {
        "code": -32002,
        "message": f"method 'eth_getStorageAt' is not supported on chain {CHAIN_A}",
    }
    # A chain the service does not serve: the router's -32001, as it sent it.
    no_chain = await _call(service, "rpc_get_balance", {"chainId": 424242, "address": ACCOUNT})
    assert payload(no_chain)["error"]["code"] == -32001


async def test_errors_of_the_key_come_back_as_the_router_said_them(service: Service) -> None:
    env = companion_env(service, SERVICE_API_KEY=service.broke_api_key)
    async with companion(env) as session:
        broke = await session.call_tool("rpc_get_balance", {"chainId": CHAIN_A, "address": ACCOUNT})
    passed = payload(broke)
    assert passed["httpStatus"] == 402
    assert passed["error"]["code"] == -32601  # insufficient credits
    unknown = "crk_" + "x" * 43
    async with companion(companion_env(service, SERVICE_API_KEY=unknown)) as session:
        refused = await session.call_tool("rpc_call", {"chainId": CHAIN_A, "method": "eth_chainId"})
    assert payload(refused)["httpStatus"] == 401
    assert BATCH_ID.match(payload(refused)["batchId"])


async def test_trace_falls_back_to_the_other_method_when_the_first_is_not_offered(
    service: Service,
) -> None:
    chain_a = service.chains[CHAIN_A]
    arguments = {"chainId": CHAIN_A, "txHash": chain_a.tx_hash}
    async with companion(companion_env(service)) as session:
        traced = payload(await session.call_tool("rpc_trace_transaction", arguments))
        strict = await session.call_tool(
            "rpc_trace_transaction", {**arguments, "allowFallback": False}
        )
        geth = payload(
            await session.call_tool(
                "rpc_trace_transaction", {**arguments, "traceMethod": "debug_traceTransaction"}
            )
        )
    assert traced["traceMethod"] == "debug_traceTransaction"
    assert traced["fallback"]["from"] == "trace_transaction"
    assert traced["fallback"]["error"]["code"] == -32002
    assert traced["result"]["type"] == "CREATE"  # the callTracer's call tree
    assert traced["result"]["to"].lower() == chain_a.contract.lower()
    assert payload(strict)["error"]["code"] == -32002
    assert "fallback" not in geth
    assert geth["result"] == traced["result"]


async def test_an_answer_over_the_result_bound_is_cut_with_a_note_of_its_size(
    service: Service,
) -> None:
    # eth_call of code put at an address for the call (a state override): the code returns
    # 300,000 zero bytes, 600 KB of hex; the small one returns 32.
    def returning(size: int) -> dict[str, Any]:
        code = "0x62" + size.to_bytes(3).hex() + "6000f3"  # RETURN(0, size)
        to = "0x" + "11" * 20
        params = [{"to": to, "data": "0x"}, "latest", {to: {"code": code}}]
        return {"chainId": CHAIN_A, "method": "eth_call", "params": params}

    async with companion(companion_env(service)) as session:
        cut = await session.call_tool("rpc_call", returning(300_000))
        whole = await session.call_tool("rpc_call", returning(32))
    assert not cut.is_error, cut.content
    text = cut.content[0].text  # type: ignore[union-attr]
    assert len(text.encode()) <= MAX_RESULT_BYTES
    answer = payload(cut)  # still one JSON object, the same as the structured content
    assert BATCH_ID.match(answer["batchId"])
    assert (answer["chainId"], answer["method"]) == (CHAIN_A, "eth_call")
    assert "result" not in answer
    full = len(f'"result": "0x{"00" * 300_000}"')
    assert full < answer["truncated"]["bytes"] < full + 200
    assert answer["truncated"]["limit"] == MAX_RESULT_BYTES
    assert "cut" in answer["truncated"]["note"]
    assert answer["partial"].startswith('{"batchId": ')
    assert payload(whole)["result"] == "0x" + "00" * 32
    assert "truncated" not in payload(whole)


async def test_logs_come_in_pages(service: Service) -> None:
    base = {"chainId": CHAIN_B, "fromBlock": 0}
    async with companion(companion_env(service)) as session:
        first = payload(await session.call_tool("rpc_get_logs", {**base, "limit": 1}))
        past = payload(await session.call_tool("rpc_get_logs", {**base, "offset": 5}))
        too_many = await session.call_tool("rpc_get_logs", {**base, "limit": 1001})
    assert (first["total"], first["returned"], first["nextOffset"]) == (1, 1, None)
    assert (past["total"], past["returned"], past["logs"]) == (1, 0, [])
    assert "limit: Input should be less than or equal to 1000" in error_text(too_many)


async def test_a_block_s_transactions_come_in_pages(service: Service) -> None:
    node = service.chains[CHAIN_B].node_url
    sender = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"  # anvil's fourth account; no other
    receiver = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"  # test uses either

    async def on_node(method: str, params: list[Any]) -> Any:
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return (await client.post(node, json=request)).json()["result"]

    async with httpx.AsyncClient() as client:  # three transfers mined into one block
        await on_node("evm_setAutomine", [False])
        sent = [
            await on_node("eth_sendTransaction", [{"from": sender, "to": receiver, "value": "0x1"}])
            for _ in range(3)
        ]
        await on_node("evm_mine", [])
        await on_node("evm_setAutomine", [True])
        block = (await on_node("eth_getTransactionReceipt", [sent[0]]))["blockNumber"]

    async with companion(companion_env(service)) as session:

        async def page(offset: int, full: bool) -> dict[str, Any]:
            arguments = {"chainId": CHAIN_B, "blockTag": block, "limit": 2, "offset": offset}
            answer = payload(
                await session.call_tool("rpc_get_block", {**arguments, "includeTransactions": full})
            )
            assert isinstance(answer, dict)
            return answer

        first, second = await page(0, True), await page(2, True)
        hashes = await page(0, False)
    assert [tx["hash"] for tx in first["result"]["transactions"]] == sent[:2]
    assert first["transactions"] == {
        "total": 3, "offset": 0, "limit": 2, "returned": 2, "nextOffset": 2
    }  # fmt: skip
    assert [tx["hash"] for tx in second["result"]["transactions"]] == sent[2:]
    assert (second["transactions"]["returned"], second["transactions"]["nextOffset"]) == (1, None)
    assert second["result"]["hash"] == first["result"]["hash"]  # the rest of the block is whole
    assert hashes["result"]["transactions"] == sent[:2]


async def test_chains_are_listed_by_page_and_filtered_by_name_or_id(service: Service) -> None:
    async with companion(companion_env(service)) as session:
        whole = payload(await session.call_tool("rpc_list_chains", {}))
        pages, offset = [], 0
        while offset is not None:
            page = payload(
                await session.call_tool("rpc_list_chains", {"limit": 1, "offset": offset})
            )
            assert (page["total"], page["limit"], page["returned"]) == (whole["total"], 1, 1)
            pages.extend(page["chains"])
            offset = page["nextOffset"]
        beyond = payload(await session.call_tool("rpc_list_chains", {"offset": whole["total"]}))
        by_name = payload(await session.call_tool("rpc_list_chains", {"query": "BETA"}))
        by_id = payload(await session.call_tool("rpc_list_chains", {"chainId": "0x7a69"}))
        over = await session.call_tool("rpc_list_chains", {"limit": 501})
    assert whole["total"] >= 2
    assert pages == whole["chains"]
    assert (beyond["returned"], beyond["chains"], beyond["nextOffset"]) == (0, [], None)
    assert [c["short_name"] for c in by_name["chains"]] == ["beta"]
    assert [c["chain_id"] for c in by_id["chains"]] == ["31337"]
    assert "limit: Input should be less than or equal to 500" in error_text(over)


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("rpc_get_balance", {"chainId": CHAIN_A}, "- address: required"),
        ("rpc_get_balance", {"chainId": CHAIN_A, "address": "0x12"}, "- address: String should"),
        ("rpc_get_balance", {"chain_id": 1, "address": ACCOUNT}, "- chain_id: unknown argument"),
        ("rpc_get_block", {"chainId": 1, "blockTag": "newest"}, "must be one of latest"),
        (
            "rpc_get_block",
            {"chainId": 1, "blockTag": "latest", "blockHash": "0x" + "ab" * 32},
            "give blockTag or blockHash, not both",
        ),
        ("rpc_get_transaction", {"chainId": 1, "txHash": "0xabc"}, "- txHash: String should"),
        ("rpc_get_logs", {"chainId": 1}, "- fromBlock: required"),
        (
            "rpc_get_logs",
            {"chainId": 1, "fromBlock": 0, "topics": [None, None, None, None, None]},
            "- topics: List should have at most 4 items",
        ),
        (
            "rpc_call_contract",
            {"chainId": 1, "to": ACCOUNT, "data": "0x1", "value": -1},
            "- data: String should",
        ),
        (
            "rpc_estimate_gas",
            {"chainId": 1, "transaction": {"value": "ten"}},
            "- transaction.value: must be a non-negative integer",
        ),
        (
            "rpc_trace_transaction",
            {"chainId": 1, "txHash": "0x" + "0" * 64, "traceMethod": "trace_call"},
            "- traceMethod: Input should be",
        ),
        ("rpc_call", {"chainId": 0, "method": "eth_chainId"}, "- chainId: Input should be greater"),
        ("rpc_call", {"chainId": 1, "method": "eth chainId"}, "- method: String should match"),
    ],
)
async def test_invalid_arguments_are_refused_before_anything_is_sent(
    service: Service, tool: str, arguments: dict[str, Any], message: str
) -> None:
    result = await _call(service, tool, arguments)
    text = error_text(result)
    assert text.startswith(f"{tool}: invalid arguments, nothing was sent.")
    assert message in text


@pytest.mark.parametrize(
    "method",
    [
        "eth_sendRawTransaction",
        "eth_sendTransaction",
        "personal_sign",
        "anvil_mine",
        "eth_newFilter",
        "eth_subscribe",
        "eth_signTypedData_v4",
    ],
)
async def test_rpc_call_refuses_methods_that_change_state_or_need_one_node(
    service: Service, method: str
) -> None:
    result = await _call(service, "rpc_call", {"chainId": CHAIN_A, "method": method})
    assert f"{method} is not available: these tools are read-only" in error_text(result)
