// Providers: each provider's credentials (secrets are write-only: sent once, never shown) and its
// routing table as a grid of (operation, kind) cells with edit, delete and reset to the channel's defaults.
import { call, listAll, ApiError } from "../api.js";
import { int } from "../wire.js";
import { el, field, fieldError, clearErrors, showApiErrors, notice, when, table, errorText } from "../ui.js";

const IMPLS = ["passthrough", "transform_to", "local", "unsupported"];
let root, ctx, providers = [], current = null, rules = [], editing = null, cellDialog;

export function mount(section, c) {
  root = section;
  ctx = c;
  cellDialog = el("dialog", { id: "pv-cell", "aria-labelledby": "pv-cell-title" },
    el("form", { id: "pv-cell-form", novalidate: true },
      el("div", { class: "dialog-head" }, el("h2", { id: "pv-cell-title" }, "Routing cell")),
      el("div", { class: "dialog-body" },
        el("p", { id: "pv-cell-errors", class: "notice notice-error", role: "alert", hidden: true }),
        el("div", { class: "grid" },
          field("pv-impl", "Implementation", (() => { const s = el("select", {}); for (const i of IMPLS) s.append(el("option", { value: i }, i)); return s; })()),
          field("pv-dest-op", "Destination operation", el("input", { type: "text", autocomplete: "off", spellcheck: "false" }), { hint: "transform_to only; empty: the same operation" }),
          field("pv-dest-kind", "Destination kind", el("input", { type: "text", autocomplete: "off", spellcheck: "false" }), { hint: "transform_to only" })),
        el("div", { class: "field-check" }, el("input", { type: "checkbox", id: "pv-enabled" }), el("label", { for: "pv-enabled" }, "Enabled"))),
      el("div", { class: "dialog-actions" },
        el("button", { type: "button", class: "btn btn-danger-quiet", id: "pv-cell-delete", "data-mutates": true }, "Delete cell"),
        el("span", { class: "spacer" }),
        el("button", { type: "button", class: "btn", id: "pv-cell-cancel" }, "Cancel"),
        el("button", { type: "submit", class: "btn btn-primary", id: "pv-cell-save", "data-mutates": true }, "Save"))));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "providers-title" }, "Providers")),
    el("p", { id: "pv-readonly", class: "notice", role: "status", hidden: true }, "Read-only: this token has the viewer role."),
    el("div", { class: "filters" }, field("pv-provider", "Provider", el("select", {}))),
    el("p", { id: "pv-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("section", { class: "panel", "aria-labelledby": "pv-info-title" }, el("h2", { id: "pv-info-title" }, "Provider"), el("dl", { id: "pv-info", class: "detail" })),
    el("section", { class: "panel", "aria-labelledby": "pv-creds-title" },
      el("h2", { id: "pv-creds-title" }, "Credentials"),
      el("p", { class: "muted small" }, "Secrets are stored sealed and never shown again, here or in the API. To replace one, add the new credential, then delete the old."),
      el("div", { id: "pv-creds" }),
      el("form", { id: "pv-cred-form", class: "inline-form", "aria-label": "Add a credential", novalidate: true },
        field("pv-secret", "New secret (API key)", el("input", { type: "password", autocomplete: "off", spellcheck: "false" })),
        field("pv-weight", "Weight", el("input", { type: "text", inputmode: "numeric", value: "1", autocomplete: "off" })),
        el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Add credential")))),
    el("section", { class: "panel", "aria-labelledby": "pv-grid-title" },
      el("div", { class: "page-head" }, el("h2", { id: "pv-grid-title" }, "Routing table"),
        el("button", { type: "button", class: "btn", id: "pv-reset", "data-mutates": true }, "Reset to channel defaults")),
      el("p", { class: "muted small" }, "One cell per (operation, request kind): how this provider serves it. A missing cell means unsupported."),
      el("div", { id: "pv-grid" })),
    cellDialog);
  section.querySelector("#pv-provider").addEventListener("change", () => select(section.querySelector("#pv-provider").value));
  section.querySelector("#pv-cred-form").addEventListener("submit", (ev) => { ev.preventDefault(); addCredential(); });
  section.querySelector("#pv-reset").addEventListener("click", reset);
  section.querySelector("#pv-cell-form").addEventListener("submit", (ev) => { ev.preventDefault(); saveCell(); });
  section.querySelector("#pv-cell-cancel").addEventListener("click", () => cellDialog.close());
  section.querySelector("#pv-cell-delete").addEventListener("click", deleteCell);
  cellDialog.addEventListener("close", () => editing?.from?.focus());
}

export async function show(c) {
  ctx = c;
  root.querySelector("#pv-readonly").hidden = !ctx.readOnly;
  root.querySelector("#pv-cred-form").hidden = ctx.readOnly;
  for (const b of root.querySelectorAll("[data-mutates]")) b.hidden = ctx.readOnly;
  try {
    providers = await listAll("/admin/providers?limit=500");
    const sel = root.querySelector("#pv-provider");
    const keep = current ? current.id : (providers[0]?.id ?? "");
    sel.replaceChildren(...providers.map((p) => el("option", { value: p.id, selected: p.id === keep }, `${p.name} (${p.channel_type}, id ${p.id})`)));
    if (providers.length) await select(keep);
    else notice(root.querySelector("#pv-error"), "No providers yet: create one with POST /admin/providers.");
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) notice(root.querySelector("#pv-error"), errorText(e));
  }
}

async function select(id) {
  notice(root.querySelector("#pv-error"), "");
  const [{ data: p }, { data: r }] = await Promise.all([call("GET", `/admin/providers/${id}`), call("GET", `/admin/providers/${id}/routing-rules`)]);
  current = p;
  rules = r.items || [];
  root.querySelector("#pv-info").replaceChildren(...[["Name", p.name], ["Channel type", p.channel_type], ["Base URL", p.base_url],
    ["Enabled", p.enabled ? "yes" : "no"]].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  renderCredentials();
  renderGrid();
}

function renderCredentials() {
  const creds = current.credentials || [];
  root.querySelector("#pv-creds").replaceChildren(creds.length ? table("Credentials", ["Id", { label: "Weight", num: true }, "Enabled", "Added (UTC)", "Secret", { label: "" }],
    creds.map((c) => el("tr", {},
      el("td", { "data-label": "Id" }, c.id), el("td", { class: "num", "data-label": "Weight" }, c.weight),
      el("td", { "data-label": "Enabled" }, c.enabled ? "yes" : "no"), el("td", { "data-label": "Added" }, when(c.created_at, { utc: true })),
      el("td", { "data-label": "Secret", class: "muted" }, "•••• (write-only)"),
      el("td", { class: "actions" }, ctx.readOnly ? "" : el("button", { type: "button", class: "btn btn-small btn-danger-quiet",
        "aria-label": `Delete credential ${c.id}`, onclick: () => deleteCredential(c) }, "Delete")))),
    { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No credentials: requests to this provider fail until one is added."));
}

async function addCredential() {
  const form = root.querySelector("#pv-cred-form");
  clearErrors(form);
  const secret = root.querySelector("#pv-secret").value;
  const weight = root.querySelector("#pv-weight").value.trim();
  let bad = null;
  if (!secret) { fieldError("pv-secret", "Paste the provider's API key."); bad = bad || "pv-secret"; }
  if (!/^[1-9]\d{0,8}$/.test(weight)) { fieldError("pv-weight", "A whole number of at least 1."); bad = bad || "pv-weight"; }
  if (bad) { root.querySelector(`#${bad}`).focus(); return; }
  try {
    await call("POST", `/admin/providers/${current.id}/credentials`, { secret, weight: int(weight) });
    root.querySelector("#pv-secret").value = "";
    await select(current.id);
  } catch (e) {
    notice(root.querySelector("#pv-error"), showApiErrors(e, { secret: "pv-secret", weight: "pv-weight" }).join(" "));
  }
}

async function deleteCredential(c) {
  try {
    await call("DELETE", `/admin/credentials/${c.id}`);
    await select(current.id);
  } catch (e) {
    notice(root.querySelector("#pv-error"), errorText(e));
  }
}

function renderGrid() {
  const ops = [...new Set(rules.map((r) => r.operation))].sort();
  const kinds = [...new Set(rules.map((r) => r.kind))].sort();
  const at = new Map(rules.map((r) => [`${r.operation}|${r.kind}`, r]));
  if (!rules.length) {
    root.querySelector("#pv-grid").replaceChildren(el("p", { class: "muted" }, "No cells. Reset restores the channel's defaults."));
    return;
  }
  const head = el("tr", {}, el("th", { scope: "col" }, "Operation \\ kind"), ...kinds.map((k) => el("th", { scope: "col" }, k)));
  const body = ops.map((op) => el("tr", {}, el("th", { scope: "row" }, op), ...kinds.map((k) => {
    const r = at.get(`${op}|${k}`);
    if (!r) return el("td", { class: "cell-empty", "data-label": k }, "—");
    const label = r.implementation === "transform_to" ? `→ ${r.dest_operation && r.dest_operation !== op ? r.dest_operation + " " : ""}${r.dest_kind ?? "?"}` : r.implementation;
    return el("td", { "data-label": k }, el("button", { type: "button", class: `cell cell-${r.implementation}${r.enabled ? "" : " cell-off"}`,
      "data-cell": `${op}|${k}`, "aria-label": `${op} with ${k}: ${r.implementation}${r.enabled ? "" : " (disabled)"}. Edit`,
      onclick: (ev) => openCell(r, ev.currentTarget) }, label, r.enabled ? "" : " (off)"));
  })));
  root.querySelector("#pv-grid").replaceChildren(el("div", { class: "table-wrap grid-wrap", tabindex: "0", role: "region", "aria-label": "Routing cells (scrolls sideways)" },
    el("table", { class: "data grid-table" }, el("caption", { class: "visually-hidden" }, "Routing cells"), el("thead", {}, head), el("tbody", {}, body))));
}

function openCell(r, from) {
  editing = { rule: r, from };
  clearErrors(cellDialog);
  notice(root.querySelector("#pv-cell-errors"), "");
  root.querySelector("#pv-cell-title").textContent = `${r.operation} · ${r.kind}`;
  root.querySelector("#pv-impl").value = r.implementation;
  root.querySelector("#pv-dest-op").value = r.dest_operation ?? "";
  root.querySelector("#pv-dest-kind").value = r.dest_kind ?? "";
  root.querySelector("#pv-enabled").checked = !!r.enabled;
  for (const id of ["pv-impl", "pv-dest-op", "pv-dest-kind", "pv-enabled"]) root.querySelector(`#${id}`).disabled = ctx.readOnly;
  cellDialog.showModal();
  root.querySelector("#pv-impl").focus();
}

async function saveCell() {
  const r = editing.rule;
  clearErrors(cellDialog);
  const impl = root.querySelector("#pv-impl").value;
  const destOp = root.querySelector("#pv-dest-op").value.trim();
  const destKind = root.querySelector("#pv-dest-kind").value.trim();
  if (impl === "transform_to" && !destKind) { fieldError("pv-dest-kind", "transform_to needs the kind to send upstream."); root.querySelector("#pv-dest-kind").focus(); return; }
  const rule = { id: int(r.id), provider_id: int(r.provider_id), operation: r.operation, kind: r.kind, implementation: impl,
    dest_operation: impl === "transform_to" && destOp ? destOp : null, dest_kind: impl === "transform_to" ? destKind : null,
    sort_order: int(r.sort_order), enabled: root.querySelector("#pv-enabled").checked };
  try {
    await call("PUT", `/admin/providers/${current.id}/routing-rules`, { rules: [rule] });
    cellDialog.close();
    await select(current.id);
  } catch (e) {
    const rest = showApiErrors(e, { implementation: "pv-impl", dest_operation: "pv-dest-op", dest_kind: "pv-dest-kind" });
    notice(root.querySelector("#pv-cell-errors"), rest.join(" "));
  }
}

async function deleteCell() {
  const r = editing.rule;
  try {
    await call("DELETE", `/admin/providers/${current.id}/routing-rules/${encodeURIComponent(r.operation)}/${encodeURIComponent(r.kind)}`);
    cellDialog.close();
    await select(current.id);
  } catch (e) {
    notice(root.querySelector("#pv-cell-errors"), errorText(e));
  }
}

async function reset() {
  try {
    await call("POST", `/admin/providers/${current.id}/routing-rules/reset`);
    await select(current.id);
  } catch (e) {
    notice(root.querySelector("#pv-error"), errorText(e));
  }
}
