// Budgets: every limited quota by its current burn; one scope's quota (limit, period, time zone, RPM/TPM)
// and alert thresholds, its current period and closed periods; webhook endpoints (the whsec_ secret shown
// once); recent alert events with their delivery state. docs/budgets.md, docs/admin-api.md ("Quotas",
// "Budget alerts"). Money stays exact decimal text; Number() only sizes the burn bars (burnBar).
import { call, listAll, ApiError } from "../api.js";
import { int } from "../wire.js";
import { el, field, fieldError, clearErrors, showApiErrors, notice, when, table, errorText, count, groupDigits, burnBar } from "../ui.js";
import { isDecimal } from "../decimal.js";

let root, ctx, targets = { org: [], team: [], user: [], key: [] }, webhooks = [], confirmDialog, pending = null;

const SCOPES = [["org", "Org"], ["team", "Team"], ["user", "User"], ["key", "API key"]];

/** "2026-11-01 00:00" in the quota's own zone (period boundaries are local midnights there). */
function inZone(iso, zone) {
  try {
    return new Intl.DateTimeFormat("sv-SE", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit" }).format(new Date(iso));
  } catch {
    return when(iso, { utc: true }) + " UTC";
  }
}

/** "$12.50" from an exact decimal string: the digits unchanged, thousands grouped. */
const money = (s) => (s === null || s === undefined ? "unlimited" : "$" + groupDigits(s));

export function mount(section, c) {
  root = section;
  ctx = c;
  confirmDialog = el("dialog", { id: "bg-confirm", class: "confirm-dialog", "aria-labelledby": "bg-confirm-title", "aria-describedby": "bg-confirm-text" },
    el("form", { method: "dialog", class: "dialog-body" },
      el("h2", { id: "bg-confirm-title" }, "Delete webhook endpoint?"), el("p", { id: "bg-confirm-text" }),
      el("div", { class: "dialog-actions" },
        el("button", { type: "submit", value: "cancel", class: "btn", id: "bg-confirm-cancel" }, "Cancel"),
        el("button", { type: "submit", value: "ok", class: "btn btn-danger", id: "bg-confirm-ok" }, "Delete"))));
  const zones = el("datalist", { id: "bg-zones" }, (Intl.supportedValuesOf ? Intl.supportedValuesOf("timeZone") : ["UTC"]).map((z) => el("option", { value: z })));
  const panel = (id, title, ...kids) => el("section", { class: "panel", "aria-labelledby": `${id}-title` }, el("h2", { id: `${id}-title` }, title), ...kids);
  const periodSel = el("select", {}, ["none", "daily", "weekly", "monthly"].map((p) => el("option", { value: p }, p === "none" ? "none (lifetime)" : p)));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "budgets-title" }, "Budgets"),
      el("div", { class: "page-actions" }, el("button", { type: "button", class: "btn btn-quiet", id: "bg-reload", onclick: () => load() }, "Reload"))),
    el("p", { id: "bg-readonly", class: "notice", role: "status", hidden: true }, "Read-only: this token has the viewer role."),
    el("p", { id: "bg-error", class: "notice notice-error", role: "alert", hidden: true }),
    panel("bg-burn", "Current burn",
      el("p", { class: "muted small" }, "Every budget with a limit, by the share of its limit spent in its current period. Amounts are exact."),
      el("div", { id: "bg-burn-table" })),
    panel("bg-edit", "Set a budget",
      el("form", { id: "bg-form", class: "bg-form", "aria-label": "Budget", novalidate: true },
        field("bg-scope", "Scope", el("select", {}, SCOPES.map(([v, l]) => el("option", { value: v }, l)))),
        field("bg-target", "Applies to", el("select", {})),
        field("bg-limit", "Limit per period (USD)", el("input", { type: "text", inputmode: "decimal", autocomplete: "off", spellcheck: "false", placeholder: "empty = unlimited" })),
        field("bg-period", "Period", periodSel),
        field("bg-zone", "Time zone", el("input", { type: "text", autocomplete: "off", spellcheck: "false", list: "bg-zones", value: "UTC" }), { hint: "Where days, weeks (Monday) and months start." }),
        field("bg-rpm", "Scope requests / min", el("input", { type: "text", inputmode: "numeric", autocomplete: "off", value: "0" }), { hint: "All its keys together; 0 = unlimited" }),
        field("bg-tpm", "Scope tokens / min", el("input", { type: "text", inputmode: "numeric", autocomplete: "off", value: "0" }), { hint: "0 = unlimited" }),
        field("bg-thresholds", "Alert thresholds (%)", el("input", { type: "text", autocomplete: "off", spellcheck: "false", placeholder: "50, 80, 100" }), { hint: "Comma-separated percents of the limit, 1 to 1000; one alert per threshold per period." }),
        el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary", id: "bg-save" }, "Save budget"))),
      zones,
      el("p", { id: "bg-saved", class: "notice notice-ok", role: "status", hidden: true }),
      el("div", { id: "bg-current" }),
      el("h3", { id: "bg-periods-title" }, "Closed periods"),
      el("div", { id: "bg-periods" })),
    panel("bg-hooks", "Webhook endpoints",
      el("p", { class: "muted small" }, "Every alert event is delivered to every endpoint, signed (Standard Webhooks, HMAC-SHA256) with the endpoint's secret."),
      el("form", { id: "bg-hook-form", class: "inline-form tn-form mutating", "aria-label": "New webhook endpoint", novalidate: true },
        field("bg-hook-url", "URL", el("input", { type: "url", autocomplete: "off", spellcheck: "false", placeholder: "receiver URL" })),
        field("bg-hook-desc", "Description (optional)", el("input", { type: "text", autocomplete: "off" })),
        el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Add endpoint"))),
      el("div", { id: "bg-hook-secret", class: "notice notice-ok", role: "status", hidden: true }),
      el("div", { id: "bg-hook-table" })),
    panel("bg-events", "Recent alert events",
      el("div", { id: "bg-event-table" })),
    confirmDialog);
  const on = (sel, ev, fn) => section.querySelector(sel).addEventListener(ev, fn);
  // Editing a field clears its error (the message stays until the operator acts on it).
  section.addEventListener("input", (ev) => { if (ev.target.id && ev.target.getAttribute("aria-invalid") === "true") fieldError(ev.target.id, ""); });
  on("#bg-scope", "change", () => { fillTargets(); loadScope(); });
  on("#bg-target", "change", () => loadScope());
  on("#bg-form", "submit", (ev) => { ev.preventDefault(); save(); });
  on("#bg-hook-form", "submit", (ev) => { ev.preventDefault(); createHook(); });
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
  root.querySelector("#bg-readonly").hidden = !ctx.readOnly;
  for (const f of root.querySelectorAll("form.mutating")) f.hidden = ctx.readOnly;
  for (const e of root.querySelectorAll("#bg-form input, #bg-form #bg-save")) e.disabled = ctx.readOnly;
  await load();
}

function targetLabel(scope, t) {
  if (scope === "key") return `${t.name || "(unnamed)"} · ${t.prefix}… (id ${t.id})`;
  return `${t.name} (id ${t.id})`;
}

function fillTargets(want) {
  const scope = root.querySelector("#bg-scope").value;
  const sel = root.querySelector("#bg-target");
  const cur = want !== undefined ? String(want) : sel.value;
  sel.replaceChildren(...targets[scope].map((t) => el("option", { value: t.id }, targetLabel(scope, t))));
  if ([...sel.options].some((o) => o.value === cur)) sel.value = cur;
  const isKey = scope === "key";
  for (const id of ["bg-rpm", "bg-tpm"]) {
    root.querySelector(`#${id}`).disabled = isKey || ctx.readOnly;
    root.querySelector(`#${id}-hint`).textContent = isKey ? "A key's own limits apply (Tenants and keys)." : "All its keys together; 0 = unlimited";
  }
}

// aria-busy is true while the page reloads (tests wait for it to settle).
async function load() {
  root.setAttribute("aria-busy", "true");
  try {
    await reload();
  } finally {
    root.setAttribute("aria-busy", "false");
  }
}

async function reload() {
  notice(root.querySelector("#bg-error"), "");
  try {
    const [orgs, teams, users, keys] = await Promise.all(["orgs", "teams", "users", "api-keys"].map((p) => listAll(`/admin/${p}?limit=500`)));
    targets = { org: orgs, team: teams, user: users, key: keys };
    fillTargets();
    await loadBurn();
    await loadHooks();
    await Promise.all([loadScope(), loadEvents()]);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) notice(root.querySelector("#bg-error"), errorText(e));
  }
}

async function loadBurn() {
  const { data } = await call("GET", "/admin/budget-burn?limit=500");
  const items = data.items || [];
  root.querySelector("#bg-burn-table").replaceChildren(items.length ? table("Budgets by burn", ["Scope", "Name", "Period", { label: "Spent", num: true }, { label: "Limit", num: true }, "Used", { label: "" }],
    items.map((b) => el("tr", { "data-quota": `${b.scope}/${b.scope_id}` },
      el("td", { "data-label": "Scope" }, b.scope), el("td", { class: "wrap", "data-label": "Name" }, b.name || `${b.scope} ${b.scope_id}`),
      el("td", { "data-label": "Period" }, b.period === "none" ? "lifetime" : `${b.period} (${b.time_zone})`,
        b.period_end ? el("div", { class: "muted small" }, `resets ${inZone(b.period_end, b.time_zone)}`) : null),
      el("td", { class: "num mono", "data-label": "Spent" }, money(b.cost_used)),
      el("td", { class: "num mono", "data-label": "Limit" }, money(b.cost_limit)),
      el("td", { "data-label": "Used" }, burnBar(b.percent, b.percent === undefined)),
      el("td", { class: "actions" }, el("button", { type: "button", class: "btn btn-small", "aria-label": `${ctx.readOnly ? "View" : "Edit"} budget of ${b.scope} ${b.name}`,
        onclick: () => pick(b.scope, b.scope_id) }, ctx.readOnly ? "View" : "Edit")))),
  { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No budget has a limit yet: set one below."));
}

function pick(scope, id) {
  root.querySelector("#bg-scope").value = scope;
  fillTargets(id);
  loadScope();
  root.querySelector("#bg-limit").focus();
}

function scopePath() {
  const scope = root.querySelector("#bg-scope").value;
  const id = root.querySelector("#bg-target").value;
  return id ? `/admin/quotas/${scope}/${id}` : "";
}

async function loadScope() {
  clearErrors(root.querySelector("#bg-form"));
  notice(root.querySelector("#bg-saved"), "");
  const path = scopePath();
  const cur = root.querySelector("#bg-current");
  const periods = root.querySelector("#bg-periods");
  if (!path) {
    cur.replaceChildren(el("p", { class: "muted" }, "Nothing to budget yet: create orgs, teams, users or keys first."));
    periods.replaceChildren();
    return;
  }
  try {
    const [q, a] = await Promise.all([call("GET", path), call("GET", `${path}/alerts`)]).then((r) => r.map((x) => x.data));
    root.querySelector("#bg-limit").value = q.cost_limit ?? "";
    root.querySelector("#bg-period").value = q.period;
    root.querySelector("#bg-zone").value = q.time_zone;
    root.querySelector("#bg-rpm").value = q.rpm_limit;
    root.querySelector("#bg-tpm").value = q.tpm_limit;
    root.querySelector("#bg-thresholds").value = (a.thresholds || []).join(", ");
    renderCurrent(q);
    if (q.period === "none") {
      periods.replaceChildren(el("p", { class: "muted" }, "A lifetime budget has no periods."));
      return;
    }
    const { data } = await call("GET", `${path}/periods?limit=24`);
    const closed = (data.items || []).filter((p) => p.closed);
    periods.replaceChildren(closed.length ? table("Closed periods", ["Period", { label: "Spent", num: true }, { label: "Limit", num: true }, { label: "Requests", num: true }, { label: "Adjustments", num: true }],
      closed.map((p) => el("tr", {},
        el("td", { "data-label": "Period" }, `${inZone(p.start, p.time_zone)} – ${inZone(p.end, p.time_zone)}`, el("div", { class: "muted small" }, `${p.period}, ${p.time_zone}`)),
        el("td", { class: "num mono", "data-label": "Spent" }, money(p.cost_used)),
        el("td", { class: "num mono", "data-label": "Limit" }, money(p.cost_limit)),
        el("td", { class: "num", "data-label": "Requests" }, count(p.requests)),
        el("td", { class: "num mono", "data-label": "Adjustments" }, p.adjustments === "0" ? "—" : "$" + groupDigits(p.adjustments)))),
    { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No closed period yet."));
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) notice(root.querySelector("#bg-error"), errorText(e));
  }
}

function renderCurrent(q) {
  const cur = root.querySelector("#bg-current");
  const row = targets[q.scope].find((t) => String(t.id) === String(q.scope_id));
  const who = row ? targetLabel(q.scope, row) : `${q.scope} ${q.scope_id}`;
  const periodText = q.period === "none" ? "since the budget was created" : `${inZone(q.period_start, q.time_zone)} – ${inZone(q.period_end, q.time_zone)} (${q.time_zone})`;
  let bar = null;
  if (q.cost_limit !== null && q.cost_limit !== undefined) {
    // The share is shown from the burn list's exact percent when the scope is in it; otherwise only the amounts.
    const b = root.querySelector(`#bg-burn-table tr[data-quota="${q.scope}/${q.scope_id}"] .burn-text`);
    if (b) bar = burnBar(b.textContent.replace(" %", ""), b.textContent === "limit 0");
  }
  cur.replaceChildren(el("div", { class: "bg-current", id: "bg-current-box" },
    el("p", {}, el("strong", {}, who), " — ", q.period === "none" ? "lifetime budget" : `${q.period} budget`),
    el("dl", { class: "detail" },
      el("dt", {}, "Current period"), el("dd", {}, periodText),
      el("dt", {}, "Spent"), el("dd", { class: "mono", id: "bg-current-spent" }, money(q.cost_used)),
      el("dt", {}, "Limit"), el("dd", { class: "mono", id: "bg-current-limit" }, money(q.cost_limit)),
      q.requests !== undefined ? [el("dt", {}, "Requests"), el("dd", {}, count(q.requests))] : null,
      el("dt", {}, "Lifetime spend"), el("dd", { class: "mono" }, money(q.lifetime_cost_used))),
    bar));
}

async function save() {
  const form = root.querySelector("#bg-form");
  clearErrors(form);
  notice(root.querySelector("#bg-saved"), "");
  const path = scopePath();
  const v = (id) => root.querySelector(`#${id}`).value.trim();
  let bad = null;
  const fail = (id, msg) => { fieldError(id, msg); bad = bad || id; };
  if (!path) fail("bg-target", "Choose what the budget applies to.");
  if (v("bg-limit") && !isDecimal(v("bg-limit"))) fail("bg-limit", "Dollars as a plain decimal (12.50), or empty for unlimited.");
  if (!v("bg-zone")) fail("bg-zone", "An IANA time zone such as Europe/Paris (UTC by default).");
  const isKey = root.querySelector("#bg-scope").value === "key";
  for (const id of ["bg-rpm", "bg-tpm"]) if (!isKey && !/^\d{1,12}$/.test(v(id) || "0")) fail(id, "A whole number, 0 for unlimited.");
  const th = v("bg-thresholds") ? v("bg-thresholds").split(",").map((s) => s.trim()) : [];
  if (th.some((t) => !/^\d{1,4}$/.test(t) || Number(t) < 1 || Number(t) > 1000)) fail("bg-thresholds", "Whole percents from 1 to 1000, separated by commas, such as 50, 80, 100.");
  else if (new Set(th.map(Number)).size !== th.length) fail("bg-thresholds", "Each threshold once.");
  else if (th.length > 16) fail("bg-thresholds", "At most 16 thresholds.");
  if (bad) { root.querySelector(`#${bad}`).focus(); return; }
  const body = { cost_limit: v("bg-limit") || null, period: v("bg-period"), time_zone: v("bg-zone") };
  if (!isKey) { body.rpm_limit = int(v("bg-rpm") || "0"); body.tpm_limit = int(v("bg-tpm") || "0"); }
  const map = { cost_limit: "bg-limit", period: "bg-period", time_zone: "bg-zone", rpm_limit: "bg-rpm", tpm_limit: "bg-tpm", thresholds: "bg-thresholds" };
  th.forEach((_, i) => { map[`thresholds[${i}]`] = "bg-thresholds"; });
  try {
    await call("PUT", path, body);
    await call("PUT", `${path}/alerts`, { thresholds: th.map((t) => int(t)) });
    await loadBurn();
    await loadScope();
    notice(root.querySelector("#bg-saved"), "Budget saved. Data planes enforce it from the next snapshot.");
  } catch (e) {
    const rest = showApiErrors(e, map);
    notice(root.querySelector("#bg-error"), rest.join(" "));
  }
}

async function loadHooks() {
  webhooks = await listAll("/admin/webhooks");
  root.querySelector("#bg-hook-table").replaceChildren(webhooks.length ? table("Webhook endpoints", ["URL", "Description", "Created (UTC)", { label: "" }],
    webhooks.map((w) => el("tr", { "data-webhook": w.id },
      el("td", { class: "mono wrap", "data-label": "URL" }, w.url), el("td", { "data-label": "Description" }, w.description || "—"),
      el("td", { "data-label": "Created" }, when(w.created_at, { utc: true })),
      el("td", { class: "actions" }, ctx.readOnly ? "" : el("button", { type: "button", class: "btn btn-small btn-danger-quiet", "aria-label": `Delete webhook endpoint ${w.url}`,
        onclick: (ev) => askHook(w, ev.currentTarget) }, "Delete")))),
  { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No webhook endpoints: alert events are recorded and listed below, but delivered nowhere."));
}

async function createHook() {
  const form = root.querySelector("#bg-hook-form");
  clearErrors(form);
  notice(root.querySelector("#bg-error"), "");
  const url = root.querySelector("#bg-hook-url").value.trim();
  if (!/^https?:\/\/\S+$/i.test(url)) { fieldError("bg-hook-url", "An absolute http or https URL (scheme, host, path)."); root.querySelector("#bg-hook-url").focus(); return; }
  const body = { url };
  const desc = root.querySelector("#bg-hook-desc").value.trim();
  if (desc) body.description = desc;
  try {
    const { data } = await call("POST", "/admin/webhooks", body);
    form.reset();
    await loadHooks();
    const box = root.querySelector("#bg-hook-secret");
    box.replaceChildren(el("p", {}, el("strong", {}, `Endpoint ${data.url} added.`), " Its signing secret, for your receiver's verifier — copy it now: it is not shown again."),
      el("code", { id: "bg-hook-secret-value", class: "secret" }, data.secret),
      el("button", { type: "button", class: "btn btn-small", onclick: () => navigator.clipboard?.writeText(data.secret) }, "Copy"),
      " ", el("button", { type: "button", class: "btn btn-small btn-quiet", onclick: () => { box.hidden = true; box.replaceChildren(); } }, "Done"));
    box.hidden = false;
    box.querySelector("button").focus();
  } catch (e) {
    notice(root.querySelector("#bg-error"), showApiErrors(e, { url: "bg-hook-url", description: "bg-hook-desc" }).join(" "));
  }
}

function askHook(w, from) {
  pending = { from, run: () => removeHook(w) };
  root.querySelector("#bg-confirm-text").textContent = `${w.url} gets no more alerts; its pending deliveries are dropped. Alert events stay listed.`;
  confirmDialog.returnValue = "";
  confirmDialog.showModal();
  root.querySelector("#bg-confirm-cancel").focus();
}

async function removeHook(w) {
  try {
    await call("DELETE", `/admin/webhooks/${w.id}`);
    root.querySelector("#bg-hook-secret").hidden = true;
    await loadHooks();
  } catch (e) {
    notice(root.querySelector("#bg-error"), errorText(e));
  }
}

// One line per endpoint: its state (pending, delivered, failed), attempts and last error.
function deliveries(list) {
  if (!list.length) return "no endpoints";
  const url = (d) => webhooks.find((w) => String(w.id) === String(d.endpoint_id ?? d.webhook_id))?.url ?? `endpoint ${d.endpoint_id ?? d.webhook_id}`;
  return el("ul", { class: "plain-list" }, list.map((d) => el("li", {},
    el("span", { class: `badge badge-${d.state}` }, d.state), " ", el("span", { class: "wrap" }, url(d)),
    d.attempts && d.attempts !== "0" ? ` · ${d.attempts} attempt(s)` : "",
    d.last_error ? el("div", { class: "muted small wrap" }, d.last_error) : null)));
}

async function loadEvents() {
  const { data } = await call("GET", "/admin/alert-events?limit=20");
  const items = data.items || [];
  const name = (scope, id) => {
    const t = targets[scope]?.find((x) => String(x.id) === String(id));
    return t ? targetLabel(scope, t) : `${scope} ${id}`;
  };
  root.querySelector("#bg-event-table").replaceChildren(items.length ? table("Alert events", ["When (UTC)", "Budget", { label: "Threshold", num: true }, { label: "Spent / limit", num: true }, "Deliveries"],
    items.map((ev) => el("tr", { "data-event": ev.id },
      el("td", { "data-label": "When" }, when(ev.created_at, { utc: true })),
      el("td", { class: "wrap", "data-label": "Budget" }, `${ev.scope}: ${name(ev.scope, ev.scope_id)}`),
      el("td", { class: "num", "data-label": "Threshold" }, `${ev.threshold} %`),
      el("td", { class: "num mono", "data-label": "Spent / limit" }, `${money(ev.cost_used)} / ${money(ev.cost_limit)}`),
      el("td", { "data-label": "Deliveries" }, deliveries(ev.deliveries || [])))),
  { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No alert has fired yet."));
}
