// Small DOM helpers. Everything shown is written as text (textContent), never parsed as HTML.

import { ApiError } from "./api.js";

export const $ = (selector, root = document) => root.querySelector(selector);
export const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

export function element(tag, text, attributes = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value);
  }
  return node;
}

// A span showing `text`, whose title (shown on hover) is `full`.
export function withTitle(text, full, tag = "span") {
  return element(tag, text, { title: full });
}

export function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    if (cell instanceof Node) td.append(cell);
    else td.textContent = cell === null || cell === undefined ? "" : String(cell);
    tr.append(td);
  }
  return tr;
}

export function fill(tbody, rows, emptyText) {
  const columns = tbody.closest("table").querySelectorAll("thead th").length || 1;
  tbody.replaceChildren(...rows);
  if (!rows.length) {
    const tr = document.createElement("tr");
    tr.append(element("td", emptyText, { colspan: String(columns), class: "empty" }));
    tbody.append(tr);
  }
}

// -- messages, scoped to the view that is shown ----------------------------------------------

let handlers = { unauthorised: () => {} };

export function onUnauthorised(handler) {
  handlers.unauthorised = handler;
}

function currentStatus() {
  const view = $$("main > section").find((section) => !section.hidden);
  return view ? $(".status", view) : null;
}

export function say(message, isError = false) {
  const status = currentStatus();
  if (!status) return;
  status.textContent = message;
  status.classList.toggle("error", isError);
}

export function clearStatus() {
  for (const status of $$(".status")) {
    status.textContent = "";
    status.classList.remove("error");
  }
}

// Run an action; a failure is said in the view's status line, or at the form's fields.
export async function guarded(action, form) {
  if (form) clearFieldErrors(form);
  try {
    await action();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401 && handlers.unauthorised()) return;
    const placed = form && error instanceof ApiError ? showFieldErrors(form, error.details) : 0;
    if (!placed || error.details.length > placed) say(error.message || String(error), true);
    else say("Please correct the fields marked below.", true);
  }
}

export function button(label, onClick, attributes = {}) {
  const node = element("button", label, { type: "button", ...attributes });
  node.addEventListener("click", () => guarded(onClick));
  return node;
}

export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    say("Copied to the clipboard.");
  } catch {
    say("Copying is not allowed here: select the text and copy it yourself.", true);
  }
}

export function copyButton(text, what) {
  return button("Copy", () => copy(text), { "aria-label": `Copy ${what}` });
}

// -- errors at the field ---------------------------------------------------------------------

// The API names fields as `allowed_domains[0]`, `rate_limit`, `[2].cost`: a form's control
// answers to the names in its data-field attribute (space separated).
function controlFor(form, field) {
  const names = [field, field.replace(/\[\d+\]/g, ""), field.replace(/^\[\d+\]\./, "")];
  return $$("[data-field]", form).find((control) =>
    control.dataset.field.split(" ").some((name) => names.includes(name)),
  );
}

export function setFieldError(control, message) {
  const id = `${control.id}-error`;
  let note = document.getElementById(id);
  if (!note) {
    note = element("p", null, { id, class: "field-error" });
    control.insertAdjacentElement("afterend", note);
  }
  note.textContent = message;
  control.setAttribute("aria-invalid", "true");
  const described = (control.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
  if (!described.includes(id)) control.setAttribute("aria-describedby", [...described, id].join(" "));
}

export function clearFieldErrors(form) {
  for (const control of $$("[aria-invalid]", form)) {
    control.removeAttribute("aria-invalid");
    const id = `${control.id}-error`;
    const described = (control.getAttribute("aria-describedby") || "")
      .split(" ")
      .filter((name) => name && name !== id);
    if (described.length) control.setAttribute("aria-describedby", described.join(" "));
    else control.removeAttribute("aria-describedby");
  }
  for (const note of $$(".field-error", form)) note.remove();
}

export function showFieldErrors(form, details) {
  let placed = 0;
  let first = null;
  for (const detail of details || []) {
    if (!detail.field) continue;
    const control = controlFor(form, detail.field);
    if (!control) continue;
    setFieldError(control, detail.message);
    first = first || control;
    placed += 1;
  }
  if (first) first.focus();
  return placed;
}

// The browser's own checks (required, patterns, ranges), said at each field; true when valid.
export function checkFields(form) {
  clearFieldErrors(form);
  let first = null;
  for (const control of $$("input, select, textarea", form)) {
    if (control.type === "hidden" || control.disabled || control.checkValidity()) continue;
    setFieldError(control, control.validationMessage);
    first = first || control;
  }
  if (first) {
    first.focus();
    say("Please correct the fields marked below.", true);
  }
  return first === null;
}

// A form whose submission runs `action` after the fields pass their checks.
export function onSubmit(form, action) {
  form.noValidate = true;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!checkFields(form)) return;
    guarded(() => action(form), form);
  });
}

// -- confirmation of destructive actions -----------------------------------------------------

// Ask before doing something that cannot be taken back (or stops traffic): a modal dialog whose
// focus starts on "Cancel"; Escape cancels. Resolves true when confirmed.
export function confirmAction({ title, text, confirm }) {
  const dialog = $("#confirm");
  $("#confirm-title", dialog).textContent = title;
  $("#confirm-text", dialog).textContent = text;
  $("#confirm-yes", dialog).textContent = confirm;
  return new Promise((resolve) => {
    const done = (answer) => {
      dialog.removeEventListener("close", onClose);
      resolve(answer);
    };
    const onClose = () => done(dialog.returnValue === "yes");
    dialog.addEventListener("close", onClose);
    dialog.returnValue = "";
    dialog.showModal();
    $("#confirm-no", dialog).focus();
  });
}
