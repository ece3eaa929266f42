"""The eleven call-and-answer RPC tools (the two watch tools are in watch_tools.py). All are
read-only on chain; every result carries the `batchId` of the answer it came from (the
`X-Batch-Id` header), and a router's JSON-RPC error is passed through unchanged, flagged as a
tool error."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictStr, model_validator

from chainrouter.companion.evm_values import (
    Address,
    Addresses,
    BlockTag,
    Chain,
    Hash32,
    HexData,
    Quantity,
    Topic,
    quantity_value,
    wei_to_ether,
    wei_to_gwei,
)
from chainrouter.companion.remote import (
    Answer,
    ManagementClient,
    RouterClient,
    ServiceUnavailableError,
)
from chainrouter.companion.toolkit import CamelArguments, Result, ToolError, ToolSpec
from chainrouter.operator_config.model import ChainId

CHAIN_PAGE_DEFAULT, CHAIN_PAGE_MAX = 50, 500
LOG_PAGE_DEFAULT, LOG_PAGE_MAX = 100, 1000
TX_PAGE_DEFAULT, TX_PAGE_MAX = 100, 1000

# Methods that would change state (send, sign, mine, reconfigure a node) or that need a
# conversation with one node (filters, subscriptions): rpc_call is read-only and stateless.
_REFUSED_METHODS = frozenset(
    {
        "eth_sendRawTransaction",
        "eth_sendTransaction",
        "eth_sign",
        "eth_signTransaction",
        "eth_submitWork",
        "eth_submitHashrate",
        "eth_subscribe",
        "eth_unsubscribe",
        "eth_newFilter",
        "eth_newBlockFilter",
        "eth_newPendingTransactionFilter",
        "eth_getFilterChanges",
        "eth_getFilterLogs",
        "eth_uninstallFilter",
    }
)
_REFUSED_PREFIXES = (
    "eth_signTypedData",
    "personal_",
    "admin_",
    "miner_",
    "engine_",
    "anvil_",
    "hardhat_",
    "evm_",
    "debug_set",
)
# JSON-RPC errors that mean "this method is not offered here", after which a trace may be
# retried with the other trace method. -32601 is also the router's insufficient-credits code;
# that one is not a reason to try another method.
_METHOD_UNAVAILABLE = frozenset({-32002, -32004, -32011, -32601})


def refusal_reason(method: str) -> str | None:
    if method in _REFUSED_METHODS or method.startswith(_REFUSED_PREFIXES):
        return (
            f"{method} is not available: these tools are read-only and stateless (no sending, "
            "signing, filters, subscriptions or node administration)"
        )
    return None


# -- talking to the routers ----------------------------------------------------------------


def _call(method: str, params: list[Any], request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _unusable(answer: Answer, what: str) -> ToolError:
    detail = "a body that is not JSON-RPC" if answer.is_json else "a body that is not JSON"
    return ToolError(
        f"{what}: the router answered HTTP {answer.status} with {detail}",
        {"batchId": answer.batch_id, "httpStatus": answer.status, "body": answer.raw_text},
    )


def router_error(answer: Answer, method: str, error: Any) -> ToolError:
    """The router's JSON-RPC error object, unchanged, with the batch id to quote to support."""
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    passed: Result = {"batchId": answer.batch_id, "httpStatus": answer.status, "error": error}
    if answer.attempts > 1:
        passed["attempts"] = answer.attempts
    return ToolError(f"{method} failed: JSON-RPC error {code}: {message}", passed)


async def post(router: RouterClient, chain_id: int, payload: Any) -> Answer:
    try:
        return await router.post(chain_id, payload)
    except ServiceUnavailableError as exc:
        raise ToolError(str(exc), {"batchId": None}) from None


def single_result(answer: Answer, method: str) -> Any:
    body = answer.body
    if not isinstance(body, dict):
        raise _unusable(answer, method)
    if isinstance(body.get("error"), dict):
        raise router_error(answer, method, body["error"])
    if "result" not in body:
        raise _unusable(answer, method)
    return body["result"]


async def rpc(router: RouterClient, chain_id: int, method: str, params: list[Any]) -> Result:
    answer = await post(router, chain_id, _call(method, params))
    return {
        "batchId": answer.batch_id,
        "chainId": chain_id,
        "method": method,
        "result": single_result(answer, method),
    }


# -- arguments ------------------------------------------------------------------------------


class ListChainsArgs(CamelArguments):
    query: StrictStr | None = Field(
        default=None, max_length=100, description="Case-insensitive part of the chain's name."
    )
    chain_id: ChainId | None = Field(default=None, description="Only this chain.")
    limit: int = Field(default=CHAIN_PAGE_DEFAULT, ge=1, le=CHAIN_PAGE_MAX)
    offset: int = Field(default=0, ge=0, description="Chains to skip (for the next page).")


class RpcCallArgs(CamelArguments):
    chain_id: Chain
    method: StrictStr = Field(
        pattern=r"^[A-Za-z][A-Za-z0-9_]*$",
        max_length=100,
        description="A read-only JSON-RPC method, e.g. eth_getCode or eth_getStorageAt.",
    )
    params: list[Any] = Field(default_factory=list, description="Positional parameters.")


class GetBlockArgs(CamelArguments):
    chain_id: Chain
    block_tag: BlockTag = "latest"
    block_hash: Hash32 | None = Field(default=None, description="Fetch by hash instead of tag.")
    include_transactions: StrictBool = Field(
        default=False, description="Full transaction objects instead of their hashes."
    )
    limit: int = Field(
        default=TX_PAGE_DEFAULT,
        ge=1,
        le=TX_PAGE_MAX,
        description="Transactions (or hashes) returned per page.",
    )
    offset: int = Field(default=0, ge=0, description="Transactions to skip (for the next page).")

    @model_validator(mode="after")
    def _one_way(self) -> GetBlockArgs:
        if self.block_hash is not None and "block_tag" in self.model_fields_set:
            raise ValueError("give blockTag or blockHash, not both")
        return self


class TxArgs(CamelArguments):
    chain_id: Chain
    tx_hash: Hash32


class GetLogsArgs(CamelArguments):
    chain_id: Chain
    from_block: BlockTag
    to_block: BlockTag = "latest"
    address: Addresses | None = Field(
        default=None, description="One contract address or a list of them."
    )
    topics: list[Topic] | None = Field(
        default=None,
        max_length=4,
        description="Up to 4 positions; each null (any), a topic, or a list of topics (any of).",
    )
    limit: int = Field(
        default=LOG_PAGE_DEFAULT, ge=1, le=LOG_PAGE_MAX, description="Logs returned per page."
    )
    offset: int = Field(default=0, ge=0, description="Logs to skip (for the next page).")


class GetBalanceArgs(CamelArguments):
    chain_id: Chain
    address: Address
    block_tag: BlockTag = "latest"


class CallContractArgs(CamelArguments):
    chain_id: Chain
    to: Address
    data: HexData = Field(description="Call data: selector and ABI-encoded arguments.")
    from_: Address | None = Field(default=None, alias="from")
    gas: Quantity | None = None
    gas_price: Quantity | None = None
    value: Quantity | None = Field(default=None, description="Wei sent with the call.")
    block_tag: BlockTag = "latest"


class AccessListEntry(CamelArguments):
    address: Address
    storage_keys: list[Hash32] = Field(default_factory=list)


class TransactionFields(CamelArguments):
    """The standard transaction fields; values are hex quantities (decimals are converted)."""

    from_: Address | None = Field(default=None, alias="from")
    to: Address | None = Field(default=None, description="Left out for a contract creation.")
    gas: Quantity | None = None
    gas_price: Quantity | None = None
    max_fee_per_gas: Quantity | None = None
    max_priority_fee_per_gas: Quantity | None = None
    value: Quantity | None = None
    data: HexData | None = None
    input: HexData | None = None
    nonce: Quantity | None = None
    type: Quantity | None = None
    access_list: list[AccessListEntry] | None = None


class EstimateGasArgs(CamelArguments):
    chain_id: Chain
    transaction: TransactionFields


class FeeDataArgs(CamelArguments):
    chain_id: Chain


TraceMethod = Literal["trace_transaction", "debug_traceTransaction"]


class TraceArgs(CamelArguments):
    chain_id: Chain
    tx_hash: Hash32
    trace_method: TraceMethod = Field(
        default="trace_transaction",
        description="trace_transaction (Parity/OpenEthereum style) or debug_traceTransaction "
        "(Geth style, with the callTracer).",
    )
    allow_fallback: StrictBool = Field(
        default=True, description="Try the other method when this one is not offered."
    )


# -- tools ----------------------------------------------------------------------------------


def _fields(model: CamelArguments, *, exclude: set[str]) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, exclude=exclude)


def _page(items: list[Any], offset: int, limit: int) -> tuple[dict[str, Any], list[Any]]:
    """Where a page sits in the whole (for the model to ask for the next one), and the page."""
    page = items[offset : offset + limit]
    following = offset + len(page)
    position = {
        "total": len(items),
        "offset": offset,
        "limit": limit,
        "returned": len(page),
        "nextOffset": following if following < len(items) else None,
    }
    return position, page


def _amount(value: Any) -> dict[str, Any] | Any:
    """A hex wei amount with its decimal and gwei readings; anything else as it came."""
    wei = quantity_value(value)
    if wei is None:
        return value
    return {"hex": value, "wei": str(wei), "gwei": wei_to_gwei(wei)}


class RpcTools:
    def __init__(self, router: RouterClient, management: ManagementClient) -> None:
        self._router = router
        self._management = management

    async def list_chains(self, args: ListChainsArgs) -> Result:
        try:
            answer = await self._management.request("GET", "/chains")
        except ServiceUnavailableError as exc:
            raise ToolError(str(exc), {"batchId": None}) from None
        if answer.status != 200 or not isinstance(answer.body, list):
            raise ToolError(
                f"the chain list could not be read (HTTP {answer.status})",
                {"batchId": answer.batch_id, "httpStatus": answer.status},
            )
        chains = answer.body
        if args.chain_id is not None:
            chains = [c for c in chains if str(c.get("chain_id")) == str(args.chain_id)]
        if args.query:
            needle = args.query.casefold()
            chains = [
                c
                for c in chains
                if needle in str(c.get("name", "")).casefold()
                or needle in str(c.get("short_name", "")).casefold()
            ]
        position, page = _page(chains, args.offset, args.limit)
        return {"batchId": answer.batch_id, **position, "chains": page}

    async def call(self, args: RpcCallArgs) -> Result:
        reason = refusal_reason(args.method)
        if reason is not None:
            raise ToolError(reason)
        return await rpc(self._router, args.chain_id, args.method, args.params)

    async def get_block(self, args: GetBlockArgs) -> Result:
        if args.block_hash is not None:
            params: list[Any] = [args.block_hash, args.include_transactions]
            answer = await rpc(self._router, args.chain_id, "eth_getBlockByHash", params)
        else:
            params = [args.block_tag, args.include_transactions]
            answer = await rpc(self._router, args.chain_id, "eth_getBlockByNumber", params)
        # A busy chain's block holds thousands of transactions, megabytes as full objects: more
        # than a model's context should take in one answer, so they come a page at a time.
        block = answer["result"]
        if isinstance(block, dict) and isinstance(block.get("transactions"), list):
            position, page = _page(block["transactions"], args.offset, args.limit)
            answer["result"] = {**block, "transactions": page}
            answer["transactions"] = position
        return answer

    async def get_transaction(self, args: TxArgs) -> Result:
        return await rpc(self._router, args.chain_id, "eth_getTransactionByHash", [args.tx_hash])

    async def get_receipt(self, args: TxArgs) -> Result:
        return await rpc(self._router, args.chain_id, "eth_getTransactionReceipt", [args.tx_hash])

    async def get_logs(self, args: GetLogsArgs) -> Result:
        log_filter = _fields(args, exclude={"chain_id", "limit", "offset"})
        answer = await rpc(self._router, args.chain_id, "eth_getLogs", [log_filter])
        logs = answer.pop("result")
        if not isinstance(logs, list):
            raise ToolError("eth_getLogs answered with something other than a list", answer)
        position, page = _page(logs, args.offset, args.limit)
        return {**answer, **position, "logs": page}

    async def get_balance(self, args: GetBalanceArgs) -> Result:
        params = [args.address, args.block_tag]
        answer = await rpc(self._router, args.chain_id, "eth_getBalance", params)
        wei = quantity_value(answer["result"])
        if wei is not None:
            answer |= {"wei": str(wei), "ether": wei_to_ether(wei)}
        return answer

    async def call_contract(self, args: CallContractArgs) -> Result:
        call = _fields(args, exclude={"chain_id", "block_tag"})
        return await rpc(self._router, args.chain_id, "eth_call", [call, args.block_tag])

    async def estimate_gas(self, args: EstimateGasArgs) -> Result:
        transaction = args.transaction.model_dump(by_alias=True, exclude_none=True)
        answer = await rpc(self._router, args.chain_id, "eth_estimateGas", [transaction])
        gas = quantity_value(answer["result"])
        if gas is not None:
            answer["gas"] = gas
        return answer

    async def fee_data(self, args: FeeDataArgs) -> Result:
        methods = {
            1: ("gasPrice", "eth_gasPrice", []),
            2: ("maxPriorityFeePerGas", "eth_maxPriorityFeePerGas", []),
            3: ("feeHistory", "eth_feeHistory", ["0x1", "latest", [25, 50, 75]]),
        }
        batch = [_call(method, params, i) for i, (_, method, params) in methods.items()]
        answer = await post(self._router, args.chain_id, batch)
        if isinstance(answer.body, dict) and isinstance(answer.body.get("error"), dict):
            raise router_error(answer, "fee data", answer.body["error"])
        if not isinstance(answer.body, list):
            raise _unusable(answer, "fee data")
        by_id = {item.get("id"): item for item in answer.body if isinstance(item, dict)}
        result: Result = {"batchId": answer.batch_id, "chainId": args.chain_id}
        errors: dict[str, Any] = {}
        for request_id, (field, method, _) in methods.items():
            item = by_id.get(request_id, {})
            if "result" in item:
                value = item["result"]
                result[field] = value if field == "feeHistory" else _amount(value)
            else:
                errors[method] = item.get("error", {"message": "no answer in the batch"})
        if len(errors) == len(methods):
            raise ToolError("no fee data could be read", {**result, "errors": errors})
        if errors:
            result["errors"] = errors
        return result

    async def trace(self, args: TraceArgs) -> Result:
        first: TraceMethod = args.trace_method
        try:
            return await self._trace_with(first, args)
        except ToolError as failure:
            error = (failure.payload or {}).get("error")
            if not args.allow_fallback or not isinstance(error, dict):
                raise
            if not _method_unavailable(error):
                raise
            other: TraceMethod = (
                "debug_traceTransaction" if first == "trace_transaction" else "trace_transaction"
            )
            fallback = {
                "from": first,
                "batchId": (failure.payload or {}).get("batchId"),
                "error": error,
            }
            try:
                answer = await self._trace_with(other, args)
            except ToolError as second:
                raise ToolError(
                    f"{first} is not offered ({error.get('message')}); then {second}",
                    {**(second.payload or {}), "fallback": fallback},
                ) from None
            answer["fallback"] = fallback
            return answer

    async def _trace_with(self, method: TraceMethod, args: TraceArgs) -> Result:
        params: list[Any] = [args.tx_hash]
        if method == "debug_traceTransaction":
            # The call tree, not the opcode log: the default tracer's output runs to megabytes.
            params.append({"tracer": "callTracer"})
        answer = await rpc(self._router, args.chain_id, method, params)
        answer["traceMethod"] = method
        return answer


def _method_unavailable(error: dict[str, Any]) -> bool:
    if error.get("code") not in _METHOD_UNAVAILABLE:
        return False
    return not (error["code"] == -32601 and "credit" in str(error.get("message", "")).lower())


def rpc_tools(router: RouterClient, management: ManagementClient) -> list[ToolSpec[Any]]:
    tools = RpcTools(router, management)
    return [
        ToolSpec(
            "rpc_list_chains",
            "List supported chains",
            "Chains the service routes over HTTP JSON-RPC, by chain ID, one page at a time. "
            "Filter by part of the name (query) or by chainId; follow nextOffset for more.",
            ListChainsArgs,
            tools.list_chains,
        ),
        ToolSpec(
            "rpc_call",
            "Raw JSON-RPC call",
            "Send one read-only JSON-RPC call (any method the chain's nodes offer, such as "
            "eth_getCode or eth_getStorageAt) and get its result. Methods that send, sign, "
            "filter, subscribe or administer a node are refused.",
            RpcCallArgs,
            tools.call,
        ),
        ToolSpec(
            "rpc_get_block",
            "Get a block",
            "A block by tag or number (blockTag, default latest) or by hash (blockHash); "
            "transaction hashes only unless includeTransactions is true. Transactions come in "
            "pages (limit, offset; follow transactions.nextOffset).",
            GetBlockArgs,
            tools.get_block,
        ),
        ToolSpec(
            "rpc_get_transaction",
            "Get a transaction",
            "A transaction by hash; result null when the chain does not know it.",
            TxArgs,
            tools.get_transaction,
        ),
        ToolSpec(
            "rpc_get_transaction_receipt",
            "Get a transaction receipt",
            "The receipt of a mined transaction (status, gas used, logs); null while pending or "
            "unknown.",
            TxArgs,
            tools.get_receipt,
        ),
        ToolSpec(
            "rpc_get_logs",
            "Get event logs",
            "Event logs between fromBlock and toBlock (default latest), optionally by contract "
            "address and topics. Results come in pages (limit, offset; follow nextOffset). A "
            "range the service refuses as too large says how many blocks to ask for instead.",
            GetLogsArgs,
            tools.get_logs,
        ),
        ToolSpec(
            "rpc_get_balance",
            "Get a balance",
            "The native-currency balance of an address, in wei and in ether.",
            GetBalanceArgs,
            tools.get_balance,
        ),
        ToolSpec(
            "rpc_call_contract",
            "Call a contract (eth_call)",
            "Execute a contract call without sending a transaction and return its raw output.",
            CallContractArgs,
            tools.call_contract,
        ),
        ToolSpec(
            "rpc_estimate_gas",
            "Estimate gas",
            "The gas a transaction would use (eth_estimateGas); nothing is sent.",
            EstimateGasArgs,
            tools.estimate_gas,
        ),
        ToolSpec(
            "rpc_get_fee_data",
            "Get fee data",
            "Current gas price, max priority fee and a one-block fee history (25th, 50th and "
            "75th percentile rewards), in one round trip.",
            FeeDataArgs,
            tools.fee_data,
        ),
        ToolSpec(
            "rpc_trace_transaction",
            "Trace a transaction",
            "The internal calls of a mined transaction, with trace_transaction or "
            "debug_traceTransaction (callTracer); falls back to the other method when the "
            "first is not offered, unless allowFallback is false.",
            TraceArgs,
            tools.trace,
        ),
    ]
