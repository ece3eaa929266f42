// The provider's page: earnings, plans and their standing explained, method prices (editable),
// and nodes with their health, which the provider adds, disables, enables and deletes.
import { api } from "../api.js";
import { CREDITS, timeChart } from "../charts.js";
import { $, button, confirmAction, element, fill, onSubmit, row, say, withTitle } from "../dom.js";
import { count, credits, creditsFull, ms, utcDay, when } from "../format.js";
import { chainName, state } from "../state.js";

const STANDINGS = {
  unmetered: ["No quota", "The plan has no quota: the operator pays its fixed price only, and every call is routed to it."],
  within_quota: ["Within quota", "Calls inside the quota cost the operator nothing more, so economy routing sends calls here first."],
  overage: ["In overage", "The quota is used: each further call costs the operator the overage price, so the plan is routed after plans within quota."],
  exhausted: ["Used up", "Quota and overage limit are used: no call is routed to the plan until its next billing cycle."],
};

const STATUSES = {
  healthy: "healthy",
  "pending check": "waiting for its first health check",
  "out of sync": "out of sync: behind the chain's head, no traffic",
  failing: "failing its health checks: no traffic until it recovers",
  "disabled by provider": "disabled by you",
  cordoned: "cordoned: an audit caught a wrong answer, no traffic",
};

let plans = [];

export async function loadProvider() {
  if (!state.chains.length) state.chains = await api("GET", "/chains");
  plans = await api("GET", "/provider/plans");
  showPlans();
  for (const select of [$("#node-plan"), $("#ws-node-plan")]) {
    const chosen = select.value;
    select.replaceChildren(...plans.map((plan) => element("option", plan.name, { value: String(plan.id) })));
    if (chosen) select.value = chosen;
  }
  await Promise.all([loadNodes(), loadEarnings()]);
}

function quotaText(plan) {
  if (plan.quota === null) return "none";
  return `${Number(plan.quota).toLocaleString()} ${plan.quota_unit || "requests"}`;
}

function showPlans() {
  const rows = plans.map((plan) => {
    const cycle = plan.cycle;
    const [standing, why] = cycle ? STANDINGS[cycle.standing] || [cycle.standing, ""] : ["", ""];
    const standingCell = element("div");
    standingCell.append(element("strong", standing, { title: cycle ? cycle.standing : "" }), element("div", why, { class: "hint" }));
    if (cycle && cycle.standing === "exhausted") standingCell.append(element("div", `Routed again from ${utcDay(cycle.end)}.`, { class: "hint" }));
    const used = element("span");
    if (cycle) used.append(document.createTextNode(`${count(cycle.requests, "call")}, `), withTitle(credits(cycle.credits), creditsFull(cycle.credits)));
    return row([
      plan.name,
      quotaText(plan),
      cycle ? `${when(cycle.start)} to ${when(cycle.end)}` : "",
      used,
      standingCell,
      button("Prices", () => loadMethods(plan), { "aria-label": `Method prices of ${plan.name}` }),
    ]);
  });
  fill($("#plans tbody"), rows, "No plan yet: the operator creates them.");
}

async function loadMethods(plan) {
  const methods = await api("GET", `/provider/plans/${plan.id}/methods`);
  $("#plan-methods-title").textContent = `Method prices of ${plan.name}`;
  $("#price-form").elements.plan.value = String(plan.id);
  fill(
    $("#plan-methods tbody"),
    methods.map((m) =>
      row([
        element("code", m.method),
        m.chain_id === null ? "every chain" : chainName(m.chain_id),
        m.node_target_type,
        withTitle(credits(m.cost), creditsFull(m.cost)),
        m.rate_limit ? `${count(m.rate_limit, "call")} per ${count(m.rate_limit_interval_sec, "second")}` : "none",
      ]),
    ),
    "No method priced.",
  );
  $("#plan-methods").hidden = false;
}

onSubmit($("#price-form"), async (form) => {
  const planId = form.elements.plan.value;
  const priced = {
    method: form.elements.method.value.trim(),
    cost: form.elements.cost.value.trim(),
    chain_id: form.elements.chain.value.trim() || null,
  };
  const rate = Number(form.elements.rate_limit.value || 0);
  if (rate) {
    priced.rate_limit = rate;
    priced.rate_limit_interval_sec = Number(form.elements.rate_limit_interval_sec.value || 1);
  }
  await api("POST", `/provider/plans/${planId}/methods`, [priced]);
  say(`${priced.method} now costs ${credits(priced.cost)} per call.`);
  form.elements.method.value = "";
  form.elements.cost.value = "";
  await loadMethods(plans.find((plan) => String(plan.id) === planId));
});

function headCell(status) {
  if (status.head_block === null || status.head_block === undefined) return "not reported yet";
  const lag = status.head_lag;
  const behind = lag === null || lag === undefined ? "" : lag === 0 ? ", at the chain's head" : `, ${count(lag, "block")} behind`;
  return `block ${Number(status.head_block).toLocaleString()}${behind}`;
}

// What audits and proofs found of the node (docs/integrity.md, "What is visible where"): every
// router's counts, up to one flush behind; the cordon's reason when an audit or a proof caught it.
function since(label, iso) {
  return iso ? `${label} ${when(iso)}` : `never ${label}`;
}

function audited(status) {
  const checks = status.checks || {};
  const cell = element("div", null, { class: "checks" });
  if (status.status === "cordoned") cell.append(withTitle("outvoted: cordoned", status.cordon_reason || "cordoned", "strong"));
  const failed = checks.audits_failed || 0;
  const audits = `${count(checks.audits_passed || 0, "audit")} passed, ${failed ? `${count(failed, "answer")} outvoted` : "none outvoted"}`;
  const auditTimes = [since("passed", checks.last_audit_passed_at), since("outvoted", checks.last_audit_failed_at)].join("; ");
  cell.append(withTitle(audits, `Routers ask a share of its answers again of other providers' nodes: ${auditTimes}`, "div"));
  const refuted = checks.proofs_failed || 0;
  const proofs = `${count(checks.proofs_checked || 0, "answer")} proven, ${refuted ? `${count(refuted, "answer")} refuted` : "none refuted"}`;
  const proofTimes = [since("proven", checks.last_proof_checked_at), since("refuted", checks.last_proof_failed_at)].join("; ");
  cell.append(withTitle(proofs, `Answers checked against the chain's own proofs before they were served: ${proofTimes}`, "div"));
  cell.lastChild.classList.add("hint");
  return cell;
}

function disputed(status) {
  const answers = status.disputed_answers || 0;
  if (!answers) return "none";
  return withTitle(`${count(answers, "answer")}, ${credits(status.disputed_credits)}`, "Refunded to the customers, not paid to you");
}

// The provider's answers disputed in all (not only in the period): refunded, never earned.
function disputedTotal(disputed) {
  const answers = (disputed && disputed.answers) || 0;
  if (!answers) return "none";
  return withTitle(`${count(answers, "answer")}, ${credits(disputed.credits)}`, "Answers of your nodes disputed when they were cordoned: refunded to the customers, not paid to you");
}

function nodeActions(listed) {
  const { node, status, kind } = listed;
  const name = `${kind === "ws" ? "WebSocket" : "HTTP"} node ${node.id}`;
  const actions = element("span", null, { class: "actions" });
  if (status.status === "disabled by provider") {
    actions.append(button("Enable", () => setStatus(listed, "healthy"), { "aria-label": `Enable ${name}` }));
  } else if (status.status === "cordoned") {
    actions.append(button("Bring back", () => setStatus(listed, "healthy"), { "aria-label": `Bring back ${name}` }));
  } else {
    actions.append(button("Disable", () => setStatus(listed, "disabled by provider"), { "aria-label": `Disable ${name}`, class: "danger" }));
  }
  actions.append(button("Delete", () => setStatus(listed, "provider-deleted"), { "aria-label": `Delete ${name}`, class: "danger" }));
  return actions;
}

const ASK = {
  "disabled by provider": ["Disable", "It gets no traffic until you enable it again; it stays listed here."],
  "provider-deleted": ["Delete", "It gets no traffic and disappears from this page; registering its URL again brings it back, screened anew."],
};

async function setStatus(listed, status) {
  const { node, kind } = listed;
  const name = `${kind === "ws" ? "WebSocket" : "HTTP"} node ${node.id}`;
  if (ASK[status]) {
    const [verb, text] = ASK[status];
    const yes = await confirmAction({ title: `${verb} ${name} (${node.url})?`, text, confirm: `${verb} node` });
    if (!yes) {
      say("Nothing was changed.");
      return;
    }
  }
  await api("POST", "/provider/nodes/status", { node_id: node.id, status, kind });
  const done = { healthy: "enabled", "disabled by provider": "disabled", "provider-deleted": "deleted" }[status];
  say(`${name} is ${done}; routers see it within a few seconds.`);
  await loadNodes();
}

async function loadNodes() {
  state.wsChains = await api("GET", "/chains/ws");
  const listed = await api("GET", "/provider/nodes");
  const planName = (id) => (plans.find((plan) => plan.id === id) || { name: `plan ${id}` }).name;
  const label = (l) => {
    const cell = element("div");
    cell.append(element("strong", `${l.kind === "ws" ? "WebSocket" : "HTTP"} node ${l.node.id}`), element("div", planName(l.node.plan_id), { class: "hint" }));
    return cell;
  };
  const statusCell = (status) => withTitle(STATUSES[status.status] || status.status, status.status);
  fill(
    $("#nodes tbody"),
    listed.filter((l) => l.kind === "http").map((l) =>
      row([
        label(l),
        chainName(l.node.chain_id),
        element("code", l.node.url),
        statusCell(l.status),
        headCell(l.status),
        ms(l.status.latency_ms),
        audited(l.status),
        disputed(l.status),
        l.status.checked_at ? when(l.status.checked_at) : "none yet",
        nodeActions(l),
      ]),
    ),
    "No HTTP node: add one below.",
  );
  fill(
    $("#ws-nodes tbody"),
    listed.filter((l) => l.kind === "ws").map((l) =>
      row([
        label(l),
        chainName(l.node.chain_id),
        element("code", l.node.url),
        statusCell(l.status),
        headCell(l.status),
        ms(l.status.latency_ms),
        l.status.checked_at ? when(l.status.checked_at) : "none yet",
        nodeActions(l),
      ]),
    ),
    "No WebSocket node: add one below.",
  );
}

onSubmit($("#node-form"), async (form) => {
  const made = await api("PUT", "/provider/nodes", {
    plan_id: Number(form.elements.plan.value),
    url: form.elements.url.value.trim(),
    rate_limit: Number(form.elements.rate_limit.value),
    rate_limit_interval_sec: Number(form.elements.rate_limit_interval_sec.value),
  });
  form.elements.url.value = "";
  await loadNodes();
  say(`HTTP node ${made.node.id} passed screening and serves ${chainName(made.node.chain_id)}.`);
});

onSubmit($("#ws-node-form"), async (form) => {
  const made = await api("PUT", "/provider/nodes/ws", {
    plan_id: Number(form.elements.plan.value),
    chain_id: form.elements.chain.value.trim(),
    url: form.elements.url.value.trim(),
  });
  form.elements.url.value = "";
  await loadNodes();
  say(`WebSocket node ${made.node_ws.id} passed screening and serves ${chainName(made.node_ws.chain_id)}.`);
});

async function loadEarnings() {
  const days = Number($("#earnings-period").value);
  const to = new Date();
  const from = new Date(to.getTime() - days * 86400000);
  const hourly = days === 1;
  const query = new URLSearchParams({ from: from.toISOString(), to: to.toISOString(), granularity: hourly ? "hour" : "day" });
  const earned = await api("GET", `/provider/earnings?${query}`);
  $("#earnings-summary").replaceChildren(
    element("dt", "Earned"),
    wrap(withTitle(credits(earned.total.credits), creditsFull(earned.total.credits))),
    element("dt", "Calls served"),
    element("dd", count(earned.total.request_count, "call")),
    element("dt", "Disputed, in all"),
    wrap(disputedTotal(earned.disputed)),
  );
  fill(
    $("#earnings tbody"),
    earned.by_plan.map((p) => row([p.name, count(p.request_count, "call"), withTitle(credits(p.credits), creditsFull(p.credits))])),
    "Nothing earned in this period.",
  );
  const buckets = everyBucket(from, to, hourly);
  const names = earned.by_plan.map((p) => p.name);
  const series = (names.length ? names : ["Earned"]).map((name) => ({
    label: name,
    values: buckets.map((b) => {
      const found = earned.time_series.find((e) => e.name === name && Date.parse(e.bucket) === Date.parse(b));
      return found ? found.credits : "0";
    }),
  }));
  timeChart($("#chart-earnings"), { buckets, series, unit: CREDITS, hourly, empty: "Nothing earned in this period." });
}

function wrap(child) {
  const dd = element("dd");
  dd.append(child);
  return dd;
}

// Every hour (or UTC day) of the window, as the usage report buckets it.
function everyBucket(from, to, hourly) {
  const step = hourly ? 3600000 : 86400000;
  const first = new Date(from);
  if (hourly) {
    first.setUTCMinutes(0, 0, 0);
    if (first < from) first.setTime(first.getTime() + step);
  } else {
    first.setUTCHours(0, 0, 0, 0);
  }
  const out = [];
  for (let t = first.getTime(); t < to.getTime(); t += step) out.push(new Date(t).toISOString());
  return out;
}

onSubmit($("#earnings-form"), loadEarnings);

