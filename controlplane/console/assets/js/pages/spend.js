// Spend: cost over time stacked by a chosen dimension (uPlot), the exact table, and CSV export.
import { call, ApiError } from "../api.js";
import { el, field, fieldError, clearErrors, showApiErrors, notice, count, when, table, download } from "../ui.js";
import { spendQuery, utcDay, groupLabel } from "../spendapi.js";
import uPlot from "../../vendor/uplot/uPlot.esm.js";

const DIMS = [["", "Nothing (one series)"], ["logical_model", "Model (logical)"], ["upstream_model", "Model (upstream)"],
  ["provider", "Provider"], ["org", "Org"], ["team", "Team"], ["user", "User"], ["key", "API key"],
  ["operation", "Operation"], ["end_state", "End state"], ["batch", "Batch"]];
const FILTERS = [["logical_model", "Model"], ["provider", "Provider id"], ["org", "Org id"], ["team", "Team id"], ["key", "Key id"]];
const PALETTE = ["#1f5fbf", "#e07b00", "#1a7f37", "#b42318", "#6e40c9", "#0e7c86", "#a2570f", "#c6407f", "#5a6472", "#3d7d2a", "#8a6d00"];
// API fields → input ids, so the API's errors land next to the input they concern.
const FIELD_IDS = { since: "sp-since", until: "sp-until", bucket: "sp-bucket", group_by: "sp-group", top: "sp-top", tz: "sp-tz",
  logical_model: "sp-f-logical_model", provider: "sp-f-provider", org: "sp-f-org", team: "sp-f-team", key: "sp-f-key" };

let root, chart, last;

function select(options, value) {
  const s = el("select", {});
  for (const [v, label] of options) s.append(el("option", { value: v, selected: v === value }, label));
  return s;
}

export function mount(section) {
  root = section;
  const today = new Date();
  const dateInput = (v) => el("input", { type: "date", value: v.slice(0, 10), required: true });
  const browserTZ = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const form = el("form", { id: "sp-form", class: "filters spend-form", "aria-label": "Spend query", novalidate: true },
    field("sp-since", "From (first day)", dateInput(utcDay(today, -29))),
    field("sp-until", "To (last day)", dateInput(utcDay(today))),
    field("sp-bucket", "Bucket", select([["day", "Day"], ["hour", "Hour"], ["month", "Month"]], "day")),
    field("sp-group", "Stack by", select(DIMS, "logical_model")),
    field("sp-top", "Top groups", el("input", { type: "text", inputmode: "numeric", value: "8", autocomplete: "off" })),
    field("sp-tz", "Time zone", select([["UTC", "UTC"], ...(browserTZ !== "UTC" ? [[browserTZ, browserTZ]] : [])], "UTC")),
    ...FILTERS.map(([d, label]) => field(`sp-f-${d}`, label, el("input", { type: "text", autocomplete: "off", placeholder: "any" }))),
    el("div", { class: "form-actions" },
      el("button", { type: "submit", class: "btn btn-primary" }, "Show"),
      el("button", { type: "button", class: "btn", id: "sp-csv" }, "Download CSV")));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "spend-title" }, "Spend")),
    form,
    el("p", { id: "sp-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("p", { id: "sp-summary", class: "muted", role: "status", "aria-live": "polite" }),
    el("figure", { class: "panel chart-panel" },
      el("div", { id: "sp-chart", class: "chart" }),
      el("figcaption", { id: "sp-legend", class: "legend" })),
    el("div", { id: "sp-table" }));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  section.querySelector("#sp-csv").addEventListener("click", csv);
  new ResizeObserver(() => { if (chart) chart.setSize(size()); }).observe(section.querySelector("#sp-chart"));
}

/** Reads and checks the form; answers the request or null (errors shown next to the fields). */
function request() {
  clearErrors(root.querySelector("#sp-form"));
  const v = (id) => root.querySelector(`#${id}`).value.trim();
  const since = v("sp-since"), until = v("sp-until");
  let bad = null;
  const fail = (id, msg) => { fieldError(id, msg); bad = bad || id; };
  if (!/^\d{4}-\d{2}-\d{2}$/.test(since)) fail("sp-since", "Choose the first day.");
  if (!/^\d{4}-\d{2}-\d{2}$/.test(until)) fail("sp-until", "Choose the last day.");
  else if (since && until < since) fail("sp-until", "The last day is before the first day.");
  const top = v("sp-top");
  if (top && !/^[1-9]\d{0,2}$/.test(top)) fail("sp-top", "A whole number from 1 to 999, or empty for every group.");
  const filters = {};
  for (const [d] of FILTERS) {
    const x = v(`sp-f-${d}`);
    if (!x) continue;
    if (d !== "logical_model" && !/^(\d+|none)$/.test(x)) { fail(`sp-f-${d}`, "An id (digits), or none."); continue; }
    filters[d] = [x];
  }
  if (bad) { root.querySelector(`#${bad}`).focus(); return null; }
  const group = v("sp-group");
  const end = new Date(`${until}T00:00:00Z`);
  return { since: `${since}T00:00:00Z`, until: utcDay(end, 1), bucket: v("sp-bucket"), tz: v("sp-tz"),
    groupBy: group ? [group] : [], top: group && top ? top : "", filters };
}

function size() {
  const box = root.querySelector("#sp-chart");
  return { width: Math.max(280, box.clientWidth), height: box.clientWidth < 500 ? 220 : 320 };
}

export async function show() {
  if (!last) await run();
}

async function run() {
  const req = request();
  if (!req) return;
  const err = root.querySelector("#sp-error");
  notice(err, "");
  try {
    const { data } = await call("GET", spendQuery(req));
    last = { req, data };
    render(data);
  } catch (e) {
    const rest = showApiErrors(e, FIELD_IDS);
    notice(err, e instanceof ApiError && e.status === 401 ? "" : rest.join(" "));
  }
}

async function csv() {
  const req = request();
  if (!req) return;
  try {
    const { text } = await call("GET", spendQuery({ ...req, format: "csv" }), undefined, { raw: true });
    download(`tollgate-spend-${req.since.slice(0, 10)}-${req.until.slice(0, 10)}.csv`, text, "text/csv");
  } catch (e) {
    notice(root.querySelector("#sp-error"), showApiErrors(e, FIELD_IDS).join(" "));
  }
}

/** Every UTC bucket start of the range (the API's rows are sparse; the chart shows empty buckets too). */
function everyBucket(data) {
  const out = [];
  const iso = (t) => new Date(t).toISOString().replace(".000Z", "Z");
  let t = new Date(data.since).getTime();
  const end = new Date(data.until).getTime();
  if (data.bucket === "month") t = Date.UTC(new Date(t).getUTCFullYear(), new Date(t).getUTCMonth(), 1);
  if (!data.bucket) return [iso(t)];
  while (t < end && out.length < 5000) {
    out.push(iso(t));
    if (data.bucket === "month") { const d = new Date(t); t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1); }
    else t += data.bucket === "hour" ? 3600e3 : 86400e3;
  }
  return out;
}

/** Series in order of total cost (the API's order within buckets; "Other" last). */
function seriesOf(data) {
  const order = [], byLabel = new Map();
  for (const r of data.rows) {
    const label = groupLabel(r, data.group_by);
    if (!byLabel.has(label)) { byLabel.set(label, { label, other: r.other, rows: [] }); order.push(label); }
    byLabel.get(label).rows.push(r);
  }
  const series = order.map((l) => byLabel.get(l));
  series.sort((a, b) => (a.other - b.other));
  return series;
}

/** Decimal places that write every multiple of a tick increment (5 → 0, 0.25 → 2, 0.00025 → 5). */
function decimalsOf(incr) {
  for (let d = 0; d < 20; d++) {
    const scaled = incr * 10 ** d;
    if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, scaled)) return d;
  }
  return 20;
}

/**
 * The y-axis labels: as many decimals as the tick increment needs (at least cents once below a dollar),
 * so ticks at demo scale ($0.0001, $0.0002, …) differ instead of all reading "$0". The ticks are chart
 * positions, not amounts from the data: the table below shows the exact decimals. The labels are also
 * kept on the chart element (data-y-ticks), since the canvas has no text to read.
 */
function moneyTicks(ticks, incr) {
  const d = decimalsOf(incr);
  const places = d === 0 ? 0 : Math.max(2, d);
  const labels = ticks.map((t) => "$" + t.toLocaleString("en-US", { minimumFractionDigits: places, maximumFractionDigits: places }));
  root.querySelector("#sp-chart").dataset.yTicks = JSON.stringify(labels);
  return labels;
}

/** The y axis is as wide as its longest label (uPlot's axis autosize recipe). */
function axisWidth(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size;
  let width = axis.ticks.size + axis.gap;
  const longest = (values ?? []).reduce((a, v) => (v.length > a.length ? v : a), "");
  if (longest) {
    u.ctx.font = axis.font[0];
    width += u.ctx.measureText(longest).width / devicePixelRatio;
  }
  return Math.ceil(width) + 8;
}

function render(data) {
  const utc = data.tz === "UTC";
  const buckets = utc ? everyBucket(data) : [...new Set(data.rows.map((r) => r.bucket_start))];
  const series = seriesOf(data);
  root.querySelector("#sp-summary").textContent = data.rows.length
    ? `${count(data.total.requests)} requests costing $${data.total.cost} (exact) from ${when(data.since, { utc, time: false })} to ${when(new Date(new Date(data.until) - 1).toISOString(), { utc, time: false })}${utc ? " UTC" : ` (${data.tz})`}.`
    : "No spend in this range.";
  // Chart: x = bucket start (seconds); each series stacked on the ones before it. Numbers are for
  // drawing only; the table below shows the exact decimals.
  const xs = buckets.map((b) => Math.floor(new Date(b).getTime() / 1000));
  const idx = new Map(buckets.map((b, i) => [new Date(b).toISOString().replace(".000Z", "Z"), i]));
  const stacked = [];
  let below = xs.map(() => 0);
  series.forEach((s) => {
    const ys = below.slice();
    for (const r of s.rows) {
      const i = idx.get(new Date(r.bucket_start).toISOString().replace(".000Z", "Z"));
      if (i !== undefined) ys[i] += Number(r.cost);
    }
    stacked.push(ys);
    below = ys;
  });
  const box = root.querySelector("#sp-chart");
  if (chart) { chart.destroy(); chart = null; }
  box.replaceChildren();
  if (xs.length) {
    const bars = uPlot.paths.bars({ size: [0.7, 48], align: 0 });
    // Half a bucket of room on each side, so the first and last bars are not cut in half.
    const pad = xs.length > 1 ? (xs[1] - xs[0]) / 2 : 43200;
    // Drawn from the top of the stack down, so each lower series paints over the one above it.
    const order = stacked.map((_, i) => i).reverse();
    chart = new uPlot({
      ...size(), tzDate: utc ? (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC") : undefined,
      legend: { show: false }, cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true, range: (u, min, max) => [min - pad, max + pad] }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.08 : 1] } },
      axes: [{}, { values: (u, ticks, _axis, _space, incr) => moneyTicks(ticks, incr), size: axisWidth }],
      series: [{}, ...order.map((i) => ({ label: series[i].label, stroke: PALETTE[i % PALETTE.length],
        fill: PALETTE[i % PALETTE.length], width: 0, paths: bars, points: { show: false } }))],
    }, [xs, ...order.map((i) => stacked[i])], box);
  }
  root.querySelector("#sp-legend").replaceChildren(
    el("span", { class: "visually-hidden" }, "Legend: "),
    ...series.map((s, i) => el("span", { class: "legend-item" },
      el("span", { class: `swatch swatch-${i % PALETTE.length}`, "aria-hidden": "true" }), s.label)));
  const heads = ["Bucket", data.group_by.length ? "Group" : null, { label: "Requests", num: true }, { label: "Cost ($, exact)", num: true },
    { label: "Input tokens", num: true }, { label: "Output tokens", num: true }].filter(Boolean);
  const rows = data.rows.map((r) => el("tr", {},
    el("td", { "data-label": "Bucket" }, data.bucket === "hour" ? when(r.bucket_start, { utc }) : when(r.bucket_start, { utc, time: false })),
    data.group_by.length ? el("td", { "data-label": "Group" }, groupLabel(r, data.group_by)) : null,
    el("td", { class: "num", "data-label": "Requests" }, count(r.requests)),
    el("td", { class: "num mono", "data-label": "Cost" }, r.cost),
    el("td", { class: "num", "data-label": "Input" }, count(r.tokens.input)),
    el("td", { class: "num", "data-label": "Output" }, count(r.tokens.output))));
  rows.push(el("tr", { class: "total" }, el("th", { scope: "row", "data-label": "" }, "Total"),
    data.group_by.length ? el("td", {}) : null,
    el("td", { class: "num", "data-label": "Requests" }, count(data.total.requests)),
    el("td", { class: "num mono", "data-label": "Cost" }, data.total.cost),
    el("td", { class: "num", "data-label": "Input" }, count(data.total.tokens.input)),
    el("td", { class: "num", "data-label": "Output" }, count(data.total.tokens.output))));
  root.querySelector("#sp-table").replaceChildren(table("Spend per bucket and group", heads, rows, { cls: "data cards-narrow" }));
}
