/**
 * Dates, times and timestamps as the text a record holds, and back: the one
 * home of how a typed input's temporal values (Parquet's DATE, TIME,
 * TIMESTAMP, INT96 and INTERVAL) become record values, and how a typed
 * output finds and writes them again.
 *
 * A timestamp keeps its unit and its time zone: ISO 8601 with as many
 * fraction digits as its unit has (3 for milliseconds, 6 for microseconds,
 * 9 for nanoseconds) and a `Z` only when it is an instant in UTC
 * (`isAdjustedToUTC`); a naive one (a wall-clock time, as DuckDB's and
 * Spark's TIMESTAMP_NTZ and pandas' naive datetimes are) has none. A date is
 * `YYYY-MM-DD`. The values past the calendar JavaScript's Date covers
 * (DuckDB's `infinity`) are `infinity` and `-infinity`.
 */

/** A timestamp's or time's unit. */
export type TimeUnit = "ms" | "us" | "ns";

/** Counts of a unit per second, and the fraction digits it is written with. */
const PER_SECOND: Record<TimeUnit, bigint> = { ms: 1_000n, us: 1_000_000n, ns: 1_000_000_000n };
const DIGITS: Record<TimeUnit, number> = { ms: 3, us: 6, ns: 9 };
const SECONDS_PER_DAY = 86_400n;
const MS_PER_DAY = 86_400_000;
/** The farthest instant a Date holds, in milliseconds either side of 1970. */
const DATE_RANGE_MS = 8.64e15;

const pad2 = (n: bigint | number) => String(n).padStart(2, "0");

/** The date `days` after 1970-01-01 (`YYYY-MM-DD`; years past 9999 as `+YYYYYY`), or `±infinity` past the calendar. */
export function dateText(days: number): string {
  const ms = days * MS_PER_DAY;
  if (!(Math.abs(ms) <= DATE_RANGE_MS)) return days > 0 ? "infinity" : "-infinity";
  const iso = new Date(ms).toISOString();
  return iso.slice(0, iso.indexOf("T"));
}

/** The time of day `count` units after midnight: `HH:MM:SS.fff` with the unit's digits. */
function clockText(count: bigint, unit: TimeUnit): string {
  const perSecond = PER_SECOND[unit];
  const seconds = count / perSecond;
  const fraction = count % perSecond;
  return `${pad2(seconds / 3600n)}:${pad2((seconds / 60n) % 60n)}:${pad2(seconds % 60n)}.${fraction.toString().padStart(DIGITS[unit], "0")}`;
}

/** A timestamp of `count` units since 1970-01-01T00:00 as ISO 8601 text, with `Z` only when it is an instant in UTC. */
export function timestampText(count: bigint, unit: TimeUnit, utc: boolean): string {
  const perDay = PER_SECOND[unit] * SECONDS_PER_DAY;
  let days = count / perDay;
  let rest = count % perDay;
  if (rest < 0n) {
    rest += perDay;
    days -= 1n;
  }
  const date = dateText(Number(days));
  if (date.endsWith("infinity")) return date;
  return `${date}T${clockText(rest, unit)}${utc ? "Z" : ""}`;
}

/** A time of day (Parquet TIME) as `HH:MM:SS.fff`, `Z` when it is adjusted to UTC. */
export function timeText(count: bigint, unit: TimeUnit, utc: boolean): string {
  return `${clockText(count, unit)}${utc ? "Z" : ""}`;
}

/** A Parquet INTERVAL (months, days, milliseconds; little-endian unsigned) as an ISO 8601 duration: `P1M2DT3.5S`. */
export function intervalText(bytes: Uint8Array): string {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const months = view.getUint32(0, true);
  const days = view.getUint32(4, true);
  const millis = view.getUint32(8, true);
  const date = `${months ? `${months}M` : ""}${days ? `${days}D` : ""}`;
  const time = millis ? `T${millis / 1000}S` : "";
  return `P${date}${time}` === "P" ? "P0D" : `P${date}${time}`;
}

/** The kind a typed output gives text that is a date or a timestamp this module writes (`timestamp-us`, `timestamptz-ns`, ...). */
export type TemporalKind = "date" | `timestamp-${TimeUnit}` | `timestamptz-${TimeUnit}`;

const DATE = /^(?:[+-]\d{6}|\d{4})-\d{2}-\d{2}$/;
const TIMESTAMP = /^((?:[+-]\d{6}|\d{4})-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}|\d{6}|\d{9}))?(Z?)$/;
const UNIT_OF_DIGITS: Record<number, TimeUnit> = { 0: "ms", 3: "ms", 6: "us", 9: "ns" };

/** Days since 1970-01-01 of a `YYYY-MM-DD` text, or undefined when it is no calendar date. */
function daysOf(date: string): number | undefined {
  const ms = Date.parse(`${date}T00:00:00.000Z`);
  // Date.parse rolls 02-30 over to March; a date that does not print back as itself is not one.
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, date.length) !== date) return undefined;
  return ms / MS_PER_DAY;
}

/** The kind of a text that is a date or a timestamp exactly as this module writes them (its unit from its fraction digits); undefined for any other text. */
export function temporalKindOf(text: string): TemporalKind | undefined {
  if (DATE.test(text)) return daysOf(text) === undefined ? undefined : "date";
  const match = TIMESTAMP.exec(text);
  if (!match || daysOf(match[1] as string) === undefined) return undefined;
  if (Number(match[2]) > 23 || Number(match[3]) > 59 || Number(match[4]) > 59) return undefined;
  const unit = UNIT_OF_DIGITS[(match[5] ?? "").length] as TimeUnit;
  return match[6] ? `timestamptz-${unit}` : `timestamp-${unit}`;
}

/** The days since 1970 of a date text (`temporalKindOf` said "date"). */
export function dateDays(text: string): number | undefined {
  return DATE.test(text) ? daysOf(text) : undefined;
}

/** The count of `unit` since 1970-01-01T00:00 of a timestamp text (`temporalKindOf` said it is one); a finer fraction than the unit is refused (undefined). */
export function timestampCount(text: string, unit: TimeUnit): bigint | undefined {
  const match = TIMESTAMP.exec(text);
  const days = match ? daysOf(match[1] as string) : undefined;
  if (!match || days === undefined) return undefined;
  const fraction = match[5] ?? "";
  if (fraction.length > DIGITS[unit]) return undefined;
  const seconds = BigInt(days) * SECONDS_PER_DAY + BigInt(Number(match[2]) * 3600 + Number(match[3]) * 60 + Number(match[4]));
  return seconds * PER_SECOND[unit] + BigInt(fraction.padEnd(DIGITS[unit], "0"));
}
