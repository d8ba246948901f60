// GET /admin/spend for the Overview and Spend pages. Costs stay the exact decimal strings the API sends;
// only chart heights become Numbers (plotting, never arithmetic shown to the operator).
import { call } from "./api.js";

/** Builds the query string of a spend request: filters are {dimension: [values]}. */
export function spendQuery({ since, until, bucket, tz, groupBy = [], top, filters = {}, format }) {
  const q = new URLSearchParams();
  q.set("since", since);
  q.set("until", until);
  if (bucket) q.set("bucket", bucket);
  if (tz && tz !== "UTC") q.set("tz", tz);
  if (groupBy.length) q.set("group_by", groupBy.join(","));
  if (top) q.set("top", String(top));
  for (const [dim, values] of Object.entries(filters)) for (const v of values) q.append(dim, v);
  if (format) q.set("format", format);
  return `/admin/spend?${q}`;
}

export async function getSpend(req) {
  const { data } = await call("GET", spendQuery(req));
  return data;
}

/** Midnight UTC of the day d (a Date) plus days, as RFC 3339. */
export function utcDay(d, days = 0) {
  const t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + days);
  return new Date(t).toISOString().replace(".000Z", "Z");
}

const ID_TITLES = { org: "Org", team: "Team", user: "User", key: "Key", provider: "Provider" };

/** One dimension's value for people: "Team 3", "No team", "gpt-4o", "(none)". */
export function dimValue(dim, v) {
  if (ID_TITLES[dim]) return v === null || v === undefined ? `No ${ID_TITLES[dim].toLowerCase()}` : `${ID_TITLES[dim]} ${v}`;
  return v === "" || v === null || v === undefined ? "(none)" : String(v);
}

/** A row's group label: "Team 3 · gpt-4o"; "Other" for the rest beyond the top N; "All" without groups. */
export function groupLabel(row, groupBy) {
  if (row.other) return "Other";
  if (!groupBy.length) return "All";
  return groupBy.map((d) => dimValue(d, row.group[d])).join(" · ");
}
