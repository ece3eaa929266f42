"""The customer's deposit address, as a companion tool (offered with the customer tools, when a
management token is configured): where to send coins or tokens to buy credits on a chain, and
what each asset there is worth (docs/billing.md)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chainrouter.companion.management_calls import management_object
from chainrouter.companion.remote import ManagementClient
from chainrouter.companion.toolkit import CamelArguments, Result, ToolSpec
from chainrouter.operator_config.model import ChainId


class DepositAddressArgs(CamelArguments):
    chain_id: ChainId = Field(description="The chain to deposit on (decimal or 0x hex).")


class BillingTools:
    def __init__(self, management: ManagementClient) -> None:
        self._management = management

    async def deposit_address(self, args: DepositAddressArgs) -> Result:
        found: Result = await management_object(
            self._management,
            "GET",
            "/billing/deposit-address",
            params={"chain_id": str(args.chain_id)},
        )
        return found


def billing_tools(management: ManagementClient) -> list[ToolSpec[Any]]:
    tools = BillingTools(management)
    return [
        ToolSpec(
            "get_deposit_address",
            "Get your deposit address",
            "Your own address for buying credits on a chain, and the assets accepted there: "
            "`native` or a token contract, credits per whole unit, and when a deposit is "
            "credited (once its block is finalized, or after `confirmations`). Only direct "
            "transfers to the address count. Credits are exact decimal strings.",
            DepositAddressArgs,
            tools.deposit_address,
        )
    ]
