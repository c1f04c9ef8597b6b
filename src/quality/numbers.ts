/**
 * Numbers for people, the same on every page and in the terminal: a fixed
 * number of decimals where that reads, significant digits where a value is
 * too small for them (5e-11, never "0.000"), no negative zero, and "n/a"
 * for a figure that could not be computed (never NaN).
 */

/** Drops trailing zeros of a decimal mantissa: "5.0e-11" -> "5e-11", "0.00040" -> "0.0004". */
function trimZeros(s: string): string {
  const [mantissa = s, exponent] = s.split("e");
  const trimmed = mantissa.includes(".") ? mantissa.replace(/0+$/, "").replace(/\.$/, "") : mantissa;
  return exponent === undefined ? trimmed : `${trimmed}e${exponent}`;
}

/** `x` with `digits` decimals; a non-zero value those decimals would print as zero keeps two significant digits; n/a when it is not a number. */
export function num(x: number | null | undefined, digits = 3): string {
  if (x === undefined || x === null || !Number.isFinite(x)) return "n/a";
  if (x !== 0 && Math.abs(x) < 0.5 * 10 ** -digits) return trimZeros(x.toPrecision(2));
  const s = x.toFixed(digits);
  // -0.0004 to three decimals, or -0 itself: a sign on a zero says nothing.
  return /^-0(\.0*)?$/.test(s) ? s.slice(1) : s;
}

/** A share as a percent with one decimal (significant digits below 0.05%): 0.123 -> "12.3%"; n/a when it is not a number. */
export function pct(x: number | null | undefined): string {
  if (x === undefined || x === null || !Number.isFinite(x)) return "n/a";
  return `${num(x * 100, 1)}%`;
}

/** A count with thousands separators. */
export const tally = (n: number) => n.toLocaleString("en-US");

/** `1 gold row`, `2 gold rows`: the count with thousands separators and the noun in its number. */
export function plural(n: number, noun: string, nouns = `${noun}s`): string {
  return `${tally(n)} ${n === 1 ? noun : nouns}`;
}

/** A 95% interval as "0.024–0.146" at the digits of its figure. */
export function intervalText(interval: readonly [number, number] | undefined | null, digits = 3): string {
  return interval ? `${num(interval[0], digits)}–${num(interval[1], digits)}` : "";
}

/** Names joined for a sentence: "a", "a and b", "a, b and c". */
export function listText(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}
