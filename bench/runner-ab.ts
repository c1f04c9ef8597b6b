/**
 * The runner's throughput and peak memory against another commit's, side by
 * side on one input (the throughput part of runner.bench.ts, both builds):
 *
 *   git archive <commit> | tar -x -C /tmp/base && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   (cd /tmp/base && npx tsc -p tsconfig.build.json && touch dist/.built); make build
 *   npx tsx bench/runner-ab.ts /tmp/base        (BENCH_RECORDS, default 1000000; BENCH_ORDER, default base,head,head,base)
 *
 * Each run is the compiled CLI under /usr/bin/time (peak RSS) against the
 * bench's stand-in upstream answering at once, limits out of the way, 64 in
 * flight, records of about 900 characters, JSONL in and out. The order
 * interleaves the builds (ABBA), so a machine that slows down during the
 * bench weighs on both alike. Prints one JSON line per run.
 */
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";

const base = resolve(process.argv[2] ?? "");
if (!existsSync(join(base, "dist", ".built")))
  throw new Error(`usage: npx tsx bench/runner-ab.ts <a built checkout of another commit> (no ${base}/dist/.built)`);
const builds: Record<string, string> = { base: join(base, "bin/typed-eval.js"), head: join(import.meta.dirname, "../bin/typed-eval.js") };
const n = Number(process.env["BENCH_RECORDS"] ?? 1_000_000);
const order = (process.env["BENCH_ORDER"] ?? "base,head,head,base").split(",");
const dir = join(tmpdir(), "te-bench-runner-ab");
mkdirSync(dir, { recursive: true });

const upstream = spawn(
  process.execPath,
  ["--import", "tsx", join(import.meta.dirname, "upstream.ts"), JSON.stringify({ minMs: 0, maxMs: 0, rpm: 1e12, tps: 1e15 })],
  {
    stdio: ["ignore", "pipe", "inherit"],
  },
);
const port = await new Promise<string>((done) => upstream.stdout?.once("data", (d: Buffer) => done(d.toString().trim())));

const input = join(dir, `in-${n}.jsonl`);
if (!existsSync(input)) {
  const out = createWriteStream(input);
  const pad = "x".repeat(880);
  for (let i = 0; i < n; i++)
    if (!out.write(`${JSON.stringify({ id: `r${i}`, text: `record ${i} ${pad}` })}\n`)) await new Promise<void>((r) => out.once("drain", () => r()));
  await new Promise<void>((r) => out.end(r));
}
const job = join(dir, "job.json");
writeFileSync(job, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" }, pick: { type: "choice", criteria: { a: null, b: null } } } }));

try {
  for (const name of order) {
    const output = join(dir, `out-${name}.jsonl`);
    const clean = () => {
      for (const f of [output, `${output}.journal`, `${output}.errors.jsonl`, `${output}.usage.json`]) rmSync(f, { force: true });
    };
    clean();
    const started = Date.now();
    const args = ["run", input, "--job", job, "-o", output, "--base-url", `http://127.0.0.1:${port}`, "--rpm", "1e12", "--tps", "1e15", "--concurrency", "64"];
    const run = spawnSync("/usr/bin/time", ["-f", "%M", process.execPath, builds[name] as string, ...args], {
      encoding: "utf8",
      env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "silent", TYPED_EVAL_API_KEY: "k" },
      maxBuffer: 1 << 26,
    });
    const seconds = (Date.now() - started) / 1000;
    const peakMiB = Number(run.stderr.trim().split("\n").at(-1)) / 1024;
    console.log(
      JSON.stringify({
        build: name,
        exit: run.status,
        records: n,
        seconds,
        records_per_second: Math.round(n / seconds),
        peak_mib: Math.round(peakMiB),
        load: loadavg()[0],
      }),
    );
    clean();
  }
} finally {
  upstream.kill();
}
