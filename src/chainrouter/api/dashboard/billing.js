// The dashboard's "Buy credits" page: the customer's deposit address per chain and asset (with
// a QR code of an EIP-681 payment request), deposits pending with their confirmations, card
// checkout where the operator offers it, and the ledger of purchases. It is served and loaded
// on its own, after the page's bundle (app.js, built from src/): it announces itself with a
// "dashboard:page" event, the bundle hands it the page's helpers, and it writes every value as
// text.

let offered = null;

async function qrImage(page, chainId, asset) {
  // The QR code is the API's SVG, fetched with the token and shown as a data: image (the page's
  // content security policy allows no other source).
  const response = await fetch(
    `/billing/deposit-qr?chain_id=${encodeURIComponent(chainId)}&asset=${encodeURIComponent(asset)}`,
    { headers: { "X-Api-Key": page.token() || "" },
      credentials: "omit", cache: "no-store" },
  );
  if (!response.ok) return null;
  const svg = await response.text();
  const img = page.element("img", null, {
    alt: `QR code: pay ${asset === "native" ? "" : "the token "}to your address on chain ${chainId}`,
    src: `data:image/svg+xml;base64,${btoa(svg)}`,
  });
  return img;
}

function assetLine(asset) {
  const plural = Number(asset.credits_per_unit) === 1 ? "credit" : "credits";
  const rate = `1 ${asset.symbol} = ${asset.credits_per_unit} ${plural}`;
  const when = asset.confirmations === null ? "once its block is finalized"
    : `after ${asset.confirmations} confirmation${asset.confirmations === 1 ? "" : "s"}`;
  const minimum = Number(asset.minimum) > 0 ? `; at least ${asset.minimum} ${asset.symbol}` : "";
  return `${rate}, credited ${when}${minimum}.`;
}

async function renderDepositOptions(page, deposits) {
  const { element, button, copy, api } = page;
  const chains = [...new Set(deposits.map((a) => a.chain_id))];
  const cards = [];
  for (const chainId of chains) {
    const found = await api("GET", `/billing/deposit-address?chain_id=${chainId}`);
    for (const asset of found.assets) {
      const card = element("div", null, { class: "deposit" });
      const name = asset.chain_name || `chain ${chainId}`;
      card.append(element("h4", `${asset.symbol} on ${name} (chain ${chainId})`));
      if (asset.asset !== "native") {
        const contract = element("p", "Token contract: ", { class: "hint" });
        contract.append(element("code", asset.asset));
        card.append(contract);
      }
      const address = element("code", found.address, { "data-address": found.address });
      card.append(element("p", "Your deposit address:"), address);
      card.append(button("Copy address", () => copy(found.address)));
      const img = await qrImage(page, chainId, asset.asset);
      if (img) card.append(img);
      card.append(element("p", assetLine(asset), { class: "hint" }));
      cards.push(card);
    }
  }
  page.$("#deposit-options").replaceChildren(...cards);
}

function depositState(deposit) {
  if (deposit.state !== "pending") return deposit.state.replace("_", " ");
  const have = deposit.confirmations === null ? "?" : deposit.confirmations;
  const need = deposit.confirmations_needed === null ? "until its block is finalized"
    : `of ${deposit.confirmations_needed}`;
  return `pending: ${have} confirmation${have === 1 ? "" : "s"} ${need}`;
}

export async function loadBilling(page) {
  const { api, row, fill, when, $ } = page;
  const [account, options] = await Promise.all([api("GET", "/account"), api("GET", "/billing/options")]);
  offered = options;
  page.alerts(account.alerts);
  $("#billing-balance").textContent = account.balance;
  $("#billing-card").hidden = !options.card.enabled;
  $("#checkout-bounds").textContent =
    `${options.card.min_credits} to ${options.card.max_credits} credits, in USD`;
  $("#billing-deposits").hidden = options.deposits.length === 0;
  $("#billing-none").hidden = options.card.enabled || options.deposits.length > 0;
  if (options.deposits.length) {
    await renderDepositOptions(page, options.deposits);
    const deposits = await api("GET", "/billing/deposits?limit=50");
    fill($("#deposits tbody"), deposits.map((d) => row([
      when(d.seen_at), d.chain_id, `${d.amount} ${d.symbol}`, d.credits, depositState(d), d.tx_hash,
    ])), "No deposits yet.");
  }
  const purchases = await api("GET", "/billing/purchases?limit=50");
  fill($("#purchases tbody"), purchases.map((p) => row([
    when(p.created_at), p.kind, p.amount, p.note, p.reference,
  ])), "No purchases yet.");
}

export function startCheckoutForm(page) {
  const { api, onSubmit, say, $ } = page;
  // Checked like the page's other forms: the browser's checks and the API's refusals are said
  // at the field.
  onSubmit($("#checkout-form"), async (form) => {
    const credits = form.elements.credits.value.trim();
    const made = await api("POST", "/billing/checkout", { credits });
    say("Taking you to the card payment page...");
    window.location.assign(made.url);
  });
  return offered;
}

document.dispatchEvent(new CustomEvent("dashboard:page", {
  detail: { name: "billing", load: loadBilling, start: startCheckoutForm },
}));
