// Tenants and keys: orgs, teams and users (create, rename, delete with the stated effects), and API keys
// (filter by org/team/user and prefix, create — the key shown once —, enable/disable, rotate with an
// optional grace period — the new key shown once —, revoke). docs/admin-api.md, "Tenancy and keys".
import { call, listAll, ApiError } from "../api.js";
import { int } from "../wire.js";
import { el, field, fieldError, clearErrors, showApiErrors, notice, when, table, errorText, count } from "../ui.js";

let root, ctx, orgs = [], teams = [], users = [], keys = [];
let keyDialog, editingKey = null, editDialog, rotateDialog, confirmDialog, editing = null, rotating = null, pending = null;

const MAX_GRACE = 2592000; // 30 days, the API's bound (docs/admin-api.md, "Key lifecycle")

function confirmBox(id, title) {
  return el("dialog", { id, class: "confirm-dialog", "aria-labelledby": `${id}-title`, "aria-describedby": `${id}-text` },
    el("form", { method: "dialog", class: "dialog-body" },
      el("h2", { id: `${id}-title` }, title), el("p", { id: `${id}-text` }),
      el("div", { class: "dialog-actions" },
        el("button", { type: "submit", value: "cancel", class: "btn", id: `${id}-cancel` }, "Cancel"),
        el("button", { type: "submit", value: "ok", class: "btn btn-danger", id: `${id}-ok` }, "Delete"))));
}

const orgName = (id) => orgs.find((o) => o.id === id)?.name ?? `org ${id}`;
const teamName = (id) => (id ? teams.find((t) => t.id === id)?.name ?? `team ${id}` : "—");
const userName = (id) => users.find((u) => u.id === id)?.name ?? `user ${id}`;

function select(id, label, { any = "", none = "" } = {}) {
  const s = el("select", {});
  if (any) s.dataset.any = any;
  if (none) s.dataset.none = none;
  return field(id, label, s);
}

function fillSelect(sel, items, label, { any, none } = {}) {
  const cur = sel.value;
  const opts = [];
  if (any) opts.push(el("option", { value: "" }, any));
  if (none) opts.push(el("option", { value: "" }, none));
  for (const it of items) opts.push(el("option", { value: it.id }, label(it)));
  sel.replaceChildren(...opts);
  if ([...sel.options].some((o) => o.value === cur)) sel.value = cur;
}

export function mount(section, c) {
  root = section;
  ctx = c;
  editDialog = el("dialog", { id: "tn-edit", "aria-labelledby": "tn-edit-title" },
    el("form", { id: "tn-edit-form", novalidate: true },
      el("div", { class: "dialog-head" }, el("h2", { id: "tn-edit-title" }, "Rename")),
      el("div", { class: "dialog-body" },
        el("p", { id: "tn-edit-errors", class: "notice notice-error", role: "alert", hidden: true }),
        field("tn-edit-name", "Name", el("input", { type: "text", autocomplete: "off", required: true, maxlength: "200" })),
        el("div", { id: "tn-edit-user-fields" },
          field("tn-edit-email", "Email (optional)", el("input", { type: "email", autocomplete: "off" })),
          field("tn-edit-team", "Team", el("select", {}), { hint: "Moving a user moves its keys' charges to the new team from the next snapshot on; settled usage stays where it was." }))),
      el("div", { class: "dialog-actions" },
        el("button", { type: "button", class: "btn", id: "tn-edit-cancel" }, "Cancel"),
        el("button", { type: "submit", class: "btn btn-primary", id: "tn-edit-save" }, "Save"))));
  rotateDialog = el("dialog", { id: "tn-rotate", "aria-labelledby": "tn-rotate-title" },
    el("form", { id: "tn-rotate-form", novalidate: true },
      el("div", { class: "dialog-head" }, el("h2", { id: "tn-rotate-title" }, "Rotate key")),
      el("div", { class: "dialog-body" },
        el("p", { id: "tn-rotate-text" }),
        el("p", { id: "tn-rotate-errors", class: "notice notice-error", role: "alert", hidden: true }),
        field("tn-rotate-grace", "Grace period (minutes)", el("input", { type: "text", inputmode: "numeric", autocomplete: "off", value: "0" }),
          { hint: "How long the replaced key keeps working: 0 = it stops with the next snapshot; at most 43,200 (30 days)." })),
      el("div", { class: "dialog-actions" },
        el("button", { type: "button", class: "btn", id: "tn-rotate-cancel" }, "Cancel"),
        el("button", { type: "submit", class: "btn btn-primary", id: "tn-rotate-go" }, "Rotate"))));
  confirmDialog = confirmBox("tn-confirm", "Delete?");
  keyDialog = el("dialog", { id: "tn-key-edit", "aria-labelledby": "tn-ke-title" },
    el("form", { id: "tn-ke-form", novalidate: true },
      el("div", { class: "dialog-head" }, el("h2", { id: "tn-ke-title" }, "Edit key")),
      el("div", { class: "dialog-body" },
        el("p", { id: "tn-ke-errors", class: "notice notice-error", role: "alert", hidden: true }),
        field("tn-ke-name", "Name", el("input", { type: "text", autocomplete: "off", maxlength: "200" })),
        field("tn-ke-models", "Allowed models", el("input", { type: "text", autocomplete: "off", spellcheck: "false", placeholder: "empty = every model" }), { hint: "Comma-separated names or patterns (gpt-4o*)." }),
        el("div", { class: "grid" },
          field("tn-ke-rpm", "Requests / minute", el("input", { type: "text", inputmode: "numeric", autocomplete: "off" }), { hint: "0 = unlimited" }),
          field("tn-ke-tpm", "Tokens / minute", el("input", { type: "text", inputmode: "numeric", autocomplete: "off" }), { hint: "0 = unlimited" })),
        field("tn-ke-expires", "Expires", el("input", { type: "datetime-local" }), { hint: `In your time zone (${Intl.DateTimeFormat().resolvedOptions().timeZone}); empty = never.` }),
        field("tn-ke-cost", "Cost shown to the caller", el("select", {},
          el("option", { value: "" }, "Gateway setting (Settings page)"), el("option", { value: "true" }, "Shown"), el("option", { value: "false" }, "Hidden")),
        { hint: "Exact cost in headers, streams and lookups by request id. A reseller may hide it." })),
      el("div", { class: "dialog-actions" },
        el("button", { type: "button", class: "btn", id: "tn-ke-cancel" }, "Cancel"),
        el("button", { type: "submit", class: "btn btn-primary", id: "tn-ke-save" }, "Save key"))));

  const panel = (id, title, ...kids) => el("section", { class: "panel", "aria-labelledby": `${id}-title` }, el("h2", { id: `${id}-title` }, title), ...kids);
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "tenants-title" }, "Tenants and keys"),
      el("div", { class: "page-actions" }, el("button", { type: "button", class: "btn btn-quiet", id: "tn-reload", onclick: () => load() }, "Reload"))),
    el("p", { id: "tn-readonly", class: "notice", role: "status", hidden: true }, "Read-only: this token has the viewer role."),
    el("p", { id: "tn-error", class: "notice notice-error", role: "alert", hidden: true }),
    panel("tn-keys", "API keys",
      el("h3", { class: "sub-title" }, "Find keys"),
      el("form", { id: "tn-kf", class: "inline-form tn-form", "aria-label": "Filter API keys", novalidate: true },
        select("tn-kf-org", "Org", { any: "Any org" }), select("tn-kf-team", "Team", { any: "Any team" }),
        select("tn-kf-user", "User", { any: "Any user" }),
        field("tn-kf-prefix", "Prefix starts with", el("input", { type: "text", autocomplete: "off", spellcheck: "false", placeholder: "tg-…" })),
        el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn" }, "Filter"),
          el("button", { type: "button", class: "btn btn-quiet", id: "tn-kf-clear" }, "Clear"))),
      el("h3", { class: "sub-title mutating-title" }, "New key"),
      el("form", { id: "tn-key-form", class: "inline-form tn-form mutating", "aria-label": "New API key", novalidate: true },
        select("tn-key-user", "Owner (user)"),
        field("tn-key-name", "Key name", el("input", { type: "text", autocomplete: "off", maxlength: "200" })),
        field("tn-key-models", "Allowed models", el("input", { type: "text", autocomplete: "off", spellcheck: "false", placeholder: "empty = every model" }), { hint: "Comma-separated names or patterns (gpt-4o*)." }),
        field("tn-key-rpm", "Requests / minute", el("input", { type: "text", inputmode: "numeric", autocomplete: "off", value: "0" }), { hint: "0 = unlimited" }),
        field("tn-key-tpm", "Tokens / minute", el("input", { type: "text", inputmode: "numeric", autocomplete: "off", value: "0" }), { hint: "0 = unlimited" }),
        el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Create key"))),
      el("div", { id: "tn-secret-box", class: "notice notice-ok", role: "status", hidden: true }),
      el("p", { id: "tn-key-count", class: "muted small" }),
      el("div", { id: "tn-key-table" })),
    el("div", { class: "two-col tn-tenants" },
      panel("tn-orgs", "Organisations",
        el("form", { id: "tn-org-form", class: "inline-form tn-form mutating", "aria-label": "New organisation", novalidate: true },
          field("tn-org-name", "Name", el("input", { type: "text", autocomplete: "off", maxlength: "200" })),
          el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Create org"))),
        el("div", { id: "tn-org-table" })),
      panel("tn-teams", "Teams",
        el("form", { id: "tn-team-form", class: "inline-form tn-form mutating", "aria-label": "New team", novalidate: true },
          select("tn-team-org", "Org"),
          field("tn-team-name", "Name", el("input", { type: "text", autocomplete: "off", maxlength: "200" })),
          el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Create team"))),
        el("div", { id: "tn-team-table" }))),
    panel("tn-users", "Users",
      el("form", { id: "tn-user-form", class: "inline-form tn-form mutating", "aria-label": "New user", novalidate: true },
        select("tn-user-org", "Org"), select("tn-user-team", "Team", { none: "No team" }),
        field("tn-user-name", "Name", el("input", { type: "text", autocomplete: "off", maxlength: "200" })),
        field("tn-user-email", "Email (optional)", el("input", { type: "email", autocomplete: "off" })),
        el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Create user"))),
      el("div", { id: "tn-user-table" })),
    editDialog, rotateDialog, keyDialog, confirmDialog);

  const on = (sel, ev, fn) => section.querySelector(sel).addEventListener(ev, fn);
  // Editing a field clears its error (the message stays until the operator acts on it).
  section.addEventListener("input", (ev) => { if (ev.target.id && ev.target.getAttribute("aria-invalid") === "true") fieldError(ev.target.id, ""); });
  on("#tn-kf", "submit", (ev) => { ev.preventDefault(); loadKeys(); });
  on("#tn-kf-clear", "click", () => { root.querySelector("#tn-kf").reset(); loadKeys(); });
  on("#tn-key-form", "submit", (ev) => { ev.preventDefault(); createKey(); });
  on("#tn-org-form", "submit", (ev) => { ev.preventDefault(); createTenant("org"); });
  on("#tn-team-form", "submit", (ev) => { ev.preventDefault(); createTenant("team"); });
  on("#tn-user-form", "submit", (ev) => { ev.preventDefault(); createTenant("user"); });
  on("#tn-user-org", "change", () => fillTeamsFor("#tn-user-team", root.querySelector("#tn-user-org").value, "No team"));
  on("#tn-edit-form", "submit", (ev) => { ev.preventDefault(); saveEdit(); });
  on("#tn-edit-cancel", "click", () => editDialog.close());
  on("#tn-rotate-form", "submit", (ev) => { ev.preventDefault(); rotate(); });
  on("#tn-rotate-cancel", "click", () => rotateDialog.close());
  on("#tn-ke-form", "submit", (ev) => { ev.preventDefault(); saveKey(); });
  on("#tn-ke-cancel", "click", () => keyDialog.close());
  keyDialog.addEventListener("close", () => editingKey?.from?.focus());
  editDialog.addEventListener("close", () => editing?.from?.focus());
  rotateDialog.addEventListener("close", () => rotating?.from?.focus());
  confirmDialog.addEventListener("close", () => {
    if (confirmDialog.open) return;
    const p = pending;
    pending = null;
    if (p && confirmDialog.returnValue === "ok") p.run();
    p?.from?.focus();
  });
}

export async function show(c) {
  ctx = c;
  root.querySelector("#tn-readonly").hidden = !ctx.readOnly;
  for (const f of root.querySelectorAll("form.mutating, .mutating-title")) f.hidden = ctx.readOnly;
  await load();
}

function fillTeamsFor(sel, orgID, none) {
  fillSelect(root.querySelector(sel), teams.filter((t) => !orgID || String(t.org_id) === String(orgID)), (t) => `${t.name} (${orgName(t.org_id)})`, { none });
}

// aria-busy is true while the page reloads its lists (tests wait for it to settle).
async function load() {
  root.setAttribute("aria-busy", "true");
  try {
    await reload();
  } finally {
    root.setAttribute("aria-busy", "false");
  }
}

async function reload() {
  notice(root.querySelector("#tn-error"), "");
  try {
    [orgs, teams, users] = await Promise.all([listAll("/admin/orgs?limit=500"), listAll("/admin/teams?limit=500"), listAll("/admin/users?limit=500")]);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) notice(root.querySelector("#tn-error"), errorText(e));
    return;
  }
  const orgLabel = (o) => `${o.name} (id ${o.id})`;
  fillSelect(root.querySelector("#tn-kf-org"), orgs, orgLabel, { any: "Any org" });
  fillSelect(root.querySelector("#tn-kf-team"), teams, (t) => `${t.name} (${orgName(t.org_id)})`, { any: "Any team" });
  fillSelect(root.querySelector("#tn-kf-user"), users, (u) => `${u.name} (id ${u.id})`, { any: "Any user" });
  fillSelect(root.querySelector("#tn-key-user"), users, (u) => `${u.name} (${orgName(u.org_id)})`);
  fillSelect(root.querySelector("#tn-team-org"), orgs, orgLabel);
  fillSelect(root.querySelector("#tn-user-org"), orgs, orgLabel);
  fillTeamsFor("#tn-user-team", root.querySelector("#tn-user-org").value, "No team");
  renderTenants();
  await loadKeys();
}

function actions(label, onRename, onDelete) {
  if (ctx.readOnly) return el("td", { class: "actions" });
  return el("td", { class: "actions" },
    el("button", { type: "button", class: "btn btn-small", "aria-label": `Rename ${label}`, onclick: (ev) => onRename(ev.currentTarget) }, "Rename"),
    el("button", { type: "button", class: "btn btn-small btn-danger-quiet", "aria-label": `Delete ${label}`, onclick: (ev) => onDelete(ev.currentTarget) }, "Delete"));
}

function renderTenants() {
  const keysOf = (pred) => keys.filter(pred).length;
  root.querySelector("#tn-org-table").replaceChildren(orgs.length ? table("Organisations", ["Name", { label: "Teams", num: true }, { label: "Users", num: true }, { label: "" }],
    orgs.map((o) => el("tr", { "data-org": o.id },
      el("td", { "data-label": "Name" }, o.name),
      el("td", { class: "num", "data-label": "Teams" }, count(teams.filter((t) => t.org_id === o.id).length)),
      el("td", { class: "num", "data-label": "Users" }, count(users.filter((u) => u.org_id === o.id).length)),
      actions(`org ${o.name}`, (from) => openEdit("org", o, from), (from) => ask(from, `Delete org “${o.name}”?`,
        "Its quota and alert thresholds are deleted. Usage history stays (listable by its id). The API refuses while the org still has teams or users: delete or move them first.",
        () => remove(`/admin/orgs/${o.id}`))))), { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No organisations yet."));
  root.querySelector("#tn-team-table").replaceChildren(teams.length ? table("Teams", ["Name", "Org", { label: "Users", num: true }, { label: "" }],
    teams.map((t) => el("tr", { "data-team": t.id },
      el("td", { "data-label": "Name" }, t.name), el("td", { "data-label": "Org" }, orgName(t.org_id)),
      el("td", { class: "num", "data-label": "Users" }, count(users.filter((u) => u.team_id === t.id).length)),
      actions(`team ${t.name}`, (from) => openEdit("team", t, from), (from) => ask(from, `Delete team “${t.name}”?`,
        `Its ${users.filter((u) => u.team_id === t.id).length} user(s) stay in ${orgName(t.org_id)} without a team; their keys keep working, charged to user and org only. The team's quota and alert thresholds are deleted. Usage history stays.`,
        () => remove(`/admin/teams/${t.id}`))))), { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No teams yet."));
  root.querySelector("#tn-user-table").replaceChildren(users.length ? table("Users", ["Name", "Email", "Org", "Team", { label: "" }],
    users.map((u) => el("tr", { "data-user": u.id },
      el("td", { "data-label": "Name" }, u.name), el("td", { class: "wrap", "data-label": "Email" }, u.email || "—"),
      el("td", { "data-label": "Org" }, orgName(u.org_id)), el("td", { "data-label": "Team" }, teamName(u.team_id)),
      actions(`user ${u.name}`, (from) => openEdit("user", u, from), (from) => ask(from, `Delete user “${u.name}”?`,
        `Its API keys${keysOf((k) => k.user_id === u.id) ? ` (${keysOf((k) => k.user_id === u.id)} listed)` : ""} are deleted and stop working with the next snapshot, with their own budgets. The user's quota and alert thresholds are deleted. Usage history stays.`,
        () => remove(`/admin/users/${u.id}`))))), { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No users yet."));
}

async function loadKeys() {
  const q = new URLSearchParams({ limit: "500" });
  for (const [id, name] of [["tn-kf-org", "org_id"], ["tn-kf-team", "team_id"], ["tn-kf-user", "user_id"]]) {
    const v = root.querySelector(`#${id}`).value;
    if (v) q.set(name, v);
  }
  const prefix = root.querySelector("#tn-kf-prefix").value.trim();
  if (prefix) q.set("prefix", prefix);
  clearErrors(root.querySelector("#tn-kf"));
  try {
    keys = await listAll(`/admin/api-keys?${q}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    const rest = showApiErrors(e, { prefix: "tn-kf-prefix", org_id: "tn-kf-org", team_id: "tn-kf-team", user_id: "tn-kf-user" });
    notice(root.querySelector("#tn-error"), rest.join(" "));
    return;
  }
  root.querySelector("#tn-key-count").textContent = `${keys.length} key${keys.length === 1 ? "" : "s"}${q.size > 1 ? " (filtered)" : ""}.`;
  const now = Date.now();
  root.querySelector("#tn-key-table").replaceChildren(keys.length ? table("API keys", ["Name", "Prefix", "Owner", "Limits", "Status", "Created (UTC)", { label: "" }],
    keys.map((k) => {
      const grace = k.previous_prefix && k.previous_expires_at && new Date(k.previous_expires_at).getTime() > now;
      const expired = k.expires_at && new Date(k.expires_at).getTime() <= now;
      return el("tr", { "data-key": k.id, class: k.enabled ? "" : "disabled" },
        el("td", { "data-label": "Name" }, k.name || "—"),
        el("td", { class: "mono", "data-label": "Prefix" }, k.prefix + "…",
          grace ? el("div", { class: "muted small" }, `previous ${k.previous_prefix}… works until ${when(k.previous_expires_at, { utc: true })} UTC`) : null),
        el("td", { "data-label": "Owner" }, userName(k.user_id), el("div", { class: "muted small" }, `${teamName(k.team_id)} · ${orgName(k.org_id)}`)),
        el("td", { "data-label": "Limits" }, `${k.rpm_limit === "0" ? "∞" : count(k.rpm_limit)} rpm · ${k.tpm_limit === "0" ? "∞" : count(k.tpm_limit)} tpm`,
          el("div", { class: "muted small wrap" }, (k.allowed_models || []).length ? k.allowed_models.join(", ") : "every model")),
        el("td", { "data-label": "Status" }, el("span", { class: `badge ${k.enabled && !expired ? "badge-on" : "badge-off"}` }, !k.enabled ? "disabled" : expired ? "expired" : "enabled"),
          k.expires_at ? el("div", { class: "muted small" }, `expires ${when(k.expires_at, { utc: true })}`) : null,
          k.cost_disclosure === true || k.cost_disclosure === false ? el("div", { class: "muted small" }, k.cost_disclosure ? "cost shown" : "cost hidden") : null),
        el("td", { "data-label": "Created" }, when(k.created_at, { utc: true })),
        el("td", { class: "actions" }, ctx.readOnly ? "" : [
          el("button", { type: "button", class: "btn btn-small", "aria-label": `${k.enabled ? "Disable" : "Enable"} key ${k.prefix}`, onclick: () => toggle(k) }, k.enabled ? "Disable" : "Enable"),
          el("button", { type: "button", class: "btn btn-small", "aria-label": `Edit key ${k.prefix}`, onclick: (ev) => openKey(k, ev.currentTarget) }, "Edit"),
          el("button", { type: "button", class: "btn btn-small", "aria-label": `Rotate key ${k.prefix}`, onclick: (ev) => openRotate(k, ev.currentTarget) }, "Rotate"),
          el("button", { type: "button", class: "btn btn-small btn-danger-quiet", "aria-label": `Revoke key ${k.prefix}`,
            onclick: (ev) => ask(ev.currentTarget, `Revoke key ${k.prefix}…?`,
              `“${k.name || k.prefix}” of ${userName(k.user_id)} stops working at once on every data plane (with the next snapshot, within a second). Its own budget and alert thresholds are deleted. Its usage history stays, listable by key id ${k.id}.`,
              () => remove(`/admin/api-keys/${k.id}`), "Revoke") }, "Revoke")]));
    }), { cls: "data cards-narrow" }) : el("p", { class: "muted" }, q.size > 1 ? "No key matches these filters." : "No API keys yet."));
  renderTenants();
}

function showSecret(title, key) {
  const box = root.querySelector("#tn-secret-box");
  box.replaceChildren(el("p", {}, el("strong", {}, title), " Copy it now: it is not shown again."),
    el("code", { id: "tn-secret", class: "secret" }, key),
    el("button", { type: "button", class: "btn btn-small", onclick: () => navigator.clipboard?.writeText(key) }, "Copy"),
    " ", el("button", { type: "button", class: "btn btn-small btn-quiet", onclick: () => { box.hidden = true; box.replaceChildren(); } }, "Done"));
  box.hidden = false;
  box.querySelector("button").focus();
}

function digits(id, msg, max) {
  const v = root.querySelector(`#${id}`).value.trim() || "0";
  if (!/^\d{1,12}$/.test(v) || (max !== undefined && Number(v) > max)) { fieldError(id, msg); return null; }
  return v;
}

async function createKey() {
  const form = root.querySelector("#tn-key-form");
  clearErrors(form);
  notice(root.querySelector("#tn-error"), "");
  const user = root.querySelector("#tn-key-user").value;
  let bad = null;
  if (!user) { fieldError("tn-key-user", "Create a user first: every key belongs to one."); bad = bad || "tn-key-user"; }
  const rpm = digits("tn-key-rpm", "A whole number, 0 for unlimited.");
  if (rpm === null) bad = bad || "tn-key-rpm";
  const tpm = digits("tn-key-tpm", "A whole number, 0 for unlimited.");
  if (tpm === null) bad = bad || "tn-key-tpm";
  if (bad) { root.querySelector(`#${bad}`).focus(); return; }
  const models = root.querySelector("#tn-key-models").value.split(",").map((m) => m.trim()).filter(Boolean);
  const map = { user_id: "tn-key-user", name: "tn-key-name", allowed_models: "tn-key-models", rpm_limit: "tn-key-rpm", tpm_limit: "tn-key-tpm" };
  models.forEach((_, i) => { map[`allowed_models[${i}]`] = "tn-key-models"; });
  try {
    const { data } = await call("POST", "/admin/api-keys", { user_id: int(user), name: root.querySelector("#tn-key-name").value.trim(),
      allowed_models: models, rpm_limit: int(rpm), tpm_limit: int(tpm) });
    form.reset();
    await loadKeys();
    showSecret(`Key “${data.name || data.prefix}” created for ${userName(data.user_id)}.`, data.key);
  } catch (e) {
    notice(root.querySelector("#tn-error"), showApiErrors(e, map).join(" "));
  }
}

async function createTenant(kind) {
  const form = root.querySelector(`#tn-${kind}-form`);
  clearErrors(form);
  notice(root.querySelector("#tn-error"), "");
  const v = (f) => root.querySelector(`#tn-${kind}-${f}`).value.trim();
  if (!v("name")) { fieldError(`tn-${kind}-name`, "A name is required."); root.querySelector(`#tn-${kind}-name`).focus(); return; }
  let body = { name: v("name") };
  const map = { name: `tn-${kind}-name`, org_id: `tn-${kind}-org`, team_id: `tn-${kind}-team`, email: `tn-${kind}-email` };
  if (kind !== "org") {
    if (!v("org")) { fieldError(`tn-${kind}-org`, "Create an org first."); root.querySelector(`#tn-${kind}-org`).focus(); return; }
    body.org_id = int(v("org"));
  }
  if (kind === "user") {
    if (v("team")) body.team_id = int(v("team"));
    if (v("email")) body.email = v("email");
  }
  try {
    await call("POST", `/admin/${kind}s`, body);
    root.querySelector(`#tn-${kind}-name`).value = "";
    if (kind === "user") root.querySelector("#tn-user-email").value = "";
    await load();
    root.querySelector(`#tn-${kind}-name`).focus();
  } catch (e) {
    notice(root.querySelector("#tn-error"), showApiErrors(e, map).join(" "));
  }
}

function openEdit(kind, item, from) {
  editing = { kind, item, from };
  clearErrors(editDialog);
  notice(root.querySelector("#tn-edit-errors"), "");
  root.querySelector("#tn-edit-title").textContent = `Rename ${kind} “${item.name}”`;
  root.querySelector("#tn-edit-name").value = item.name;
  const userFields = root.querySelector("#tn-edit-user-fields");
  userFields.hidden = kind !== "user";
  if (kind === "user") {
    root.querySelector("#tn-edit-title").textContent = `Edit user “${item.name}”`;
    root.querySelector("#tn-edit-email").value = item.email || "";
    fillSelect(root.querySelector("#tn-edit-team"), teams.filter((t) => t.org_id === item.org_id), (t) => t.name, { none: "No team" });
    root.querySelector("#tn-edit-team").value = item.team_id ? String(item.team_id) : "";
  }
  editDialog.showModal();
  root.querySelector("#tn-edit-name").focus();
}

async function saveEdit() {
  clearErrors(editDialog);
  notice(root.querySelector("#tn-edit-errors"), "");
  const name = root.querySelector("#tn-edit-name").value.trim();
  if (!name) { fieldError("tn-edit-name", "A name is required."); root.querySelector("#tn-edit-name").focus(); return; }
  const { kind, item } = editing;
  const body = { name };
  if (kind === "user") {
    body.email = root.querySelector("#tn-edit-email").value.trim();
    const team = root.querySelector("#tn-edit-team").value;
    body.team_id = team ? int(team) : null;
  }
  try {
    await call("PUT", `/admin/${kind}s/${item.id}`, body);
    editDialog.close();
    await load();
    root.querySelector(`tr[data-${kind}="${item.id}"] button`)?.focus(); // the row was redrawn
  } catch (e) {
    notice(root.querySelector("#tn-edit-errors"), showApiErrors(e, { name: "tn-edit-name", email: "tn-edit-email", team_id: "tn-edit-team" }).join(" "));
  }
}

// A datetime-local value ("2026-12-31T18:00") in the browser's zone for an instant, and back.
function localInput(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const pad = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function openKey(k, from) {
  editingKey = { key: k, from };
  clearErrors(keyDialog);
  notice(root.querySelector("#tn-ke-errors"), "");
  root.querySelector("#tn-ke-title").textContent = `Edit key ${k.prefix}…`;
  root.querySelector("#tn-ke-name").value = k.name || "";
  root.querySelector("#tn-ke-models").value = (k.allowed_models || []).join(", ");
  root.querySelector("#tn-ke-rpm").value = k.rpm_limit;
  root.querySelector("#tn-ke-tpm").value = k.tpm_limit;
  root.querySelector("#tn-ke-expires").value = localInput(k.expires_at);
  root.querySelector("#tn-ke-cost").value = k.cost_disclosure === true ? "true" : k.cost_disclosure === false ? "false" : "";
  keyDialog.showModal();
  root.querySelector("#tn-ke-name").focus();
}

async function saveKey() {
  clearErrors(keyDialog);
  notice(root.querySelector("#tn-ke-errors"), "");
  let bad = null;
  const rpm = digits("tn-ke-rpm", "A whole number, 0 for unlimited.");
  if (rpm === null) bad = bad || "tn-ke-rpm";
  const tpm = digits("tn-ke-tpm", "A whole number, 0 for unlimited.");
  if (tpm === null) bad = bad || "tn-ke-tpm";
  const exp = root.querySelector("#tn-ke-expires").value;
  if (exp && Number.isNaN(new Date(exp).getTime())) { fieldError("tn-ke-expires", "A date and time, or empty for never."); bad = bad || "tn-ke-expires"; }
  if (bad) { root.querySelector(`#${bad}`).focus(); return; }
  const models = root.querySelector("#tn-ke-models").value.split(",").map((m) => m.trim()).filter(Boolean);
  const map = { name: "tn-ke-name", allowed_models: "tn-ke-models", rpm_limit: "tn-ke-rpm", tpm_limit: "tn-ke-tpm", expires_at: "tn-ke-expires",
    cost_disclosure: "tn-ke-cost" };
  models.forEach((_, i) => { map[`allowed_models[${i}]`] = "tn-ke-models"; });
  const k = editingKey.key;
  try {
    await call("PATCH", `/admin/api-keys/${k.id}`, { name: root.querySelector("#tn-ke-name").value.trim(), allowed_models: models,
      rpm_limit: int(rpm), tpm_limit: int(tpm), expires_at: exp ? new Date(exp).toISOString() : null,
      cost_disclosure: { "": null, true: true, false: false }[root.querySelector("#tn-ke-cost").value] });
    keyDialog.close();
    await loadKeys();
    root.querySelector(`tr[data-key="${k.id}"] button[aria-label^="Edit key"]`)?.focus(); // the row was redrawn
  } catch (e) {
    notice(root.querySelector("#tn-ke-errors"), showApiErrors(e, map).join(" "));
  }
}

function openRotate(k, from) {
  rotating = { key: k, from };
  clearErrors(rotateDialog);
  notice(root.querySelector("#tn-rotate-errors"), "");
  root.querySelector("#tn-rotate-title").textContent = `Rotate key ${k.prefix}…`;
  root.querySelector("#tn-rotate-text").textContent = `“${k.name || k.prefix}” gets a new secret, shown once; it keeps its id, owner, limits and usage history.`;
  root.querySelector("#tn-rotate-grace").value = "0";
  rotateDialog.showModal();
  root.querySelector("#tn-rotate-grace").focus();
}

async function rotate() {
  clearErrors(rotateDialog);
  notice(root.querySelector("#tn-rotate-errors"), "");
  const mins = digits("tn-rotate-grace", `Whole minutes from 0 to ${count(MAX_GRACE / 60)}.`, MAX_GRACE / 60);
  if (mins === null) { root.querySelector("#tn-rotate-grace").focus(); return; }
  const k = rotating.key;
  try {
    const { data } = await call("POST", `/admin/api-keys/${k.id}/rotate`, { grace_seconds: int(String(Number(mins) * 60)) });
    rotateDialog.close();
    await loadKeys();
    showSecret(`Key “${data.name || data.prefix}” rotated.${data.previous_expires_at ? ` The old key (${data.previous_prefix}…) works until ${when(data.previous_expires_at, { utc: true })} UTC.` : " The old key stops with the next snapshot."}`, data.key);
  } catch (e) {
    notice(root.querySelector("#tn-rotate-errors"), showApiErrors(e, { grace_seconds: "tn-rotate-grace" }).join(" "));
  }
}

async function toggle(k) {
  notice(root.querySelector("#tn-error"), "");
  try {
    await call("PATCH", `/admin/api-keys/${k.id}`, { enabled: !k.enabled });
    await loadKeys();
    root.querySelector(`tr[data-key="${k.id}"] td.actions button`)?.focus();
  } catch (e) {
    notice(root.querySelector("#tn-error"), errorText(e));
  }
}

function ask(from, title, text, run, okLabel = "Delete") {
  pending = { from, run };
  root.querySelector("#tn-confirm-title").textContent = title;
  root.querySelector("#tn-confirm-text").textContent = text;
  root.querySelector("#tn-confirm-ok").textContent = okLabel;
  confirmDialog.returnValue = "";
  confirmDialog.showModal();
  root.querySelector("#tn-confirm-cancel").focus();
}

async function remove(path) {
  notice(root.querySelector("#tn-error"), "");
  try {
    await call("DELETE", path);
    await load();
    root.querySelector("#tenants-title").setAttribute("tabindex", "-1");
    root.querySelector("#tenants-title").focus(); // the row and its button are gone
  } catch (e) {
    notice(root.querySelector("#tn-error"), errorText(e));
  }
}
