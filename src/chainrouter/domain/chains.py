"""Chain metadata as the catalog keeps it."""

from __future__ import annotations

from dataclasses import dataclass, field

from chainrouter.domain.enums import ChainStatus

# Chain IDs are positive and fit a signed 64-bit column; every registered chain ID does.
MAX_CHAIN_ID = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Explorer:
    name: str
    url: str
    standard: str | None = None


@dataclass(frozen=True, slots=True)
class Chain:
    chain_id: int
    name: str
    short_name: str
    native_currency_name: str
    native_currency_symbol: str
    native_currency_decimals: int
    vm: str = "evm"
    network: str | None = None  # the registry's `chain` field, e.g. "ETH"
    info_url: str | None = None
    icon: str | None = None
    status: ChainStatus = ChainStatus.ACTIVE
    explorers: tuple[Explorer, ...] = field(default=())
    public_rpc_urls: tuple[str, ...] = field(default=())
