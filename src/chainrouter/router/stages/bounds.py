"""Stage after a call ended: the bound on what one request's answers may take (design notes,
"Bounds"; docs/security.md).

The free tier's budget of answer bytes per IP is its own stage (`FreeTierAnswerBytes`,
stages/free_tier.py); both withhold an answer past them (`CallContext.withhold`).
"""

from __future__ import annotations

from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.context import CallContext


def answer_too_large(max_bytes: int) -> RpcError:
    return RpcError(
        200,
        RpcCode.ANSWER_TOO_LARGE,
        f"this answer would take the request's answers past {max_bytes} bytes; ask for less "
        "in one request (fewer calls, or narrower ones)",
        {"max_answer_bytes": max_bytes},
    )


class AnswerWithinBound:
    """After each call ends, its answer counts towards its request's; an answer that would take
    the request past `max_bytes` is withheld: HTTP 200, -32014 with the bound in `data`,
    unbilled, and a batch's other items keep theirs. Calls count as they end, so of a batch
    whose answers pass the bound together, the last to end get the errors. The native server
    serves no request under decisions whose answers pass the bound its decisions carry
    (`Decision.max_answer_bytes`, from here): it hands it to the pipeline, where this applies.
    0: no bound."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    def run(self, call: CallContext) -> None:
        max_bytes = self.max_bytes
        if not max_bytes or call.scenario is None:
            return
        request = call.request
        total = request.answer_bytes + len(call.answer)
        if total <= max_bytes:
            request.answer_bytes = total
            return
        call.withhold(200, error_response(answer_too_large(max_bytes), call.call.id_json))
