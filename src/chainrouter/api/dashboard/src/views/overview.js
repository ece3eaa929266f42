// The account, its balance and alert, and every chain with its HTTP and WebSocket addresses.
import { api } from "../api.js";
import { $, copyButton, element, fill, onSubmit, say, withTitle } from "../dom.js";
import { credits, creditsFull, exact } from "../format.js";
import { state } from "../state.js";
import { showAlerts } from "./alerts.js";

export async function loadOverview() {
  const account = await api("GET", "/account");
  state.account = account;
  showAlerts(account.alerts);
  const facts = [
    ["Account", `${account.name} <${account.email}>`],
    ["Balance", withTitle(credits(account.balance), creditsFull(account.balance))],
    ["Signed in with", `management token “${account.token_label}” (${account.role} role)`],
  ];
  if (account.provider) {
    facts.push(["Acting for provider", `${account.provider.name} (${account.provider.slug})`]);
  }
  $("#account").replaceChildren(
    ...facts.flatMap(([term, value]) => [
      element("dt", term),
      value instanceof Node ? wrap("dd", value) : element("dd", value),
    ]),
  );
  $("#alert-balance").value = exact(account.low_balance_alert);
  state.chains = await api("GET", "/chains");
  renderChains();
}

function wrap(tag, child) {
  const node = element(tag);
  node.append(child);
  return node;
}

export function addresses(chainId, key = "YOUR_KEY") {
  const http = `${state.settings.rpc_url}/rpc/${chainId}/${key}`;
  const ws = `${state.settings.ws_url}/rpc/${chainId}/${key}`;
  return { http, ws, cast: `cast block-number --rpc-url ${http}` };
}

function addressLine(label, text, what) {
  const line = element("div", null, { class: "address" });
  line.append(element("span", label, { class: "address-label" }), element("code", text), copyButton(text, what));
  return line;
}

function renderChains() {
  const wanted = $("#chain-filter").value.trim().toLowerCase();
  const shown = state.chains
    .filter((chain) => !wanted || String(chain.chain_id).includes(wanted) || chain.name.toLowerCase().includes(wanted))
    .slice(0, 200);
  const rows = shown.map((chain) => {
    const { http, ws, cast } = addresses(chain.chain_id);
    const name = element("div");
    name.append(element("strong", chain.name), element("div", `chain ID ${chain.chain_id}`, { class: "hint" }));
    const where = element("div");
    where.append(
      addressLine("HTTP", http, `the HTTP URL of ${chain.name}`),
      addressLine("WebSocket", ws, `the WebSocket URL of ${chain.name}`),
      addressLine("cast", cast, `the cast command for ${chain.name}`),
    );
    const tr = element("tr");
    for (const cell of [name, where]) {
      const td = element("td");
      td.append(cell);
      tr.append(td);
    }
    return tr;
  });
  fill($("#chains tbody"), rows, wanted ? "No chain matches." : "No chain is served yet.");
}

$("#chain-filter").addEventListener("input", renderChains);

onSubmit($("#alert-form"), async (form) => {
  const value = form.elements.low_balance_alert.value.trim();
  const account = await api("PATCH", "/account", { low_balance_alert: value });
  state.account = account;
  showAlerts(account.alerts);
  say(
    exact(account.low_balance_alert) === "0"
      ? "No low-balance alert."
      : `You are warned when the balance is below ${credits(account.low_balance_alert)}.`,
  );
});
