// Audit log: every configuration change with who made it, before and after (GET /admin/audit, admin role).
import { call, ApiError } from "../api.js";
import { el, field, clearErrors, notice, when, table, errorText } from "../ui.js";

const TEXT = [["resource", "Resource (table)"], ["resource_id", "Resource id"], ["actor", "Actor (token name)"]];

let root, query = "", cursor = "", items = [], dialog, opener = null;

export function mount(section) {
  root = section;
  const form = el("form", { id: "au-form", class: "filters usage-form", "aria-label": "Audit filters", novalidate: true },
    ...TEXT.map(([k, label]) => field(`au-${k}`, label, el("input", { type: "text", autocomplete: "off", spellcheck: "false" }))),
    field("au-since", "From (UTC)", el("input", { type: "datetime-local" })),
    field("au-until", "Before (UTC)", el("input", { type: "datetime-local" })),
    el("div", { class: "form-actions" },
      el("button", { type: "submit", class: "btn btn-primary" }, "Search"),
      el("button", { type: "reset", class: "btn btn-quiet" }, "Clear")));
  dialog = el("dialog", { id: "au-dialog", "aria-labelledby": "au-dialog-title" },
    el("form", { method: "dialog" },
      el("div", { class: "dialog-head" }, el("h2", { id: "au-dialog-title" }, "Change")),
      el("div", { class: "dialog-body" },
        el("dl", { id: "au-detail", class: "detail" }),
        el("div", { class: "two-col" },
          el("section", { class: "panel", "aria-labelledby": "au-before-title" },
            el("h3", { id: "au-before-title" }, "Before"), el("pre", { id: "au-before", class: "mono wrap" })),
          el("section", { class: "panel", "aria-labelledby": "au-after-title" },
            el("h3", { id: "au-after-title" }, "After"), el("pre", { id: "au-after", class: "mono wrap" })))),
      el("div", { class: "dialog-actions" }, el("button", { type: "submit", class: "btn", id: "au-close" }, "Close"))));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "audit-title" }, "Audit log")),
    el("p", { class: "muted" }, "Every configuration change, newest first: who made it (admin token), what changed, before and after. Secrets show as \"redacted\". Recorded by the database in the same transaction as the change."),
    form,
    el("p", { id: "au-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("p", { id: "au-count", class: "muted", role: "status", "aria-live": "polite" }),
    el("div", { id: "au-table" }),
    el("button", { type: "button", class: "btn", id: "au-more", hidden: true }, "Load more"),
    dialog);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); search(); });
  form.addEventListener("reset", () => setTimeout(search, 0));
  section.querySelector("#au-more").addEventListener("click", () => load(false));
}

// show reloads on every visit: the log grows, and a different token may have signed in since.
export async function show() {
  if (!query) await search();
  else await load(true);
}

function buildQuery() {
  clearErrors(root.querySelector("#au-form"));
  const q = new URLSearchParams({ limit: "50" });
  const v = (k) => root.querySelector(`#au-${k}`).value.trim();
  for (const [k] of TEXT) if (v(k)) q.set(k, v(k));
  for (const k of ["since", "until"]) if (v(k)) q.set(k, v(k).length === 16 ? `${v(k)}:00Z` : `${v(k)}Z`);
  return q.toString();
}

async function search() {
  query = buildQuery();
  await load(true);
}

async function load(fresh) {
  const err = root.querySelector("#au-error");
  notice(err, "");
  try {
    const { data } = await call("GET", `/admin/audit?${query}${!fresh && cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    items = fresh ? data.items : items.concat(data.items);
    cursor = data.next_cursor || "";
    render();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
    if (e instanceof ApiError && e.status === 403) {
      notice(err, "The audit log is for admin tokens only.");
      items = []; cursor = "";
      root.querySelector("#au-table").replaceChildren();
      root.querySelector("#au-count").textContent = "";
      return;
    }
    notice(err, errorText(e));
  }
}

function render() {
  root.querySelector("#au-count").textContent = items.length ? `${items.length} change${items.length === 1 ? "" : "s"}${cursor ? " (more available)" : ""}.` : "No changes match.";
  root.querySelector("#au-more").hidden = !cursor;
  const rows = items.map((a, i) => el("tr", {},
    el("td", { "data-label": "Time (UTC)" }, when(a.at, { utc: true })),
    el("td", { "data-label": "Actor" }, a.actor),
    el("td", { "data-label": "Action" }, a.action),
    el("td", { class: "mono", "data-label": "Resource" }, a.resource),
    el("td", { class: "mono wrap", "data-label": "Id" }, a.resource_id || "—"),
    el("td", { class: "actions" }, el("button", { type: "button", class: "btn btn-small", "data-row": i,
      "aria-label": `Details of ${a.action} ${a.resource} ${a.resource_id}`, onclick: (ev) => open(a, ev.currentTarget) }, "Details"))));
  root.querySelector("#au-table").replaceChildren(items.length ? table("Audit events", ["Time (UTC)", "Actor", "Action", "Resource", "Id", { label: "" }],
    rows, { cls: "data cards-narrow" }) : "");
}

// pretty renders a row image; money and ids stay the strings and numbers the API sent.
function pretty(v) {
  return v === null || v === undefined ? "—" : JSON.stringify(v, null, 2);
}

function open(a, from) {
  opener = from;
  root.querySelector("#au-dialog-title").textContent = `${a.action} ${a.resource} ${a.resource_id}`;
  root.querySelector("#au-detail").replaceChildren(...[["id", a.id], ["at", a.at], ["actor", a.actor], ["role", a.actor_role || "—"]]
    .flatMap(([k, v]) => [el("dt", {}, k), el("dd", { class: "mono" }, String(v))]));
  root.querySelector("#au-before").textContent = pretty(a.before);
  root.querySelector("#au-after").textContent = pretty(a.after);
  dialog.addEventListener("close", () => opener?.focus(), { once: true });
  dialog.showModal();
  root.querySelector("#au-close").focus();
}
