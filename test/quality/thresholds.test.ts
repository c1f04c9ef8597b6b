/**
 * The review_below that `thresholds` suggests keeps the accuracy it was
 * picked for: it accepts exactly the rows the threshold accepts.
 */
import { describe, expect, it } from "vitest";
import { Rows } from "../../src/quality/assess.js";
import { describeThresholds, pickThreshold, safeThreshold } from "../../src/quality/thresholds.js";

const info = { name: "urgent", type: "noul" as const, labels: ["false", "true"] };

/** A noul row answered yes with p(yes) = p, gold yes when `right`. */
function rowsOf(list: [p: number, right: boolean][]): Rows {
  const rows = new Rows(2);
  list.forEach(([p, right], i) => rows.push([1 - p, p], right ? 1 : 0, -1, `r${i}`));
  return rows;
}

/** In-sample accuracy of the rows a review_below accepts (top-label probability at or above it). */
function acceptedAccuracy(list: [number, boolean][], reviewBelow: number): number {
  const kept = list.filter(([p]) => p >= reviewBelow);
  return kept.filter(([, right]) => right).length / kept.length;
}

describe("suggested review_below", () => {
  it("rounds toward the safe side: never under a lower-confidence row the threshold leaves out", () => {
    // 18 right at 0.99 and 2 wrong at 0.98004 reach 0.9 exactly; a wrong row at 0.98001 must stay out.
    const list: [number, boolean][] = [
      ...Array.from({ length: 18 }, (): [number, boolean] => [0.99, true]),
      [0.98004, false],
      [0.98004, false],
      [0.98001, false],
    ];
    const t = pickThreshold(info, rowsOf(list), 0.9, { seed: 1, bootstrap: 20 });
    expect(t.threshold).toBe(0.98004);
    // Rounded to the nearest 4 digits (0.98) it let the 0.98001 row in: 18 of 21.
    expect(acceptedAccuracy(list, Number((0.98004).toFixed(4)))).toBeLessThan(0.9);
    expect(t.review_below).toBe(0.98004);
    expect(acceptedAccuracy(list, t.review_below)).toBeGreaterThanOrEqual(0.9);
    expect(describeThresholds([t])).toContain('"review_below": {"urgent":0.98004}');
  });

  it("is the shortest such decimal, at 4 digits or more, and never above the threshold", () => {
    expect(safeThreshold(0.912345, 0.9)).toBe(0.9123);
    expect(safeThreshold(0.912345, 0.91233)).toBe(0.91234);
    expect(safeThreshold(0.912345, 0.91234)).toBe(0.912345);
    expect(safeThreshold(0.29, 0.1)).toBeLessThanOrEqual(0.29);
    expect(safeThreshold(0.29, 0.1)).toBeGreaterThan(0.28);
    expect(safeThreshold(0.7, -Infinity)).toBe(0.7);
    // An old-style nearest rounding up (0.91235) would send threshold rows to review; this never goes above.
    expect(safeThreshold(0.912345, 0.9123449)).toBeLessThanOrEqual(0.912345);
    expect(safeThreshold(0.912345, 0.9123449)).toBeGreaterThan(0.9123449);
  });
});
