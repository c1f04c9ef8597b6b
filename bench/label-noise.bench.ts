/**
 * How well `assess --suspects` estimates the share of wrong gold labels, on
 * planted flips with known truth, side by side with confident learning's
 * 1 - trace(Q) in one run: `make bench BENCH=label-noise`. The data are the
 * suspects benchmark's (test/support/planted-flips.ts): a noul, a 5-option
 * choice and a 4-level score, each with a class imbalance, answered by a
 * model in four regimes; gold labels are the true labels with 2%, 5% or 10%
 * flipped (a score to a neighbouring level). Per type and rate: the mean
 * estimate over seeds, how often the 95% interval holds the planted rate,
 * and confident learning's mean estimate. The goal: the interval holds the
 * planted rate in at least 90% of the draws of every type.
 */
import { calibratedJoint, confidentJoint, confidentLabels, confidentThresholds, labelCounts } from "../src/quality/confident-learning.js";
import { estimateNoise, type NoiseKernel } from "../src/quality/label-noise.js";
import { flipped, QUESTIONS, REGIMES, synthetic } from "../test/support/planted-flips.js";
import type { Benchmark, Ratio } from "./harness.js";

const ROWS = Number(process.env["BENCH_NOISE_ROWS"] ?? 4000);
const SEEDS = Number(process.env["BENCH_NOISE_SEEDS"] ?? 5);
const RATES = (process.env["BENCH_NOISE_RATES"] ?? "0.02,0.05,0.1").split(",").map(Number);

/** Confident learning's estimate, 1 - trace(Q): what the suspects cell read before. */
function confidentLearning(rows: { n: number; k: number; p: Float64Array; y: Int32Array }): number {
  const joint = calibratedJoint(confidentJoint(rows, confidentLabels(rows, confidentThresholds(rows))), labelCounts(rows));
  let trace = 0;
  for (let j = 0; j < rows.k; j++) trace += joint[j * rows.k + j] as number;
  return 1 - trace / rows.n;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

const bench: Benchmark = {
  name: "label-noise",
  description: `estimated share of wrong gold labels on planted flips: ${ROWS.toLocaleString("en-US")} rows per question, ${SEEDS} seeds, ${REGIMES.length} regimes`,
  async run() {
    const figures: Record<string, string | number> = {};
    const ratios: Ratio[] = [];
    const coveredByType = new Map<string, { held: number; draws: number }>();
    for (const q of QUESTIONS) {
      const kernel: NoiseKernel = q.type === "score" ? "neighbour" : "any-other";
      for (const rate of RATES) {
        let sum = 0;
        let width = 0;
        let held = 0;
        let cl = 0;
        let draws = 0;
        for (const [ri, regime] of REGIMES.entries()) {
          for (let seed = 1; seed <= SEEDS; seed++) {
            const s = synthetic(q, regime, ROWS, seed * 1000 + ri * 97);
            const { gold } = flipped(q, s.truth, { name: "", rate, oneClass: false }, seed * 7919 + ri * 31);
            const rows = { n: ROWS, k: q.prior.length, p: s.p, y: gold };
            const e = estimateNoise(rows, { kernel });
            sum += e.estimate;
            width += e.interval[1] - e.interval[0];
            if (e.interval[0] <= rate && rate <= e.interval[1]) held++;
            cl += confidentLearning(rows);
            draws++;
          }
        }
        const c = coveredByType.get(q.type) ?? { held: 0, draws: 0 };
        coveredByType.set(q.type, { held: c.held + held, draws: c.draws + draws });
        figures[`${q.type} ${pct(rate)}`] =
          `estimate ${pct(sum / draws)}, interval width ${pct(width / draws)}, holds the planted rate in ${held} of ${draws}; confident learning ${pct(cl / draws)}`;
      }
    }
    for (const [type, c] of coveredByType) ratios.push({ name: `${type}: intervals holding the planted rate`, value: c.held / c.draws, goal: { min: 0.9 } });
    return { figures, ratios };
  },
};
export default bench;
