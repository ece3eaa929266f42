"""The one error of the integrity package: a node's claim that its proof does not bear out."""

from __future__ import annotations


class ProofError(Exception):
    """A claim that does not hold: the answer disagrees with what was proven, or the proof itself
    does not reach the trusted root. `reason` says which, in words for logs and node status."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
