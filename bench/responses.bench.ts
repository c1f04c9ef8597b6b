/**
 * Memory under oversized responses: the CLI against an upstream (its own
 * process) whose every answer is 40 MB, streamed with no length declared
 * (over the 32 MiB cap, so every request fails and the run ends in exit 3),
 * beside the same run against an upstream answering normally, at the same
 * concurrency. Peak RSS of each from /usr/bin/time; the ratio's goal is 2.
 * BENCH_CONCURRENCY (default 32,1000) picks the concurrencies.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Benchmark, Ratio } from "./harness.js";
import { timedCli, upstreamProcess } from "./processes.js";

const dir = mkdtempSync(join(tmpdir(), "te-bench-responses-"));

/** One CLI run: its exit code, wall seconds and peak RSS in MiB. */
function measured(input: string, url: string, concurrency: number): { code: number; seconds: number; peakMiB: number } {
  const job = join(dir, "job.json");
  writeFileSync(job, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
  const out = join(dir, `out-${Date.now()}-${Math.random()}.jsonl`);
  const limits = ["--rpm", "1e12", "--tps", "1e15", "--concurrency", String(concurrency), "--max-retries", "0"];
  return timedCli(["run", input, "--job", job, "-o", out, "--base-url", url, ...limits]);
}

const bench: Benchmark = {
  name: "responses",
  description: "peak memory with 40 MB responses (over the cap) beside normal ones, same concurrency",
  async run() {
    const figures: Record<string, number> = {};
    const ratios: Ratio[] = [];
    const normal = await upstreamProcess({ minMs: 0, maxMs: 0, rpm: 1e12, tps: 1e15 });
    const large = await upstreamProcess({ minMs: 0, maxMs: 0, rpm: 1e12, tps: 1e15, bodyBytes: 40_000_000 });
    try {
      for (const concurrency of (process.env["BENCH_CONCURRENCY"] ?? "32,1000").split(",").map(Number)) {
        const records = Math.max(200, concurrency);
        const input = join(dir, `in-${records}.jsonl`);
        writeFileSync(input, Array.from({ length: records }, (_, i) => `${JSON.stringify({ id: `r${i}`, text: `record ${i}` })}\n`).join(""));
        const base = measured(input, normal.url, concurrency);
        const big = measured(input, large.url, concurrency);
        if (base.code !== 0) throw new Error(`the normal run exited ${base.code}`);
        if (big.code !== 3) throw new Error(`the run with 40 MB answers exited ${big.code}, not 3`);
        figures[`concurrency ${concurrency}: normal answers, peak RSS MiB`] = base.peakMiB;
        figures[`concurrency ${concurrency}: 40 MB answers, peak RSS MiB`] = big.peakMiB;
        figures[`concurrency ${concurrency}: 40 MB answers, seconds to exit 3`] = big.seconds;
        ratios.push({ name: `peak RSS 40 MB / normal, concurrency ${concurrency}`, value: big.peakMiB / base.peakMiB, goal: { max: 2 } });
      }
    } finally {
      normal.stop();
      large.stop();
    }
    return { figures, ratios };
  },
};
export default bench;
