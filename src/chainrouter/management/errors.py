"""Why a management operation was refused; the API turns each kind into a status and a code."""

from __future__ import annotations

from typing import Any


class ManagementError(Exception):
    """`code` is machine-readable and stable; `message` is for people."""

    code = "error"

    def __init__(self, message: str, *, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class UnauthenticatedError(ManagementError):
    code = "unauthenticated"


class ForbiddenError(ManagementError):
    code = "forbidden"


class ProviderNotResolvedError(ForbiddenError):
    code = "provider_not_resolved"

    def __init__(self) -> None:
        super().__init__("provider not resolved")


class NotFoundError(ManagementError):
    code = "not_found"


class ConflictError(ManagementError):
    code = "conflict"


class InvalidInputError(ManagementError):
    code = "invalid_input"


class ScreeningFailedError(ManagementError):
    code = "screening_failed"


class RateLimitedError(ManagementError):
    code = "rate_limited"

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
