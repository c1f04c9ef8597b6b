/**
 * Numbers JSON has no form for (NaN, Infinity, -Infinity), through the
 * JSON a run keeps between reading and writing (its journal). A typed input
 * (a Parquet DOUBLE) can hold them, and a typed or text output can say them
 * again (Parquet's DOUBLE, CSV's `NaN`), so a kept value that is one is
 * journaled in MongoDB Extended JSON's form, `{"$numberDouble": "NaN"}`, and
 * read back as the number. Inside a list or an object it stays as JSON
 * writes it (null). JSONL outputs write the number as JSON does: null.
 */

const KEY = "$numberDouble";
const NAMES: ReadonlyMap<string, number> = new Map([
  ["NaN", Number.NaN],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["-Infinity", Number.NEGATIVE_INFINITY],
]);

/** A kept value as the journal holds it: a non-finite number in its tagged form, anything else as it is. */
export function journaledValue(value: unknown): unknown {
  return typeof value === "number" && !Number.isFinite(value) ? { [KEY]: String(value) } : value;
}

/** Kept values as read back from the journal: each tagged non-finite number is the number again (the object is changed in place). */
export function keptValues(keep: Record<string, unknown>): Record<string, unknown> {
  for (const [field, value] of Object.entries(keep)) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) continue;
    const keys = Object.keys(value);
    const name = (value as Record<string, unknown>)[KEY];
    if (keys.length === 1 && typeof name === "string" && NAMES.has(name)) keep[field] = NAMES.get(name);
  }
  return keep;
}
