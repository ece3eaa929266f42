"""Stage: the path names a chain the router serves."""

from __future__ import annotations

from chainrouter.domain.chains import MAX_CHAIN_ID
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.context import RequestContext


def parse_chain_id(segment: str) -> int | None:
    if not segment.isdigit() or not segment.isascii() or len(segment) > 20:
        return None
    value = int(segment)
    return value if 0 < value <= MAX_CHAIN_ID else None


class SupportedChain:
    """HTTP 422, -32001 unless the chain ID is decimal and the chain has a healthy node."""

    def run(self, request: RequestContext) -> None:
        segment = request.chain_segment
        chain_id = parse_chain_id(segment)
        if chain_id is None:
            request.refusal = RpcError(
                422,
                RpcCode.CHAIN_NOT_SUPPORTED,
                f"chain {segment[:40]!r} is not supported: the path needs a decimal chain ID",
            )
        elif not request.snapshot.routes.serves_chain(chain_id):
            request.refusal = RpcError(
                422, RpcCode.CHAIN_NOT_SUPPORTED, f"chain {chain_id} is not supported"
            )
        else:
            request.chain_id = chain_id
