"""Stage: the path's API key is one of the active keys (design notes, "Credentials")."""

from __future__ import annotations

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.credentials import SecretKind, hash_secret
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.context import RequestContext
from chainrouter.router.stages.memo import PerSnapshot

_MEMO_MAX_CHARS = 512  # longer keys are never valid, and are not remembered


class ApiKey:
    """HTTP 401, -32000 `invalid API key` for an unknown, malformed or inactive key.

    Keys are held in memory by their SHA-256 digest. A key found once is remembered until the
    next snapshot, which saves the digest on every later request with it.
    """

    def __init__(self) -> None:
        self.remembered: PerSnapshot[str, KeyAccess] = PerSnapshot()

    def run(self, request: RequestContext) -> None:
        key = request.api_key or ""
        snapshot = request.snapshot
        access = self.remembered.get(snapshot, key)
        if access is None and key.startswith(SecretKind.API_KEY.value):
            access = snapshot.keys_by_hash.get(hash_secret(key))
            if access is not None and len(key) <= _MEMO_MAX_CHARS:
                self.remembered.put(snapshot, key, access)
        if access is None:
            request.refusal = RpcError(401, RpcCode.SERVER_ERROR, "invalid API key")
            return
        request.access = access
        request.strategy = access.strategy
