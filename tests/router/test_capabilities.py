"""Node capabilities (design notes, "Node capabilities"): a call goes only to a node that can
answer it; a node that cannot is the node's failure, never billed, and teaches the router; when no
node can, the client gets the error that names what is missing and the best that is available.

Told with scripted nodes (testing/scripted.py); the same rules against real anvil nodes are in
test_capabilities_anvil.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from chainrouter.domain.capabilities import ARCHIVE_DEPTH, Capabilities
from chainrouter.domain.enums import Scenario
from chainrouter.testing.scripted import answering, erroring
from tests.router.scripted_world import rpc, scripted_world

ARCHIVE, PRUNED, NO_TRACE = "http://archive.node", "http://pruned.node", "http://notrace.node"
ADDRESS = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
HEAD = 20_000
OLD = hex(100)
RECENT = hex(HEAD - 10)
STATE_METHODS = ("eth_getBalance", "trace_block", "debug_traceBlockByNumber", "eth_getLogs")


def _error(body: bytes) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(body)["error"]
    return error


def _balance(block: str, request_id: int = 1) -> dict[str, Any]:
    return rpc("eth_getBalance", [ADDRESS, block], request_id)


def test_an_old_state_read_skips_a_node_declared_pruned() -> None:
    world = scripted_world(
        [(PRUNED, 100, answering("0x1")), (ARCHIVE, 300, answering("0x2"))],
        methods=STATE_METHODS,
        capabilities={PRUNED: Capabilities(state_depth=128), ARCHIVE: Capabilities(ARCHIVE_DEPTH)},
        heads={PRUNED: HEAD, ARCHIVE: HEAD},
    )
    reply = world.call(_balance(OLD))
    assert json.loads(reply.body)["result"] == "0x2"
    assert world.urls_called() == [ARCHIVE]
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 300)}


def test_a_recent_state_read_goes_to_the_cheapest_node_that_keeps_it() -> None:
    world = scripted_world(
        [(PRUNED, 100, answering("0x1")), (ARCHIVE, 300, answering("0x2"))],
        methods=STATE_METHODS,
        capabilities={PRUNED: Capabilities(state_depth=128)},
        heads={PRUNED: HEAD, ARCHIVE: HEAD},
    )
    assert json.loads(world.call(_balance(RECENT)).body)["result"] == "0x1"
    assert json.loads(world.call(_balance("latest")).body)["result"] == "0x1"
    assert world.urls_called() == [PRUNED, PRUNED]


@pytest.mark.parametrize(
    "message",
    [
        "missing trie node 0xabc (path ) <nil>",
        "BlockOutOfRangeError: block height is 20000 but requested was 100",
        "required historical state unavailable (reexec=128)",
    ],
)
def test_a_node_without_the_state_fails_over_unbilled_and_is_learned_from(message: str) -> None:
    world = scripted_world(
        [(PRUNED, 100, erroring(-32000, message)), (ARCHIVE, 300, answering("0x2"))],
        methods=STATE_METHODS,
        heads={PRUNED: HEAD, ARCHIVE: HEAD},
    )
    first = world.call(_balance(OLD))
    assert json.loads(first.body)["result"] == "0x2"
    assert world.metered() == {Scenario.FAILOVER: (1, 300)}
    assert world.cooling() == []  # lacking old state is not ill health
    world.call(_balance(hex(50)))  # older than the block it was found to lack: not asked
    assert world.urls_called() == [PRUNED, ARCHIVE, ARCHIVE]
    world.call(_balance(RECENT))  # recent state: still asked of it first
    assert world.urls_called()[3] == PRUNED


def test_state_older_than_any_node_keeps_is_refused_with_the_oldest_available() -> None:
    world = scripted_world(
        [(PRUNED, 100, answering("0x1")), (ARCHIVE, 300, answering("0x2"))],
        methods=STATE_METHODS,
        capabilities={
            PRUNED: Capabilities(state_depth=128),
            ARCHIVE: Capabilities(state_depth=10_000),
        },
        heads={PRUNED: HEAD, ARCHIVE: HEAD},
    )
    reply = world.call(_balance(OLD))
    assert reply.status == 422
    error = _error(reply.body)
    assert error["code"] == -32012
    assert error["message"] == (
        "insufficient historical state depth: block 100 is older than the oldest state kept by "
        "any node (block 10,000)"
    )
    assert error["data"] == {"requirement": "state", "block": 100, "oldest_available": 10_000}
    assert world.urls_called() == []
    assert world.metered() == {Scenario.INCAPABLE: (1, 0)}


def test_every_node_lacking_the_state_ends_in_minus_32012_after_they_said_so() -> None:
    world = scripted_world(
        [
            (PRUNED, 100, erroring(-32000, "missing trie node abc")),
            (ARCHIVE, 300, erroring(-32000, "missing trie node def")),
        ],
        methods=STATE_METHODS,
        heads={PRUNED: HEAD, ARCHIVE: HEAD},
    )
    reply = world.call(_balance(OLD))
    assert _error(reply.body)["code"] == -32012
    assert world.metered() == {Scenario.INCAPABLE: (1, 0)}
    world.call(_balance(OLD))  # now known: refused without asking
    assert world.urls_called() == [PRUNED, ARCHIVE]


def test_a_node_lacking_the_state_and_an_archive_beyond_the_balance_is_402_not_incapable() -> None:
    # Topping up would let the archive node answer: the call is 402, not -32012.
    world = scripted_world(
        [
            (PRUNED, 100, erroring(-32000, "missing trie node abc")),
            (ARCHIVE, 300, answering("0x2")),
        ],
        methods=STATE_METHODS,
        heads={PRUNED: HEAD, ARCHIVE: HEAD},
        balance_nano=200,
    )
    reply = world.call(_balance(OLD))
    assert (reply.status, _error(reply.body)["code"]) == (402, -32601)
    assert world.urls_called() == [PRUNED]
    assert world.metered() == {Scenario.INSUFFICIENT_CREDITS: (1, 0)}


def test_a_trace_goes_to_a_tracing_node_and_a_disabled_namespace_is_learned() -> None:
    world = scripted_world(
        [
            (
                NO_TRACE,
                100,
                erroring(-32601, "the method trace_block does not exist/is not available"),
            ),
            (ARCHIVE, 300, answering([])),
        ],
        methods=STATE_METHODS,
        heads={NO_TRACE: HEAD, ARCHIVE: HEAD},
    )
    assert json.loads(world.call(rpc("trace_block", [RECENT])).body)["result"] == []
    assert json.loads(world.call(rpc("trace_block", [RECENT])).body)["result"] == []
    assert world.urls_called() == [NO_TRACE, ARCHIVE, ARCHIVE]
    assert world.metered() == {Scenario.FAILOVER: (1, 300), Scenario.FIRST_CHOICE: (1, 300)}


def _by_method(answers: dict[str, tuple[str, Any]]) -> Any:
    """A node answering each method as `answers` says ("result" or "error", value), else []."""

    def respond(command: Any) -> bytes:
        request = json.loads(command.body)
        kind, value = answers.get(request["method"], ("result", []))
        return json.dumps({"jsonrpc": "2.0", "id": request["id"], kind: value}).encode()

    return respond


def _missing(method: str) -> tuple[str, dict[str, Any]]:
    return ("error", {"code": -32601, "message": f"the method {method} does not exist"})


@pytest.mark.parametrize(
    ("lacking", "then"),
    [
        (rpc("debug_getBadBlocks", []), rpc("debug_traceBlockByNumber", [RECENT, {}])),
        (rpc("trace_rawTransaction", ["0x00", ["trace"]]), rpc("trace_block", [RECENT])),
    ],
)
def test_one_method_a_node_lacks_is_learned_not_its_whole_namespace(
    lacking: dict[str, Any], then: dict[str, Any]
) -> None:
    """Nodes and providers often lack one method of a namespace they serve: another caller's
    call of that method must not take the others away (the probes judge the namespace)."""
    node = _by_method({lacking["method"]: _missing(lacking["method"])})
    world = scripted_world(
        [(NO_TRACE, 100, node)],
        methods=(*STATE_METHODS, lacking["method"]),
        heads={NO_TRACE: HEAD},
    )
    other = world.another_key(2, customer_id=2)
    refused = world.call(lacking, key=other)
    assert _error(refused.body)["code"] == -32011  # that method: no node serves it
    assert json.loads(world.call(then).body)["result"] == []


def test_a_trace_filter_range_limit_is_not_learned_as_the_logs_limit() -> None:
    """Nodes limit trace_filter's range far below eth_getLogs's: one caller's trace_filter must
    not move everyone's log queries off the node."""
    limited = ("error", {"code": -32000, "message": "block range too large, max 100 blocks"})
    node = _by_method({"trace_filter": limited})
    world = scripted_world(
        [(ARCHIVE, 100, node), (PRUNED, 300, answering([]))],
        methods=(*STATE_METHODS, "trace_filter"),
        heads={ARCHIVE: HEAD, PRUNED: HEAD},
    )
    other = world.another_key(2, customer_id=2)
    world.call(rpc("trace_filter", [{"fromBlock": hex(1000), "toBlock": hex(1500)}]), key=other)
    world.call(_logs(5000, 5999))
    assert world.urls_called()[-1] == ARCHIVE


@pytest.mark.parametrize("block", [HEAD, HEAD - 1])
def test_a_block_missing_near_the_head_takes_no_history_away(block: int) -> None:
    """A provider's backend a block behind the one its health check reached says "header not
    found" near the head: that says nothing of the history it keeps."""

    def behind(command: Any) -> bytes:
        request = json.loads(command.body)
        if request["params"][0] == hex(block):
            failure = {"code": -32000, "message": "header not found"}
            return json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": failure}).encode()
        answer = {"number": request["params"][0]}
        return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": answer}).encode()

    world = scripted_world(
        [(ARCHIVE, 100, behind)], methods=("eth_getBlockByNumber",), heads={ARCHIVE: HEAD}
    )
    other = world.another_key(2, customer_id=2)
    world.call(rpc("eth_getBlockByNumber", [hex(block), False]), key=other)
    reply = world.call(rpc("eth_getBlockByNumber", [hex(1_000), False]))
    assert json.loads(reply.body)["result"] == {"number": hex(1_000)}


def test_no_tracing_node_is_minus_32011() -> None:
    world = scripted_world(
        [(NO_TRACE, 100, answering([]))],
        methods=STATE_METHODS,
        capabilities={NO_TRACE: Capabilities(trace=False, debug=False)},
    )
    reply = world.call(rpc("debug_traceBlockByNumber", ["latest", {}]))
    error = _error(reply.body)
    assert (reply.status, error["code"]) == (422, -32011)
    assert "debug_*" in error["message"]
    assert world.urls_called() == []


def test_requirements_met_only_by_different_nodes_are_minus_32013() -> None:
    world = scripted_world(
        [(NO_TRACE, 100, answering([])), (PRUNED, 200, answering([]))],
        methods=STATE_METHODS,
        capabilities={
            NO_TRACE: Capabilities(state_depth=ARCHIVE_DEPTH, trace=False),
            PRUNED: Capabilities(state_depth=128, trace=True),
        },
        heads={NO_TRACE: HEAD, PRUNED: HEAD},
    )
    reply = world.call(rpc("trace_block", [OLD]))
    error = _error(reply.body)
    assert (reply.status, error["code"]) == (422, -32013)
    assert "state at block 99" in error["message"]
    assert "trace namespace" in error["message"]
    assert world.urls_called() == []


def test_a_block_past_every_nodes_head_is_answered_as_the_nodes_at_the_head_answer_it() -> None:
    """Not yet, rather than a router's error: the node's own "not found", unbilled (design
    notes, "Integrity")."""
    world = scripted_world(
        [(ARCHIVE, 100, erroring(-32000, "header not found"))],
        methods=STATE_METHODS,
        heads={ARCHIVE: HEAD},
    )
    for block in (HEAD + 3, HEAD + 5_000):
        reply = world.call(_balance(hex(block)))
        assert reply.status == 200
        assert _error(reply.body) == {"code": -32000, "message": "header not found"}
    assert world.urls_called() == [ARCHIVE, ARCHIVE]
    assert world.metered() == {Scenario.INCAPABLE: (2, 0)}


@pytest.mark.parametrize(
    "block",
    ["0xZZ", "0x" + "f" * 17, 12, None, True, {"blockNumber": "12"}, {"blockHash": "0x12"}, {}],
)
def test_a_malformed_block_parameter_is_minus_32602_and_never_sent(block: object) -> None:
    world = scripted_world([(ARCHIVE, 100, answering("0x1"))], methods=STATE_METHODS)
    reply = world.call(rpc("eth_getBalance", [ADDRESS, block]))
    error = _error(reply.body)
    assert (reply.status, error["code"]) == (400, -32602)
    assert world.urls_called() == []
    assert world.metered() == {Scenario.REFUSED: (1, 0)}


def test_a_log_range_wider_than_a_nodes_own_limit_goes_to_a_node_that_serves_it() -> None:
    narrow = "http://narrow.node"
    world = scripted_world(
        [(narrow, 100, answering([])), (ARCHIVE, 300, answering([]))],
        methods=STATE_METHODS,
        capabilities={narrow: Capabilities(logs_max_range=10)},
    )
    world.call(rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0xa"}]))
    world.call(rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0xb"}]))
    assert world.urls_called() == [narrow, ARCHIVE]


def test_a_log_range_no_node_serves_is_minus_32005_with_the_widest_any_serves() -> None:
    world = scripted_world(
        [("http://n1", 100, answering([])), ("http://n2", 300, answering([]))],
        methods=STATE_METHODS,
        capabilities={
            "http://n1": Capabilities(logs_max_range=10),
            "http://n2": Capabilities(logs_max_range=500),
        },
    )
    # 8,193 blocks: 17 ranges of the widest node's 500, one more than a split may take
    reply = world.call(rpc("eth_getLogs", [{"fromBlock": "0x0", "toBlock": "0x2000"}]))
    error = _error(reply.body)
    assert (reply.status, error["code"], error["data"]) == (200, -32005, 500)
    assert error["message"].endswith("try a block range of at most 500 blocks")


def test_a_nodes_stated_range_limit_is_learned() -> None:
    narrow = "http://narrow.node"
    world = scripted_world(
        [
            (narrow, 100, erroring(-32005, "eth_getLogs is limited to a 10 block range")),
            (ARCHIVE, 300, answering([])),
        ],
        methods=STATE_METHODS,
    )
    world.call(rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x32"}]))
    world.call(rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0xb"}]))  # 11 blocks
    assert world.urls_called() == [narrow, ARCHIVE, ARCHIVE]
    assert world.metered() == {Scenario.FAILOVER: (1, 300), Scenario.FIRST_CHOICE: (1, 300)}


def test_a_result_size_limit_fails_over_but_teaches_nothing() -> None:
    """What a query returns depends on the query: one caller's busy range must not narrow the
    node for every other customer."""
    busy = "http://busy.node"
    world = scripted_world(
        [
            (
                busy,
                100,
                [erroring(-32005, "query returned more than 10000 results"), answering([])],
            ),
            (ARCHIVE, 300, answering([])),
        ],
        methods=STATE_METHODS,
    )
    world.call(rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x64"}]))
    world.call(rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x64"}]))
    assert world.urls_called() == [busy, ARCHIVE, busy]


def test_a_revert_is_an_answer_and_billed() -> None:
    world = scripted_world(
        [
            (ARCHIVE, 100, erroring(3, "execution reverted: not owner")),
            (PRUNED, 200, answering("0x")),
        ],
        methods=("eth_call",),
    )
    reply = world.call(rpc("eth_call", [{"to": ADDRESS, "data": "0x"}, "latest"]))
    assert _error(reply.body)["code"] == 3
    assert world.urls_called() == [ARCHIVE]
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 100)}


def test_in_a_batch_each_item_is_routed_on_its_own() -> None:
    world = scripted_world(
        [(PRUNED, 100, answering("0x1")), (ARCHIVE, 300, answering("0x2"))],
        methods=STATE_METHODS,
        capabilities={PRUNED: Capabilities(state_depth=128)},
        heads={PRUNED: HEAD, ARCHIVE: HEAD},
    )
    reply = world.call([_balance(RECENT, 1), _balance(OLD, 2)])
    results = {item["id"]: item["result"] for item in json.loads(reply.body)}
    assert results == {1: "0x1", 2: "0x2"}
    assert world.metered() == {Scenario.FIRST_CHOICE: (2, 400)}


def _logs(start: int, end: int, request_id: int = 1) -> dict[str, Any]:
    return rpc("eth_getLogs", [{"fromBlock": hex(start), "toBlock": hex(end)}], request_id)


def _log(block: int, index: int = 0) -> dict[str, Any]:
    return {"blockNumber": hex(block), "blockHash": f"0x{block:064x}", "logIndex": hex(index)}


def _logs_of_range(command: Any) -> bytes:
    """A node that answers each range with one log per block in it."""
    request = json.loads(command.body)
    query = request["params"][0]
    blocks = range(int(query["fromBlock"], 16), int(query["toBlock"], 16) + 1)
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": [_log(b) for b in blocks]}
    return json.dumps(answer).encode()


def test_a_range_wider_than_every_nodes_limit_is_split_merged_and_billed_per_range() -> None:
    n1, n2 = "http://n1", "http://n2"
    world = scripted_world(
        [(n1, 100, _logs_of_range), (n2, 300, _logs_of_range)],
        methods=STATE_METHODS,
        capabilities={n1: Capabilities(logs_max_range=10), n2: Capabilities(logs_max_range=25)},
    )
    reply = world.call(_logs(1, 60, request_id=9))
    answer = json.loads(reply.body)
    assert (reply.status, answer["id"]) == (200, 9)
    assert [log["blockNumber"] for log in answer["result"]] == [hex(b) for b in range(1, 61)]
    assert reply.headers == (("x-logs-split-ranges", "3"),)
    asked = [json.loads(c.body)["params"][0] for c in world.executor.forwarded]
    assert [(q["fromBlock"], q["toBlock"]) for q in asked] == [
        ("0x1", "0x19"),
        ("0x1a", "0x32"),
        ("0x33", "0x3c"),
    ]
    assert world.urls_called() == [n2, n2, n1]  # the last, 10-block range fits the cheaper node
    # Each range counted at its route's price, under the plan whose node served it (n1's plan
    # is 1, n2's 2): the plans' use in their cycles is what their nodes answered.
    by_plan: dict[tuple[str, int], list[int]] = {}
    for key, (calls, credits) in world.deps.meter.take().rows.items():
        counted = by_plan.setdefault((key[4], key[6]), [0, 0])
        counted[0] += calls
        counted[1] += credits
    assert by_plan == {(Scenario.SPLIT, 2): [2, 600], (Scenario.SPLIT, 1): [1, 100]}


def test_a_split_range_that_fails_in_part_fails_whole_and_unbilled() -> None:
    n1 = "http://n1"
    world = scripted_world(
        [(n1, 100, [_logs_of_range, erroring(-32000, "header not found"), _logs_of_range])],
        methods=STATE_METHODS,
        capabilities={n1: Capabilities(logs_max_range=10)},
    )
    reply = world.call(_logs(1, 30))
    assert "error" in json.loads(reply.body)
    assert "x-logs-split-ranges" not in dict(reply.headers)
    [(scenario, (calls, credits))] = world.metered().items()
    assert (calls, credits) == (1, 0)
    assert scenario != Scenario.SPLIT


def test_a_range_needing_too_many_parts_is_minus_32005() -> None:
    n1 = "http://n1"
    world = scripted_world(
        [(n1, 100, _logs_of_range)],
        methods=STATE_METHODS,
        capabilities={n1: Capabilities(logs_max_range=10)},
    )
    reply = world.call(_logs(1, 10 * 16 + 1))  # 17 ranges; the default bound is 16
    error = _error(reply.body)
    assert (error["code"], error["data"]) == (-32005, 10)
    assert world.urls_called() == []


def test_logs_a_node_sends_twice_across_ranges_are_merged_once() -> None:
    n1 = "http://n1"

    def overlapping(command: Any) -> bytes:  # every range also answers block 1's log
        request = json.loads(command.body)
        query = request["params"][0]
        blocks = range(int(query["fromBlock"], 16), int(query["toBlock"], 16) + 1)
        logs = [_log(1), *(_log(b) for b in blocks if b != 1), {"odd": ["not", "hashable"]}]
        return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": logs}).encode()

    world = scripted_world(
        [(n1, 100, overlapping)],
        methods=STATE_METHODS,
        capabilities={n1: Capabilities(logs_max_range=5)},
    )
    result = json.loads(world.call(_logs(1, 10)).body)["result"]
    numbers = [log.get("blockNumber") for log in result]
    assert numbers == [hex(b) for b in range(1, 6)] + [None] + [hex(b) for b in range(6, 11)] + [
        None
    ]


def test_a_split_query_keeps_to_the_calls_deadline() -> None:
    n1 = "http://n1"

    def slow(command: Any) -> bytes:
        world.clock.now += 2.0  # each range takes 2 s
        return _logs_of_range(command)

    world = scripted_world(
        [(n1, 100, slow)],
        methods=STATE_METHODS,
        capabilities={n1: Capabilities(logs_max_range=1)},
        deadline_s=5.0,
    )
    reply = world.call(_logs(1, 16))  # 16 ranges, 4 at a time: the deadline passes after 3 rounds
    assert reply.status == 504
    assert len(world.executor.forwarded) < 16
    assert world.metered()[Scenario.ALL_FAILED] == (1, 0)
