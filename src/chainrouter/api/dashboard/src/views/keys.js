// API keys: create (the secret shown once), edit every setting, revoke (after a confirmation)
// and restore.
import { api } from "../api.js";
import { $, button, confirmAction, element, fill, onSubmit, say, withTitle } from "../dom.js";
import { count, credits, creditsFull, exact, when } from "../format.js";
import { showSecret } from "../secret.js";
import { keyName, state } from "../state.js";
import { addresses } from "./overview.js";

let openUsage = () => {};

export function onOpenUsage(handler) {
  openUsage = handler;
}

function rateText(key) {
  const lines = [
    key.rate_limit
      ? `${count(key.rate_limit, "call")} per ${count(key.rate_limit_interval_sec, "second")}`
      : "none",
  ];
  if (exact(key.max_price_per_call) !== "0") lines.push(`at most ${credits(key.max_price_per_call)} a call`);
  if (key.verified) lines.push("verified answers");
  for (const [field, label] of [["allowed_methods", "methods"], ["allowed_contracts", "contracts"]]) {
    if (Array.isArray(key[field]) && key[field].length) lines.push(`${label}: ${key[field].join(", ")}`);
  }
  return lines.join("; ");
}

function spendCell(key) {
  const cell = element("span");
  cell.append(withTitle(credits(key.spent_today), creditsFull(key.spent_today)));
  if (exact(key.spend_alert) !== "0") {
    const over = Number(exact(key.spent_today)) > Number(exact(key.spend_alert));
    cell.append(
      element("span", ` (alert above ${credits(key.spend_alert)})`, { class: over ? "over" : "hint" }),
    );
  }
  return cell;
}

export async function loadKeys() {
  const keys = await api("GET", "/api-keys");
  state.keys = keys;
  const rows = keys.map((key) => {
    const name = keyName(key);
    const actions = element("span", null, { class: "actions" });
    actions.append(
      button("Edit", () => editKey(key), { "aria-label": `Edit key ${name}` }),
      button("Usage", () => openUsage(key.id), { "aria-label": `Usage of key ${name}` }),
      key.active
        ? button("Revoke", () => revoke(key), { "aria-label": `Revoke key ${name}`, class: "danger" })
        : button("Restore", () => restore(key), { "aria-label": `Restore key ${name}` }),
    );
    const tr = element("tr");
    const cells = [
      key.name,
      element("code", key["X-Hint"]),
      key.allowed_domains.join(", "),
      key.routing_strategy,
      rateText(key),
      spendCell(key),
      key.active ? "active" : "revoked",
      when(key.created_at),
      actions,
    ];
    for (const cell of cells) {
      const td = element("td");
      if (cell instanceof Node) td.append(cell);
      else td.textContent = cell;
      tr.append(td);
    }
    return tr;
  });
  fill($("#keys tbody"), rows, "No API key yet: create one above.");
}

async function revoke(key) {
  const yes = await confirmAction({
    title: `Revoke key ${keyName(key)}?`,
    text: "Routers refuse it within a few seconds: every application using it stops working until you restore it.",
    confirm: "Revoke key",
  });
  if (!yes) {
    say("Nothing was revoked.");
    return;
  }
  await api("PATCH", `/api-keys/${key.id}`, { active: false });
  say(`Key ${keyName(key)} is revoked: routers refuse it within a few seconds.`);
  await loadKeys();
}

async function restore(key) {
  await api("PATCH", `/api-keys/${key.id}`, { active: true });
  say(`Key ${keyName(key)} works again.`);
  await loadKeys();
}

function editKey(key) {
  const form = $("#key-form");
  form.elements.id.value = String(key.id);
  form.elements.name.value = key.name;
  form.elements.domains.value = key.allowed_domains.join("\n");
  form.elements.strategy.value = key.routing_strategy;
  form.elements.rate_limit.value = String(key.rate_limit);
  form.elements.rate_limit_interval_sec.value = String(key.rate_limit_interval_sec);
  form.elements.spend_alert.value = exact(key.spend_alert);
  form.elements.max_price_per_call.value = exact(key.max_price_per_call);
  form.elements.verified.checked = key.verified;
  $("#key-form-title").textContent = `Edit ${keyName(key)}`;
  $("#key-submit").textContent = "Save changes";
  $("#key-cancel").hidden = false;
  form.elements.name.focus();
}

export function resetKeyForm() {
  const form = $("#key-form");
  form.reset();
  form.elements.id.value = "";
  $("#key-form-title").textContent = "Create an API key";
  $("#key-submit").textContent = "Create key";
  $("#key-cancel").hidden = true;
}

$("#key-cancel").addEventListener("click", resetKeyForm);

onSubmit($("#key-form"), async (form) => {
  const body = {
    name: form.elements.name.value.trim(),
    allowed_domains: form.elements.domains.value.split(/[\s,]+/).filter(Boolean),
    routing_strategy: form.elements.strategy.value,
    rate_limit: Number(form.elements.rate_limit.value),
    rate_limit_interval_sec: Number(form.elements.rate_limit_interval_sec.value),
    spend_alert: form.elements.spend_alert.value.trim(),
    max_price_per_call: form.elements.max_price_per_call.value.trim(),
    verified: form.elements.verified.checked,
  };
  const id = form.elements.id.value;
  if (id) {
    await api("PATCH", `/api-keys/${id}`, body);
    say(`Key ${body.name || id} saved.`);
  } else {
    const created = await api("POST", "/api-keys", body);
    const chain = state.chains[0];
    const urls = chain
      ? [
          [`HTTP URL of ${chain.name}`, addresses(chain.chain_id, created.api_key).http],
          [`WebSocket URL of ${chain.name}`, addresses(chain.chain_id, created.api_key).ws],
        ]
      : [];
    showSecret(`Your new API key ${created.name || ""}.`, created.api_key, urls);
    say("Key created.");
  }
  resetKeyForm();
  await loadKeys();
});
