/**
 * `thresholds` picks what its evidence supports: a review_below that keeps
 * the figure it was picked for, never a cut resting on fewer rows than the
 * minimum, every figure with its count and an interval that is not a
 * certainty on two rows, and a class's precision or recall as the target.
 */
import { describe, expect, it } from "vitest";
import { Rows } from "../../src/quality/assess.js";
import { describeThresholds, MIN_SUPPORT, pickThreshold, safeThreshold, targetedQuestions } from "../../src/quality/thresholds.js";

const info = { name: "urgent", type: "noul" as const, labels: ["false", "true"] };
const accuracy = (value: number) => ({ metric: "accuracy" as const, value });

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

const repeat = (n: number, row: [number, boolean]) => Array.from({ length: n }, (): [number, boolean] => row);

describe("suggested review_below", () => {
  it("rounds toward the safe side: never under a lower-confidence row the threshold leaves out", () => {
    // 18 right at 0.99 and 2 wrong at 0.98004 reach 0.9 exactly; a wrong row at 0.98001 must stay out.
    const list: [number, boolean][] = [...repeat(18, [0.99, true]), [0.98004, false], [0.98004, false], [0.98001, false]];
    const t = pickThreshold(info, rowsOf(list), accuracy(0.9), { minSupport: 10 });
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
    expect(safeThreshold(0.29, 0.1)).toBe(0.29);
    expect(safeThreshold(0.7, -Infinity)).toBe(0.7);
    // An old-style nearest rounding up (0.91235) would send threshold rows to review; this never goes above.
    expect(safeThreshold(0.912345, 0.9123449)).toBeLessThanOrEqual(0.912345);
    expect(safeThreshold(0.912345, 0.9123449)).toBeGreaterThan(0.9123449);
    // Float noise is no cut: no decimal of 8 digits or fewer falls between these.
    expect(safeThreshold(0.9900000000000001, 0.99)).toBeUndefined();
  });

  it("writes 0.99, not 0.9900000000000001: confidences that differ by float noise are one confidence", () => {
    // 0.9900000000000001 is what 0.99 becomes through a little arithmetic (a score's probabilities summed).
    const noisy = 0.9900000000000001;
    const list: [number, boolean][] = [...repeat(20, [noisy, true]), ...repeat(20, [0.99, true]), ...repeat(20, [0.6, false])];
    const t = pickThreshold(info, rowsOf(list), accuracy(0.95), { minSupport: 30 });
    expect(t.review_below).toBe(0.99);
    expect(t.accepted).toBe(40);
    expect(describeThresholds([t])).not.toMatch(/0\.99000000/);
  });
});

describe("support behind a threshold", () => {
  // A 2-row tail at the top that is right, then rows at 0.8 that are 70% right: the old picker accepted the 2 rows at 1.000 [1.000, 1.000].
  const tail: [number, boolean][] = [[0.999, true], [0.998, true], ...Array.from({ length: 100 }, (_, i): [number, boolean] => [0.8 - i * 1e-3, i % 10 >= 3])];

  it(`refuses a threshold on a 2-row tail: under ${MIN_SUPPORT} rows is no evidence`, () => {
    const t = pickThreshold(info, rowsOf(tail), accuracy(0.95));
    expect(t.min_support).toBe(MIN_SUPPORT);
    expect(t.threshold).toBeNull();
    expect(t.review_below).toBe(1);
    expect(describeThresholds([t])).toContain(`urgent (noul, 102 rows): no threshold reaches accuracy 0.95 on at least ${MIN_SUPPORT} rows; review every row`);
    // With the minimum lowered to 2 it picks the tail, and says what it rests on: 2 of 2, not a certainty.
    const two = pickThreshold(info, rowsOf(tail), accuracy(0.95), { minSupport: 2 });
    expect(two.threshold).toBe(0.998);
    expect(two.accepted).toBe(2);
    expect(two.accuracy_interval![0]).toBeLessThan(0.4);
    expect(two.accuracy_interval![1]).toBe(1);
    expect(describeThresholds([two])).toMatch(/accuracy 1\.000 \(95%: 0\.3\d\d–1\.000\), 2 of 2/);
  });

  it("widens to the support asked for when the target allows it", () => {
    // The same tail under a 0.8 target: the cut widens past the 2 rows to where 30 or more rows reach it.
    const list: [number, boolean][] = [...tail.slice(0, 2), ...repeat(40, [0.9, true]), ...tail.slice(2)];
    const t = pickThreshold(info, rowsOf(list), accuracy(0.8));
    expect(t.accepted).toBeGreaterThanOrEqual(MIN_SUPPORT);
    expect(t.correct / t.accepted).toBeGreaterThanOrEqual(0.8);
    expect(acceptedAccuracy(list, t.review_below)).toBe(t.accuracy);
  });
});

describe("a class's precision or recall as the target", () => {
  const fraud = { name: "team", type: "choice" as const, labels: ["billing", "fraud", "other"] };
  /** Answers: `n` rows answered `label` with confidence p, gold `gold`. */
  function block(n: number, label: number, p: number, gold: number): { dist: number[]; gold: number }[] {
    const dist = [0, 1, 2].map((j) => (j === label ? p : (1 - p) / 2));
    return Array.from({ length: n }, () => ({ dist, gold }));
  }
  // Billing is easy and common; fraud answers at 0.97 are right only 2 times in 3, at 0.999 always; 15 fraud rows are answered billing at 0.95.
  const data = [
    ...block(60, 1, 0.999, 1),
    ...block(600, 0, 0.98, 0),
    ...block(40, 1, 0.97, 1),
    ...block(20, 1, 0.97, 0),
    ...block(15, 0, 0.95, 1),
    ...block(100, 0, 0.9, 0),
    ...block(30, 1, 0.6, 1),
  ];
  const rows = new Rows(3);
  data.forEach((r, i) => rows.push(r.dist, r.gold, -1, `t${i}`));

  it("an accuracy target accepts fraud answers that are a third wrong; a precision target for fraud does not", () => {
    const overall = pickThreshold(fraud, rows, accuracy(0.95));
    expect(overall.accuracy).toBeGreaterThanOrEqual(0.95);
    expect(overall.review_below).toBeLessThanOrEqual(0.97);
    const precise = pickThreshold(fraud, rows, { metric: "precision", value: 0.95, class: "team=fraud" });
    expect(precise.target_class).toBe("fraud");
    expect(precise.review_below).toBe(0.98);
    expect(precise.figure).toMatchObject({ value: 1, hits: 60, support: 60 });
    expect(describeThresholds([precise])).toContain("precision of fraud 1.000 (95%: 0.940–1.000), 60 of 60");
  });

  it("a recall target counts the accepted rows whose gold is the class", () => {
    const t = pickThreshold(fraud, rows, { metric: "recall", value: 0.9, class: "fraud" });
    // Accepting the billing answers at 0.95 would let 15 fraud rows through as billing: 100 of 115, under 0.9, and so on down.
    expect(t.review_below).toBe(0.97);
    expect(t.figure).toMatchObject({ value: 1, hits: 100, support: 100 });
    expect(t.accepted).toBe(720);
  });

  it("needs a class that one question has", () => {
    expect(() => targetedQuestions([fraud], { metric: "precision", value: 0.9 })).toThrow(/needs --class/);
    expect(() => targetedQuestions([fraud], { metric: "precision", value: 0.9, class: "team=theft" })).toThrow(
      /names no question's option.*team: billing, fraud, other/,
    );
    const other = { ...fraud, name: "queue" };
    expect(() => targetedQuestions([fraud, other], { metric: "recall", value: 0.9, class: "fraud" })).toThrow(/option of team and queue; name the question/);
    expect(targetedQuestions([fraud, other], { metric: "recall", value: 0.9, class: "queue=fraud" }).map((q) => q.name)).toEqual(["queue"]);
  });
});
