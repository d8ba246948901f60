// Decimal strings for prices and multipliers. They are validated and compared as text, never as floats.

/** A plain non-negative decimal: digits, optionally '.' and digits. Size limits are the server's to enforce. */
export const DECIMAL_RE = /^\d+(\.\d+)?$/;
/** A non-negative integer (token counts, thresholds). */
export const INTEGER_RE = /^\d+$/;

export function isDecimal(s) { return DECIMAL_RE.test(s); }
export function isInteger(s) { return INTEGER_RE.test(s); }

function parts(s) {
  let [i, f = ""] = String(s).split(".");
  i = i.replace(/^0+(?=\d)/, "");
  f = f.replace(/0+$/, "");
  return [i, f];
}

/** Compares two non-negative decimal (or integer) strings exactly: -1, 0 or 1. Non-decimals sort last. */
export function compareDecimal(a, b) {
  const da = DECIMAL_RE.test(a ?? ""), db = DECIMAL_RE.test(b ?? "");
  if (!da || !db) return da === db ? 0 : (da ? -1 : 1);
  const [ai, af] = parts(a), [bi, bf] = parts(b);
  if (ai.length !== bi.length) return ai.length < bi.length ? -1 : 1;
  if (ai !== bi) return ai < bi ? -1 : 1;
  const n = Math.max(af.length, bf.length);
  const pa = af.padEnd(n, "0"), pb = bf.padEnd(n, "0");
  return pa === pb ? 0 : (pa < pb ? -1 : 1);
}

/** a − b of two non-negative decimal strings, exactly, as a signed decimal string ("-0.0012", "0"); "" when
 * either is not a decimal. BigInt arithmetic on the digits: never a float. */
export function subtractDecimal(a, b) {
  if (!DECIMAL_RE.test(a ?? "") || !DECIMAL_RE.test(b ?? "")) return "";
  const [ai, af] = parts(a), [bi, bf] = parts(b);
  const n = Math.max(af.length, bf.length);
  const d = BigInt(ai + af.padEnd(n, "0")) - BigInt(bi + bf.padEnd(n, "0"));
  const digits = (d < 0n ? -d : d).toString().padStart(n + 1, "0");
  let out = n ? `${digits.slice(0, digits.length - n)}.${digits.slice(digits.length - n)}` : digits;
  if (n) out = out.replace(/0+$/, "").replace(/\.$/, "");
  return (d < 0n ? "-" : "") + out;
}
