/** Dates and timestamps as record text and back: every count of every unit, either side of 1970, prints and parses to itself. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KeptKindsOf } from "../../src/runner/output/columns.js";
import { dateDays, dateText, intervalText, temporalKindOf, type TimeUnit, timestampCount, timestampText, timeText } from "../../src/records/time-text.js";

describe("time text", () => {
  it("prints a timestamp with its unit's digits and a Z only in UTC, and reads it back to the same count", () => {
    expect(timestampText(1793523600123456789n, "ns", false)).toBe("2026-11-01T09:00:00.123456789");
    expect(timestampText(-1n, "us", true)).toBe("1969-12-31T23:59:59.999999Z");
    expect(timestampText(0n, "ms", false)).toBe("1970-01-01T00:00:00.000");
    expect(timestampText(9223372036854775807n, "us", false)).toBe("infinity");
    // Every count a Date's calendar holds (±8.64e15 ms), in each unit.
    const range = { ms: 8_640_000_000_000_000n, us: 8_640_000_000_000_000_000n, ns: 9_223_372_036_854_775_807n };
    fc.assert(
      fc.property(fc.constantFrom<TimeUnit>("ms", "us", "ns"), fc.boolean(), fc.bigInt(-(2n ** 63n) + 1n, 2n ** 63n - 1n), (unit, utc, raw) => {
        const count = raw % range[unit];
        const text = timestampText(count, unit, utc);
        expect(temporalKindOf(text)).toBe(`${utc ? "timestamptz" : "timestamp"}-${unit}`);
        expect(timestampCount(text, unit)).toBe(count);
      }),
    );
  });

  it("prints dates and reads them back; a day that does not exist is plain text", () => {
    fc.assert(
      fc.property(fc.integer({ min: -100_000_000, max: 100_000_000 }), (days) => {
        const text = dateText(days);
        expect(temporalKindOf(text)).toBe("date");
        expect(dateDays(text)).toBe(days);
      }),
    );
    expect(dateText(2_147_483_647)).toBe("infinity");
    for (const text of ["2026-02-30", "2026-13-01", "2026-11-01T24:00:00.000", "2026-11-01T09:00:00.12", "2026-11-01 09:00:00.123", "11/01/2026"])
      expect(temporalKindOf(text), text).toBeUndefined();
    // A text without a fraction is a timestamp in milliseconds.
    expect(temporalKindOf("2026-11-01T09:00:00Z")).toBe("timestamptz-ms");
    expect(timestampCount("2026-11-01T09:00:00.123456", "ms")).toBeUndefined();
  });

  it("prints times of day and intervals", () => {
    expect(timeText(32_400_500_000n, "us", false)).toBe("09:00:00.500000");
    const interval = (months: number, days: number, millis: number) => {
      const bytes = new Uint8Array(12);
      const view = new DataView(bytes.buffer);
      view.setUint32(0, months, true);
      view.setUint32(4, days, true);
      view.setUint32(8, millis, true);
      return intervalText(bytes);
    };
    expect([interval(1, 2, 3500), interval(0, 0, 0), interval(14, 0, 0)]).toEqual(["P1M2DT3.5S", "P0D", "P14M"]);
  });

  it("types a kept field by all its values: dates and timestamps of one unit and zone keep it, mixed text is text, NaN is a float", () => {
    const kinds = new KeptKindsOf(["d", "t", "mixed", "units", "x"]);
    for (const keep of [
      { d: "2026-11-01", t: "2026-11-01T09:00:00.123456Z", mixed: "2026-11-01", units: "2026-11-01T09:00:00.123", x: 3 },
      { d: "1969-12-31", t: null, mixed: "soon", units: "2026-11-01T09:00:00.123456", x: Number.NaN },
    ])
      kinds.add(keep);
    expect(Object.fromEntries(kinds.kinds())).toEqual({ d: "date", t: "timestamptz-us", mixed: "string", units: "string", x: "double" });
  });
});
