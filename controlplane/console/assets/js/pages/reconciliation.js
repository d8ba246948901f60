// Reconciliation: the ledger against what the providers report (docs/reconciliation.md). A chart of drift
// per day stacked by provider and model (uPlot), the exact drift table, the recent runs with their lines,
// and "run now" for one provider and day (admins).
import { call, ApiError } from "../api.js";
import { el, field, fieldError, clearErrors, showApiErrors, notice, count, when, table } from "../ui.js";
import { utcDay } from "../spendapi.js";
import { subtractDecimal } from "../decimal.js";
import uPlot from "../../vendor/uplot/uPlot.esm.js";

// The same colours as the .swatch-N classes (console.css), so the legend matches the bars.
const PALETTE = ["#1f5fbf", "#e07b00", "#1a7f37", "#b42318", "#6e40c9", "#0e7c86", "#a2570f", "#c6407f", "#5a6472", "#3d7d2a", "#8a6d00"];
const CAUSES = {
  none: "agrees", missing_at_provider: "missing at provider", pending_late: "pending late data",
  missing_in_ledger: "missing in ledger", tokens: "token counts differ", local_count: "local/estimated counts",
  price: "price differs", cost: "cost follows tokens",
};
const FIELD_IDS = { from: "rc-from", to: "rc-to", provider_id: "rc-provider", day: "rc-run-day" };

let root, chart, last;

export function mount(section) {
  root = section;
  const today = new Date();
  const day = (v) => el("input", { type: "date", value: v.slice(0, 10), required: true });
  const form = el("form", { id: "rc-form", class: "filters", "aria-label": "Drift query", novalidate: true },
    field("rc-from", "From (first day)", day(utcDay(today, -13))),
    field("rc-to", "To (last day)", day(utcDay(today))),
    field("rc-provider", "Provider id", el("input", { type: "text", inputmode: "numeric", autocomplete: "off", placeholder: "any" })),
    field("rc-measure", "Chart", el("select", {},
      el("option", { value: "cost", selected: true }, "Cost drift ($)"), el("option", { value: "tokens" }, "Token drift"))),
    el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Show")));
  const runForm = el("form", { id: "rc-run-form", class: "filters", "aria-label": "Run a reconciliation", novalidate: true },
    field("rc-run-provider", "Provider id", el("input", { type: "text", inputmode: "numeric", autocomplete: "off", required: true })),
    field("rc-run-day", "Day (UTC)", day(utcDay(today, -1))),
    el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn" }, "Reconcile now")));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "reconciliation-title" }, "Reconciliation")),
    el("p", { class: "muted" }, "The ledger compared with each provider's own usage and cost reports, per UTC day. Drift is |provider − ledger| summed over token categories and cost lines; each day shows its latest run."),
    form,
    el("p", { id: "rc-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("p", { id: "rc-summary", class: "muted", role: "status", "aria-live": "polite" }),
    el("figure", { class: "panel chart-panel" },
      el("div", { id: "rc-chart", class: "chart" }),
      el("figcaption", { id: "rc-legend", class: "legend" })),
    el("div", { id: "rc-table" }),
    el("h2", { id: "rc-runs-title" }, "Runs"),
    runForm,
    el("p", { id: "rc-run-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("div", { id: "rc-runs" }),
    el("section", { id: "rc-run", class: "panel", "aria-labelledby": "rc-run-title", hidden: true },
      el("h3", { id: "rc-run-title" }, "Run"), el("div", { id: "rc-lines" })));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  runForm.addEventListener("submit", (ev) => { ev.preventDefault(); reconcileNow(); });
  section.querySelector("#rc-measure").addEventListener("change", () => { if (last) render(last); });
  new ResizeObserver(() => { if (chart) chart.setSize(size()); }).observe(section.querySelector("#rc-chart"));
}

export async function show() {
  await run();
}

function size() {
  const box = root.querySelector("#rc-chart");
  return { width: Math.max(280, box.clientWidth), height: box.clientWidth < 500 ? 220 : 300 };
}

function query() {
  clearErrors(root.querySelector("#rc-form"));
  const v = (id) => root.querySelector(`#${id}`).value.trim();
  const from = v("rc-from"), to = v("rc-to"), provider = v("rc-provider");
  let bad = null;
  const fail = (id, msg) => { fieldError(id, msg); bad = bad || id; };
  if (!/^\d{4}-\d{2}-\d{2}$/.test(from)) fail("rc-from", "Choose the first day.");
  if (!/^\d{4}-\d{2}-\d{2}$/.test(to)) fail("rc-to", "Choose the last day.");
  else if (from && to < from) fail("rc-to", "The last day is before the first day.");
  if (provider && !/^[1-9]\d*$/.test(provider)) fail("rc-provider", "A provider id (digits), or empty for every provider.");
  if (bad) { root.querySelector(`#${bad}`).focus(); return null; }
  const q = new URLSearchParams({ from, to: utcDay(new Date(`${to}T00:00:00Z`), 1).slice(0, 10) });
  if (provider) q.set("provider_id", provider);
  return q;
}

async function run() {
  const q = query();
  if (!q) return;
  const err = root.querySelector("#rc-error");
  notice(err, "");
  try {
    const [{ data: drift }, { data: runs }] = await Promise.all([
      call("GET", `/admin/reconciliation/drift?${q}`),
      call("GET", `/admin/reconciliation/runs?limit=20${q.get("provider_id") ? `&provider_id=${q.get("provider_id")}` : ""}`)]);
    last = { q, items: drift.items || [] };
    render(last);
    renderRuns(runs.items || []);
  } catch (e) {
    const rest = showApiErrors(e, FIELD_IDS);
    notice(err, e instanceof ApiError && e.status === 401 ? "" : rest.join(" "));
  }
}

function days(q) {
  const out = [];
  for (let t = Date.parse(`${q.get("from")}T00:00:00Z`), end = Date.parse(`${q.get("to")}T00:00:00Z`); t < end && out.length < 100; t += 86400e3) {
    out.push(new Date(t).toISOString().slice(0, 10));
  }
  return out;
}

function render({ q, items }) {
  const measure = root.querySelector("#rc-measure").value;
  const drifting = items.filter((p) => p.tokens_drift > 0 || Number(p.cost_drift) !== 0);
  root.querySelector("#rc-summary").textContent = items.length
    ? `${count(items.length)} provider·model·days reconciled, ${count(drifting.length)} with drift.`
    : "No reconciliation runs in this range.";
  const xsDays = days(q);
  const xs = xsDays.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
  const idx = new Map(xsDays.map((d, i) => [d, i]));
  const labels = [...new Set(items.map((p) => `Provider ${p.provider_id} · ${p.model}`))];
  const stacked = [];
  let below = xs.map(() => 0);
  labels.forEach((label) => {
    const ys = below.slice();
    for (const p of items) {
      if (`Provider ${p.provider_id} · ${p.model}` !== label) continue;
      const i = idx.get(p.day);
      // Numbers for drawing only; the table shows the exact decimals.
      if (i !== undefined) ys[i] += measure === "tokens" ? p.tokens_drift : Number(p.cost_drift);
    }
    stacked.push(ys);
    below = ys;
  });
  const box = root.querySelector("#rc-chart");
  if (chart) { chart.destroy(); chart = null; }
  box.replaceChildren();
  if (xs.length && labels.length) {
    const bars = uPlot.paths.bars({ size: [0.7, 48], align: 0 });
    const order = stacked.map((_, i) => i).reverse();
    const fmt = measure === "tokens" ? (t) => t.toLocaleString("en-US", { maximumFractionDigits: 0 })
      : (t) => "$" + t.toLocaleString("en-US", { maximumSignificantDigits: 3 });
    chart = new uPlot({
      ...size(), tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
      legend: { show: false }, cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true, range: (u, min, max) => [min - 43200, max + 43200] }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      axes: [{}, { values: (u, ticks) => ticks.map(fmt), size: 72 }],
      series: [{}, ...order.map((i) => ({ label: labels[i], stroke: PALETTE[i % PALETTE.length], fill: PALETTE[i % PALETTE.length],
        width: 0, paths: bars, points: { show: false } }))],
    }, [xs, ...order.map((i) => stacked[i])], box);
  }
  root.querySelector("#rc-legend").replaceChildren(
    el("span", { class: "visually-hidden" }, "Legend: "),
    ...labels.map((l, i) => el("span", { class: "legend-item" },
      el("span", { class: `swatch swatch-${i % PALETTE.length}`, "aria-hidden": "true" }), l)));
  const heads = ["Day", "Provider", "Model", { label: "Ledger tokens", num: true }, { label: "Provider tokens", num: true },
    { label: "Token drift", num: true }, { label: "Ledger cost ($)", num: true }, { label: "Provider cost ($)", num: true },
    { label: "Cost drift ($)", num: true }, "Causes", "Run"];
  const rows = items.map((p) => el("tr", { class: p.tokens_drift > 0 || Number(p.cost_drift) !== 0 ? "drift" : "" },
    el("td", { "data-label": "Day" }, p.day + (p.provisional ? " (provisional)" : "")),
    el("td", { "data-label": "Provider" }, String(p.provider_id)),
    el("td", { "data-label": "Model" }, p.model),
    el("td", { class: "num", "data-label": "Ledger tokens" }, count(p.ledger_tokens)),
    el("td", { class: "num", "data-label": "Provider tokens" }, count(p.provider_tokens)),
    el("td", { class: "num", "data-label": "Token drift" }, count(p.tokens_drift)),
    el("td", { class: "num mono", "data-label": "Ledger cost" }, p.ledger_cost),
    el("td", { class: "num mono", "data-label": "Provider cost" }, p.provider_cost),
    el("td", { class: "num mono", "data-label": "Cost drift" }, p.cost_drift),
    el("td", { "data-label": "Causes" }, p.causes.length ? p.causes.map((c) => CAUSES[c] || c).join(", ") : "agrees"),
    el("td", { "data-label": "Run" }, el("button", { type: "button", class: "btn btn-quiet", "data-run": String(p.run_id) }, `#${p.run_id}`))));
  const t = table("Drift per day, provider and model", heads, rows, { cls: "data cards-narrow" });
  t.addEventListener("click", (ev) => { const b = ev.target.closest("[data-run]"); if (b) openRun(b.dataset.run); });
  root.querySelector("#rc-table").replaceChildren(t);
}

function statusBadge(r) {
  const cls = r.status === "ok" ? "badge badge-on" : r.status === "failed" ? "badge badge-failed" : "badge badge-pending";
  return el("span", { class: cls }, r.status + (r.provisional ? " · provisional" : ""));
}

function renderRuns(runs) {
  const heads = [{ label: "Run", num: true }, "Provider", "Day", "Status", "Trigger", { label: "Ledger cost ($)", num: true },
    { label: "Provider cost ($)", num: true }, "Sources (upstream/local/estimated)", "Finished"];
  const rows = runs.map((r) => el("tr", {},
    el("td", { class: "num", "data-label": "Run" }, el("button", { type: "button", class: "btn btn-quiet", "data-run": String(r.id) }, `#${r.id}`)),
    el("td", { "data-label": "Provider" }, String(r.provider_id)),
    el("td", { "data-label": "Day" }, r.day.slice(0, 10)),
    el("td", { "data-label": "Status" }, statusBadge(r), r.error ? el("span", { class: "muted" }, " " + r.error) : null),
    el("td", { "data-label": "Trigger" }, r.trigger),
    el("td", { class: "num mono", "data-label": "Ledger cost" }, r.ledger_cost),
    el("td", { class: "num mono", "data-label": "Provider cost" }, r.provider_cost),
    el("td", { "data-label": "Sources" }, `${count(r.source_upstream)} / ${count(r.source_local)} / ${count(r.source_estimated)}`),
    el("td", { "data-label": "Finished" }, when(r.finished_at, { utc: true }))));
  const t = table("Recent reconciliation runs", heads, rows, { cls: "data cards-narrow" });
  t.addEventListener("click", (ev) => { const b = ev.target.closest("[data-run]"); if (b) openRun(b.dataset.run); });
  root.querySelector("#rc-runs").replaceChildren(rows.length ? t : el("p", { class: "muted" }, "No runs yet."));
}

// The seven token categories of a line, in the ledger's order (docs/reconciliation.md, "What is compared").
const CATEGORIES = [
  ["input_tokens", "Input"], ["output_tokens", "Output"], ["cache_read_tokens", "Cache read"],
  ["cache_creation_5m_tokens", "Cache write 5m"], ["cache_creation_30m_tokens", "Cache write 30m"],
  ["cache_creation_1h_tokens", "Cache write 1h"], ["image_output_tokens", "Image output"],
];

// signed formats a difference with its sign (U+2212 for minus); zero is "0".
function signed(s, fmt) {
  if (s === "" || s === undefined) return "—";
  const neg = s.startsWith("-"), v = neg ? s.slice(1) : s;
  if (/^0(\.0*)?$/.test(v)) return "0";
  return (neg ? "\u2212" : "+") + fmt(v);
}

// compared is one cell of a line: the ledger's value, the provider's and the difference provider − ledger,
// stacked (on narrow screens in a row, each with its side's letter).
function compared(label, ledger, provider, delta, { mono = false } = {}) {
  const off = delta !== "0" && delta !== "—";
  return el("td", { class: `num cmp${mono ? " mono" : ""}`, "data-label": label },
    el("span", { "data-side": "L", title: "Ledger" }, ledger),
    el("span", { "data-side": "P", title: "Provider" }, provider),
    el("span", { "data-side": "Δ", title: "Provider − ledger", class: off ? "delta off" : "delta" }, delta));
}

async function openRun(id) {
  const { data: r } = await call("GET", `/admin/reconciliation/runs/${id}`);
  const panel = root.querySelector("#rc-run");
  root.querySelector("#rc-run-title").replaceChildren(`Run #${r.id} — provider ${r.provider_id}, ${r.day.slice(0, 10)} `, statusBadge(r));
  const heads = ["Line", { label: "", num: true }, ...CATEGORIES.map(([, label]) => ({ label, num: true })), { label: "Cost ($)", num: true }, "Cause"];
  const rows = r.lines.map((l) => {
    const tokens = l.kind === "tokens";
    const cats = CATEGORIES.map(([k, label]) => {
      if (!tokens) return el("td", { class: "num muted", "data-label": label }, "");
      const lv = l.ledger[k], pv = l.provider ? l.provider[k] : null;
      return compared(label, count(lv), pv === null ? "—" : count(pv), pv === null ? "—" : signed(String(pv - lv), count));
    });
    // A token line's cost is the ledger's only: the provider reports cost per project (the cost lines).
    const cost = tokens ? compared("Cost", l.ledger_cost, "—", "—", { mono: true })
      : compared("Cost", l.ledger_cost, l.provider_cost, signed(subtractDecimal(l.provider_cost, l.ledger_cost), (v) => v), { mono: true });
    const where = tokens ? l.key_ref || "(unmapped key)" : l.project_ref || "(no project)";
    return el("tr", { class: l.cause === "none" ? "" : "drift", "data-cause": l.cause, "data-kind": l.kind },
      el("td", { "data-label": "Line", class: "line" },
        el("strong", {}, l.model), el("br"),
        el("span", { class: "mono" }, where), el("br"),
        el("span", { class: "muted" }, `${l.kind}${l.tier ? ` · ${l.tier}` : ""}`),
        tokens ? el("span", { class: "muted" }, el("br"), `requests ${count(l.ledger_requests)} / ${count(l.provider_requests)}`) : null),
      el("td", { class: "num sides", "aria-hidden": "true" }, el("span", {}, "Ledger"), el("span", {}, "Provider"), el("span", {}, "Δ P−L")),
      ...cats, cost,
      el("td", { "data-label": "Cause", class: "cause" }, el("strong", {}, CAUSES[l.cause] || l.cause), l.detail ? el("br") : null, l.detail || ""));
  });
  root.querySelector("#rc-lines").replaceChildren(
    el("p", { class: "muted" }, "Each cell: the ledger, the provider's report, and the difference provider − ledger. Token lines match the provider's usage groups (key, model, tier); cost lines its cost groups (project, model)."),
    table(`Lines of run ${r.id}`, heads, rows, { cls: "data cards-narrow rc-lines" }));
  panel.hidden = false;
}

async function reconcileNow() {
  const form = root.querySelector("#rc-run-form");
  clearErrors(form);
  const provider = root.querySelector("#rc-run-provider").value.trim();
  const day = root.querySelector("#rc-run-day").value.trim();
  if (!/^[1-9]\d*$/.test(provider)) { fieldError("rc-run-provider", "A provider id (digits)."); root.querySelector("#rc-run-provider").focus(); return; }
  const err = root.querySelector("#rc-run-error");
  notice(err, "");
  try {
    const { data: r } = await call("POST", "/admin/reconciliation/runs", { provider_id: Number(provider), day });
    await run();
    await openRun(r.id);
  } catch (e) {
    notice(err, showApiErrors(e, { ...FIELD_IDS, provider_id: "rc-run-provider" }).join(" "));
  }
}
