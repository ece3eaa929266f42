"""The native server's memo and epoch store, as a router worker makes them (native/src/memo.rs,
native/src/epochs.rs): the Python side of the fast path's state, which the runtime hands to the
stages (epochs, grants) and to the server (`NativeServer.apply_decisions`)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from types import ModuleType

from chainrouter.jsonrpc.envelope import MAX_PARAMS_DEPTH
from chainrouter.router.epochs import SLOTS
from chainrouter.router.fast.decisions import Decider
from chainrouter.router.native_api import Epochs, Memo
from chainrouter.settings import Settings

# Bodies longer than this are never keyed: a key costs a pass over the body, and requests of
# many calls are rare enough to leave to the pipeline.
MAX_BODY_BYTES = 16 * 1024
# The longest a forward is applied after the pipeline decided it, whatever the answers' age:
# what drifts without an event (answer times, time-outs, the `performance` order) is never older.
FORWARD_MAX_AGE_S = 1.0


@dataclass(frozen=True, slots=True)
class FastPath:
    epochs: Epochs
    memo: Memo


def native_fast_path(native: ModuleType, settings: Settings) -> FastPath | None:
    """The worker's memo and epoch store, or None when it applies no decisions (settings)."""
    if not settings.cache_replay_max_bytes:
        return None
    epochs: Epochs = native.Epochs(SLOTS)
    memo: Memo = native.Memo(
        epochs,
        max_bytes=settings.cache_replay_max_bytes,
        max_body_bytes=MAX_BODY_BYTES,
        max_calls=settings.max_batch_size,
        max_params_depth=MAX_PARAMS_DEPTH,
        forward_max_age_s=min(FORWARD_MAX_AGE_S, settings.cache_replay_max_age_s),
        answer_max_age_s=settings.cache_replay_max_age_s,
        masks=Decider.masks(),
        # The worker's batch ids: one sequence for the pipeline's answers and the memo's.
        batch_prefix=secrets.token_hex(6) + "-",
    )
    return FastPath(epochs, memo)
