// Admin tokens: list, create (the token is shown once), delete with confirmation.
import { call, ApiError } from "../api.js";
import { el, field, fieldError, clearErrors, showApiErrors, notice, when, table, errorText } from "../ui.js";

let root, ctx, confirmDialog, pending = null;

export function mount(section, c) {
  root = section;
  ctx = c;
  const roleSel = el("select", {}, el("option", { value: "viewer" }, "viewer (read-only)"), el("option", { value: "admin" }, "admin"));
  confirmDialog = el("dialog", { id: "tk-confirm", "aria-labelledby": "tk-confirm-title" },
    el("form", { method: "dialog", class: "dialog-body" },
      el("h2", { id: "tk-confirm-title" }, "Delete token?"),
      el("p", { id: "tk-confirm-text" }),
      el("div", { class: "dialog-actions" },
        el("button", { type: "submit", value: "cancel", class: "btn", id: "tk-cancel", autofocus: true }, "Cancel"),
        el("button", { type: "submit", value: "delete", class: "btn btn-danger", id: "tk-confirm-delete" }, "Delete"))));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "tokens-title" }, "Admin tokens")),
    el("p", { class: "muted" }, "Tokens for this console and the admin API. Viewers read everything and change nothing. The bootstrap token (TOLLGATE_ADMIN_TOKEN) is not listed."),
    el("p", { id: "tk-readonly", class: "notice", role: "status", hidden: true }, "Read-only: this token has the viewer role."),
    el("form", { id: "tk-form", class: "filters", "aria-label": "New admin token", novalidate: true },
      field("tk-name", "Name", el("input", { type: "text", autocomplete: "off", required: true, maxlength: "200" })),
      field("tk-role", "Role", roleSel),
      el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Create token"))),
    el("div", { id: "tk-created", class: "notice notice-ok", role: "status", hidden: true }),
    el("p", { id: "tk-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("div", { id: "tk-table" }),
    confirmDialog);
  section.querySelector("#tk-form").addEventListener("submit", (ev) => { ev.preventDefault(); create(); });
  confirmDialog.addEventListener("close", () => {
    if (confirmDialog.open) return; // a late close event of an earlier opening: the dialog is open again
    const p = pending;
    pending = null;
    if (p && confirmDialog.returnValue === "delete") remove(p.token);
    p?.from?.focus();
  });
}

export async function show(c) {
  ctx = c;
  root.querySelector("#tk-readonly").hidden = !ctx.readOnly;
  root.querySelector("#tk-form").hidden = ctx.readOnly;
  await load();
}

async function load() {
  try {
    const { data } = await call("GET", "/admin/admin-tokens");
    const items = Array.isArray(data) ? data : (data.items || []);
    root.querySelector("#tk-table").replaceChildren(items.length ? table("Admin tokens", ["Name", "Role", "Created (UTC)", { label: "" }],
      items.map((t) => el("tr", { "data-token": t.id },
        el("td", { "data-label": "Name" }, t.name), el("td", { "data-label": "Role" }, t.role),
        el("td", { "data-label": "Created" }, when(t.created_at, { utc: true })),
        el("td", { class: "actions" }, ctx.readOnly ? "" : el("button", { type: "button", class: "btn btn-small btn-danger-quiet",
          "aria-label": `Delete token ${t.name}`, onclick: (ev) => ask(t, ev.currentTarget) }, "Delete")))),
    { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No stored tokens yet."));
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) notice(root.querySelector("#tk-error"), errorText(e));
  }
}

async function create() {
  const form = root.querySelector("#tk-form");
  clearErrors(form);
  notice(root.querySelector("#tk-error"), "");
  const name = root.querySelector("#tk-name").value.trim();
  if (!name) { fieldError("tk-name", "Give the token a name (who or what uses it)."); root.querySelector("#tk-name").focus(); return; }
  try {
    const { data } = await call("POST", "/admin/admin-tokens", { name, role: root.querySelector("#tk-role").value });
    const box = root.querySelector("#tk-created");
    const code = el("code", { id: "tk-secret", class: "secret" }, data.token);
    box.replaceChildren(el("p", {}, el("strong", {}, `Token “${data.name}” (${data.role}) created. Copy it now: it is not shown again.`)), code,
      el("button", { type: "button", class: "btn btn-small", onclick: () => navigator.clipboard?.writeText(data.token) }, "Copy"));
    box.hidden = false;
    form.reset();
    await load();
  } catch (e) {
    const rest = showApiErrors(e, { name: "tk-name", role: "tk-role" });
    notice(root.querySelector("#tk-error"), rest.join(" "));
  }
}

function ask(t, from) {
  pending = { token: t, from };
  root.querySelector("#tk-confirm-text").textContent = `“${t.name}” (${t.role}) stops working at once.`;
  confirmDialog.returnValue = "";
  confirmDialog.showModal();
  root.querySelector("#tk-cancel").focus();
}

async function remove(t) {
  try {
    await call("DELETE", `/admin/admin-tokens/${encodeURIComponent(t.id)}`);
    root.querySelector("#tk-created").hidden = true;
    await load();
  } catch (e) {
    notice(root.querySelector("#tk-error"), errorText(e));
  }
}
