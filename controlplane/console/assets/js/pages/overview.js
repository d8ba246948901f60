// Overview: spend today and over the last 30 days, top models and teams, and the configuration's state.
import { call } from "../api.js";
import { el, dollars, count, notice, errorText, table, burnBar, groupDigits } from "../ui.js";
import { getSpend, utcDay, groupLabel } from "../spendapi.js";

let root;

export function mount(section) {
  root = section;
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "overview-title" }, "Overview"),
      el("div", { class: "page-actions" }, el("button", { type: "button", class: "btn btn-quiet", id: "ov-reload", onclick: () => show() }, "Reload"))),
    el("p", { id: "ov-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("div", { class: "cards", id: "ov-cards" }),
    el("div", { class: "two-col" },
      el("section", { class: "panel", "aria-labelledby": "ov-models-title" },
        el("h2", { id: "ov-models-title" }, "Top models, last 30 days"), el("div", { id: "ov-models" })),
      el("section", { class: "panel", "aria-labelledby": "ov-teams-title" },
        el("h2", { id: "ov-teams-title" }, "Top spenders (teams), last 30 days"), el("div", { id: "ov-teams" }))),
    el("section", { class: "panel", "aria-labelledby": "ov-burn-title" },
      el("h2", { id: "ov-burn-title" }, "Budget burn: current period"), el("div", { id: "ov-burn" }),
      el("p", { class: "small" }, el("a", { href: "#budgets" }, "All budgets"))),
    el("p", { class: "muted small" }, "Days are UTC. Amounts of a dollar or more are rounded to cents here (hover for the exact amount); smaller amounts are exact. The Spend page and its CSV show every amount exactly."));
}

function card(id, label, value, sub, title) {
  return el("div", { class: "card", id },
    el("p", { class: "card-label" }, label), el("p", { class: "card-value", title }, value), sub ? el("p", { class: "card-sub muted" }, sub) : null);
}

// The spend API's seven token categories, which are disjoint (input is the uncached input, output excludes
// image output): their sum is every token the requests counted.
const TOKEN_KINDS = [["input", "input"], ["output", "output"], ["cache_read", "cache read"], ["cache_creation_5m", "cache write 5m"],
  ["cache_creation_30m", "cache write 30m"], ["cache_creation_1h", "cache write 1h"], ["image_output", "image output"]];

// tokensCard: the total of every category (summed exactly as BigInt) and the non-zero categories under it.
function tokensCard(tokens) {
  const n = (k) => BigInt(String(tokens?.[k] ?? 0));
  const total = TOKEN_KINDS.reduce((sum, [k]) => sum + n(k), 0n);
  const parts = TOKEN_KINDS.filter(([k]) => k === "input" || k === "output" || n(k) > 0n).map(([k, label]) => `${count(n(k))} ${label}`);
  return card("ov-tokens", "All tokens, last 30 days", count(total), parts.join(" · "));
}

function topTable(caption, ans, dim) {
  if (!ans.rows.length) return el("p", { class: "muted" }, "No spend in this period.");
  return table(caption, ["Name", { label: "Requests", num: true }, { label: "Cost", num: true }],
    ans.rows.map((r) => el("tr", {},
      el("td", { "data-label": "Name" }, groupLabel(r, [dim])), el("td", { class: "num", "data-label": "Requests" }, count(r.requests)),
      el("td", { class: "num mono", title: `$${r.cost}`, "data-label": "Cost" }, dollars(r.cost)))), { cls: "data cards-narrow" });
}

// freshnessCard: the data planes watching the answering control-plane replica and whether each holds the
// published version (GET /admin/snapshot-status, data_planes). Each replica knows only its own streams.
function freshnessCard(snap) {
  const dps = snap.data_planes || [];
  const stale = dps.filter((d) => d.version !== snap.published_version);
  const c = card("ov-dataplanes", "Data planes (this replica)", dps.length ? `${dps.length - stale.length} of ${dps.length} current` : "None",
    stale.length ? `Behind: ${stale.map((d) => `${d.node_id || d.peer} (v${d.version})`).join(", ")}`
      : dps.length ? `All on version ${snap.published_version}` : "No data plane watches this control-plane replica");
  c.classList.toggle("card-bad", stale.length > 0);
  return c;
}

// The five budgets with the highest share of their limit spent in the current period (GET /admin/budget-burn).
function burnTable(items) {
  if (!items.length) return el("p", { class: "muted" }, "No budget has a limit.");
  return table("Budgets by share of the limit spent", ["Budget", "Period", { label: "Spent / limit", num: true }, "Used"],
    items.map((b) => el("tr", {},
      el("td", { class: "wrap", "data-label": "Budget" }, `${b.scope}: ${b.name || b.scope_id}`),
      el("td", { "data-label": "Period" }, b.period === "none" ? "lifetime" : b.period),
      el("td", { class: "num mono", "data-label": "Spent / limit" }, `$${groupDigits(b.cost_used)} / $${groupDigits(b.cost_limit)}`),
      el("td", { "data-label": "Used" }, burnBar(b.percent, b.percent === undefined)))), { cls: "data cards-narrow" });
}

export async function show() {
  const err = root.querySelector("#ov-error");
  notice(err, "");
  const now = new Date();
  const today = { since: utcDay(now), until: utcDay(now, 1) };
  const month = { since: utcDay(now, -29), until: utcDay(now, 1) };
  try {
    const [t, m, models, teams, snap, burn] = await Promise.all([
      getSpend(today), getSpend(month),
      getSpend({ ...month, groupBy: ["logical_model"], top: 5 }),
      getSpend({ ...month, groupBy: ["team"], top: 5 }),
      call("GET", "/admin/snapshot-status").then((r) => r.data),
      call("GET", "/admin/budget-burn?limit=5").then((r) => r.data.items || []),
    ]);
    const snapOK = !snap.failing;
    root.querySelector("#ov-cards").replaceChildren(
      card("ov-today", "Spend today (UTC)", dollars(t.total.cost), `${count(t.total.requests)} requests`, `$${t.total.cost}`),
      card("ov-month", "Spend, last 30 days", dollars(m.total.cost), `${count(m.total.requests)} requests`, `$${m.total.cost}`),
      tokensCard(m.total.tokens),
      card("ov-snapshot", "Configuration", snapOK ? "Published" : "Not compiling",
        snapOK ? `Data planes serve version ${snap.published_version}` : `Data planes keep version ${snap.published_version}; see the banner`),
      freshnessCard(snap));
    root.querySelector("#ov-snapshot").classList.toggle("card-bad", !snapOK);
    root.querySelector("#ov-models").replaceChildren(topTable("Top models by cost", models, "logical_model"));
    root.querySelector("#ov-teams").replaceChildren(topTable("Top teams by cost", teams, "team"));
    root.querySelector("#ov-burn").replaceChildren(burnTable(burn));
  } catch (e) {
    notice(err, errorText(e));
  }
}
