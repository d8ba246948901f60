// Batches: provider batches submitted through the gateway (GET /admin/batches; docs/batches.md) with their
// reservation (reserved and still held), the exact settled cost and line counts, newest first.
import { call, ApiError } from "../api.js";
import { el, notice, count, when, table, errorText, dollars } from "../ui.js";

let root, cursor = "", items = [];

export function mount(section) {
  root = section;
  const form = el("form", { id: "bt-form", class: "filters", "aria-label": "Batch filters", novalidate: true },
    el("div", { class: "field-check" }, el("input", { type: "checkbox", id: "bt-open", checked: true }),
      el("label", { for: "bt-open" }, "Open only (results not all settled)")),
    el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Show")));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "batches-title" }, "Batches")),
    el("p", { class: "muted" }, "Provider batches: what was reserved at submission, what is still held, and what the settled result lines cost (each line settled once, at the batch tier). Lines: succeeded / errored / expired / cancelled of all registered."),
    form,
    el("p", { id: "bt-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("p", { id: "bt-count", class: "muted", role: "status", "aria-live": "polite" }),
    el("div", { id: "bt-table" }),
    el("button", { type: "button", class: "btn", id: "bt-more", hidden: true }, "Load more"));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); load(true); });
  section.querySelector("#bt-more").addEventListener("click", () => load(false));
}

// show reloads on every visit: batches move on their own.
export async function show() { await load(true); }

// micros writes integer micro-dollars as an exact decimal string (JSON numbers below 2^53 are exact).
function micros(m) {
  const s = String(m).padStart(7, "0");
  const frac = s.slice(-6).replace(/0+$/, "");
  return s.slice(0, -6) + (frac ? "." + frac : "");
}

async function load(fresh) {
  const err = root.querySelector("#bt-error");
  notice(err, "");
  const q = new URLSearchParams({ limit: "50", open: String(root.querySelector("#bt-open").checked) });
  if (!fresh && cursor) q.set("cursor", cursor);
  try {
    const { data } = await call("GET", `/admin/batches?${q}`);
    items = fresh ? data.items : items.concat(data.items);
    cursor = data.next_cursor || "";
    render();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    notice(err, errorText(e));
  }
}

function render() {
  root.querySelector("#bt-count").textContent = items.length ? `${items.length} batch${items.length === 1 ? "" : "es"}${cursor ? " (more available)" : ""}.` : "No batches.";
  root.querySelector("#bt-more").hidden = !cursor;
  const rows = items.map((b) => el("tr", { "data-id": b.id },
    el("td", { "data-label": "Created (UTC)" }, when(b.created_at, { utc: true })),
    el("td", { class: "mono wrap", "data-label": "Batch" }, b.provider_batch_id),
    el("td", { "data-label": "Dialect" }, b.dialect),
    el("td", { "data-label": "Key" }, b.api_key_id),
    el("td", { "data-label": "Status" }, b.outcome ? `${b.status} (${b.outcome})` : b.status, b.last_error ? el("div", { class: "muted wrap" }, b.last_error) : ""),
    el("td", { class: "num mono", "data-label": "Reserved" }, dollars(micros(b.reserved_micros))),
    el("td", { class: "num mono", "data-label": "Held" }, dollars(micros(b.held_micros))),
    el("td", { class: "num mono", "data-label": "Settled" }, dollars(b.settled_cost)),
    el("td", { class: "num", "data-label": "Lines" }, `${count(b.lines_succeeded)} / ${count(b.lines_errored)} / ${count(b.lines_expired)} / ${count(b.lines_cancelled)} of ${count(b.line_count)}`)));
  root.querySelector("#bt-table").replaceChildren(items.length ? table("Batches", ["Created (UTC)", "Batch", "Dialect", "Key", "Status",
    { label: "Reserved", num: true }, { label: "Held", num: true }, { label: "Settled", num: true }, { label: "Lines", num: true }], rows, { cls: "data cards-narrow" }) : "");
}
