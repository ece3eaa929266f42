"""Stages of the response cache and of coalescing (design notes, "Response cache and
coalescing"; docs/cache.md).

- `FromCache`, before routing: a call whose answer is kept (`domain/cacheable.py`) is answered
  from the cache: no node, the cache price, scenario `cache`.
- `Coalesce`, just before the credit hold and the attempt: an identical read-only call already
  in flight is joined instead of sending another; the first one leads (the executor's flight
  table, through the `Coalesce` command).
- `Land`, closing: the leader's outcome goes to the calls that joined it, and an answer that can
  no longer change is kept, if a key's: the free tier reads the cache but never writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson

from chainrouter.domain.cacheable import COALESCED, CachePrices, cache_key, keepable, pinned
from chainrouter.domain.enums import Scenario
from chainrouter.domain.routing import Route
from chainrouter.jsonrpc.encode import encode_call
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router import epochs
from chainrouter.router.answers import exact_member
from chainrouter.router.context import CallContext
from chainrouter.router.contract import Coalesce as CoalesceCommand
from chainrouter.router.contract import Join, Landed, Leading
from chainrouter.router.epochs import Epochs
from chainrouter.router.finality import Finality
from chainrouter.router.ledger import Ledger
from chainrouter.router.metering import CreditView
from chainrouter.router.response_cache import ResponseCache, entry, read_entry
from chainrouter.router.stages.credit import has_credit_left

SERVED = frozenset({Scenario.FIRST_CHOICE, Scenario.FAILOVER, Scenario.HEDGED, Scenario.SPLIT})


class FromCache:
    """A call the cache holds the answer to ends here, at the cache price (HTTP 402, -32601 when
    the customer cannot pay it). Every call that may be coalesced gets its key here. A call it
    looks up has its whole parameters read, and depends on the chain's cached answers; one
    whose block is not final yet depends on the chain's finalized block moving on."""

    def __init__(
        self,
        cache: ResponseCache | None,
        finality: Finality | None,
        prices: CachePrices,
        credits: CreditView,
        epoch_store: Epochs,
    ) -> None:
        self._cache = cache
        self._finality = finality
        self._finalized = None if finality is None else finality.finalized
        self._prices = prices
        self._credits = credits
        self._epochs = epoch_store

    def run(self, call: CallContext) -> Coroutine[Any, Any, None] | None:
        rpc = call.call
        method = rpc.method
        if method not in COALESCED:
            return None
        request = call.request
        chain_id = request.chain_id
        generation = request.snapshot.cache_generations.get(chain_id, 0)
        epoch = 0 if self._finality is None else self._finality.epoch(chain_id)
        key = call.cache_key = cache_key(chain_id, generation, method, rpc.params, epoch)
        if key is None:
            return None
        if call.body is request.body:
            # A single call goes to its node as sent; one whose answer is kept or shared goes as
            # it was keyed, so that the answer is to the call the key names (JSON with a member
            # twice is read here with the last, by some nodes with the first or not at all).
            call.body = encode_call(rpc)
        cache = self._cache
        if cache is None:
            return None
        pin = call.cache_pin = pinned(method, rpc.params)
        if pin is None:
            return None
        block = pin.block
        if block is not None and not pin.by_hash and self._finalized is not None:
            call.read_epoch(self._epochs, epochs.chain_final(chain_id))
            finalized = self._finalized(chain_id)
            if finalized is None or block > finalized:
                return None  # not final: never kept, so not looked for (nor asked of Redis)
        # An answer the cache will keep when it comes (Land), but never a free-tier one's.
        call.looked_up = call.request.access is not None
        call.read_params()
        call.read_epoch(self._epochs, epochs.chain_cache(chain_id))
        # A regress seen here and not yet told the other routers: the chain's answers stay out
        # of Redis meanwhile (router/shared_epochs.py).
        shared = self._finality is None or self._finality.shared(chain_id)
        found = cache.lookup(key, shared=shared)
        if isinstance(found, bytes) and _serves(call, found):
            self._answer(call, found)
            return None
        if isinstance(found, bytes):
            found = None
        if found is None:
            cache.memory.count((chain_id, method), hit=False)
            return None
        return self._from_shared(call, key, found)

    async def _from_shared(self, call: CallContext, key: str, future: Any) -> None:
        value = await Join(future)
        cache = self._cache
        assert cache is not None
        # Garbage in Redis is a miss, never an answer.
        if (
            value is None
            or not value
            or not _json(read_entry(value)[0])
            or not _serves(call, value)
        ):
            cache.memory.count((call.request.chain_id, call.call.method), hit=False)
            return
        if call.request.access is not None:  # the free tier writes no cache, this one neither
            cache.keep(key, value, shared=False)
        self._answer(call, value)

    def _answer(self, call: CallContext, stored: bytes) -> None:
        assert self._cache is not None
        request = call.request
        self._cache.memory.count((request.chain_id, call.call.method), hit=True)
        result, verified = read_entry(stored)
        member = b'"result":' + result
        end_from_cache(call, member, self._prices, self._credits)
        if call.scenario is Scenario.CACHE:
            call.cached = member  # kept and final: the native server may answer it again
            if verified is not None:  # said in `X-Verified` as for a fresh answer so checked
                call.checked(verified)


def _serves(call: CallContext, stored: bytes) -> bool:
    """Whether a kept answer may answer the call: any, but that a key which asks for verified
    answers takes none that was kept unchecked (on a chain whose `verify` is off); its own
    call is then proven, and kept so."""
    access = call.request.access
    return access is None or not access.verified or read_entry(stored)[1] is not None


def end_from_cache(
    call: CallContext, member: bytes, prices: CachePrices, credits: CreditView
) -> None:
    """End the call with an answer no node gave it (`member`: the `"result":...` part), charged
    the cache price."""
    request = call.request
    price = prices.price_nano(request.chain_id, call.call.method)
    access = request.access
    more = price - call.held_nano  # what the call holds already counts towards the price
    if access is not None:
        # A customer with nothing left gets no answer from the cache, a free one neither.
        if not has_credit_left(credits, access) or (
            more > 0
            and not credits.hold(access.customer_id, more, check=not access.bypass_credit_check)
        ):
            failure = RpcError(402, RpcCode.INSUFFICIENT_CREDITS, "insufficient credits")
            call.end(Scenario.INSUFFICIENT_CREDITS, 402, error_response(failure, call.call.id_json))
            return
        call.held_nano += max(more, 0)
    call.charged_nano = price
    request.cache_hits += 1
    call.end(Scenario.CACHE, 200, _answer(call.call.id_json, member))


class Coalesce:
    """An identical call in flight is joined (its outcome taken under this call's id; a result
    costs the cache price); else this call leads, and is attempted. A call that reads the head
    joins only calls whose key has seen the same newest block (router/seen_heads.py): the one
    it joins was routed as it would be, and its answer is no older than this key has seen. A
    call whose answer is to be checked joins only calls checked alike (stages/verify.py): a key
    that asks for verified answers never gets another key's unchecked one."""

    def __init__(self, prices: CachePrices, credits: CreditView, ledger: Ledger) -> None:
        self._prices = prices
        self._credits = credits
        self._ledger = ledger

    def run(self, call: CallContext) -> Coroutine[Any, Any, None] | None:
        key = call.cache_key
        if key is None:
            return None
        seen = call.seen_head  # read by NotBehindSeen, before
        if seen is not None:
            call.flight_seen = seen
            key = f"{key}@{seen}"
        if call.proof is not None:  # read by Verify, before: joins only calls checked alike
            key = f"{key}!{call.proof.check.value}"
        return self._board(call, key)

    async def _board(self, call: CallContext, key: str) -> None:
        boarded: Leading | Landed | None = await CoalesceCommand(key)
        if boarded is None:
            return  # the leader was cut short: this call is attempted on its own
        if not isinstance(boarded, Landed):
            call.leading = boarded
            return
        self._ledger.count_coalesced(call.request.chain_id, call.call.method)
        if boarded.scenario in SERVED:
            end_from_cache(call, boarded.member, self._prices, self._credits)
            if boarded.verified is not None and call.scenario is Scenario.CACHE:
                call.checked(boarded.verified)  # the leader's answer, checked before served
        else:
            call.retry_after_s = boarded.retry_after_s
            call.end(boarded.scenario, boarded.status, _answer(call.call.id_json, boarded.member))


class Land:
    """Closing: the calls that joined this one get its outcome; an answer that can no longer
    change is kept. Runs for every call that had a key, whatever ended it; a call cut short
    lands nothing (its followers are attempted on their own)."""

    def __init__(
        self,
        cache: ResponseCache | None,
        finality: Finality | None,
        node_head: Callable[[int], int | None],
    ) -> None:
        self._cache = cache
        self._finality = finality
        self._node_head = node_head

    def run(self, call: CallContext) -> None:
        key = call.cache_key
        if key is None:
            return
        leading, landed = call.leading, None
        # What the call ended with, before any bound withheld it from its own client: the calls
        # that joined have bounds of their own.
        withheld = call.withheld
        scenario, status, answer, retry_s, served_by = (
            (call.scenario, call.status, call.answer, call.retry_after_s, call.served_by)
            if withheld is None
            else (
                withheld.scenario,
                withheld.status,
                withheld.answer,
                withheld.retry_after_s,
                withheld.served_by,
            )
        )
        try:  # whatever happens here, the calls that joined are let go
            keeps = self._keeps(call, scenario, served_by)
            # A refusal for credits is the leader's customer's own, not the call's outcome: the
            # calls that joined are attempted on their own.
            shares = (
                leading is not None
                and scenario is not None
                and scenario is not Scenario.INSUFFICIENT_CREDITS
            )
            if not (keeps or shares):
                return
            exact = exact_member(answer)
            if exact is None:
                return  # not one JSON-RPC answer read exactly: neither kept nor shared
            parsed, member = exact
            if shares and scenario is not None:
                landed = Landed(scenario, status, member, retry_s, verified=call.verified)
            if keeps and "result" in parsed and served_by is not None:
                self._keep(call, key, parsed["result"], member, served_by)
        finally:
            if leading is not None:
                call.leading = None
                leading.land(landed)

    def _keeps(self, call: CallContext, scenario: Scenario | None, served_by: Route | None) -> bool:
        """Whether the call's answer is one the cache may keep, if final: never a free-tier
        call's (anonymous callers would fill, and evict, what paying customers share)."""
        return (
            call.request.access is not None
            and call.cache_pin is not None
            and scenario in SERVED
            and scenario is not Scenario.SPLIT  # its parts' nodes: too many heads to judge
            and served_by is not None
            and self._cache is not None
        )

    def _keep(
        self, call: CallContext, key: str, result: Any, member: bytes, served_by: Route
    ) -> None:
        pin = call.cache_pin
        cache, finality = self._cache, self._finality
        if pin is None or cache is None or finality is None:
            return
        finalized = finality.finalized(call.request.chain_id)
        if keepable(pin, result, finalized, self._node_head(served_by.node.node_id)):
            shared = finality.shared(call.request.chain_id)
            cache.keep(key, entry(member[_RESULT_AT:], call.verified), shared=shared)


def _json(value: bytes) -> bool:
    try:
        orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    return True


_RESULT_AT = len(b'"result":')


def _answer(id_json: bytes, member: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + id_json + b"," + member + b"}"
