"""What the router proves of a node's answer before it serves it (design notes, "Integrity",
Proofs; docs/integrity.md).

A node's answer is a claim. Where the chain lets the router check it, it does, before the answer
is served (and, for an answer the cache keeps, before it is kept):
- **a header** is trusted when its hash is keccak(RLP(header)) and a node of another provider
  answers the same hash at its number, or when a trusted header's `parentHash` chain reaches it
  (`TrustedHeaders`, router/trusted_headers.py, keeps the trusted ones and settles reorgs);
- **a state read** pinned to a block (balance, nonce, code, storage) is proven with
  `eth_getProof` against the trusted header's `stateRoot`;
- **a block** by number or hash is its own header; with its transactions, their root too;
- **a receipt** is checked against the whole block's receipts, proven against `receiptsRoot`
  (fetched once per block and kept), **a transaction** against its block's `transactionsRoot`;
- **logs** of a short range (or one block by hash) against the receipts of each of its blocks:
  exactly the matching logs, so an answer that leaves one out is false too;
- a kept answer the chain offers no proof for (an `eth_call`, a wide log range) is **agreed**:
  asked again of another provider's node, and kept only when both say the same.
The proofs themselves are `chainrouter.integrity`'s (pure functions over the nodes' JSON); this
module decides what to prove (`plan`) and fetches what the proof needs (`check`, a program that
awaits `Forward` commands like the attempt it runs inside: router/stages/attempt.py).

A proof that fails means the node answered something false: the caller's answer comes from
another node, and the node is reported (`on_false`). A proof that cannot be made (no second
provider, a node without the block's receipts, a time-out) leaves the answer served unproven:
not marked, and not kept.

The calls a check makes are priced as calls (`_Asking`): each is held against the customer's
balance before it is sent, at the answering plan's price for its method (the plan's price for
the call's own method where it does not price that one), and each a node answers is billed
under the scenario `verification` (router/ledger.py). A check whose next call the balance cannot
hold sends nothing more and leaves the answer unproven.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from chainrouter import integrity
from chainrouter.domain.requirements import METHODS
from chainrouter.domain.routing import Route
from chainrouter.domain.verification import Check, ProofPlan, Verified, VerifyMode
from chainrouter.integrity import ProofError
from chainrouter.jsonrpc.encode import encode_call
from chainrouter.router.context import CallContext, CheckCall
from chainrouter.router.contract import Failure, Forward
from chainrouter.router.trusted_headers import TrustedHeaders

STATE_READS = frozenset(
    {"eth_getBalance", "eth_getTransactionCount", "eth_getCode", "eth_getStorageAt"}
)
# The methods whose proofs this module fetches for, by check; each is provable by
# chainrouter.integrity's table (`PROOFS`), which a test holds it to.
CHECKS = {
    **dict.fromkeys(STATE_READS, Check.STATE),
    "eth_getBlockByNumber": Check.BLOCK,
    "eth_getBlockByHash": Check.BLOCK,
    "eth_getTransactionReceipt": Check.RECEIPT,
    "eth_getTransactionByHash": Check.TRANSACTION,
    "eth_getLogs": Check.LOGS,
}
_HEAD_TAGS = frozenset({"latest", "pending", "safe", "finalized"})
_TAGS = _HEAD_TAGS | {"earliest"}
# The widest log range proven: each block costs its header, its transactions and its receipts
# (each once per block, then kept), so wider ranges are agreed instead (docs/integrity.md).
MAX_PROVEN_LOG_BLOCKS = 4


def plan(call: CallContext, mode: VerifyMode, latest: int | None = None) -> ProofPlan | None:
    """What `call`'s answer must be checked by before it is served, if anything: under `cache`,
    an answer the cache will keep; under `always`, that and every answer the chain can prove.
    A state read or a block at `latest` is proven at block `latest` (`latest_block`), to which
    the call is then pinned (`pin_latest`): asked as it came, the node's head could move between
    its answer and the proof, and an honest node would be taken for a false one. Other head
    tags are not proven."""
    if mode is VerifyMode.OFF:
        return None
    kept = call.looked_up  # the cache looked for it: its answer will be kept
    check = CHECKS.get(call.call.method)
    if check is None:
        return ProofPlan(Check.AGREEMENT) if kept else None
    if not kept and mode is not VerifyMode.ALWAYS:
        return None
    if check in (Check.STATE, Check.BLOCK) and latest is not None and _reads_latest(call):
        return ProofPlan(check, latest, pins_latest=True)
    if check is Check.STATE:
        block = _state_block(call)
        if block is None:
            return ProofPlan(Check.AGREEMENT) if kept else None
        return ProofPlan(check, block)
    if check is Check.BLOCK and not _pinned_block(call):
        return ProofPlan(Check.AGREEMENT) if kept else None
    if check is Check.LOGS:
        blocks = _log_blocks(call)
        if blocks is None:
            return ProofPlan(Check.AGREEMENT) if kept else None
        return ProofPlan(check, *blocks)
    return ProofPlan(check)


def latest_block(call: CallContext, node_head: Callable[[int], int | None]) -> int | None:
    """The block a read of `latest` is proven at: the lowest head among the nodes the call may
    go to, which every one of them has (none lags, none is behind the head the call's key was
    told, where such nodes exist: stages/heads.py, stages/consistent_head.py); None where a
    node's head is unknown, or that block is older than what the key was told."""
    heads = [node_head(route.node.node_id) for route in call.ordered]
    if not heads or None in heads:
        return None
    lowest = min(head for head in heads if head is not None)
    seen = call.seen_head
    return None if seen is not None and lowest < seen else lowest


def _reads_latest(call: CallContext) -> bool:
    """Whether the call reads its block parameter's `latest`, named or left out."""
    params, at = call.call.params, METHODS[call.call.method].block_param
    if not isinstance(params, list) or at is None:
        return False
    return len(params) == at or (len(params) > at and params[at] == "latest")


def pin_latest(call: CallContext, block: int) -> None:
    """Send the call pinned to `block` instead of `latest`: the answer the client gets is the
    chain's state (or block) at that block, which every node the call may go to has."""
    rpc = call.call
    at = METHODS[rpc.method].block_param
    assert isinstance(rpc.params, list)
    assert at is not None
    params = [*rpc.params[:at], hex(block), *rpc.params[at + 1 :]]
    call.call = replace(rpc, params=params)
    call.body = encode_call(call.call)
    if call.needs.state_at is not None or rpc.method in STATE_READS:
        call.needs = replace(call.needs, state_at=block, at_head=False)
    else:
        call.needs = replace(call.needs, history_from=block, history_to=block, at_head=False)


def _state_block(call: CallContext) -> int | str | None:
    """The block a state read names: its number, or its hash (EIP-1898); None for a tag, or
    none named (a slot's 32 bytes are never read as a block's hash)."""
    params = call.call.params
    at = METHODS[call.call.method].block_param
    if not isinstance(params, list) or at is None or len(params) <= at:
        return None
    ref = params[at]
    if isinstance(ref, dict):
        ref = ref.get("blockHash", ref.get("blockNumber"))
    if not isinstance(ref, str) or ref in _TAGS:
        return None
    if len(ref) == 66:
        return ref.lower()
    return call.needs.state_at


def _log_blocks(call: CallContext) -> tuple[int | str, int | None] | None:
    """The blocks a log query covers, when it can be proven: its block's hash, or its first and
    last numbers (no head tag: the head may move before the proof), at most
    `MAX_PROVEN_LOG_BLOCKS` of them; None otherwise."""
    params = call.call.params
    if not isinstance(params, list) or not params or not isinstance(params[0], dict):
        return None
    query = params[0]
    if "blockHash" in query:
        return str(query["blockHash"]).lower(), None
    if any(query.get(end, "latest") in _HEAD_TAGS for end in ("fromBlock", "toBlock")):
        return None
    first, last = call.needs.history_from, call.needs.history_to
    if first is None or last is None or not 0 <= last - first < MAX_PROVEN_LOG_BLOCKS:
        return None
    return first, last


def _pinned_block(call: CallContext) -> bool:
    params = call.call.params
    if call.call.method == "eth_getBlockByHash":
        return True
    return isinstance(params, list) and bool(params) and params[0] not in _TAGS


class _UnprovableError(Exception):
    """The proof could not be made (no second provider, a node's failure): served unproven."""


class _UnaffordableError(_UnprovableError):
    """The customer's balance cannot hold the next call's price: nothing more is asked."""


@dataclass(frozen=True, slots=True)
class Outcome:
    verified: Verified | None  # None: served unproven
    false: str | None = None  # why the proof refuted the answer; None: it did not
    # The proof ran and held, against a header no other provider vouched for: the answer fits
    # its own chain's roots, so the proofs fit this chain (router/stages/attempt.py).
    held: bool = False


UNPROVEN = Outcome(None)
_OTHERS_TRIED = 2  # nodes of other providers asked to agree, before a check is left unproven
# The farthest a trusted header is looked for above one no other provider vouches for: reaching
# it costs a call per block between (each within the check's time-out), so at most 7 calls.
PARENT_WALK = 8

_HEADER_FIELDS = (
    "hash",
    "number",
    "parentHash",
    "stateRoot",
    "receiptsRoot",
    "transactionsRoot",
)


def _kept_fields(header: Mapping[str, Any]) -> dict[str, Any]:
    """What is kept of a header, its hash checked: the fields proofs and chains read."""
    return {name: header[name] for name in _HEADER_FIELDS if name in header}


class Prover:
    """Checks answers by their plan; `modes` gives each chain's `VerifyMode`."""

    def __init__(
        self,
        modes: Callable[[int], VerifyMode],
        headers: TrustedHeaders | None = None,
        max_receipts_bytes: int = 8 << 20,
        max_parent_walk: int = PARENT_WALK,
    ) -> None:
        self.mode = modes
        self.headers = TrustedHeaders() if headers is None else headers
        # How far above a header, at most, a trusted header is looked for to reach it by
        # `parentHash` when no other provider vouches for it: a call per block between.
        self.max_parent_walk = max_parent_walk
        # The receipts of blocks proven, with the block: (chain, block hash) -> both.
        self._receipts: OrderedDict[tuple[int, str], tuple[Mapping[str, Any], list[Any]]] = (
            OrderedDict()
        )
        # Bounded by the bytes the nodes sent for them (a block's receipts may be megabytes).
        self._receipt_bytes: dict[tuple[int, str], int] = {}
        self._held_bytes = 0
        self._max_receipt_bytes = max_receipts_bytes

    async def check(
        self,
        call: CallContext,
        plan: ProofPlan,
        route: Route,
        answer: bytes,
        timeout_s: float,
        hold: Callable[[int], bool],
    ) -> Outcome:
        """Check `answer`, given by `route`'s node, by `plan`; the extra calls go to that node and
        to another provider's, each within `timeout_s`, each sent once `hold` held its price
        (False: the balance cannot, and the check ends unproven)."""
        try:
            result = orjson.loads(answer)["result"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return UNPROVEN
        asking = _Asking(call, route, timeout_s, hold)
        try:
            if plan.check is Check.AGREEMENT:
                agreed = await asking.other(call.call.method, call.call.params) == result
                return Outcome(Verified.AGREEMENT) if agreed else UNPROVEN
            if result is None:
                return UNPROVEN  # an absence is not proven (router/belief.py judges it)
            if plan.check is Check.STATE:
                await self._state(asking, plan, result)
            elif plan.check is Check.BLOCK:
                await self._block(asking, result)
            elif plan.check is Check.RECEIPT:
                await self._receipt(asking, result)
            elif plan.check is Check.LOGS:
                await self._logs(asking, plan, result)
            else:
                await self._transaction(asking, result)
        except ProofError as error:
            return Outcome(None, error.reason)
        except _UnprovableError:
            return UNPROVEN
        return Outcome(None, held=True) if asking.unagreed else Outcome(Verified.PROOF, held=True)

    async def _state(self, asking: _Asking, plan: ProofPlan, result: Any) -> None:
        header = await self._header(asking, plan.block)
        call = asking.call.call
        asked = call.params if isinstance(call.params, list) else []
        method, params = integrity.proof_request(call.method, asked, str(header["hash"]))
        try:
            proof = await asking.same(method, params)
        except _UnprovableError:
            # The node has no block of the trusted header's hash: reorganised, maybe.
            header = await self._header_again(asking, plan.block, header)
            method, params = integrity.proof_request(call.method, asked, str(header["hash"]))
            proof = await asking.same(method, params)
        code = None
        if call.method == "eth_getCode":
            code = bytes.fromhex(str(result)[2:])
        root = bytes.fromhex(str(header["stateRoot"])[2:])
        integrity.verify_state_answer(call.method, asked, result, proof, root, code)

    async def _block(self, asking: _Asking, block: Any) -> None:
        if not isinstance(block, dict):
            raise ProofError("a block that is not an object")
        integrity.verify_header(block)
        await self._agreed(asking, block)
        transactions = block.get("transactions") or []
        if transactions and isinstance(transactions[0], dict):
            integrity.verify_transactions(block)

    async def _receipt(self, asking: _Asking, claimed: Any) -> None:
        if not isinstance(claimed, dict) or not isinstance(claimed.get("blockHash"), str):
            raise ProofError("a receipt without its block's hash")
        header = await self._header(asking, str(claimed["blockHash"]).lower())
        block, receipts = await self._block_receipts(asking, header)
        tx_hash = str(asking.call.call.params[0]).lower()  # type: ignore[index]
        integrity.verify_receipt(block, receipts, tx_hash, claimed)

    async def _logs(self, asking: _Asking, plan: ProofPlan, claimed: Any) -> None:
        """Logs, complete and true: exactly what the filter matches among the proven receipts of
        every block of the range (an empty answer included: that no block holds a match)."""
        query = dict(asking.call.call.params[0])  # type: ignore[index]
        if isinstance(plan.block, str):
            numbers: Sequence[int | str] = [plan.block]
        else:
            assert plan.block is not None
            assert plan.through is not None
            numbers = range(plan.block, plan.through + 1)
            query.update(fromBlock=hex(plan.block), toBlock=hex(plan.through))  # `earliest`: 0
        blocks = []
        for block in numbers:
            header = await self._header(asking, block)
            blocks.append(await self._block_receipts(asking, header))
        integrity.verify_logs(blocks, query, claimed)

    async def _transaction(self, asking: _Asking, claimed: Any) -> None:
        if not isinstance(claimed, dict) or not isinstance(claimed.get("blockHash"), str):
            return  # pending: in no block yet, nothing to prove it against
        block = await asking.same("eth_getBlockByHash", [claimed["blockHash"], True])
        if not isinstance(block, dict):
            raise _UnprovableError
        integrity.verify_header(block)
        await self._agreed(asking, block)
        tx_hash = str(asking.call.call.params[0]).lower()  # type: ignore[index]
        integrity.verify_transaction(block, tx_hash, claimed)

    async def _header(self, asking: _Asking, block: int | str | None) -> Mapping[str, Any]:
        """The trusted header of `block` (a number or a hash): known, or fetched from the
        answering node, its hash checked, and agreed by another provider's node."""
        chain_id = asking.call.request.chain_id
        if block is None:
            raise _UnprovableError
        if isinstance(block, int):
            known = self.headers.by_number(chain_id, block)
            method, ref = "eth_getBlockByNumber", hex(block)
        else:
            known = self.headers.by_hash(chain_id, block)
            method, ref = "eth_getBlockByHash", block
        if known is not None:
            return known
        header = await asking.same(method, [ref, False])
        if not isinstance(header, dict):
            raise _UnprovableError  # the node has no such block: its answer was judged already
        integrity.verify_header(header)
        return await self._agreed(asking, header)

    async def _header_again(
        self, asking: _Asking, block: int | str | None, trusted: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """The header of block number `block` once more, after the answering node had no block
        of the trusted header's hash there: a node's header of another hash is a reorg when a
        node of another provider agrees on it (`_agreed`, which drops the old fork's headers);
        the same hash again, or a block asked by hash, leaves the check unprovable."""
        if not isinstance(block, int):
            raise _UnprovableError
        header = await asking.same("eth_getBlockByNumber", [hex(block), False])
        if (
            not isinstance(header, dict)
            or str(header.get("hash", "")).lower() == str(trusted["hash"]).lower()
        ):
            raise _UnprovableError
        integrity.verify_header(header)
        return await self._agreed(asking, header)

    async def _agreed(self, asking: _Asking, header: Mapping[str, Any]) -> Mapping[str, Any]:
        """`header`, its hash checked: trusted once the trusted header above it names it as
        its parent (no call), a node of another provider has the same hash at its number (one
        call), or a trusted header at most `max_parent_walk` blocks above reaches it by
        `parentHash` (a call per block between, to the answering node). Another provider's
        agreement on a hash other than the trusted one at that number is a reorg, which
        `TrustedHeaders.trust` settles; a chain never overrides a trusted header. Where none
        can say (one provider, their nodes without the block, or one that disagrees: audits
        decide who is wrong), the proof goes on against it, and an answer it shows false is
        still false; one it holds is served unproven (`asking.unagreed`)."""
        chain_id = asking.call.request.chain_id
        block_hash, number = str(header["hash"]).lower(), int(str(header["number"]), 16)
        trusted = _kept_fields(header)
        known = self.headers.by_number(chain_id, number)
        if known is not None and str(known["hash"]).lower() == block_hash:
            return known
        child = self.headers.by_number(chain_id, number + 1)
        if (
            known is None
            and child is not None
            and self.headers.trust_ancestor(chain_id, child, trusted)
        ):
            return trusted
        try:
            theirs = await asking.other("eth_getBlockByNumber", [hex(number), False])
            if not isinstance(theirs, dict):
                raise _UnprovableError
            try:
                integrity.verify_header(theirs)
            except ProofError as error:  # the other node's claim, not the answering node's
                raise _UnprovableError from error
            if str(theirs["hash"]).lower() != block_hash:
                raise _UnprovableError
        except _UnprovableError:
            if known is None and await self._walked(asking, trusted):
                return trusted
            asking.unagreed = True
            self.headers.hold(chain_id, trusted)
            return header
        self.headers.trust(chain_id, trusted)
        return trusted

    async def _walked(self, asking: _Asking, header: Mapping[str, Any]) -> bool:
        """Whether the nearest trusted header at most `max_parent_walk` blocks above `header`
        reaches it by `parentHash`: each parent between fetched by hash from the answering node
        (a call each, within the check's time-out) and checked against its hash, then trusted.
        A parent the node does not give, or one that another trusted header contradicts, ends
        the walk (what it trusted on the way stays trusted: each one was reached)."""
        chain_id = asking.call.request.chain_id
        number = int(str(header["number"]), 16)
        if self.headers.by_number(chain_id, number + 1) is not None:
            return False  # the trusted header above names another parent (`_agreed` asked it)
        above = None
        for at in range(number + 2, number + self.max_parent_walk + 1):
            above = self.headers.by_number(chain_id, at)
            if above is not None:
                break
        if above is None:
            return False
        child = above
        while int(str(child["number"]), 16) > number + 1:
            try:
                parent = await asking.same("eth_getBlockByHash", [child["parentHash"], False])
            except _UnprovableError:
                return False
            if not isinstance(parent, dict):
                return False
            try:
                integrity.verify_header(parent)
            except ProofError:
                return False  # the answering node's own header: proven false elsewhere if used
            kept = _kept_fields(parent)
            if not self.headers.trust_ancestor(chain_id, child, kept):
                return False
            child = kept
        return self.headers.trust_ancestor(chain_id, child, header)

    async def _block_receipts(
        self, asking: _Asking, header: Mapping[str, Any]
    ) -> tuple[Mapping[str, Any], list[Any]]:
        """The trusted block (its transactions' hashes) and its receipts, proven against its
        receiptsRoot: kept, or fetched from the answering node."""
        key = (asking.call.request.chain_id, str(header["hash"]).lower())
        kept = self._receipts.get(key)
        if kept is not None:
            self._receipts.move_to_end(key)
            return kept
        # With its transactions: each receipt is then bound to its transaction (its sender,
        # recipient, created contract), not only to its place in the receipts root.
        block = await asking.same("eth_getBlockByHash", [header["hash"], True])
        size = asking.last_bytes
        receipts = await asking.same("eth_getBlockReceipts", [header["hash"]])
        size += asking.last_bytes
        if not isinstance(block, dict) or not isinstance(receipts, list):
            raise _UnprovableError
        if str(block.get("hash", "")).lower() != key[1]:
            raise ProofError("the block fetched is not the trusted one")
        integrity.verify_receipts(block, receipts)
        if size <= self._max_receipt_bytes:
            self._receipts[key] = (block, receipts)
            self._receipt_bytes[key] = size
            self._held_bytes += size
            while self._held_bytes > self._max_receipt_bytes:
                old, _ = self._receipts.popitem(last=False)
                self._held_bytes -= self._receipt_bytes.pop(old)
        return block, receipts


class _Asking:
    """The calls one check makes: to the answering node, or to a node of another provider.

    Each is priced as a call: its price held by `hold` before it is sent, and, once its node
    answers it, recorded on the call (`CallContext.check_calls`) for the ledger to bill to the
    call's customer and pay to the node's plan. A failure or an error answer is not billed, as
    no call's is. Once a hold fails nothing more is sent: the check is left unproven."""

    def __init__(
        self, call: CallContext, route: Route, timeout_s: float, hold: Callable[[int], bool]
    ) -> None:
        self.call = call
        self._route = route
        self._timeout_s = timeout_s
        self._hold = hold
        self._unaffordable = False
        self._sent = 0
        self.last_bytes = 0  # the size of the last answer
        self.unagreed = False  # a header no node of another provider vouched for

    async def same(self, method: str, params: Sequence[Any]) -> Any:
        return await self._ask(self._route, method, params)

    async def other(self, method: str, params: Any) -> Any:
        """The answer of a node of another provider: the first two such routes in the call's
        order are tried."""
        provider, tried, seen = self._route.node.provider_id, 0, set()
        for route in (*self.call.ordered, *self.call.routes):
            node_id = route.node.node_id
            if route.node.provider_id == provider or node_id in seen:
                continue
            seen.add(node_id)
            tried += 1
            try:
                return await self._ask(route, method, params)
            except _UnaffordableError:
                raise
            except _UnprovableError:
                if tried == _OTHERS_TRIED:
                    raise
        raise _UnprovableError  # one provider serves the chain: nothing to agree with

    async def _ask(self, route: Route, method: str, params: Any) -> Any:
        cost = self._price(route, method)
        if self._unaffordable or not self._hold(cost):
            self._unaffordable = True
            raise _UnaffordableError
        self._sent += 1
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": self._sent, "method": method, "params": params}
        )
        answer = await Forward(route.node.url, body, self._timeout_s)
        if isinstance(answer, Failure):
            raise _UnprovableError
        self.last_bytes = len(answer)
        try:
            parsed = orjson.loads(answer)
        except orjson.JSONDecodeError as error:
            raise _UnprovableError from error
        if not isinstance(parsed, dict) or "result" not in parsed:
            raise _UnprovableError
        made = CheckCall(route.node, route.plan.plan_id, method, cost)
        if self.call.check_calls is None:
            self.call.check_calls = [made]
        else:
            self.call.check_calls.append(made)
        return parsed["result"]

    def _price(self, route: Route, method: str) -> int:
        """What `method` costs on `route`'s node: its plan's price for it (domain/routing.py),
        or, where the plan does not price it, the plan's price for the call's own method, which
        `route` carries (every route a check asks is one of the call's)."""
        call = self.call
        if method == route.price.method:
            return route.price.cost_nano
        price = call.request.snapshot.routes.price(route.node, method, call.request.chain_id)
        return route.price.cost_nano if price is None else price.cost_nano
