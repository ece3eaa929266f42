"""What the operator file may say; the JSON Schema in docs/ is generated from these models.

The file declares chains, providers with their plans, method prices and nodes, and customers with
their credits, API keys and management tokens. Applying it creates what is missing and updates what
differs; it never deletes. Identity: chains by `chain_id`, providers by `slug`, plans by name
within their provider, method prices by (vm, method, node_target_type, chain_id) within their
plan, nodes by URL, customers by e-mail, API keys by name and tokens by label within their customer,
credit entries by `reference` within their customer.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
)

from chainrouter.domain.capabilities import Capabilities
from chainrouter.domain.chains import MAX_CHAIN_ID, Chain, Explorer
from chainrouter.domain.credentials import MAX_BODY_LENGTH, SecretKind, secret_format_problem
from chainrouter.domain.deposit_address import DepositKeyError, check_xpub
from chainrouter.domain.deposits import MAX_TOKEN_DECIMALS, normalise_asset
from chainrouter.domain.domains import normalise_allowed_domain
from chainrouter.domain.enums import (
    ChainStatus,
    LedgerEntryKind,
    NodeSource,
    NodeStatus,
    Role,
    RoutingStrategy,
)
from chainrouter.domain.money import NANO_PER_CREDIT, parse_credits, parse_exact_decimal
from chainrouter.domain.plan_cycle import QuotaUnit
from chainrouter.domain.urls import normalise_url


def _chain_id(value: Any) -> Any:
    """Chain IDs may be written as integers, decimal strings or 0x-prefixed hex strings."""
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            return int(text, 16) if text.startswith("0x") else int(text, 10)
        except ValueError:
            raise ValueError("must be a decimal or 0x-prefixed chain ID") from None
    return value


_MONEY_SCHEMA = {
    "anyOf": [
        {"type": "string", "pattern": r"^-?\d+(\.\d{1,9})?$"},
        {"type": "integer"},
        {"type": "number"},
    ],
    "description": "Credits (1 credit = 1 USD), exact to 9 decimal places.",
}

# Integer nano-credits after validation; written in the file as a decimal number of credits.
Credits = Annotated[int, BeforeValidator(parse_credits), WithJsonSchema(_MONEY_SCHEMA)]
ChainId = Annotated[
    StrictInt,
    Field(ge=1, le=MAX_CHAIN_ID),
    BeforeValidator(_chain_id),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_CHAIN_ID},
                {"type": "string", "pattern": r"^(0x[0-9a-fA-F]+|[0-9]+)$"},
            ],
            "description": "EIP-155 chain ID: integer, decimal string or 0x-prefixed hex string.",
        }
    ),
]


def _refuse(characters: re.Pattern[str], what: str) -> Any:
    def validate(value: str) -> str:
        if characters.search(value):
            raise ValueError(f"must not contain {what}")
        return value

    return AfterValidator(validate)


# Control characters (Unicode category Cc) have no use in a name, label, address or URL, and
# PostgreSQL text cannot hold NUL at all (SQLite stores it, so the backends would disagree):
# every string a person gives is refused with them, at its field, before it reaches storage.
# Free text keeps its layout: tab and line breaks. Put these last in an Annotated type, after
# its Field bounds: a bound placed after a validator is checked, and worded, as a generic length.
NoControls = _refuse(re.compile(r"[\x00-\x1f\x7f-\x9f]"), "control characters")
NoControlsButLayout = _refuse(
    re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"),
    "control characters other than tab and line breaks",
)
Line = Annotated[StrictStr, NoControls]
Name = Annotated[StrictStr, Field(min_length=1, max_length=200), NoControls]
Text = Annotated[StrictStr, Field(max_length=10_000), NoControlsButLayout]
PositiveInt = Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
# A record's id, as storage holds it (64-bit): beyond that no record can have it.
MAX_ROW_ID = 2**63 - 1
RowId = Annotated[StrictInt, Field(ge=1, le=MAX_ROW_ID)]
# A non-money quantity (plan quota, overage limit), exact, stored as NUMERIC.
Quantity = Annotated[
    Decimal,
    BeforeValidator(parse_exact_decimal),
    WithJsonSchema(_MONEY_SCHEMA | {"description": "A decimal quantity, at most 9 decimals."}),
]

# Every list has a maximum length, so that what one file makes validation and `apply` do is
# bounded (docs/operator-config.md, "Limits"). The bounds are far above real use: the benchmark
# (bench/router.py) lists the 1,940 chains of the shared registry with 3 nodes each on two plans.
MAX_CHAINS = 20_000
MAX_EXPLORERS = 100  # per chain
MAX_PROVIDERS = 1_000
MAX_PLANS = 1_000  # per provider
MAX_METHODS = 100_000  # per plan: a price for each method on each chain
MAX_NODES = 50_000  # per plan, HTTP and WebSocket nodes each
MAX_CUSTOMERS = 100_000
MAX_CREDITS = 10_000  # per customer
MAX_API_KEYS = 1_000  # per customer, as many as the management API lets a customer hold
MAX_TOKENS = 1_000  # per customer, revoked ones included
MAX_ALLOWED_DOMAINS = 100  # per API key

_METHOD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TARGET_TYPE = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


def _check(pattern: re.Pattern[str], what: str) -> Any:
    def validate(value: str) -> str:
        # fullmatch: with `match`, `$` lets a trailing newline through.
        if not pattern.fullmatch(value):
            raise ValueError(f"must be {what}")
        return value

    return AfterValidator(validate)


MethodName = Annotated[
    StrictStr,
    Field(max_length=100, json_schema_extra={"pattern": _METHOD_NAME.pattern}),
    _check(_METHOD_NAME, "a JSON-RPC method name such as eth_call"),
]
Slug = Annotated[
    StrictStr,
    Field(json_schema_extra={"pattern": _SLUG.pattern}),
    _check(_SLUG, "lowercase letters, digits and '-', at most 64 characters"),
]


def _lowered_email(value: str) -> str:
    lowered = value.strip().lower()
    # Checked again once lowered: some characters grow ("İ" is two in lower case), and the
    # stored column holds 320.
    if len(lowered) > 320:
        raise ValueError("an e-mail address of at most 320 characters")
    return lowered


Email = Annotated[
    StrictStr,
    Field(max_length=320),
    NoControls,
    AfterValidator(_lowered_email),
    _check(_EMAIL, "an e-mail address"),
]
TargetType = Annotated[StrictStr, _check(_TARGET_TYPE, "a lowercase word such as full or archive")]


def _url(schemes: tuple[str, ...]) -> Any:
    def validate(value: str) -> str:
        lowered = value.lower()
        if not lowered.startswith(tuple(f"{s}://" for s in schemes)):
            raise ValueError(
                "must be a URL starting with " + " or ".join(f"{s}://" for s in schemes)
            )
        return value

    return AfterValidator(validate)


MAX_URL_LENGTH = 2048  # what the URL columns hold


def _url_length(value: str) -> str:
    if len(value) > MAX_URL_LENGTH:
        raise ValueError(f"must be a URL of at most {MAX_URL_LENGTH} characters")
    return value


UrlLength = AfterValidator(_url_length)
HttpUrl = Annotated[Line, _url(("http", "https")), UrlLength]
WsUrl = Annotated[Line, _url(("ws", "wss")), UrlLength]
# A node's URL in its one spelling (domain/urls.py): what is compared and stored. Its length is
# checked again once normalised: percent-encoding can make it several times longer than written
# ("ü" becomes "%C3%BC"), and the stored form must fit the column.
NodeUrl = Annotated[HttpUrl, AfterValidator(normalise_url), UrlLength]
WsNodeUrl = Annotated[WsUrl, AfterValidator(normalise_url), UrlLength]


def _secret(kind: SecretKind) -> Any:
    def validate(value: str) -> str:
        problem = secret_format_problem(value, kind)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(validate)


def _secret_pattern(kind: SecretKind) -> Any:
    body = f"[A-Za-z0-9_-]{{32,{MAX_BODY_LENGTH}}}"
    return Field(json_schema_extra={"pattern": f"^{kind.value}{body}$"})


def _domain(value: str) -> str:
    return normalise_allowed_domain(value)


AllowedDomain = Annotated[StrictStr, AfterValidator(_domain)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NativeCurrency(_Strict):
    name: Annotated[StrictStr, Field(min_length=1, max_length=100), NoControls]
    symbol: Annotated[StrictStr, Field(min_length=1, max_length=40), NoControls]
    decimals: Annotated[StrictInt, Field(ge=0, le=255)] = 18


class ExplorerSpec(_Strict):
    name: Name
    url: HttpUrl
    standard: Line | None = None


class ChainSpec(_Strict):
    """A chain to add to (or correct in) the catalog."""

    chain_id: ChainId
    name: Name
    short_name: Annotated[StrictStr, Field(min_length=1, max_length=100), NoControls]
    native_currency: NativeCurrency
    network: Annotated[StrictStr, Field(max_length=100), NoControls] | None = None
    info_url: HttpUrl | None = None
    icon: Annotated[StrictStr, Field(max_length=200), NoControls] | None = None
    status: ChainStatus = ChainStatus.ACTIVE
    explorers: list[ExplorerSpec] = Field(default_factory=list, max_length=MAX_EXPLORERS)

    def to_chain(self) -> Chain:
        return Chain(
            chain_id=self.chain_id,
            name=self.name,
            short_name=self.short_name,
            network=self.network,
            native_currency_name=self.native_currency.name,
            native_currency_symbol=self.native_currency.symbol,
            native_currency_decimals=self.native_currency.decimals,
            info_url=self.info_url,
            icon=self.icon,
            status=self.status,
            explorers=tuple(Explorer(e.name, e.url, e.standard) for e in self.explorers),
        )


# The most a method may cost per call, in nano-credits: 100 credits (USD), whoever sets it.
MAX_PRICE_NANO = 100 * 10**9


class MethodPriceSpec(_Strict):
    """The price of one method on a plan; `chain_id` null means every chain."""

    method: MethodName
    vm: Literal["evm"] = "evm"
    node_target_type: TargetType = "full"
    cost: Annotated[Credits, Field(ge=0, le=MAX_PRICE_NANO)] = Field(
        description="Credits per call (1 credit = 1 USD), exact to 9 decimal places; 0 is free; "
        "at most 100 (no call costs more: a price past it is a mistake or an attack)."
    )
    rate_limit: NonNegativeInt | None = None
    rate_limit_interval_sec: PositiveInt | None = None
    chain_id: ChainId | None = Field(default=None, description="null or left out: every chain.")


MAX_BLOCK = 2**63 - 1
BlockNumber = Annotated[StrictInt, Field(ge=0, le=MAX_BLOCK)]


class NodeCapabilitiesSpec(_Strict):
    """What a node can answer, as its provider declares it (docs/router.md, "Node
    capabilities"). Every field is optional: what is not declared is found by screening and
    probes, or learned from the node's own errors. Screening refuses a declaration it finds
    untrue (state, history, tracing); the log range and batch limits are taken as declared."""

    state_history: Literal["archive"] | Annotated[StrictInt, Field(ge=0, le=MAX_BLOCK)] | None = (
        Field(
            default=None,
            description='"archive" (the state of every block), or how many blocks of state it '
            "keeps behind its head (a geth full node: 128).",
        )
    )
    blocks_from: BlockNumber | None = Field(
        default=None,
        description="The oldest block whose header, transactions, receipts and logs it serves "
        "(0: all of them).",
    )
    trace: StrictBool | None = Field(default=None, description="Serves trace_* methods.")
    debug: StrictBool | None = Field(default=None, description="Serves debug_trace* methods.")
    logs_max_block_range: PositiveInt | None = Field(
        default=None, description="The widest eth_getLogs block range it accepts."
    )
    max_batch_size: PositiveInt | None = Field(
        default=None, description="The largest JSON-RPC batch it accepts."
    )

    def capabilities(self) -> Capabilities:
        return Capabilities.from_json(self.model_dump())


class NodeSpec(_Strict):
    """An HTTP(S) JSON-RPC node serving one chain for the plan it is listed under."""

    url: NodeUrl
    chain_id: ChainId
    vm: Literal["evm"] = "evm"
    node_target_type: TargetType = "full"
    rate_limit: NonNegativeInt = 0  # requests per interval; 0 means unlimited
    rate_limit_interval_sec: PositiveInt = 1
    source: NodeSource = NodeSource.PROVIDER
    status: NodeStatus = NodeStatus.HEALTHY
    capabilities: NodeCapabilitiesSpec | None = None


class WsNodeSpec(_Strict):
    """A WebSocket node (ws:// or wss://) serving one chain."""

    url: WsNodeUrl
    chain_id: ChainId
    status: NodeStatus = NodeStatus.HEALTHY


# Plan fields whose storage column has another name: money is held in nano-credits.
_PLAN_COLUMNS = {
    "price": "price_nano",
    "overage_price": "overage_price_nano",
    "rate_limit_cr": "rate_limit_cr_nano",
}


# Billing cycles are computed as dates: bounded so that a cycle's end is always a date.
MAX_BILLING_INTERVAL_DAYS = 3660
BILLING_ANCHOR_YEARS = (1970, 9000)


def _billing_anchor(value: datetime) -> datetime:
    try:
        year = value.astimezone(UTC).year
    except OverflowError:
        year = 0
    low, high = BILLING_ANCHOR_YEARS
    if not low <= year <= high:
        raise ValueError(f"must be in the years {low} to {high} (UTC)")
    return value


# SQLite keeps a NUMERIC column's value as a double whatever its declared precision: a quota
# with more significant digits than a double holds would come back another number.
MAX_QUANTITY_DIGITS = 15


def _stored_exactly(value: Decimal) -> Decimal:
    if len(value.normalize().as_tuple().digits) > MAX_QUANTITY_DIGITS:
        raise ValueError(f"has more than {MAX_QUANTITY_DIGITS} significant digits")
    return value


class PlanTerms(_Strict):
    """A plan's price, quota, limits and billing terms: what the operator file and the admin API
    both set."""

    description: Text = ""
    price: Annotated[Credits, Field(ge=0)] = 0
    quota: Annotated[Quantity, Field(ge=0), AfterValidator(_stored_exactly)] | None = None
    quota_unit: QuotaUnit | None = Field(
        default=None,
        description="What the quota counts: requests (calls the plan's nodes answered), or "
        "credits (their method prices). Unset: requests.",
    )
    overage_price: Annotated[Credits, Field(ge=0)] | None = None
    overage_limit: Annotated[Quantity, Field(ge=0), AfterValidator(_stored_exactly)] | None = None
    rate_limit_req: NonNegativeInt | None = None
    rate_limit_req_interval_sec: PositiveInt | None = None
    rate_limit_cr: NonNegativeInt | None = Field(
        default=None,
        description="Whole credits of method prices the plan's routes may serve per "
        "rate_limit_cr_interval_sec (an integer, as spec section 2 has it).",
    )
    rate_limit_cr_interval_sec: PositiveInt | None = None
    billing_fixed_day: Annotated[StrictInt, Field(ge=1, le=31)] | None = None
    billing_interval_days: Annotated[PositiveInt, Field(le=MAX_BILLING_INTERVAL_DAYS)] | None = None
    billing_anchored_start_date: (
        Annotated[AwareDatetime, AfterValidator(_billing_anchor)] | None
    ) = None

    def term_columns(self, *, only_given: bool = False) -> dict[str, Any]:
        """The plan columns these terms fill (all, or only the fields that were given)."""
        names = [n for n in PlanTerms.model_fields if not only_given or n in self.model_fields_set]
        columns = {_PLAN_COLUMNS.get(name, name): getattr(self, name) for name in names}
        if columns.get("rate_limit_cr_nano") is not None:  # whole credits, stored in nano
            columns["rate_limit_cr_nano"] *= NANO_PER_CREDIT
        return columns


class PlanSpec(PlanTerms):
    name: Name
    methods: list[MethodPriceSpec] = Field(default_factory=list, max_length=MAX_METHODS)
    nodes: list[NodeSpec] = Field(default_factory=list, max_length=MAX_NODES)
    ws_nodes: list[WsNodeSpec] = Field(default_factory=list, max_length=MAX_NODES)


class ProviderSpec(_Strict):
    slug: Slug
    name: Name
    plans: list[PlanSpec] = Field(default_factory=list, max_length=MAX_PLANS)


class CreditSpec(_Strict):
    """A purchase or grant. `reference` makes it happen once, however often the file is applied."""

    reference: Annotated[StrictStr, Field(min_length=1, max_length=200), NoControls]
    kind: Literal[LedgerEntryKind.PURCHASE, LedgerEntryKind.GRANT] = LedgerEntryKind.GRANT
    amount: Annotated[Credits, Field(gt=0)]
    note: Text = ""


MAX_KEY_RATE_LIMIT = 1_000_000
MAX_KEY_RATE_INTERVAL_S = 86_400
KeyRateLimit = Annotated[
    int,
    Field(
        strict=True,
        ge=0,
        le=MAX_KEY_RATE_LIMIT,
        description="The key's own limit: at most this many calls (each item of a batch is one) "
        "in any window of rate_limit_interval_sec seconds; 0: no limit of its own. Over it, "
        "HTTP 429 with JSON-RPC error -32031 and Retry-After.",
    ),
]
KeyRateInterval = Annotated[
    int,
    Field(strict=True, ge=1, le=MAX_KEY_RATE_INTERVAL_S, description="The window, in seconds."),
]


class ApiKeySpec(_Strict):
    name: Name
    secret: (
        Annotated[StrictStr, _secret(SecretKind.API_KEY), _secret_pattern(SecretKind.API_KEY)]
        | None
    ) = Field(default=None, description="Omit to have a secret generated and printed once.")
    allowed_domains: Annotated[
        list[AllowedDomain],
        Field(min_length=1, max_length=MAX_ALLOWED_DOMAINS),
        AfterValidator(lambda entries: list(dict.fromkeys(entries))),
    ]
    routing_strategy: RoutingStrategy = RoutingStrategy.ECONOMY
    active: StrictBool = True
    bypass_credit_check: StrictBool = False
    rate_limit: KeyRateLimit = 0
    rate_limit_interval_sec: KeyRateInterval = 1
    verified: StrictBool = Field(
        default=False,
        description="Every answer the chain lets the router prove is proven before it is "
        "served, whatever the chain's verify setting (docs/integrity.md).",
    )


class ManagementTokenSpec(_Strict):
    label: Name
    role: Role = Role.CUSTOMER
    secret: (
        Annotated[
            StrictStr,
            _secret(SecretKind.MANAGEMENT_TOKEN),
            _secret_pattern(SecretKind.MANAGEMENT_TOKEN),
        ]
        | None
    ) = Field(default=None, description="Omit to have a secret generated and printed once.")
    revoked: StrictBool = Field(
        default=False, description="true revokes the token; a revoked token is never restored."
    )


class CustomerSpec(_Strict):
    email: Email
    name: Name
    provider: Slug | None = Field(
        default=None, description="Slug of the provider this customer acts for."
    )
    credits: list[CreditSpec] = Field(default_factory=list, max_length=MAX_CREDITS)
    api_keys: list[ApiKeySpec] = Field(default_factory=list, max_length=MAX_API_KEYS)
    management_tokens: list[ManagementTokenSpec] = Field(
        default_factory=list, max_length=MAX_TOKENS
    )


MAX_DEPOSIT_ASSETS = 1_000
MAX_CONFIRMATIONS = 100_000
RATE_DECIMALS = 18  # places of a rate or a minimum: a token's whole unit may be worth very little


def _rate(value: Any) -> Decimal:
    return parse_exact_decimal(value, places=RATE_DECIMALS)


def _xpub(value: str) -> str:
    try:
        return check_xpub(value)
    except DepositKeyError as exc:
        raise ValueError(str(exc)) from None


Rate = Annotated[
    Decimal,
    BeforeValidator(_rate),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^\d+(\.\d{1,18})?$"},
                {"type": "integer"},
                {"type": "number"},
            ],
            "description": "An exact decimal, at most 18 decimal places.",
        }
    ),
]


class DepositAssetSpec(_Strict):
    """An asset customers may deposit on a chain to buy credits (docs/billing.md)."""

    chain_id: ChainId
    asset: Annotated[
        StrictStr,
        AfterValidator(normalise_asset),
        Field(description="`native` (the chain's own coin) or an ERC-20 contract address."),
    ]
    credits_per_unit: Annotated[Rate, Field(gt=0)] = Field(
        description="Credits one whole unit buys (1 USDC: 1; 1 ETH: the rate the operator sets), "
        "exact; a deposit's worth is rounded down to the nano-credit."
    )
    confirmations: Annotated[StrictInt, Field(ge=1, le=MAX_CONFIRMATIONS)] | None = Field(
        default=None,
        description="Credited once its block has this many confirmations (1: the block itself). "
        "Left out: once the chain's finalized block reaches it.",
    )
    decimals: Annotated[StrictInt, Field(ge=0, le=MAX_TOKEN_DECIMALS)] | None = Field(
        default=None,
        description="Decimals of the asset. Left out: the chain's native currency decimals, or "
        "the token's decimals() read through the router.",
    )
    minimum: Annotated[Rate, Field(ge=0)] = Field(
        default=Decimal(0),
        description="Smallest deposit credited, in whole units; a smaller one is recorded as "
        "below_minimum and not credited.",
    )
    symbol: Annotated[StrictStr, Field(max_length=40), NoControls] = Field(
        default="",
        description="What customers see, e.g. USDC. Left out: the chain's currency "
        "symbol for `native`, else the address.",
    )
    start_block: BlockNumber | None = Field(
        default=None,
        description="First block read for deposits of this chain. Left out: the chain's head "
        "when it is first watched.",
    )
    enabled: StrictBool = Field(
        default=True, description="false: no longer offered, watched or credited."
    )


class CardSpec(_Strict):
    """Card payments through Stripe Checkout; on only when the Stripe keys are set too
    (CHAINROUTER_STRIPE_SECRET_KEY, CHAINROUTER_STRIPE_WEBHOOK_SECRET)."""

    min_credits: Annotated[Credits, Field(ge=1_000_000_000 // 100)] = Field(
        default=5_000_000_000, description="Fewest credits one checkout buys (default 5)."
    )
    max_credits: Annotated[Credits, Field(ge=1_000_000_000 // 100)] = Field(
        default=10_000_000_000_000, description="Most credits one checkout buys (default 10000)."
    )
    success_url: HttpUrl | None = Field(
        default=None,
        description="Where Stripe sends the customer after paying. Left out: the dashboard's "
        "Buy credits page on the API's address.",
    )
    cancel_url: HttpUrl | None = Field(
        default=None, description="Where Stripe sends a customer who cancels. Left out: the same."
    )


class PaymentsSpec(_Strict):
    """How customers buy credits: on-chain deposits and card payments (docs/billing.md)."""

    deposit_xpub: Annotated[StrictStr, AfterValidator(_xpub)] | None = Field(
        default=None,
        description="The BIP-32 extended public key (xpub...) of the account deposits go to; "
        "each customer's address is its child m/0/{customer_id}. Never a private key.",
    )
    deposits: list[DepositAssetSpec] = Field(default_factory=list, max_length=MAX_DEPOSIT_ASSETS)
    card: CardSpec | None = None


class OperatorConfig(_Strict):
    """The whole operator file."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="chainrouter operator configuration",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    version: Literal[1] = 1
    chains: list[ChainSpec] = Field(default_factory=list, max_length=MAX_CHAINS)
    providers: list[ProviderSpec] = Field(default_factory=list, max_length=MAX_PROVIDERS)
    customers: list[CustomerSpec] = Field(default_factory=list, max_length=MAX_CUSTOMERS)
    payments: PaymentsSpec | None = None


def _first_seen(items: list[tuple[str, object]]) -> list[str]:
    """Given (path, identity) pairs, a problem line for every identity that comes again."""
    seen: dict[object, str] = {}
    problems = []
    for path, identity in items:
        if identity in seen:
            problems.append(f"{path}: duplicate of {seen[identity]}")
        else:
            seen[identity] = path
    return problems


def find_duplicates(config: OperatorConfig) -> list[str]:
    """Entries that claim the same identity twice, as `path: duplicate of path` lines."""
    problems = _first_seen(
        [(f"chains[{i}].chain_id", c.chain_id) for i, c in enumerate(config.chains)]
    )
    problems += _first_seen(
        [(f"providers[{i}].slug", p.slug) for i, p in enumerate(config.providers)]
    )
    urls: list[tuple[str, object]] = []
    for i, provider in enumerate(config.providers):
        problems += _first_seen(
            [(f"providers[{i}].plans[{j}].name", p.name) for j, p in enumerate(provider.plans)]
        )
        for j, plan in enumerate(provider.plans):
            base = f"providers[{i}].plans[{j}]"
            problems += _first_seen(
                [
                    (f"{base}.methods[{k}]", (m.vm, m.method, m.node_target_type, m.chain_id))
                    for k, m in enumerate(plan.methods)
                ]
            )
            urls += [(f"{base}.nodes[{k}].url", n.url) for k, n in enumerate(plan.nodes)]
            urls += [(f"{base}.ws_nodes[{k}].url", n.url) for k, n in enumerate(plan.ws_nodes)]
    problems += _first_seen(urls)
    problems += _first_seen(
        [(f"customers[{i}].email", c.email) for i, c in enumerate(config.customers)]
    )
    secrets: list[tuple[str, object]] = []
    for i, customer in enumerate(config.customers):
        base = f"customers[{i}]"
        problems += _first_seen(
            [
                (f"{base}.credits[{k}].reference", c.reference)
                for k, c in enumerate(customer.credits)
            ]
        )
        problems += _first_seen(
            [(f"{base}.api_keys[{k}].name", k_.name) for k, k_ in enumerate(customer.api_keys)]
        )
        problems += _first_seen(
            [
                (f"{base}.management_tokens[{k}].label", t.label)
                for k, t in enumerate(customer.management_tokens)
            ]
        )
        secrets += [
            (f"{base}.api_keys[{k}].secret", s.secret)
            for k, s in enumerate(customer.api_keys)
            if s.secret
        ]
        secrets += [
            (f"{base}.management_tokens[{k}].secret", t.secret)
            for k, t in enumerate(customer.management_tokens)
            if t.secret
        ]
    # Never echo a secret in an error message: the duplicate's path is enough.
    problems += _first_seen(secrets)
    if config.payments is not None:
        problems += _first_seen(
            [
                (f"payments.deposits[{i}]", (d.chain_id, d.asset))
                for i, d in enumerate(config.payments.deposits)
            ]
        )
        if config.payments.deposits and config.payments.deposit_xpub is None:
            problems.append(
                "payments.deposit_xpub: deposits need the key their addresses come from"
            )
        card = config.payments.card
        if card is not None and card.min_credits > card.max_credits:
            problems.append("payments.card.min_credits: must not exceed max_credits")
    return problems


def json_schema() -> dict[str, Any]:
    return OperatorConfig.model_json_schema(mode="validation")
