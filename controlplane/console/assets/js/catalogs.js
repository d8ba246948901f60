// The Catalogs page: plan a price catalog import, review it (changes field by field, operator-edited
// rules, entries not imported), apply it with exclusions, and browse the provenance of imported rules.
import { call, listAll, ApiError } from "./api.js";

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === undefined || v === null) continue;
    if (k === "class") e.className = v; else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const state = { plan: null, readOnly: false };

function showError(msg) {
  const e = $("cat-error");
  e.textContent = msg || "";
  e.hidden = !msg;
}

function errorText(e) {
  if (!(e instanceof ApiError)) return e.message;
  const details = e.details.map((d) => [d.field, d.name, d.message].filter(Boolean).join(": "));
  return details.length ? `${e.message} — ${details.slice(0, 10).join("; ")}` : e.message;
}

/** Shows the page (the router has made it visible): loads the provenance. */
export function showCatalogs() {
  loadProvenance().catch((e) => showError(errorText(e)));
}

/** Wires the page once; readOnly hides planning and applying. */
export function initCatalogs({ readOnly }) {
  state.readOnly = readOnly;
  $("cat-readonly").hidden = !readOnly;
  $("cat-form").hidden = readOnly;
  if (!initCatalogs.done) {
    initCatalogs.done = true;
    $("cat-format").addEventListener("change", syncFileInput);
    $("cat-form").addEventListener("submit", (ev) => { ev.preventDefault(); plan(); });
    $("cat-apply").addEventListener("click", apply);
    syncFileInput();
  }
}

function syncFileInput() {
  const input = $("cat-file");
  const dir = $("cat-format").value === "models.dev";
  input.toggleAttribute("webkitdirectory", dir);
  input.multiple = dir;
}

function providerMap() {
  const map = {};
  const lines = $("cat-map").value.split("\n").map((l) => l.trim()).filter(Boolean);
  for (const line of lines) {
    const m = /^([^=\s]+)\s*=\s*([1-9][0-9]{0,17})$/.exec(line);
    if (!m) throw new Error(`Provider mapping "${line}": write catalog=provider id, e.g. openai=1.`);
    map[m[1]] = Number(m[2]);
  }
  return map;
}

async function plan() {
  showError("");
  $("cat-status").textContent = "";
  const files = [...$("cat-file").files];
  if (!files.length) { showError("Choose the catalog file (or folder) first."); return; }
  const format = $("cat-format").value;
  const btn = $("cat-plan-btn");
  btn.disabled = true;
  try {
    const body = { format, provider_map: providerMap(), only_mapped: $("cat-only-mapped").checked,
      starts_with_as_contains: $("cat-starts-with").checked };
    if ($("cat-at").value) body.at = new Date($("cat-at").value).toISOString();
    if (format === "genai-prices") {
      body.document = await files[0].text();
    } else {
      body.files = {};
      for (const f of files) {
        if (f.name.endsWith(".toml")) body.files[f.webkitRelativePath || f.name] = await f.text();
      }
    }
    const { data } = await call("POST", "/admin/price-catalogs/plan", body);
    state.plan = data;
    renderPlan();
  } catch (e) {
    showError(errorText(e));
  } finally {
    btn.disabled = false;
  }
}

function ruleLabel(r) {
  return `${r.provider_id == null ? "global" : "provider " + r.provider_id} · ${r.match_type} "${r.model_match}"`;
}

function checkbox(entry, checked, label) {
  return el("input", { type: "checkbox", "data-entry": entry, checked, "aria-label": label });
}

function renderPlan() {
  const p = state.plan;
  const s = p.summary;
  $("cat-plan").hidden = false;
  $("cat-summary").textContent = `Plan ${p.id}: ${p.entries} catalog entries — ${s.added} to add, ${s.changed} to change ` +
    `(${s.operator_edited} edited by an operator), ${s.unchanged} unchanged, ${s.skipped} not imported.`;
  const scopes = Object.entries(p.channel_type_scopes || {}).sort(([a], [b]) => a.localeCompare(b));
  $("cat-scopes").hidden = !scopes.length;
  $("cat-scopes").textContent = scopes.length ? "Mapped by channel type: " + scopes.map(([name, ids]) =>
    `${name} → provider${ids.length > 1 ? "s" : ""} ${ids.join(", ")}`).join(" · ") + "." : "";
  const changed = $("cat-changed").tBodies[0];
  changed.replaceChildren(...p.changed.map((c) => el("tr", { class: c.operator_edited ? "operator-edited" : "" },
    el("td", {}, checkbox(c.entry_id, !c.operator_edited, `apply ${c.entry_id}`)),
    el("td", {}, c.entry_id, c.operator_edited ? el("span", { class: "badge" }, " operator-edited") : ""),
    el("td", {}, `#${c.price_rule_id} `, ruleLabel(c.rule)),
    el("td", {}, ...c.fields.map((f) => el("div", {}, `${f.field}: ${f.old} → ${f.new}`))),
    el("td", { class: "small" }, (c.notes || []).join("; ")))));
  const added = $("cat-added").tBodies[0];
  added.replaceChildren(...p.added.slice(0, 2000).map((a) => el("tr", {},
    el("td", {}, checkbox(a.entry_id, true, `apply ${a.entry_id}`)),
    el("td", {}, a.entry_id),
    el("td", {}, ruleLabel(a.rule)),
    el("td", { class: "num" }, a.rule.input_price),
    el("td", { class: "num" }, a.rule.output_price),
    el("td", { class: "small" }, (a.notes || []).join("; ")))));
  $("cat-skipped").tBodies[0].replaceChildren(...p.skipped.map((k) => el("tr", {}, el("td", {}, k.entry_id), el("td", {}, k.reason))));
  $("cat-confirm").checked = false;
  $("cat-apply").disabled = s.added + s.changed === 0 && !p.unchanged.some((u) => u.provenance_only);
}

async function apply() {
  const p = state.plan;
  if (!p) return;
  showError("");
  const exclude = [...document.querySelectorAll("#cat-plan input[data-entry]")].filter((c) => !c.checked).map((c) => c.dataset.entry);
  const btn = $("cat-apply");
  const atInput = $("cat-effective_at"), atError = $("cat-effective_at-error");
  const fieldError = (msg) => {
    atError.textContent = msg || "";
    atError.hidden = !msg;
    atInput.setAttribute("aria-invalid", msg ? "true" : "false");
    if (msg) atInput.focus();
  };
  fieldError("");
  const body = { plan_id: p.id, exclude, confirm_operator_edited: $("cat-confirm").checked };
  if (atInput.value.trim() !== "") {
    const d = new Date(atInput.value);
    if (Number.isNaN(d.getTime())) { fieldError("Enter a date and time, or leave it empty to apply now."); return; }
    body.effective_at = d.toISOString();
  }
  btn.disabled = true;
  try {
    const { data } = await call("POST", "/admin/price-catalogs/apply", body);
    $("cat-status").textContent = `Applied: ${data.added} added, ${data.changed} changed, ${data.excluded} excluded.` +
      (body.effective_at && String(data.scheduled ?? "0") !== "0"
        ? ` ${data.scheduled} change${String(data.scheduled) === "1" ? "" : "s"} scheduled for ${body.effective_at}.` : "");
    state.plan = null;
    await loadProvenance();
  } catch (e) {
    const d = e instanceof ApiError ? e.details.find((x) => x && x.field === "effective_at") : null;
    if (d) fieldError(String(d.message));
    showError(errorText(e));
    btn.disabled = false;
  }
}

async function loadProvenance() {
  const items = await listAll("/admin/price-catalogs/provenance?limit=1000");
  $("cat-provenance").tBodies[0].replaceChildren(...items.map((v) => el("tr", {},
    el("td", { class: "num" }, v.price_rule_id),
    el("td", {}, v.catalog),
    el("td", {}, v.entry_id),
    el("td", { title: v.file_digest }, String(v.file_digest).slice(0, 12) + "…"),
    el("td", {}, v.imported_at),
    el("td", {}, v.imported_by))));
}
