// Exact JSON for money: numbers are never turned into JS Numbers.
//
// parseExact keeps every JSON number as the string of digits the server sent (via the reviver's
// source-text access), so ids, token counts and cost_micros survive unchanged whatever their size.
// Prices and costs are decimal strings on the wire already and stay strings.
// int() marks a validated digit string to be sent as a raw JSON integer.

const hasSource = (() => {
  try {
    let ok = false;
    JSON.parse("1", (k, v, ctx) => { ok = !!(ctx && ctx.source === "1"); return v; });
    return ok;
  } catch { return false; }
})();

/** Parses JSON text, keeping every number as its source string. */
export function parseExact(text) {
  return JSON.parse(text, (key, value, ctx) => {
    if (typeof value === "number") return hasSource && ctx ? ctx.source : String(value);
    return value;
  });
}

const canRaw = typeof JSON.rawJSON === "function";

/** A JSON integer from a string of digits (optionally signed), serialised without passing through a float. */
export function int(digits) {
  const s = String(digits);
  if (!/^-?\d+$/.test(s)) throw new Error(`not an integer: ${s}`);
  return canRaw ? JSON.rawJSON(s.replace(/^(-?)0+(?=\d)/, "$1")) : Number(s);
}

/** Serialises a payload built with int(). */
export function stringify(value) {
  return JSON.stringify(value);
}
