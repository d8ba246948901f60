// Usage explorer: filter the usage rows (GET /admin/usages) and open one request's full row.
import { call, ApiError } from "../api.js";
import { el, field, fieldError, clearErrors, notice, count, when, table, errorText } from "../ui.js";

const TEXT = [["request_id", "Request id"], ["logical_model", "Model (logical)"], ["upstream_model", "Model (upstream)"], ["operation", "Operation"]];
const IDS = [["org_id", "Org id"], ["team_id", "Team id"], ["user_id", "User id"], ["api_key_id", "Key id"], ["provider_id", "Provider id"], ["batch_id", "Batch id"]];
const STATES = ["", "completed", "upstream_error", "upstream_interrupted", "client_dropped", "rejected"];

let root, query = "", cursor = "", items = [], dialog;

export function mount(section) {
  root = section;
  const form = el("form", { id: "us-form", class: "filters usage-form", "aria-label": "Usage filters", novalidate: true },
    ...TEXT.map(([k, label]) => field(`us-${k}`, label, el("input", { type: "text", autocomplete: "off", spellcheck: "false" }))),
    ...IDS.map(([k, label]) => field(`us-${k}`, label, el("input", { type: "text", inputmode: "numeric", autocomplete: "off" }))),
    field("us-end_state", "End state", (() => { const s = el("select", {}); for (const v of STATES) s.append(el("option", { value: v }, v || "Any")); return s; })()),
    field("us-since", "From (UTC)", el("input", { type: "datetime-local" })),
    field("us-until", "Before (UTC)", el("input", { type: "datetime-local" })),
    el("div", { class: "form-actions" },
      el("button", { type: "submit", class: "btn btn-primary" }, "Search"),
      el("button", { type: "reset", class: "btn btn-quiet" }, "Clear")));
  dialog = el("dialog", { id: "us-dialog", "aria-labelledby": "us-dialog-title" },
    el("form", { method: "dialog" },
      el("div", { class: "dialog-head" }, el("h2", { id: "us-dialog-title" }, "Request")),
      el("div", { class: "dialog-body" }, el("dl", { id: "us-detail", class: "detail" })),
      el("div", { class: "dialog-actions" }, el("button", { type: "submit", class: "btn", id: "us-close" }, "Close"))));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "usage-title" }, "Usage")),
    el("p", { class: "muted" }, "Every settled request, newest first. Filters match exactly; costs are the stored exact decimals."),
    form,
    el("p", { id: "us-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("p", { id: "us-count", class: "muted", role: "status", "aria-live": "polite" }),
    el("div", { id: "us-table" }),
    el("button", { type: "button", class: "btn", id: "us-more", hidden: true }, "Load more"),
    dialog);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); search(); });
  form.addEventListener("reset", () => setTimeout(search, 0));
  section.querySelector("#us-more").addEventListener("click", () => load(false));
}

export async function show() {
  if (!query) await search();
}

function buildQuery() {
  clearErrors(root.querySelector("#us-form"));
  const q = new URLSearchParams({ limit: "50" });
  let bad = null;
  const v = (k) => root.querySelector(`#us-${k}`).value.trim();
  for (const [k] of TEXT) if (v(k)) q.set(k, v(k));
  for (const [k] of IDS) {
    if (!v(k)) continue;
    if (!/^[1-9]\d*$/.test(v(k))) { fieldError(`us-${k}`, "A positive whole number."); bad = bad || `us-${k}`; continue; }
    q.set(k, v(k));
  }
  if (v("end_state")) q.set("end_state", v("end_state"));
  for (const k of ["since", "until"]) if (v(k)) q.set(k, v(k).length === 16 ? `${v(k)}:00Z` : `${v(k)}Z`);
  if (bad) { root.querySelector(`#${bad}`).focus(); return null; }
  return q.toString();
}

async function search() {
  const q = buildQuery();
  if (q === null) return;
  query = q;
  await load(true);
}

async function load(fresh) {
  const err = root.querySelector("#us-error");
  notice(err, "");
  try {
    const { data } = await call("GET", `/admin/usages?${query}${!fresh && cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    items = fresh ? data.items : items.concat(data.items);
    cursor = data.next_cursor || "";
    render();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    notice(err, errorText(e));
  }
}

function render() {
  root.querySelector("#us-count").textContent = items.length ? `${items.length} request${items.length === 1 ? "" : "s"}${cursor ? " (more available)" : ""}.` : "No requests match.";
  root.querySelector("#us-more").hidden = !cursor;
  const rows = items.map((u, i) => el("tr", {},
    el("td", { "data-label": "Time (UTC)" }, when(u.created_at, { utc: true })),
    el("td", { class: "mono wrap", "data-label": "Request" }, u.request_id),
    el("td", { "data-label": "Model" }, u.logical_model || "—"),
    el("td", { "data-label": "Key" }, u.api_key_id ?? "—"),
    el("td", { "data-label": "End state" }, u.end_state),
    el("td", { class: "num", "data-label": "Tokens in/out" }, `${count(u.input_tokens)} / ${count(u.output_tokens)}`),
    el("td", { class: "num mono", "data-label": "Cost ($)" }, u.cost),
    el("td", { class: "actions" }, el("button", { type: "button", class: "btn btn-small", "data-row": i,
      "aria-label": `Details of request ${u.request_id}`, onclick: (ev) => open(u, ev.currentTarget) }, "Details"))));
  root.querySelector("#us-table").replaceChildren(items.length ? table("Usage rows", ["Time (UTC)", "Request", "Model", "Key", "End state",
    { label: "Tokens in/out", num: true }, { label: "Cost ($)", num: true }, { label: "" }], rows, { cls: "data cards-narrow" }) : "");
}

let opener = null;
function open(u, from) {
  opener = from;
  root.querySelector("#us-dialog-title").textContent = `Request ${u.request_id}`;
  root.querySelector("#us-detail").replaceChildren(...Object.entries(u).flatMap(([k, v]) => [
    el("dt", {}, k), el("dd", { class: "mono" }, v === null || v === "" ? "—" : String(v))]));
  dialog.addEventListener("close", () => opener?.focus(), { once: true });
  dialog.showModal();
  root.querySelector("#us-close").focus();
}
