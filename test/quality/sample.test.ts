/**
 * What a gold sample is (src/quality/sample.ts): the Kolmogorov-Smirnov
 * comparison of the gold rows' confidence with the run's against SciPy's
 * (test/quality/fixtures/make_sample.py made the reference values; the
 * suite never runs Python), and the compact record of which gold rows a
 * calibration was fitted on.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { decodeIdKeys, encodeIdKeys } from "../../src/calibration/file.js";
import { recordKey } from "../../src/quality/resample.js";
import { compareConfidence, ConfidenceCounts, kolmogorovTail } from "../../src/quality/sample.js";

interface Reference {
  kolmogorov_tail: { lambda: number[]; sf: number[] };
  run: number[];
  random: { gold: number[]; distance: number; p: number };
  chosen: { gold: number[]; distance: number; p: number };
}
const ref = JSON.parse(readFileSync(new URL("fixtures/sample.json", import.meta.url), "utf8")) as Reference;

/** The run's confidences counted as `assess` counts them: a row by its top probability (here the only one given). */
function counted(values: readonly number[]): ConfidenceCounts {
  const c = new ConfidenceCounts();
  for (const x of values) c.add([x]);
  return c;
}

describe("gold chosen by confidence", () => {
  it("Kolmogorov's tail is SciPy's kstwobign.sf", () => {
    ref.kolmogorov_tail.lambda.forEach((lambda, i) => {
      const want = ref.kolmogorov_tail.sf[i]!;
      expect(kolmogorovTail(lambda), `lambda ${lambda}`).toBeCloseTo(want, 12);
      expect(Math.abs(kolmogorovTail(lambda) - want) / want, `lambda ${lambda}`).toBeLessThan(1e-9);
    });
    expect(kolmogorovTail(0)).toBe(1);
  });

  it("measures the KS distance and its p-value as SciPy does: a random sample passes, one drawn from the least sure fifth is chosen", () => {
    const run = counted(ref.run);
    const random = compareConfidence(Float64Array.from(ref.random.gold), run)!;
    expect(random.distance).toBeCloseTo(ref.random.distance, 12);
    expect(random.p).toBeCloseTo(ref.random.p, 9);
    expect(random.chosen).toBe(false);
    const chosen = compareConfidence(Float64Array.from(ref.chosen.gold), run)!;
    expect(chosen.distance).toBeCloseTo(ref.chosen.distance, 12);
    expect(Math.abs(chosen.p - ref.chosen.p) / ref.chosen.p).toBeLessThan(1e-6);
    expect(chosen).toMatchObject({ chosen: true, direction: "less sure", gold_rows: 150, run_rows: 2000 });
    expect(chosen.gold_median).toBeLessThan(chosen.run_median);
    // The gold is the whole run: not a sample of it, nothing to compare.
    expect(compareConfidence(Float64Array.from(ref.run), run)).toBeUndefined();
  });
});

describe("the gold rows a calibration was fitted on", () => {
  it("are recorded compactly, in any order, and read back as the same sorted keys", () => {
    const ids = Array.from({ length: 5000 }, (_, i) => `R${i}`);
    const keys = ids.map((id) => recordKey(id)[0]);
    const encoded = encodeIdKeys([...keys].reverse().concat(keys.slice(0, 10)));
    expect(encoded.count).toBe(5000);
    // 4 bytes a row, as base64: 27 KB for 5,000 gold rows.
    expect(encoded.key32.length).toBe(Math.ceil((5000 * 4) / 3) * 4);
    expect(Array.from(decodeIdKeys(encoded))).toEqual([...new Set(keys)].sort((a, b) => a - b));
    expect(Array.from(decodeIdKeys({ count: 0, key32: "" }))).toEqual([]);
  });
});
