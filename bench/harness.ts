/**
 * The benchmark contract: each `bench/*.bench.ts` default-exports a
 * `Benchmark`; `bench/run.ts` runs them and prints figures and the ratio each
 * is judged by. Ratios are measured side by side in one run, never against a
 * number recorded on another day.
 */
export interface Ratio {
  /** What the ratio compares, e.g. "16 questions / 1 question". */
  name: string;
  value: number;
  /** The goal, as a bound on `value`. */
  goal?: { max?: number; min?: number };
}

export interface BenchResult {
  figures: Record<string, number | string>;
  ratios: Ratio[];
}

export interface Benchmark {
  name: string;
  description: string;
  run(): Promise<BenchResult>;
}

/** Whether a ratio meets its goal (true when it has none). */
export function meetsGoal(ratio: Ratio): boolean {
  const { min, max } = ratio.goal ?? {};
  return (min === undefined || ratio.value >= min) && (max === undefined || ratio.value <= max);
}

/** Median of a non-empty list. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Median wall time in ms of `fn` over `rounds` rounds of `iterations` calls each. */
export async function timeMs(fn: () => unknown, iterations: number, rounds = 7): Promise<number> {
  const perCall: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) await fn();
    perCall.push(Number(process.hrtime.bigint() - start) / 1e6 / iterations);
  }
  return median(perCall);
}

/**
 * A seeded random order of `items` (Fisher-Yates on mulberry32): benchmarks interleaving several paths
 * draw each round's order from it, so no path keeps a fixed neighbour (a rotation keeps the cyclic
 * order, and what runs just before a path changes its caches and wake-ups), and a rerun draws the same orders.
 */
export function shuffler(seed = 1): <T>(items: readonly T[]) => T[] {
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  return (items) => {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [out[i], out[j]] = [out[j] as (typeof out)[number], out[i] as (typeof out)[number]];
    }
    return out;
  };
}
