// The chainrouter dashboard: one page over the management API's JSON routes.
//
// The management token lives in this tab's sessionStorage and travels only in the X-Api-Key
// header of requests to this origin: never in a URL, a cookie or a submitted form. Everything
// shown is written with textContent, never as HTML.

import { loadBilling, startCheckoutForm } from "/dashboard/billing.js";

const TOKEN_KEY = "chainrouter.token";
const $ = (selector) => document.querySelector(selector);
const state = { token: sessionStorage.getItem(TOKEN_KEY), settings: null, account: null };

// -- talking to the API --------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (state.token) headers["X-Api-Key"] = state.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const message = data && data.error ? data.error.message : `HTTP ${response.status}`;
    throw new ApiError(response.status, message);
  }
  return data;
}

function say(message, isError = false) {
  const status = $("#status");
  status.textContent = message;
  status.className = isError ? "error" : "";
}

async function guarded(action) {
  try {
    await action();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401 && state.token) {
      signOut("Your token is no longer valid: sign in again.");
      return;
    }
    say(error.message || String(error), true);
  }
}

// -- small DOM helpers ---------------------------------------------------------------------

function element(tag, text, attributes = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  return node;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    if (cell instanceof Node) td.append(cell);
    else td.textContent = cell === null || cell === undefined ? "" : String(cell);
    tr.append(td);
  }
  return tr;
}

function button(label, onClick, attributes = {}) {
  const node = element("button", label, { type: "button", ...attributes });
  node.addEventListener("click", () => guarded(onClick));
  return node;
}

function fill(tbody, rows, emptyText, columns) {
  tbody.replaceChildren(...rows);
  if (!rows.length) {
    const td = element("td", emptyText, { colspan: String(columns) });
    const tr = document.createElement("tr");
    tr.append(td);
    tbody.append(tr);
  }
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    say("Copied to the clipboard.");
  } catch {
    say("Copying is not allowed here: select the text and copy it yourself.", true);
  }
}

// -- signing in and out --------------------------------------------------------------------

function showView(name) {
  if (name === "signin") $("#new-secret").hidden = true;
  for (const section of document.querySelectorAll("main > section")) {
    section.hidden = section.id !== `view-${name}`;
  }
  for (const item of document.querySelectorAll("#nav [data-view]")) {
    if (item.dataset.view === name) item.setAttribute("aria-current", "page");
    else item.removeAttribute("aria-current");
  }
  $("#main").focus();
  const load = LOADERS[name];
  if (load) guarded(load);
}

async function signIn(token) {
  state.token = token;
  const account = await api("GET", "/account");
  sessionStorage.setItem(TOKEN_KEY, token);
  state.account = account;
  $("#nav").hidden = false;
  $('#nav [data-view="provider"]').hidden = !account.provider;
  say(`Signed in as ${account.name}.`);
  const checkout = new URLSearchParams(window.location.search).get("checkout");
  if (checkout) {
    history.replaceState(null, "", "/dashboard");
    showView("billing");
    say(checkout === "success" ? "Payment received: your credits arrive as soon as the card "
      + "payment is confirmed." : "The card payment was cancelled: nothing was charged.");
    return;
  }
  showView("overview");
}

function signOut(message = "Signed out.") {
  state.token = null;
  state.account = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("#nav").hidden = true;
  $("#signin-token").value = "";
  showView("signin");
  say(message);
}

$("#signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("#signin-token").value.trim();
  guarded(async () => {
    try {
      await signIn(token);
    } catch (error) {
      state.token = null;
      throw error;
    }
  });
});

$("#signup-form").addEventListener("submit", (event) => {
  event.preventDefault();
  guarded(async () => {
    const made = await api("POST", "/signup", {
      name: $("#signup-name").value.trim(),
      email: $("#signup-email").value.trim(),
    });
    await signIn(made.token);
    showSecret("Your management token: you need it to sign in again.", made.token);
  });
});

$("#sign-out").addEventListener("click", () => signOut());
for (const item of document.querySelectorAll("#nav [data-view]")) {
  item.addEventListener("click", () => showView(item.dataset.view));
}

// -- a secret shown once -------------------------------------------------------------------

function showSecret(title, secret) {
  $("#new-secret-title").textContent = title;
  $("#new-secret-value").textContent = secret;
  $("#new-secret").hidden = false;
  $("#new-secret-copy").focus();
}

$("#new-secret-copy").addEventListener("click", () => copy($("#new-secret-value").textContent));
$("#new-secret-done").addEventListener("click", () => {
  $("#new-secret-value").textContent = "";
  $("#new-secret").hidden = true;
});

// -- overview ------------------------------------------------------------------------------

async function loadOverview() {
  const account = await api("GET", "/account");
  state.account = account;
  const facts = [
    ["Account", `${account.name} <${account.email}>`],
    ["Balance", `${account.balance} credits`],
    ["Signed in with", `token ${account.token_id} (${account.role})`],
  ];
  if (account.provider) facts.push(["Provider", `${account.provider.name} (${account.provider.slug})`]);
  $("#account").replaceChildren(
    ...facts.flatMap(([term, value]) => [element("dt", term), element("dd", value)]),
  );
  const base = state.settings.rpc_url;
  $("#url-pattern").textContent = `${base}/rpc/CHAIN_ID/YOUR_KEY`;
  state.chains = await api("GET", "/chains");
  renderChains();
}

function renderChains() {
  const wanted = $("#chain-filter").value.trim().toLowerCase();
  const base = state.settings.rpc_url;
  const shown = (state.chains || [])
    .filter((chain) => !wanted || chain.chain_id.includes(wanted) || chain.name.toLowerCase().includes(wanted))
    .slice(0, 200);
  const rows = shown.map((chain) => {
    const url = `${base}/rpc/${chain.chain_id}/YOUR_KEY`;
    const cells = [chain.chain_id, chain.name, element("code", url)];
    const actions = document.createElement("span");
    actions.append(button("Copy", () => copy(url), { "aria-label": `Copy the RPC URL of ${chain.name}` }));
    if (state.settings.ws_url) {
      const ws = `${state.settings.ws_url}/rpc/${chain.chain_id}/YOUR_KEY`;
      actions.append(button("Copy WebSocket URL", () => copy(ws), { "aria-label": `Copy the WebSocket URL of ${chain.name}` }));
    }
    cells.push(actions);
    return row(cells);
  });
  fill($("#chains tbody"), rows, "No chain matches.", 4);
}

$("#chain-filter").addEventListener("input", renderChains);

// -- API keys ------------------------------------------------------------------------------

async function loadKeys() {
  const keys = await api("GET", "/api-keys");
  const rows = keys.map((key) => {
    const actions = document.createElement("span");
    actions.append(button("Edit", () => editKey(key), { "aria-label": `Edit key ${key.name || key["X-Hint"]}` }));
    actions.append(
      key.active
        ? button("Revoke", () => setActive(key, false), { "aria-label": `Revoke key ${key.name || key["X-Hint"]}` })
        : button("Restore", () => setActive(key, true), { "aria-label": `Restore key ${key.name || key["X-Hint"]}` }),
    );
    return row([
      key.name,
      element("code", key["X-Hint"]),
      key.allowed_domains.join(", "),
      key.routing_strategy,
      key.active ? "active" : "revoked",
      when(key.created_at),
      actions,
    ]);
  });
  fill($("#keys tbody"), rows, "No API key yet: create one above.", 7);
}

async function setActive(key, active) {
  await api("PATCH", `/api-keys/${key.id}`, { active });
  say(active ? "The key works again." : "The key is revoked: routers refuse it within a few seconds.");
  await loadKeys();
}

function editKey(key) {
  const form = $("#key-form");
  form.elements.id.value = String(key.id);
  form.elements.name.value = key.name;
  form.elements.domains.value = key.allowed_domains.join("\n");
  form.elements.strategy.value = key.routing_strategy;
  $("#key-form-title").textContent = `Edit ${key.name || key["X-Hint"]}`;
  $("#key-submit").textContent = "Save changes";
  $("#key-cancel").hidden = false;
  form.elements.name.focus();
}

function resetKeyForm() {
  const form = $("#key-form");
  form.reset();
  form.elements.id.value = "";
  $("#key-form-title").textContent = "Create an API key";
  $("#key-submit").textContent = "Create key";
  $("#key-cancel").hidden = true;
}

$("#key-cancel").addEventListener("click", resetKeyForm);
$("#key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  const body = {
    name: form.elements.name.value.trim(),
    allowed_domains: form.elements.domains.value.split(/[\s,]+/).filter(Boolean),
    routing_strategy: form.elements.strategy.value,
  };
  const id = form.elements.id.value;
  guarded(async () => {
    if (id) {
      await api("PATCH", `/api-keys/${id}`, body);
      say("Saved.");
    } else {
      const created = await api("POST", "/api-keys", body);
      showSecret(`Your new API key ${created.name || ""}.`, created.api_key);
      say("Key created.");
    }
    resetKeyForm();
    await loadKeys();
  });
});

// -- usage ---------------------------------------------------------------------------------

async function loadUsage() {
  const days = Number($("#usage-period").value);
  const to = new Date();
  const from = new Date(to.getTime() - days * 86400000);
  const query = new URLSearchParams({
    from: from.toISOString(),
    to: to.toISOString(),
    include: "summary,balance,time_series,by_chain,top_methods,by_api_key,by_scenario",
    granularity: days === 1 ? "hour" : "day",
    limit: "100",
  });
  const report = await api("GET", `/usage?${query}`);
  const summary = report.summary;
  $("#usage-summary").replaceChildren(
    element("dt", "Spent"), element("dd", `${summary.credits_consumed} credits`),
    element("dt", "Calls"), element("dd", summary.request_count),
    element("dt", "Balance"), element("dd", `${report.balance.credits} credits`),
  );
  const series = report.time_series || [];
  drawColumns($("#chart-spend"), series, "credits_consumed", days === 1, "credits");
  drawColumns($("#chart-calls"), series, "request_count", days === 1, "calls");
  drawBars($("#by-chain"), report.by_chain || [], (r) => `chain ${r.chain_id}`);
  drawBars($("#by-method"), report.top_methods || [], (r) => r.method);
  drawBars($("#by-key"), report.by_api_key || [], (r) => r.name || r.key_hint);
  drawBars($("#by-scenario"), report.by_scenario || [], (r) => r.scenario);
}

$("#usage-form").addEventListener("submit", (event) => {
  event.preventDefault();
  guarded(loadUsage);
});

const SVG = "http://www.w3.org/2000/svg";

function drawColumns(container, rows, field, hourly, unit) {
  if (!rows.length) {
    container.replaceChildren(element("p", "Nothing in this period.", { class: "hint" }));
    return;
  }
  const width = 720, height = 180, gap = 2;
  const most = Math.max(...rows.map((r) => Number(r[field]))) || 1;
  const step = width / rows.length;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height + 20}`);
  svg.setAttribute("role", "img");
  const label = (r) => {
    const at = new Date(r.bucket);
    return hourly ? at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : at.toLocaleDateString();
  };
  svg.setAttribute("aria-label", rows.map((r) => `${label(r)}: ${r[field]} ${unit}`).join("; "));
  rows.forEach((r, index) => {
    const value = Number(r[field]);
    const h = Math.max((value / most) * height, value > 0 ? 1 : 0);
    const bar = document.createElementNS(SVG, "rect");
    bar.setAttribute("x", String(index * step + gap / 2));
    bar.setAttribute("y", String(height - h));
    bar.setAttribute("width", String(Math.max(step - gap, 1)));
    bar.setAttribute("height", String(h));
    const title = document.createElementNS(SVG, "title");
    title.textContent = `${label(r)}: ${r[field]} ${unit}`;
    bar.append(title);
    svg.append(bar);
  });
  // About six labels under the columns, each centred on its own.
  const every = Math.max(1, Math.ceil(rows.length / 6));
  rows.forEach((r, index) => {
    if (index % every !== 0) return;
    const text = document.createElementNS(SVG, "text");
    text.setAttribute("x", String(Math.min(Math.max(index * step + step / 2, 30), width - 30)));
    text.setAttribute("y", String(height + 16));
    text.setAttribute("text-anchor", "middle");
    text.textContent = label(r);
    svg.append(text);
  });
  container.replaceChildren(svg);
}

function drawBars(container, rows, name) {
  if (!rows.length) {
    container.replaceChildren(element("p", "Nothing in this period.", { class: "hint" }));
    return;
  }
  const most = Math.max(...rows.map((r) => Number(r.credits_consumed))) || 1;
  const list = element("ul");
  for (const r of rows) {
    const item = element("li");
    item.append(element("span", name(r), { class: "bar-name" }));
    const meter = element("span", null, { class: "bar" });
    meter.style.width = `${(Number(r.credits_consumed) / most) * 100}%`;
    item.append(meter);
    item.append(element("span", `${r.credits_consumed} credits, ${r.request_count} calls`, { class: "bar-value" }));
    list.append(item);
  }
  container.replaceChildren(list);
}

// -- management tokens ---------------------------------------------------------------------

async function loadTokens() {
  const tokens = await api("GET", "/tokens");
  const rows = tokens.map((token) => {
    const inUse = state.account && token.id === state.account.token_id;
    const actions = token.revoked_at
      ? ""
      : button(inUse ? "Revoke (signs you out)" : "Revoke", () => revokeToken(token, inUse), {
          "aria-label": `Revoke token ${token.label}`,
        });
    return row([
      token.label,
      element("code", token.token_hint),
      token.role,
      when(token.created_at),
      token.revoked_at ? `revoked ${when(token.revoked_at)}` : inUse ? "live (this session)" : "live",
      actions,
    ]);
  });
  fill($("#tokens tbody"), rows, "No token.", 6);
}

async function revokeToken(token, inUse) {
  await api("POST", `/tokens/${token.id}/revoke`);
  if (inUse) {
    signOut("The token you signed in with is revoked: you are signed out.");
    return;
  }
  say(`Token ${token.label} is revoked.`);
  await loadTokens();
}

$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  guarded(async () => {
    const issued = await api("POST", "/tokens", { label: $("#token-label").value.trim() });
    $("#token-label").value = "";
    showSecret(`Your new management token ${issued.label}.`, issued.token);
    await loadTokens();
  });
});

// -- provider ------------------------------------------------------------------------------

async function loadProvider() {
  const plans = await api("GET", "/provider/plans");
  const rows = plans.map((plan) => {
    const cycle = plan.cycle;
    return row([
      plan.name,
      plan.quota === null ? "none" : `${plan.quota} ${plan.quota_unit || "requests"}`,
      cycle ? `${when(cycle.start)} to ${when(cycle.end)}` : "",
      cycle ? `${cycle.requests} calls, ${cycle.credits} credits` : "",
      cycle ? cycle.standing : "",
      button("Prices", () => loadMethods(plan), { "aria-label": `Method prices of ${plan.name}` }),
    ]);
  });
  fill($("#plans tbody"), rows, "No plan yet: the operator creates them.", 6);
  const nodes = await api("GET", "/provider/nodes");
  fill(
    $("#nodes tbody"),
    nodes.map((listed) =>
      row([
        listed.node.id,
        listed.kind === "ws" ? "WebSocket" : "HTTP",
        listed.node.chain_id,
        element("code", listed.node.url),
        listed.status.status,
        listed.status.in_sync ? "yes" : "no",
      ]),
    ),
    "No node registered.",
    6,
  );
}

async function loadMethods(plan) {
  const methods = await api("GET", `/provider/plans/${plan.id}/methods`);
  $("#plan-methods-title").textContent = `Method prices of ${plan.name}`;
  fill(
    $("#plan-methods tbody"),
    methods.map((m) =>
      row([
        m.method,
        m.chain_id === null ? "all" : m.chain_id,
        m.cost,
        m.rate_limit ? `${m.rate_limit} per ${m.rate_limit_interval_sec} s` : "none",
      ]),
    ),
    "No method priced.",
    4,
  );
  $("#plan-methods").hidden = false;
}

// -- start ---------------------------------------------------------------------------------

const LOADERS = {
  overview: loadOverview,
  keys: loadKeys,
  usage: loadUsage,
  tokens: loadTokens,
  provider: loadProvider,
  billing: () => loadBilling(PAGE),
};
// What the Buy credits page (billing.js) uses of this one.
const PAGE = { api, element, row, button, fill, when, copy, say, guarded, $, token: () => state.token };
startCheckoutForm(PAGE);

async function start() {
  state.settings = await api("GET", "/dashboard/settings.json");
  $("#signup").hidden = !state.settings.signup_enabled;
  if (state.token) {
    try {
      await signIn(state.token);
      return;
    } catch {
      sessionStorage.removeItem(TOKEN_KEY);
      state.token = null;
    }
  }
  showView("signin");
}

guarded(start);
