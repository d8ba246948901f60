// Routes: logical model names (the route name and its aliases) and their candidates (provider, upstream
// model, priority, weight), created and edited in one dialog; delete asks first.
import { call, listAll, ApiError } from "../api.js";
import { int } from "../wire.js";
import { el, field, fieldError, clearErrors, showApiErrors, notice, table, errorText } from "../ui.js";

let root, ctx, providers = [], editing = null, dialog, confirmDialog, pendingDelete = null;

export function mount(section, c) {
  root = section;
  ctx = c;
  dialog = el("dialog", { id: "rt-dialog", "aria-labelledby": "rt-dialog-title" },
    el("form", { id: "rt-form", novalidate: true },
      el("div", { class: "dialog-head" }, el("h2", { id: "rt-dialog-title" }, "Route")),
      el("div", { class: "dialog-body" },
        el("p", { id: "rt-form-errors", class: "notice notice-error", role: "alert", hidden: true }),
        el("div", { class: "grid grid-wide" },
          field("rt-name", "Name (the model clients ask for)", el("input", { type: "text", autocomplete: "off", spellcheck: "false", required: true })),
          field("rt-strategy", "Strategy", el("select", {}, el("option", { value: "priority" }, "priority (lowest number first)"), el("option", { value: "weighted" }, "weighted (by weight within a priority)"))),
          field("rt-aliases", "Aliases (comma-separated)", el("input", { type: "text", autocomplete: "off", spellcheck: "false" }), { wide: true })),
        el("div", { class: "field-check" }, el("input", { type: "checkbox", id: "rt-enabled" }), el("label", { for: "rt-enabled" }, "Enabled")),
        el("fieldset", {}, el("legend", {}, "Members"), el("ol", { id: "rt-members", class: "member-list" }),
          el("button", { type: "button", class: "btn btn-small", id: "rt-add-member" }, "Add member"))),
      el("div", { class: "dialog-actions" },
        el("button", { type: "button", class: "btn", id: "rt-cancel" }, "Cancel"),
        el("button", { type: "submit", class: "btn btn-primary", id: "rt-save" }, "Save route"))));
  confirmDialog = el("dialog", { id: "rt-confirm", "aria-labelledby": "rt-confirm-title" },
    el("form", { method: "dialog", class: "dialog-body" },
      el("h2", { id: "rt-confirm-title" }, "Delete route?"), el("p", { id: "rt-confirm-text" }),
      el("div", { class: "dialog-actions" },
        el("button", { type: "submit", value: "cancel", class: "btn", id: "rt-confirm-cancel" }, "Cancel"),
        el("button", { type: "submit", value: "delete", class: "btn btn-danger", id: "rt-confirm-delete" }, "Delete"))));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "routes-title" }, "Routes"),
      el("div", { class: "page-actions" }, el("button", { type: "button", class: "btn btn-primary", id: "rt-new", "data-mutates": true }, "New route"))),
    el("p", { id: "rt-readonly", class: "notice", role: "status", hidden: true }, "Read-only: this token has the viewer role."),
    el("p", { id: "rt-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("div", { id: "rt-table" }), dialog, confirmDialog);
  section.querySelector("#rt-new").addEventListener("click", (ev) => open(null, ev.currentTarget));
  section.querySelector("#rt-add-member").addEventListener("click", () => addMember({ priority: "0", weight: "1", enabled: true }, true));
  section.querySelector("#rt-cancel").addEventListener("click", () => dialog.close());
  section.querySelector("#rt-form").addEventListener("submit", (ev) => { ev.preventDefault(); save(); });
  dialog.addEventListener("close", () => editing?.from?.focus());
  confirmDialog.addEventListener("close", () => {
    if (confirmDialog.open) return;
    const p = pendingDelete;
    pendingDelete = null;
    if (p && confirmDialog.returnValue === "delete") remove(p.route);
    p?.from?.focus();
  });
}

export async function show(c) {
  ctx = c;
  root.querySelector("#rt-readonly").hidden = !ctx.readOnly;
  root.querySelector("#rt-new").hidden = ctx.readOnly;
  await load();
}

async function load() {
  try {
    providers = await listAll("/admin/providers?limit=500");
    const routes = await listAll("/admin/routes?limit=500");
    const pname = (id) => providers.find((p) => p.id === id)?.name ?? `provider ${id}`;
    root.querySelector("#rt-table").replaceChildren(routes.length ? table("Routes", ["Name", "Aliases", "Strategy", "Members (priority · weight)", "Enabled", { label: "" }],
      routes.map((r) => el("tr", { "data-route": r.id },
        el("td", { class: "mono wrap", "data-label": "Name" }, r.name),
        el("td", { class: "mono wrap", "data-label": "Aliases" }, (r.aliases || []).join(", ") || "—"),
        el("td", { "data-label": "Strategy" }, r.strategy),
        el("td", { "data-label": "Members" }, el("ul", { class: "plain-list" }, (r.members || []).map((m) =>
          el("li", {}, `${pname(m.provider_id)} → ${m.upstream_model_id} (${m.priority} · ${m.weight})${m.enabled ? "" : " off"}`)))),
        el("td", { "data-label": "Enabled" }, r.enabled ? "yes" : "no"),
        el("td", { class: "actions" },
          el("button", { type: "button", class: "btn btn-small", "aria-label": `${ctx.readOnly ? "View" : "Edit"} route ${r.name}`, onclick: (ev) => open(r, ev.currentTarget) }, ctx.readOnly ? "View" : "Edit"),
          ctx.readOnly ? "" : el("button", { type: "button", class: "btn btn-small btn-danger-quiet", "aria-label": `Delete route ${r.name}`,
            onclick: (ev) => ask(r, ev.currentTarget) }, "Delete")))),
    { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No routes yet."));
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) notice(root.querySelector("#rt-error"), errorText(e));
  }
}

function addMember(m, focus) {
  const list = root.querySelector("#rt-members");
  const i = list.children.length;
  const prov = el("select", {}, providers.map((p) => el("option", { value: p.id, selected: p.id === m.provider_id }, `${p.name} (id ${p.id})`)));
  const enabled = el("input", { type: "checkbox", id: `rt-m${i}-enabled` });
  enabled.checked = m.enabled !== false;
  const li = el("li", { class: "member" },
    el("div", { class: "grid" },
      field(`rt-m${i}-provider_id`, `Member ${i + 1}: provider`, prov),
      field(`rt-m${i}-upstream_model_id`, "Upstream model", el("input", { type: "text", value: m.upstream_model_id ?? "", autocomplete: "off", spellcheck: "false" })),
      field(`rt-m${i}-priority`, "Priority", el("input", { type: "text", inputmode: "numeric", value: m.priority ?? "0", autocomplete: "off" })),
      field(`rt-m${i}-weight`, "Weight", el("input", { type: "text", inputmode: "numeric", value: m.weight ?? "1", autocomplete: "off" }))),
    el("div", { class: "tier-actions" },
      el("span", { class: "field-check" }, enabled, el("label", { for: `rt-m${i}-enabled` }, "Enabled")),
      el("button", { type: "button", class: "btn btn-small btn-danger-quiet", "aria-label": `Remove member ${i + 1}`, onclick: () => { li.remove(); } }, "Remove")));
  list.append(li);
  if (focus) prov.focus();
}

function open(r, from) {
  editing = { route: r, from };
  clearErrors(dialog);
  notice(root.querySelector("#rt-form-errors"), "");
  root.querySelector("#rt-dialog-title").textContent = r ? `Route ${r.name}` : "New route";
  root.querySelector("#rt-name").value = r?.name ?? "";
  root.querySelector("#rt-strategy").value = r?.strategy ?? "priority";
  root.querySelector("#rt-aliases").value = (r?.aliases || []).join(", ");
  root.querySelector("#rt-enabled").checked = r ? !!r.enabled : true;
  root.querySelector("#rt-members").replaceChildren();
  for (const m of (r?.members || [{ priority: "0", weight: "1", enabled: true }])) addMember(m, false);
  for (const e of dialog.querySelectorAll("input, select, #rt-add-member, #rt-save")) e.disabled = ctx.readOnly;
  dialog.showModal();
  root.querySelector("#rt-name").focus();
}

async function save() {
  clearErrors(dialog);
  notice(root.querySelector("#rt-form-errors"), "");
  const v = (id) => root.querySelector(`#${id}`).value.trim();
  let bad = null;
  const fail = (id, msg) => { fieldError(id, msg); bad = bad || id; };
  if (!v("rt-name")) fail("rt-name", "The model name clients send.");
  const members = [];
  const fieldIDs = { name: "rt-name", strategy: "rt-strategy", aliases: "rt-aliases" };
  [...root.querySelectorAll("#rt-members > li")].forEach((li, i) => {
    const id = (f) => li.querySelector(`[id$="-${f}"]`).id;
    const get = (f) => li.querySelector(`[id$="-${f}"]`).value.trim();
    if (!get("upstream_model_id")) fail(id("upstream_model_id"), "The model name the provider expects.");
    if (!/^-?\d{1,9}$/.test(get("priority"))) fail(id("priority"), "A whole number.");
    if (!/^\d{1,9}$/.test(get("weight"))) fail(id("weight"), "A whole number, 0 or more.");
    for (const f of ["provider_id", "upstream_model_id", "priority", "weight"]) fieldIDs[`members[${i}].${f}`] = id(f);
    members.push({ provider_id: get("provider_id") ? int(get("provider_id")) : null, upstream_model_id: get("upstream_model_id"),
      priority: /^-?\d+$/.test(get("priority")) ? int(get("priority")) : 0, weight: /^\d+$/.test(get("weight")) ? int(get("weight")) : 0,
      enabled: li.querySelector(`[id$="-enabled"]`).checked });
  });
  if (bad) { root.querySelector(`#${bad}`).focus(); return; }
  const aliases = v("rt-aliases").split(",").map((a) => a.trim()).filter(Boolean);
  const body = { name: v("rt-name"), strategy: v("rt-strategy"), enabled: root.querySelector("#rt-enabled").checked, aliases, members };
  aliases.forEach((_, i) => { fieldIDs[`aliases[${i}]`] = "rt-aliases"; });
  try {
    if (editing.route) await call("PUT", `/admin/routes/${editing.route.id}`, body);
    else await call("POST", "/admin/routes", body);
    dialog.close();
    await load();
  } catch (e) {
    notice(root.querySelector("#rt-form-errors"), showApiErrors(e, fieldIDs).join(" "));
  }
}

function ask(r, from) {
  pendingDelete = { route: r, from };
  root.querySelector("#rt-confirm-text").textContent = `Clients asking for “${r.name}” or its aliases get an unknown-model error at once.`;
  confirmDialog.returnValue = "";
  confirmDialog.showModal();
  root.querySelector("#rt-confirm-cancel").focus();
}

async function remove(r) {
  try {
    await call("DELETE", `/admin/routes/${r.id}`);
    await load();
  } catch (e) {
    notice(root.querySelector("#rt-error"), errorText(e));
  }
}
