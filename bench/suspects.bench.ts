/**
 * How well each suspects method finds planted label flips, side by side in
 * one run: `make bench BENCH=suspects`. The data (test/support/planted-flips.ts):
 * synthetic model probabilities for three questions (a noul, a 5-option
 * choice, a 4-level score), each with a class imbalance, from a model in four
 * regimes (overconfident, underconfident and biased, calibrated, and a
 * stronger model); gold labels are the true labels with a seeded share
 * flipped (2%, 5%, 10%, and 5% all from one class to one other), and no
 * flips at all for the false alarms. The methods: `before`, the one shipped
 * until issue 29 (the confident joint's off-diagonal rows, gold on top
 * included), and each of SUSPECT_METHODS as `assess --suspects` runs it.
 * Precision, recall and F1 pool every question and seed of a case. The
 * goals: the default's F1 at least `before`'s in every case, and at most 2%
 * of labels flagged with no flips.
 */
import { findSuspects, SUSPECT_METHODS, type LabelledRows } from "../src/quality/confident-learning.js";
import { DEFAULT_SUSPECT_METHOD } from "../src/quality/suspects.js";
import { before, CASES, flipped, QUESTIONS, REGIMES, synthetic } from "../test/support/planted-flips.js";
import type { Benchmark, Ratio } from "./harness.js";

const ROWS = Number(process.env["BENCH_SUSPECTS_ROWS"] ?? 4000);
const SEEDS = Number(process.env["BENCH_SUSPECTS_SEEDS"] ?? 20);

const METHODS: [string, (rows: LabelledRows) => Int32Array][] = [
  ["before", before],
  ...SUSPECT_METHODS.map((m): [string, (rows: LabelledRows) => Int32Array] => [m, (rows) => findSuspects(rows, m).rows]),
];

interface Tally {
  found: number;
  hit: number;
  flips: number;
  labels: number;
}

function tallyOf(map: Map<string, Tally>, key: string): Tally {
  let t = map.get(key);
  if (!t) map.set(key, (t = { found: 0, hit: 0, flips: 0, labels: 0 }));
  return t;
}

const score = (t: Tally) => {
  const precision = t.hit / t.found;
  const recall = t.hit / t.flips;
  return { precision, recall, f1: (2 * t.hit) / (t.found + t.flips) };
};

const bench: Benchmark = {
  name: "suspects",
  description: `suspect-label methods on planted flips: ${ROWS.toLocaleString("en-US")} rows per question, ${SEEDS} seeds, ${QUESTIONS.length} questions, ${REGIMES.length} regimes`,
  async run() {
    const figures: Record<string, string | number> = {};
    const ratios: Ratio[] = [];
    for (const regime of REGIMES) {
      const accuracy = new Map<string, number>();
      // tallies[case][method], and per question type at 5% flips.
      const tallies = CASES.map(() => METHODS.map((): Tally => ({ found: 0, hit: 0, flips: 0, labels: 0 })));
      const byType = new Map<string, Tally>();
      for (let seed = 1; seed <= SEEDS; seed++) {
        for (const [qi, q] of QUESTIONS.entries()) {
          const s = synthetic(q, regime, ROWS, seed * 1000 + qi);
          accuracy.set(q.name, (accuracy.get(q.name) ?? 0) + s.accuracy / SEEDS);
          CASES.forEach((c, ci) => {
            const { gold, flip } = flipped(q, s.truth, c, seed * 7919 + ci * 31 + qi);
            const rows = { n: ROWS, k: q.prior.length, p: s.p, y: gold };
            const flips = flip.reduce((a, b) => a + b, 0);
            METHODS.forEach(([name, method], mi) => {
              const found = method(rows);
              let hit = 0;
              for (const r of found) hit += flip[r] as number;
              const counted = [tallies[ci]![mi]!];
              if (c.name === "5% flips") counted.push(tallyOf(byType, `${q.type}, ${name}`));
              for (const t of counted) {
                t.found += found.length;
                t.hit += hit;
                t.flips += flips;
                t.labels += ROWS;
              }
            });
          });
        }
      }
      figures[`${regime.name}: model accuracy`] = QUESTIONS.map((q) => `${q.type} ${(accuracy.get(q.name) as number).toFixed(3)}`).join(", ");
      CASES.forEach((c, ci) => {
        METHODS.forEach(([name], mi) => {
          const t = tallies[ci]![mi]!;
          const key = `${regime.name}, ${c.name}, ${name}`;
          if (c.rate === 0) {
            figures[key] = `${t.found} of ${t.labels} labels flagged (${((100 * t.found) / t.labels).toFixed(2)}%)`;
            if (name === DEFAULT_SUSPECT_METHOD)
              ratios.push({ name: `${regime.name}: ${name} false alarms with no flips / 2%`, value: t.found / t.labels / 0.02, goal: { max: 1 } });
          } else {
            const f = score(t);
            figures[key] = `P ${f.precision.toFixed(3)}  R ${f.recall.toFixed(3)}  F1 ${f.f1.toFixed(3)}`;
          }
        });
        if (c.rate > 0) {
          const f1 = (m: string) => score(tallies[ci]![METHODS.findIndex(([name]) => name === m)]!).f1;
          ratios.push({
            name: `${regime.name}, ${c.name}: F1 ${DEFAULT_SUSPECT_METHOD} / before`,
            value: f1(DEFAULT_SUSPECT_METHOD) / f1("before"),
            goal: { min: 1 },
          });
        }
      });
      for (const [key, t] of byType) figures[`${regime.name}, 5% flips, ${key}`] = `F1 ${score(t).f1.toFixed(3)}`;
    }
    return { figures, ratios };
  },
};
export default bench;
