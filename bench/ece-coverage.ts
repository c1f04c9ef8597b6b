/**
 * Coverage of the ECE interval (metrics.ts eceWithInterval): in each setting,
 * 1,000 seeded trials of synthetic answers whose population binned ECE is
 * known exactly (test/support/calibration-trials.ts), and the share of trials
 * whose 95% interval holds it. Also the share whose interval holds its own
 * estimate (must be all), the mean estimate, and the mean plug-in ECE beside
 * the truth, which shows the bias the estimate removes.
 *
 *   npx tsx bench/ece-coverage.ts            # 1,000 trials per setting
 *   TRIALS=200 npx tsx bench/ece-coverage.ts
 *
 * Not part of `make bench`: it measures a statistic, not a speed.
 */
import { calibrationError, eceWithInterval } from "../src/quality/metrics.js";
import { trial, trueBinnedEce } from "../test/support/calibration-trials.js";

const TRIALS = Number(process.env["TRIALS"] ?? 1000);
const SETTINGS: { n: number; sharpness: number }[] = [
  { n: 200, sharpness: 1 },
  { n: 1000, sharpness: 1 },
  { n: 5000, sharpness: 1 },
  { n: 200, sharpness: 1.5 },
  { n: 1000, sharpness: 1.5 },
  { n: 5000, sharpness: 1.5 },
  { n: 1000, sharpness: 1.15 },
];

console.log(`| n | sharpness | true binned ECE | 95% interval covers it | holds its estimate | mean estimate | mean plug-in ECE |`);
console.log(`|---|---|---|---|---|---|---|`);
for (const { n, sharpness } of SETTINGS) {
  const truth = trueBinnedEce(sharpness);
  let covered = 0;
  let holds = 0;
  let estimate = 0;
  let plugIn = 0;
  for (let t = 0; t < TRIALS; t++) {
    const { confidence, correct } = trial(n, sharpness, 1_000_003 * sharpness + 7919 * n + t);
    const r = eceWithInterval(confidence, correct, { seed: t + 1 });
    if (r.interval[0] <= truth && truth <= r.interval[1]) covered++;
    if (r.interval[0] <= r.estimate && r.estimate <= r.interval[1]) holds++;
    estimate += r.estimate;
    plugIn += calibrationError(confidence, correct).ece;
  }
  const pct = (x: number) => `${((100 * x) / TRIALS).toFixed(1)}%`;
  console.log(
    `| ${n} | ${sharpness} | ${truth.toFixed(4)} | ${pct(covered)} | ${pct(holds)} | ${(estimate / TRIALS).toFixed(4)} | ${(plugIn / TRIALS).toFixed(4)} |`,
  );
}
