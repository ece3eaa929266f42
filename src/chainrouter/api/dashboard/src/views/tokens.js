// Management tokens: create (the secret shown once) and revoke, after a confirmation; revoking
// the one in use signs out.
import { api } from "../api.js";
import { $, button, confirmAction, element, fill, onSubmit, row, say } from "../dom.js";
import { when } from "../format.js";
import { showSecret } from "../secret.js";
import { state } from "../state.js";

let signOut = () => {};

export function onSignOut(handler) {
  signOut = handler;
}

export async function loadTokens() {
  const tokens = await api("GET", "/tokens");
  const rows = tokens.map((token) => {
    const inUse = state.account && token.id === state.account.token_id;
    const actions = token.revoked_at
      ? ""
      : button(inUse ? "Revoke (signs you out)" : "Revoke", () => revokeToken(token, inUse), {
          "aria-label": `Revoke token ${token.label}`,
          class: "danger",
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
  fill($("#tokens tbody"), rows, "No token.");
}

async function revokeToken(token, inUse) {
  const yes = await confirmAction({
    title: `Revoke token “${token.label}”?`,
    text: inUse
      ? "This is the token you signed in with: revoking it signs you out, and it never works again."
      : "Programs using it are refused at once, and it never works again.",
    confirm: "Revoke token",
  });
  if (!yes) {
    say("Nothing was revoked.");
    return;
  }
  await api("POST", `/tokens/${token.id}/revoke`);
  if (inUse) {
    signOut("The token you signed in with is revoked: you are signed out.");
    return;
  }
  say(`Token ${token.label} is revoked.`);
  await loadTokens();
}

onSubmit($("#token-form"), async (form) => {
  const issued = await api("POST", "/tokens", { label: form.elements.label.value.trim() });
  form.reset();
  showSecret(`Your new management token ${issued.label}.`, issued.token);
  say(`Token ${issued.label} created.`);
  await loadTokens();
});
