// Small DOM helpers shared by the page modules. Text always goes in as text nodes (never HTML): names,
// models and ids are operator or client input.
import { ApiError } from "./api.js";

/** Creates an element: attrs (class, for, hidden, data-*, aria-*, on* handlers) and children (strings or nodes). */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (v === true) e.setAttribute(k, "");
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** A labelled field: label, control and an error line the control describes itself by. */
export function field(id, label, control, { hint, wide } = {}) {
  control.id = id;
  const err = el("p", { id: `${id}-error`, class: "field-error", hidden: true });
  const describedBy = [hint ? `${id}-hint` : "", `${id}-error`].filter(Boolean).join(" ");
  control.setAttribute("aria-describedby", describedBy);
  return el("div", { class: wide ? "field field-wide" : "field" },
    el("label", { for: id }, label), control,
    hint ? el("p", { id: `${id}-hint`, class: "muted small" }, hint) : null, err);
}

/** Shows msg under the field with this id (and marks it invalid); an empty msg clears it. */
export function fieldError(id, msg) {
  const input = document.getElementById(id);
  const err = document.getElementById(`${id}-error`);
  if (input) input.setAttribute("aria-invalid", msg ? "true" : "false");
  if (err) { err.textContent = msg || ""; err.hidden = !msg; }
}

/** Clears every field error inside root. */
export function clearErrors(root) {
  for (const e of root.querySelectorAll(".field-error")) { e.textContent = ""; e.hidden = true; }
  for (const e of root.querySelectorAll("[aria-invalid]")) e.setAttribute("aria-invalid", "false");
}

/**
 * Puts an API error's details next to the fields they name (map: API field name → input id); returns the
 * messages no field took, and focuses the first field shown.
 */
export function showApiErrors(e, map) {
  const rest = [];
  let first = null;
  for (const d of (e instanceof ApiError ? e.details : [])) {
    const id = map[d.field];
    if (id && document.getElementById(id)) {
      fieldError(id, d.message);
      first = first || id;
    } else rest.push([d.field, d.message].filter(Boolean).join(": "));
  }
  if (first) document.getElementById(first).focus();
  if (!(e instanceof ApiError) || !e.details.length) rest.push(e.message);
  return rest;
}

/** A page-level notice (role alert) whose text is set or cleared. */
export function notice(node, msg) {
  node.textContent = msg || "";
  node.hidden = !msg;
}

/** Groups the integer part of a decimal string with thin commas: "1234567.5" → "1,234,567.5". */
export function groupDigits(s) {
  const str = String(s);
  const neg = str.startsWith("-");
  const [i, f] = (neg ? str.slice(1) : str).split(".");
  const g = i.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return (neg ? "-" : "") + g + (f !== undefined ? "." + f : "");
}

/**
 * Rounds a plain decimal string to places digits, half up, on the digits themselves (no Number): for
 * display only; tables show the exact string.
 */
export function roundDecimal(s, places) {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(String(s));
  if (!m) return String(s);
  const [, sign, int, frac = ""] = m;
  if (frac.length <= places) return sign + int + (places ? "." + frac.padEnd(places, "0") : "");
  let digits = (int + frac.slice(0, places)).split("").map(Number);
  if (frac[places] >= "5") {
    let i = digits.length - 1;
    while (i >= 0) { if (digits[i] === 9) { digits[i] = 0; i--; } else { digits[i]++; break; } }
    if (i < 0) digits = [1, ...digits];
  }
  const all = digits.join("");
  const ip = all.slice(0, all.length - places) || "0";
  return sign + ip + (places ? "." + all.slice(all.length - places) : "");
}

/**
 * A dollar amount from an exact decimal string, formatted on its digits (never through a Number): a
 * dollar or more is rounded to cents ("$1,234.57"); less than a dollar is written exactly, with at least
 * two decimals ("$0.50", "$0.000123"), because at small scale rounding to cents would show $0.00 for
 * every figure. Anything that is not a plain decimal is shown as it came.
 */
export function dollars(s) {
  const m = /^(-?)(\d+)(?:\.(\d*?))?0*$/.exec(String(s));
  if (!m) return String(s);
  const [, sign, int, frac = ""] = m;
  if (/^0*$/.test(int)) return sign + "$0." + frac.padEnd(2, "0");
  return sign + "$" + groupDigits(roundDecimal(int + (frac ? "." + frac : ""), 2));
}

/** Formats an integer string or number with thousands separators. */
export function count(n) { return groupDigits(String(n)); }

/** "2026-11-27 14:00" in the browser's zone, or in UTC with utc=true. */
export function when(iso, { utc = false, time = true } = {}) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const pad = (x) => String(x).padStart(2, "0");
  const y = utc ? d.getUTCFullYear() : d.getFullYear();
  const mo = pad((utc ? d.getUTCMonth() : d.getMonth()) + 1);
  const da = pad(utc ? d.getUTCDate() : d.getDate());
  if (!time) return `${y}-${mo}-${da}`;
  return `${y}-${mo}-${da} ${pad(utc ? d.getUTCHours() : d.getHours())}:${pad(utc ? d.getUTCMinutes() : d.getMinutes())}`;
}

/** A table with a caption (visually hidden), header cells and rows of cells. */
export function table(caption, heads, rows, { cls = "data" } = {}) {
  return el("div", { class: "table-wrap" },
    el("table", { class: cls },
      el("caption", { class: "visually-hidden" }, caption),
      el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col", class: h.num ? "num" : "" }, h.label ?? h)))),
      el("tbody", {}, rows)));
}

/** Downloads text as a file (a same-document blob: link; the CSP needs nothing for it). */
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** The message of an error for a page notice, with up to five details. */
export function errorText(e) {
  if (!(e instanceof ApiError)) return e.message;
  const d = e.details.map((x) => [x.field, x.message].filter(Boolean).join(": "));
  return d.length ? `${e.message} — ${d.slice(0, 5).join("; ")}` : e.message;
}

/**
 * A bar for a percent string computed by the API (exact): the one place a figure becomes a Number, to
 * size the bar (capped at 100 %); the text beside it is the API's string.
 */
export function burnBar(percent, zeroLimit) {
  const bar = el("span", { class: "burn-fill", "aria-hidden": "true" });
  const n = zeroLimit ? 100 : Math.min(100, Math.max(0, Number(percent)));
  bar.style.width = `${Number.isFinite(n) ? n : 0}%`;
  const over = zeroLimit || Number(percent) >= 100;
  return el("span", { class: `burn${over ? " burn-over" : Number(percent) >= 80 ? " burn-warn" : ""}` },
    el("span", { class: "burn-track" }, bar), el("span", { class: "burn-text mono" }, zeroLimit ? "limit 0" : `${percent} %`));
}
