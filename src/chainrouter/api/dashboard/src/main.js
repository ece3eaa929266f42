// The chainrouter dashboard: one page over the management API's JSON routes.
//
// The management token lives in this tab's sessionStorage and travels only in the X-Api-Key
// header of requests to this origin: never in a URL, a cookie or a submitted form. Everything
// shown is written with textContent, never as HTML.

import { ApiError, api, session } from "./api.js";
import { $, $$, button, clearStatus, copy, element, fill, guarded, onSubmit, onUnauthorised, row, say } from "./dom.js";
import { when } from "./format.js";
import { hideSecret, showSecret } from "./secret.js";
import { state } from "./state.js";
import { showAlerts } from "./views/alerts.js";
import { loadKeys, onOpenUsage, resetKeyForm } from "./views/keys.js";
import { loadOverview } from "./views/overview.js";
import { loadProvider } from "./views/provider.js";
import { loadTokens, onSignOut } from "./views/tokens.js";
import { chooseKey, loadUsage } from "./views/usage.js";

const TOKEN_KEY = "chainrouter.token";
const VIEWS = ["overview", "keys", "usage", "billing", "tokens", "provider"];
const LOADERS = {
  overview: loadOverview,
  keys: loadKeys,
  usage: loadUsage,
  billing: () => billing.then((load) => load(PAGE)),
  tokens: loadTokens,
  provider: loadProvider,
};

// The Buy credits page has its own script, billing.js, which index.html loads after this one:
// it announces itself with a "dashboard:page" event carrying its loader and its form's starter,
// and is handed the helpers below. The page is loaded once its script has arrived.
const PAGE = {
  api, element, row, button, fill, when, copy, say, guarded, onSubmit, $,
  token: () => session.token,
  alerts: (alerts) => showAlerts(alerts),
};
let billingArrived;
const billing = new Promise((resolve) => {
  billingArrived = resolve;
});
document.addEventListener("dashboard:page", (event) => {
  const { name, load, start: startPage } = event.detail;
  if (name !== "billing") return;
  if (startPage) startPage(PAGE);
  billingArrived(load);
});

// Show one section: its messages start empty (a message belongs to the page it was said on),
// a secret shown elsewhere is gone, and the section's data is loaded afresh.
function showView(name, { keepSecret = false } = {}) {
  if (!keepSecret) hideSecret();
  clearStatus();
  for (const section of $$("main > section")) section.hidden = section.id !== `view-${name}`;
  for (const item of $$("#nav [data-view]")) {
    if (item.dataset.view === name) item.setAttribute("aria-current", "page");
    else item.removeAttribute("aria-current");
  }
  if (name !== "signin" && location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  if (name === "keys") resetKeyForm();
  $("#main").focus();
  const load = LOADERS[name];
  return load ? guarded(load) : Promise.resolve();
}

async function signIn(token) {
  session.token = token;
  const account = await api("GET", "/account");
  sessionStorage.setItem(TOKEN_KEY, token);
  state.account = account;
  $("#nav").hidden = false;
  $('#nav [data-view="provider"]').hidden = !account.provider;
  showAlerts(account.alerts);
  // Back from Stripe's card payment page (`?checkout=success` or `cancelled`): the Buy credits
  // page, saying how the payment went.
  const checkout = new URLSearchParams(location.search).get("checkout");
  if (checkout) history.replaceState(null, "", location.pathname);
  const wanted = checkout ? "billing" : location.hash.slice(1);
  const view = VIEWS.includes(wanted) && (wanted !== "provider" || account.provider) ? wanted : "overview";
  await showView(view, { keepSecret: true });
  if (!checkout) say(`Signed in as ${account.name}.`);
  else if (checkout === "success") {
    say("Payment received: your credits arrive as soon as the card payment is confirmed.");
  } else say("The card payment was cancelled: nothing was charged.");
}

function signOut(message = "Signed out.") {
  session.token = null;
  state.account = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("#nav").hidden = true;
  showAlerts([]);
  $("#signin-token").value = "";
  history.replaceState(null, "", location.pathname);
  showView("signin");
  say(message);
}

// A token refused (revoked meanwhile, say): back to signing in.
onUnauthorised(() => {
  if (!session.token || $("#nav").hidden) return false;
  signOut("Your token is no longer valid: sign in again.");
  return true;
});
onSignOut(signOut);
onOpenUsage((keyId) => {
  chooseKey(keyId);
  showView("usage");
});

onSubmit($("#signin-form"), async (form) => {
  try {
    await signIn(form.elements.token.value.trim());
  } catch (error) {
    session.token = null;
    // A refused token is told at the token's field.
    if (error instanceof ApiError && error.status === 401) {
      throw new ApiError(401, error.message, [{ field: "token", message: error.message }]);
    }
    throw error;
  }
});

onSubmit($("#signup-form"), async (form) => {
  const made = await api("POST", "/signup", {
    name: form.elements.name.value.trim(),
    email: form.elements.email.value.trim(),
  });
  form.reset();
  await signIn(made.token);
  showSecret("Your management token: you need it to sign in again.", made.token);
});

$("#sign-out").addEventListener("click", () => signOut());
for (const item of $$("#nav [data-view]")) {
  item.addEventListener("click", () => showView(item.dataset.view));
}

// The confirmation dialog's two answers.
$("#confirm-no").addEventListener("click", () => $("#confirm").close("no"));
$("#confirm-yes").addEventListener("click", () => $("#confirm").close("yes"));

async function start() {
  state.settings = await api("GET", "/dashboard/settings.json");
  $("#signup").hidden = !state.settings.signup_enabled;
  if (session.token) {
    try {
      await signIn(session.token);
      return;
    } catch {
      sessionStorage.removeItem(TOKEN_KEY);
      session.token = null;
    }
  }
  showView("signin");
}

guarded(start);
