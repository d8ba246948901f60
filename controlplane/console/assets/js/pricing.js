// The Pricing page: rule list (sort, filter), rule editor with tiers, enable/disable, delete, import,
// export and the quote simulator. Everything goes through the admin REST API.
//
// Money never passes through a JS Number: prices, multipliers and costs are strings from input to wire
// and from wire to screen; integers (ids, token counts, cost_micros) are kept as digit strings too and
// sent as raw JSON integers (wire.js).
import { call, listAll, ApiError } from "./api.js";
import { int, parseExact } from "./wire.js";
import { isDecimal, isInteger, compareDecimal } from "./decimal.js";

const $ = (id) => document.getElementById(id);

export const PRICE_FIELDS = [
  ["input_price", "Input"],
  ["output_price", "Output"],
  ["cache_read_price", "Cache read"],
  ["cache_creation_5m_price", "Cache write 5m"],
  ["cache_creation_30m_price", "Cache write 30m"],
  ["cache_creation_1h_price", "Cache write 1h"],
  ["image_output_price", "Image output"],
];

const USAGE_FIELDS = [
  ["input_tokens", "Input"],
  ["output_tokens", "Output"],
  ["cache_read_tokens", "Cache read"],
  ["cache_creation_5m_tokens", "Cache write 5m"],
  ["cache_creation_30m_tokens", "Cache write 30m"],
  ["cache_creation_1h_tokens", "Cache write 1h"],
  ["image_output_tokens", "Image output"],
];

const MSG_DECIMAL = "Enter a plain decimal such as 2.50: digits and an optional point, no sign, exponent, spaces or commas.";
const MSG_INTEGER = "Enter a whole number of tokens (digits only).";

const state = {
  readOnly: true,
  onUnauthorized: () => {},
  rules: [],
  scheduled: new Map(), // price_rule_id (string) → its pending scheduled version
  providers: [], // [{id: "1", name: "…"}]
  sort: { key: "id", dir: "asc" },
  editing: null, // rule being edited, or null for a new rule
  deleting: null,
  opener: null,
  tierSeq: 0,
};

function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") n.className = v;
    else if (k === "text") n.textContent = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) n.append(c);
  return n;
}

function str(v) { return v === null || v === undefined ? "" : String(v); }

// ---------- errors, toast ----------

let toastTimer = 0;
function toast(message) {
  const t = $("toast");
  t.textContent = message;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 5000);
}

function showPageError(message) {
  const p = $("page-error");
  p.textContent = message || "";
  p.hidden = !message;
}

/** Handles errors every call shares: a 401 signs out, a 403 switches the page to read-only. */
function common(e) {
  if (e instanceof ApiError && e.status === 401) { state.onUnauthorized(); return true; }
  if (e instanceof ApiError && e.status === 403) { setReadOnly(true); }
  return false;
}

function setReadOnly(ro) {
  const changed = state.readOnly !== ro;
  state.readOnly = ro;
  document.body.classList.toggle("readonly", ro);
  $("readonly-notice").hidden = !ro;
  for (const b of document.querySelectorAll("[data-mutates]")) b.hidden = ro;
  if (changed) renderRules(); // row toggles and Delete buttons follow the role
}

/** One API error detail as text: "price_rules[2].pricing_tiers_json[0].multiplier: message". */
function describeDetail(d) {
  if (typeof d === "string") return d;
  if (!d || typeof d !== "object") return str(d);
  let where = str(d.section);
  if (d.index !== undefined && d.index !== null) where += `[${d.index}]`;
  if (d.tier_index !== undefined && d.tier_index !== null) where += `${where ? "." : ""}pricing_tiers_json[${d.tier_index}]`;
  if (d.field) where += `${where ? "." : ""}${d.field}`;
  if (d.resource) where += `${where ? " " : ""}(${d.resource}${d.id ? " " + d.id : ""}${d.name ? " " + d.name : ""})`;
  const msg = str(d.message ?? d.reason ?? "");
  return where ? `${where}: ${msg}` : msg;
}

// ---------- providers and rules ----------

function providerName(id) {
  if (id === null || id === undefined || id === "") return "Global";
  const p = state.providers.find((p) => p.id === String(id));
  return p ? p.name : `#${id}`;
}

async function loadProviders() {
  try {
    const items = await listAll("/admin/providers");
    state.providers = items.map((p) => ({ id: str(p.id), name: str(p.name) || `#${p.id}` }))
      .sort((a, b) => a.name.localeCompare(b.name));
  } catch (e) {
    if (common(e)) throw e;
    state.providers = [];
  }
  for (const [sel, first] of [["filter-provider", 2], ["rf-provider_id", 1], ["q-provider", 1]]) {
    const s = $(sel);
    const keep = s.value;
    while (s.options.length > first) s.remove(first);
    for (const p of state.providers) s.append(el("option", { value: p.id, text: `${p.name} (#${p.id})` }));
    if ([...s.options].some((o) => o.value === keep)) s.value = keep;
  }
}

async function loadRules() {
  try {
    state.rules = await listAll("/admin/price-rules");
    const { data } = await call("GET", "/admin/price-rules/scheduled");
    state.scheduled = new Map(((data && data.items) || []).map((sp) => [str(sp.price_rule_id), sp]));
    showPageError("");
  } catch (e) {
    if (common(e)) throw e;
    showPageError(`Could not load price rules: ${e.message}`);
  }
  renderRules();
}

export async function reloadAll() {
  await loadProviders();
  await loadRules();
}

function sortValue(rule, key) {
  if (key === "provider") return providerName(rule.provider_id).toLowerCase();
  if (key === "tiers") return String((rule.pricing_tiers_json || []).length);
  if (key === "enabled") return rule.enabled ? "1" : "0";
  return str(rule[key]);
}

const NUMERIC_KEYS = new Set(["id", "tiers", "enabled", ...PRICE_FIELDS.map(([f]) => f)]);

function compareRules(a, b) {
  const { key, dir } = state.sort;
  const va = sortValue(a, key), vb = sortValue(b, key);
  let c = NUMERIC_KEYS.has(key) ? compareDecimal(va, vb) : va.localeCompare(vb);
  if (c === 0 && key !== "id") c = compareDecimal(str(a.id), str(b.id));
  return dir === "asc" ? c : -c;
}

function filteredRules() {
  const text = $("filter-model").value.trim().toLowerCase();
  const prov = $("filter-provider").value;
  const match = $("filter-match").value;
  const enabled = $("filter-enabled").value;
  return state.rules.filter((r) => {
    if (text && !str(r.model_match).toLowerCase().includes(text)) return false;
    if (prov === "global" && r.provider_id !== null && r.provider_id !== undefined) return false;
    if (prov && prov !== "global" && str(r.provider_id) !== prov) return false;
    if (match && r.match_type !== match) return false;
    if (enabled && String(!!r.enabled) !== enabled) return false;
    return true;
  }).sort(compareRules);
}

function renderRules() {
  const tbody = $("rules").tBodies[0];
  const rows = filteredRules();
  tbody.replaceChildren();
  for (const th of $("rules").tHead.rows[0].cells) {
    const key = th.dataset.sort;
    if (!key) continue;
    th.setAttribute("aria-sort", key === state.sort.key ? (state.sort.dir === "asc" ? "ascending" : "descending") : "none");
  }
  const headers = [...$("rules").tHead.rows[0].cells].map((c) => c.textContent.trim());
  for (const r of rows) {
    const id = str(r.id);
    const tiers = r.pricing_tiers_json || [];
    const cells = [
      el("td", { "data-label": headers[0], class: "mono" }, id),
      el("td", { "data-label": headers[1] }, providerName(r.provider_id)),
      el("td", { "data-label": headers[2] }, el("span", { class: `badge badge-${r.match_type}` }, str(r.match_type))),
      el("td", { "data-label": headers[3], class: "model mono" }, str(r.model_match), scheduledBadge(id)),
      ...PRICE_FIELDS.map(([f], i) => el("td", { "data-label": headers[4 + i], class: "num mono" }, str(r[f]))),
      el("td", { "data-label": headers[11], class: "num", title: tiers.map(tierSummary).join("\n") || null }, String(tiers.length)),
    ];
    const toggle = el("input", {
      type: "checkbox", role: "switch", class: "switch", "aria-label": `Enabled: rule ${id} (${str(r.model_match)})`,
      "data-rule": id, disabled: state.readOnly,
    });
    toggle.checked = !!r.enabled;
    toggle.addEventListener("change", () => toggleEnabled(r, toggle));
    cells.push(el("td", { "data-label": headers[12] }, toggle));
    const actions = el("td", { class: "actions" },
      el("button", {
        type: "button", class: "btn btn-small", "data-action": "edit", "data-rule": id,
        "aria-label": `${state.readOnly ? "View" : "Edit"} rule ${id} (${str(r.model_match)})`,
        onclick: (ev) => openRuleDialog(r, ev.currentTarget),
      }, state.readOnly ? "View" : "Edit"));
    if (!state.readOnly) {
      actions.append(el("button", {
        type: "button", class: "btn btn-small btn-danger-quiet", "data-action": "delete", "data-rule": id,
        "aria-label": `Delete rule ${id} (${str(r.model_match)})`,
        onclick: (ev) => openDelete(r, ev.currentTarget),
      }, "Delete"));
    }
    cells.push(actions);
    tbody.append(el("tr", { "data-rule": id, class: r.enabled ? "" : "disabled" }, ...cells));
  }
  if (rows.length === 0) {
    tbody.append(el("tr", { class: "empty" }, el("td", { colspan: "14" },
      state.rules.length ? "No rule matches the filters." : "No price rules yet.")));
  }
  $("rule-count").textContent = rows.length === state.rules.length
    ? `${state.rules.length} rule${state.rules.length === 1 ? "" : "s"}`
    : `${rows.length} of ${state.rules.length} rules shown`;
}

// ---------- scheduled versions ----------

/** A local date-time as the datetime-local input shows it ("2026-12-01T09:30:00"). */
function localInputValue(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** An instant for people: local time with its zone, and UTC. */
function describeInstant(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return str(iso);
  const local = d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit",
    minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  return `${local} (${d.toISOString().replace(".000Z", "Z")})`;
}

function scheduledBadge(ruleID) {
  const sp = state.scheduled.get(ruleID);
  if (!sp) return null;
  const when = describeInstant(sp.effective_at);
  return el("span", { class: "badge badge-scheduled", "data-scheduled": ruleID, title: `Scheduled change from ${when}` },
    "scheduled", el("span", { class: "visually-hidden" }, ` change from ${when}`));
}

async function cancelSchedule() {
  const rule = state.editing;
  const sp = rule && state.scheduled.get(str(rule.id));
  if (!sp || state.readOnly) return;
  const btn = $("rf-cancel-schedule");
  btn.disabled = true;
  try {
    await call("DELETE", `/admin/price-rules/scheduled/${encodeURIComponent(sp.id)}`);
    state.opener = null;
    closeDialog($("rule-dialog"));
    await loadRules();
    toast(`Scheduled change of rule ${rule.id} cancelled.`);
    document.querySelector(`#rules tr[data-rule="${CSS.escape(str(rule.id))}"] button`)?.focus();
  } catch (e) {
    if (common(e) && e.status === 401) { closeDialog($("rule-dialog")); return; }
    showRuleErrors([], [`Could not cancel the scheduled change: ${e.message}`]);
  } finally {
    btn.disabled = false;
  }
}

function tierSummary(t, i) {
  const parts = [`#${i + 1}`];
  const min = str(t.min_prompt_tokens ?? "");
  if (t.service_tier) {
    parts.push(`tier ${t.service_tier}`);
    if (min && !/^0+$/.test(min)) parts.push(`from ${min} prompt tokens`);
  } else {
    parts.push(`≥ ${min || "0"} prompt tokens`);
  }
  if (t.multiplier !== undefined && t.multiplier !== null) parts.push(`× ${t.multiplier}`);
  const ov = PRICE_FIELDS.filter(([f]) => t[f] !== undefined && t[f] !== null).map(([f, l]) => `${l} ${t[f]}`);
  if (ov.length) parts.push(`overrides: ${ov.join(", ")}`);
  return parts.join(" · ");
}

// ---------- wire shapes ----------

/** The payload of a rule for POST/PUT, from a stored rule (enable toggle) or the form. */
function rulePayload(r) {
  const out = {
    provider_id: r.provider_id === null || r.provider_id === undefined || r.provider_id === "" ? null : int(r.provider_id),
    match_type: r.match_type,
    model_match: r.model_match,
  };
  for (const [f] of PRICE_FIELDS) out[f] = str(r[f]);
  out.enabled = !!r.enabled;
  out.pricing_tiers_json = (r.pricing_tiers_json || []).map(tierPayload);
  return out;
}

function tierPayload(t) {
  const out = {};
  for (const [k, v] of Object.entries(t)) {
    if (v === null || v === undefined || v === "") continue;
    out[k] = k === "min_prompt_tokens" ? int(v) : v;
  }
  return out;
}

async function toggleEnabled(rule, input) {
  const want = input.checked;
  input.disabled = true;
  try {
    const { data } = await call("PUT", `/admin/price-rules/${encodeURIComponent(rule.id)}`, { ...rulePayload({ ...rule, enabled: want }) });
    Object.assign(rule, data && data.id !== undefined ? data : { enabled: want });
    toast(`Rule ${rule.id} ${want ? "enabled" : "disabled"}.`);
    showPageError("");
  } catch (e) {
    input.checked = !want;
    if (!common(e)) showPageError(`Could not ${want ? "enable" : "disable"} rule ${rule.id}: ${e.message}`);
  } finally {
    input.disabled = state.readOnly;
  }
  const keepFocus = document.activeElement === input;
  renderRules();
  if (keepFocus) document.querySelector(`input.switch[data-rule="${CSS.escape(str(rule.id))}"]`)?.focus();
}

// ---------- rule editor ----------

function setFieldError(input, errorEl, message) {
  if (!errorEl) return;
  errorEl.textContent = message || "";
  errorEl.hidden = !message;
  if (input) input.setAttribute("aria-invalid", message ? "true" : "false");
}

function clearRuleErrors() {
  for (const p of $("rule-form").querySelectorAll(".field-error")) { p.textContent = ""; p.hidden = true; }
  for (const i of $("rule-form").querySelectorAll("[aria-invalid]")) i.setAttribute("aria-invalid", "false");
  $("rule-form-error").hidden = true;
  $("rule-form-error").replaceChildren();
}

function tierItems() { return [...$("tier-list").children]; }

function renumberTiers() {
  tierItems().forEach((li, i) => {
    const kind = li.querySelector('[data-field="kind"]').value;
    li.querySelector(".tier-title").textContent = `Entry ${i + 1} · ${kind === "service" ? "service tier" : "prompt threshold"}`;
    li.dataset.index = String(i);
    li.querySelector("[data-remove]").setAttribute("aria-label", `Remove entry ${i + 1}`);
  });
}

function addTier(t = {}, focus = false) {
  const frag = $("tier-template").content.cloneNode(true);
  const li = frag.querySelector("li");
  const uid = `t${++state.tierSeq}`;
  const ov = li.querySelector("[data-overrides]");
  for (const [f, label] of PRICE_FIELDS) {
    ov.append(el("div", { class: "field" },
      el("label", { "data-for": f }, `${label} override`),
      el("input", { "data-field": f, type: "text", inputmode: "decimal", autocomplete: "off", placeholder: "—" }),
      el("p", { class: "field-error", "data-error": f, hidden: true })));
  }
  for (const label of li.querySelectorAll("label[data-for]")) {
    const f = label.dataset.for;
    const input = li.querySelector(`[data-field="${f}"]`);
    input.id = `${uid}-${f}`;
    label.htmlFor = input.id;
    const err = li.querySelector(`[data-error="${f}"]`);
    if (err) { err.id = `${uid}-${f}-error`; input.setAttribute("aria-describedby", err.id); }
  }
  const kind = li.querySelector('[data-field="kind"]');
  const isService = t.service_tier !== undefined && t.service_tier !== null && t.service_tier !== "" || t.kind === "service";
  kind.value = isService ? "service" : "prompt";
  const set = (f, v) => { const i = li.querySelector(`[data-field="${f}"]`); if (i) i.value = str(v); };
  set("min_prompt_tokens", t.min_prompt_tokens ?? (isService ? "" : ""));
  set("service_tier", t.service_tier);
  set("multiplier", t.multiplier);
  let anyOverride = false;
  for (const [f] of PRICE_FIELDS) { set(f, t[f]); if (str(t[f])) anyOverride = true; }
  if (anyOverride) li.querySelector("details").open = true;
  // Unknown keys of a stored entry survive an edit unchanged.
  li._extra = Object.fromEntries(Object.entries(t).filter(([k]) =>
    !["kind", "min_prompt_tokens", "service_tier", "multiplier", ...PRICE_FIELDS.map(([f]) => f)].includes(k)));
  const sync = () => {
    li.classList.toggle("tier-service", kind.value === "service");
    li.querySelector('[data-show="service"]').hidden = kind.value !== "service";
    renumberTiers();
  };
  kind.addEventListener("change", sync);
  li.querySelector("[data-remove]").addEventListener("click", () => {
    const items = tierItems();
    const i = items.indexOf(li);
    li.remove();
    renumberTiers();
    const next = tierItems()[Math.min(i, tierItems().length - 1)];
    (next ? next.querySelector("[data-remove]") : $("add-prompt-tier")).focus();
  });
  $("tier-list").append(li);
  sync();
  if (focus) li.querySelector(isService ? '[data-field="service_tier"]' : '[data-field="min_prompt_tokens"]').focus();
  return li;
}

function openRuleDialog(stored, opener) {
  state.editing = stored;
  state.opener = opener || null;
  clearRuleErrors();
  const ro = state.readOnly;
  // A rule with a pending scheduled version shows that version (the form edits it; saving replaces it).
  const sp = stored ? state.scheduled.get(str(stored.id)) : null;
  const rule = sp ? { ...sp.rule, id: stored.id } : stored;
  $("rule-dialog-title").textContent = stored ? `${ro ? "Rule" : "Edit rule"} ${stored.id}${sp ? " (scheduled change)" : ""}` : "New price rule";
  $("rf-effective_at").value = sp ? localInputValue(sp.effective_at) : "";
  $("rf-scheduled").hidden = !sp;
  $("rf-cancel-schedule").hidden = !sp || ro;
  if (sp) {
    const now = stored;
    $("rf-scheduled-text").textContent = `Scheduled: from ${describeInstant(sp.effective_at)} this rule becomes version ${sp.version} ` +
      `as shown below (scheduled by ${str(sp.created_by)}). Until then it prices input at ${str(now.input_price)} and output at ` +
      `${str(now.output_price)}. Saving with a time replaces the scheduled change; the rule cannot change now while one is pending.`;
  }
  $("rf-provider_id").value = rule && rule.provider_id !== null && rule.provider_id !== undefined ? str(rule.provider_id) : "";
  if (rule && rule.provider_id !== null && rule.provider_id !== undefined && $("rf-provider_id").value !== str(rule.provider_id)) {
    $("rf-provider_id").append(el("option", { value: str(rule.provider_id), text: `#${rule.provider_id}` }));
    $("rf-provider_id").value = str(rule.provider_id);
  }
  $("rf-match_type").value = rule ? rule.match_type : "exact";
  $("rf-model_match").value = rule ? str(rule.model_match) : "";
  for (const [f] of PRICE_FIELDS) $(`rf-${f}`).value = rule ? str(rule[f]) : "";
  $("rf-enabled").checked = rule ? !!rule.enabled : true;
  $("tier-list").replaceChildren();
  for (const t of (rule && rule.pricing_tiers_json) || []) addTier(t);
  $("rule-fields").disabled = ro;
  $("rule-save").hidden = ro;
  $("rule-form-readonly").hidden = !ro;
  $("rule-dialog").showModal();
  (ro ? $("rule-dialog").querySelector("[data-close]") : $("rf-model_match")).focus();
}

/** Reads the form; returns {payload, errors: [{input, errorEl, message}]}. */
function collectRule() {
  const errors = [];
  const need = (input, errorEl, ok, message) => { if (!ok) errors.push({ input, errorEl, message }); };
  const prov = $("rf-provider_id").value;
  const model = $("rf-model_match");
  need(model, $("rf-model_match-error"), model.value.trim() !== "", "Required: the model id (exact) or a part of it (contains).");
  const payload = {
    provider_id: prov === "" ? null : int(prov),
    match_type: $("rf-match_type").value,
    model_match: model.value.trim(),
  };
  for (const [f] of PRICE_FIELDS) {
    const i = $(`rf-${f}`);
    const v = i.value.trim();
    need(i, $(`rf-${f}-error`), v !== "", "Required (use 0 for free).");
    if (v !== "") need(i, $(`rf-${f}-error`), isDecimal(v), MSG_DECIMAL);
    payload[f] = v;
  }
  payload.enabled = $("rf-enabled").checked;
  const at = $("rf-effective_at").value.trim();
  if (at !== "") {
    const d = new Date(at);
    need($("rf-effective_at"), $("rf-effective_at-error"), !Number.isNaN(d.getTime()), "Enter a date and time, or leave it empty to apply the change now.");
    need($("rf-effective_at"), $("rf-effective_at-error"), !!state.editing,
      "A new rule takes effect when created: create it disabled now, then schedule enabling it.");
    if (!Number.isNaN(d.getTime())) payload.effective_at = d.toISOString();
  }
  payload.pricing_tiers_json = tierItems().map((li) => {
    const get = (f) => li.querySelector(`[data-field="${f}"]`);
    const errOf = (f) => li.querySelector(`[data-error="${f}"]`);
    const service = get("kind").value === "service";
    const t = { ...li._extra };
    const min = get("min_prompt_tokens").value.trim();
    if (!service) need(get("min_prompt_tokens"), errOf("min_prompt_tokens"), min !== "", "Required for a prompt-threshold entry.");
    if (min !== "") {
      need(get("min_prompt_tokens"), errOf("min_prompt_tokens"), isInteger(min), MSG_INTEGER);
      if (isInteger(min)) t.min_prompt_tokens = int(min);
    }
    if (service) {
      const name = get("service_tier").value.trim();
      need(get("service_tier"), errOf("service_tier"), name !== "", "Required for a service-tier entry (e.g. priority).");
      t.service_tier = name;
    }
    const mult = get("multiplier").value.trim();
    if (mult !== "") { need(get("multiplier"), errOf("multiplier"), isDecimal(mult), MSG_DECIMAL); t.multiplier = mult; }
    for (const [f] of PRICE_FIELDS) {
      const v = get(f).value.trim();
      if (v === "") continue;
      need(get(f), errOf(f), isDecimal(v), MSG_DECIMAL);
      t[f] = v;
    }
    return t;
  });
  return { payload, errors };
}

function showRuleErrors(errors, unplaced = []) {
  for (const { input, errorEl, message } of errors) {
    setFieldError(input, errorEl, message);
    const details = input && input.closest("details");
    if (details) details.open = true;
  }
  const box = $("rule-form-error");
  const n = errors.length;
  const lines = [];
  if (n) lines.push(`${n === 1 ? "One field needs" : `${n} fields need`} attention; see the messages next to ${n === 1 ? "it" : "them"}.`);
  lines.push(...unplaced);
  box.replaceChildren(...lines.map((l, i) => i === 0 ? document.createTextNode(l) : el("span", { class: "block" }, l)));
  box.hidden = lines.length === 0;
  const first = errors.find((e) => e.input);
  if (first) first.input.focus();
}

/**
 * Maps an API validation detail to the input it names. Accepted field spellings: "input_price",
 * "price_rules[0].input_price" / "rule.input_price" (prefix dropped), "pricing_tiers_json[1].multiplier",
 * "pricing_tiers_json.1.multiplier", or {field: "multiplier", tier: 1} / {index: 1} on tier fields.
 */
export function locateDetail(d) {
  if (!d || typeof d !== "object") return null;
  let field = str(d.field ?? d.path ?? d.name);
  field = field.replace(/^(?:price_rules?\[\d+\]|price_rules?\.\d+|rule|price_rule)\.?/, "");
  let m = field.match(/^(?:pricing_tiers_json|pricing_tiers|tiers)(?:\[(\d+)\]|\.(\d+))(?:\.(\w+))?$/);
  if (m) return { tier: Number(m[1] ?? m[2]), field: m[3] || "" };
  const tierIdx = d.tier_index ?? d.tier;
  if (tierIdx !== undefined && tierIdx !== null && /^\d+$/.test(String(tierIdx))) return { tier: Number(tierIdx), field };
  if (field === "pricing_tiers_json" && d.index !== undefined && /^\d+$/.test(String(d.index))) return { tier: Number(d.index), field: "" };
  return { tier: null, field };
}

function placeApiErrors(e) {
  const placed = [];
  const unplaced = [];
  const items = tierItems();
  for (const d of e.details) {
    const loc = locateDetail(d);
    const message = typeof d === "object" && d ? str(d.message ?? d.reason ?? d.description ?? e.message) : str(d);
    let input = null, errorEl = null;
    if (loc && loc.tier !== null) {
      const li = items[loc.tier];
      if (li) {
        input = loc.field ? li.querySelector(`[data-field="${CSS.escape(loc.field)}"]`) : null;
        errorEl = loc.field ? li.querySelector(`[data-error="${CSS.escape(loc.field)}"]`) : null;
        if (!errorEl) { errorEl = li.querySelector('[data-error=""]'); input = input || li.querySelector("select, input"); }
      }
    } else if (loc && loc.field) {
      input = document.getElementById(`rf-${loc.field}`);
      errorEl = document.getElementById(`rf-${loc.field}-error`);
    }
    if (errorEl) placed.push({ input, errorEl, message });
    else unplaced.push(describeDetail(d));
  }
  if (!placed.length && !unplaced.length) unplaced.push(e.message);
  else if (unplaced.length) unplaced.unshift(e.message);
  showRuleErrors(placed, unplaced);
}

async function saveRule(ev) {
  ev.preventDefault();
  if (state.readOnly) return;
  clearRuleErrors();
  const { payload, errors } = collectRule();
  if (errors.length) { showRuleErrors(errors); return; }
  const save = $("rule-save");
  save.disabled = true;
  try {
    const editing = state.editing;
    const res = editing
      ? await call("PUT", `/admin/price-rules/${encodeURIComponent(editing.id)}`, payload)
      : await call("POST", "/admin/price-rules", payload);
    const scheduled = payload.effective_at !== undefined;
    const saved = !scheduled && res.data && res.data.id !== undefined ? res.data : null;
    state.opener = null; // focus goes to the saved row below
    closeDialog($("rule-dialog"));
    await loadRules();
    const id = saved ? str(saved.id) : editing ? str(editing.id) : "";
    toast(scheduled ? `Rule ${id}: change scheduled for ${describeInstant(res.data ? res.data.effective_at : payload.effective_at)}.`
      : editing ? `Rule ${id} saved.` : `Rule ${id} created.`);
    const row = id && document.querySelector(`#rules tr[data-rule="${CSS.escape(id)}"]`);
    if (row) { row.classList.add("flash"); row.querySelector("button")?.focus(); }
  } catch (e) {
    if (common(e)) { if (e.status === 401) closeDialog($("rule-dialog")); else showRuleErrors([], [e.message]); return; }
    if (e instanceof ApiError && (e.status === 400 || e.status === 422 || e.status === 409 || e.status === 404)) placeApiErrors(e);
    else showRuleErrors([], [e.message]);
  } finally {
    save.disabled = false;
  }
}

// ---------- delete ----------

function openDelete(rule, opener) {
  state.deleting = rule;
  state.opener = opener || null;
  $("confirm-title").textContent = `Delete rule ${rule.id}?`;
  $("confirm-text").textContent = `${rule.match_type} “${rule.model_match}” for ${providerName(rule.provider_id)}. ` +
    "Requests it prices will fall back to the next matching rule (or cost 0). This cannot be undone.";
  $("confirm-error").hidden = true;
  $("confirm-dialog").showModal();
  $("confirm-dialog").querySelector("[data-close]").focus();
}

async function confirmDelete(ev) {
  ev.preventDefault();
  const rule = state.deleting;
  if (!rule) return;
  const btn = $("confirm-delete");
  btn.disabled = true;
  try {
    await call("DELETE", `/admin/price-rules/${encodeURIComponent(rule.id)}`);
    state.opener = null;
    closeDialog($("confirm-dialog"));
    await loadRules();
    toast(`Rule ${rule.id} deleted.`);
    $("new-rule").focus();
  } catch (e) {
    if (common(e) && e.status === 401) { closeDialog($("confirm-dialog")); return; }
    $("confirm-error").textContent = `Could not delete: ${e.message}`;
    $("confirm-error").hidden = false;
  } finally {
    btn.disabled = false;
  }
}

// ---------- import / export ----------

function openImport(opener) {
  state.opener = opener || null;
  $("import-error").hidden = true;
  $("import-error").replaceChildren();
  $("import-file").value = "";
  $("import-dialog").showModal();
  $("import-file").focus();
}

async function submitImport(ev) {
  ev.preventDefault();
  const box = $("import-error");
  box.hidden = true;
  box.replaceChildren();
  const text = $("import-text").value.trim();
  const fail = (title, lines = []) => {
    box.replaceChildren(el("p", {}, title), ...(lines.length ? [el("ul", {}, ...lines.map((l) => el("li", {}, l)))] : []));
    box.hidden = false;
    $("import-text").focus();
  };
  if (!text) { fail("Choose a file or paste a JSON bundle."); return; }
  let bundle;
  try { bundle = parseExact(text); } catch (e) { fail(`Not valid JSON: ${e.message}`); return; }
  if (!bundle || typeof bundle !== "object" || Array.isArray(bundle) || (!bundle.price_rules && !bundle.routing_rules)) {
    fail('Expected an object with a "price_rules" and/or "routing_rules" array.');
    return;
  }
  const btn = ev.submitter || $("import-form").querySelector("button[type=submit]");
  btn.disabled = true;
  try {
    // The text goes to the server exactly as given: nothing is re-encoded on the way.
    const { data } = await call("POST", "/admin/import", text);
    state.opener = null;
    closeDialog($("import-dialog"));
    $("import-text").value = "";
    await reloadAll();
    const n = (k) => (data && data[k] !== undefined ? (Array.isArray(data[k]) ? data[k].length : data[k]) : null);
    const pr = n("price_rules") ?? n("imported_price_rules") ?? (bundle.price_rules || []).length;
    const rr = n("routing_rules") ?? n("imported_routing_rules") ?? (bundle.routing_rules || []).length;
    const sc = String(n("scheduled_price_rules") ?? "0"); // integers arrive as digit strings (wire.js)
    toast(`Imported ${pr} price rule${pr == 1 ? "" : "s"} and ${rr} routing rule${rr == 1 ? "" : "s"}` +
      (sc !== "0" ? `, and scheduled ${sc} price change${sc === "1" ? "" : "s"}.` : "."));
    $("open-import").focus();
  } catch (e) {
    if (common(e) && e.status === 401) { closeDialog($("import-dialog")); return; }
    fail(`Nothing was imported: ${e.message}`, e.details.map(describeDetail));
  } finally {
    btn.disabled = false;
  }
}

async function exportBundle() {
  try {
    const { text } = await call("GET", "/admin/export", undefined, { raw: true });
    const blob = new Blob([text], { type: "application/json" });
    const url = URL.createObjectURL(blob);
    const stamp = new Date().toISOString().slice(0, 19).replace(/[:T]/g, "-");
    const a = el("a", { href: url, download: `tollgate-pricing-${stamp}.json`, class: "visually-hidden" });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    toast("Export downloaded.");
  } catch (e) {
    if (!common(e)) showPageError(`Export failed: ${e.message}`);
  }
}

// ---------- quote ----------

/**
 * Describes the tier entry a quote applied. The API answers the index of the entry in the rule's
 * pricing_tiers_json, or -1 when none applied.
 */
function describeTier(v, kind, rule) {
  const none = kind === "prompt" ? "none: base prices" : "none: no service-tier adjustment";
  if (v === null || v === undefined || v === "" || /^-\d+$/.test(str(v))) return none;
  if (typeof v === "object") return tierSummary(v, Number(v.index ?? 0));
  if (!/^\d+$/.test(str(v))) return str(v);
  const i = Number(v);
  const t = rule && Array.isArray(rule.pricing_tiers_json) ? rule.pricing_tiers_json[i] : null;
  return t ? tierSummary(t, i).replace(/^#(\d+)/, "entry $1") : `entry ${i + 1}`;
}

function renderQuote(q, req) {
  const box = $("quote-result");
  const rows = [];
  const ruleId = q.price_rule_id;
  const dt = (k, v) => [el("dt", {}, k), el("dd", {}, v)];
  const matched = !(ruleId === null || ruleId === undefined || ruleId === "" || ruleId === "0");
  const rule = matched ? state.rules.find((r) => str(r.id) === str(ruleId)) : null;
  rows.push(...dt("Price rule", el("span", { "data-out": "price_rule_id" }, !matched
    ? "none: no enabled rule matches, so the request costs 0"
    : `rule ${ruleId}${rule ? ` (${rule.match_type} “${rule.model_match}”, ${providerName(rule.provider_id)})` : ""}`)));
  rows.push(...dt("Cost", el("span", { class: "mono", "data-out": "cost" }, `$${str(q.cost)}`)));
  rows.push(...dt("Cost in micro-dollars", el("span", { class: "mono", "data-out": "cost_micros" }, str(q.cost_micros))));
  rows.push(...dt("Prompt tier", el("span", { "data-out": "prompt_tier" }, describeTier(q.prompt_tier, "prompt", rule))));
  rows.push(...dt("Service tier", el("span", { "data-out": "service_tier" }, describeTier(q.service_tier, "service", rule) +
    (req.service_tier && !/^\d+$/.test(str(q.service_tier)) ? ` (requested “${req.service_tier}”: no entry for it was reached)` : ""))));
  const rates = q.rates && typeof q.rates === "object" ? q.rates : {};
  const rateRows = PRICE_FIELDS.map(([f, label]) => {
    const v = rates[f] ?? rates[f.replace(/_price$/, "")] ?? rates[f.replace(/_price$/, "_tokens")];
    return el("tr", {}, el("th", { scope: "row" }, label), el("td", { class: "num mono", "data-rate": f }, v === undefined ? "—" : str(v)));
  });
  box.replaceChildren(
    el("h3", {}, "Result"),
    el("dl", { class: "quote-dl" }, ...rows),
    el("table", { class: "rates" },
      el("caption", {}, "Effective rates (dollars per 1,000,000 tokens)"),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Category"), el("th", { scope: "col", class: "num" }, "Rate"))),
      el("tbody", {}, ...rateRows)));
  box.hidden = false;
}

async function submitQuote(ev) {
  ev.preventDefault();
  const errBox = $("quote-error");
  errBox.hidden = true;
  for (const p of $("quote-form").querySelectorAll(".field-error")) { p.hidden = true; p.textContent = ""; }
  for (const i of $("quote-form").querySelectorAll("[aria-invalid]")) i.setAttribute("aria-invalid", "false");
  const errors = [];
  const model = $("q-model").value.trim();
  if (!model) errors.push([$("q-model"), "Required: the upstream model id to price."]);
  const usage = {};
  for (const [f] of USAGE_FIELDS) {
    const i = $(`q-${f}`);
    const v = i.value.trim() || "0";
    if (!isInteger(v)) errors.push([i, MSG_INTEGER]);
    else usage[f] = int(v);
  }
  if (errors.length) {
    for (const [i, m] of errors) setFieldError(i, $(`${i.id}-error`), m);
    errors[0][0].focus();
    return;
  }
  const prov = $("q-provider").value;
  const tier = $("q-service_tier").value.trim();
  const req = { provider_id: prov ? int(prov) : null, model, service_tier: tier, usage };
  const btn = ev.submitter || $("quote-form").querySelector("button[type=submit]");
  btn.disabled = true;
  try {
    const { data } = await call("POST", "/admin/price-rules/quote", req);
    renderQuote(data || {}, req);
  } catch (e) {
    if (common(e) && e.status === 401) return;
    let placedAny = false;
    for (const d of e.details || []) {
      const loc = locateDetail(d);
      const f = loc && loc.field ? loc.field.replace(/^usage\./, "") : "";
      const i = f && document.getElementById(`q-${f}`);
      if (i) { setFieldError(i, $(`q-${f}-error`), str(d.message ?? "")); placedAny = true; }
    }
    errBox.textContent = `Could not quote: ${e.message}`;
    errBox.hidden = false;
    if (!placedAny) errBox.focus?.();
    $("quote-result").hidden = true;
  } finally {
    btn.disabled = false;
  }
}

// ---------- dialogs ----------

function closeDialog(d) {
  if (d.open) d.close();
}

function wireDialog(d) {
  for (const b of d.querySelectorAll("[data-close]")) b.addEventListener("click", () => closeDialog(d));
  d.addEventListener("close", () => {
    // The browser usually restores focus to the opener itself. Only step in when focus was lost
    // (e.g. the opener was re-rendered), never pull it away from where the user has gone since.
    const o = state.opener;
    state.opener = null;
    const lost = !document.activeElement || document.activeElement === document.body || d.contains(document.activeElement);
    if (o && o.isConnected && lost) o.focus();
  });
}

// ---------- setup ----------

let initialised = false;

/** Builds the generated inputs and wires every handler; called once at start. */
export function initPricing() {
  if (initialised) return;
  initialised = true;
  const prices = $("rf-prices");
  for (const [f, label] of PRICE_FIELDS) {
    prices.append(el("div", { class: "field" },
      el("label", { for: `rf-${f}` }, label),
      el("input", { id: `rf-${f}`, name: f, type: "text", inputmode: "decimal", autocomplete: "off", spellcheck: "false", required: true,
        placeholder: "0.00", "aria-describedby": `rf-${f}-error` }),
      el("p", { id: `rf-${f}-error`, class: "field-error", hidden: true })));
  }
  const usage = $("q-usage");
  for (const [f, label] of USAGE_FIELDS) {
    usage.append(el("div", { class: "field" },
      el("label", { for: `q-${f}` }, label),
      el("input", { id: `q-${f}`, name: f, type: "text", inputmode: "numeric", autocomplete: "off", placeholder: "0",
        "aria-describedby": `q-${f}-error` }),
      el("p", { id: `q-${f}-error`, class: "field-error", hidden: true })));
  }
  for (const th of $("rules").tHead.rows[0].cells) {
    const key = th.dataset.sort;
    if (!key) continue;
    th.querySelector("button").addEventListener("click", () => {
      state.sort = state.sort.key === key ? { key, dir: state.sort.dir === "asc" ? "desc" : "asc" } : { key, dir: "asc" };
      renderRules();
    });
  }
  for (const id of ["filter-model", "filter-provider", "filter-match", "filter-enabled"]) {
    $(id).addEventListener("input", renderRules);
  }
  $("filters").addEventListener("submit", (ev) => ev.preventDefault());
  $("filters").addEventListener("reset", () => setTimeout(renderRules, 0));
  $("new-rule").addEventListener("click", (ev) => openRuleDialog(null, ev.currentTarget));
  $("open-import").addEventListener("click", (ev) => openImport(ev.currentTarget));
  $("export").addEventListener("click", exportBundle);
  $("reload").addEventListener("click", () => reloadAll().then(() => toast("Reloaded.")).catch(() => {}));
  $("rule-form").addEventListener("submit", saveRule);
  $("rf-cancel-schedule").addEventListener("click", cancelSchedule);
  try { $("rf-tz").textContent = `your time zone, ${Intl.DateTimeFormat().resolvedOptions().timeZone}`; } catch { /* keep the default text */ }
  $("add-prompt-tier").addEventListener("click", () => addTier({ min_prompt_tokens: "" }, true));
  $("add-service-tier").addEventListener("click", () => addTier({ kind: "service" }, true));
  $("confirm-form").addEventListener("submit", confirmDelete);
  $("import-form").addEventListener("submit", submitImport);
  $("import-file").addEventListener("change", async () => {
    const f = $("import-file").files[0];
    if (f) $("import-text").value = await f.text();
  });
  $("quote-form").addEventListener("submit", submitQuote);
  for (const d of document.querySelectorAll("dialog")) wireDialog(d);
}

/** Shows the page for a signed-in token. */
export async function showPricing({ readOnly, onUnauthorized }) {
  state.onUnauthorized = onUnauthorized;
  setReadOnly(readOnly);
  $("pricing-view").hidden = false;
  try {
    await reloadAll();
  } catch {
    // 401 already handled (signed out).
  }
}
