// Side-by-side: the runner CLI of two builds on the same 1,000,000-record input (ABBA), /usr/bin/time peak RSS.
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, rmSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
const dir = "/tmp/truth-bench";
const n = Number(process.argv[2] ?? 1_000_000);
const builds: Record<string, string> = { base: "/tmp/truth-base/bin/typed-eval.js", head: "/work/wt/truth/bin/typed-eval.js" };
const child = spawn(process.execPath, ["--import", "tsx", "/work/wt/truth/bench/upstream.ts", JSON.stringify({ minMs: 0, maxMs: 0, rpm: 1e12, tps: 1e15 })], { stdio: ["ignore", "pipe", "inherit"], cwd: "/work/wt/truth" });
const port = await new Promise<string>((resolve) => child.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())));
const url = `http://127.0.0.1:${port}`;
const input = join(dir, `in-${n}.jsonl`);
if (!existsSync(input)) {
  const out = createWriteStream(input);
  const pad = "x".repeat(880);
  for (let i = 0; i < n; i++) if (!out.write(`${JSON.stringify({ id: `r${i}`, text: `record ${i} ${pad}` })}\n`)) await new Promise<void>((r) => out.once("drain", () => r()));
  await new Promise<void>((r) => out.end(r));
}
const job = join(dir, "job.json");
writeFileSync(job, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" }, pick: { type: "choice", criteria: { a: null, b: null } } } }));
const order = (process.argv[3] ?? "base,head,head,base").split(",");
for (const name of order) {
  const output = join(dir, `out-${name}.jsonl`);
  for (const f of [output, `${output}.journal`, `${output}.errors.jsonl`, `${output}.usage.json`]) rmSync(f, { force: true });
  const started = Date.now();
  const r = spawnSync("/usr/bin/time", ["-f", "%M", process.execPath, builds[name]!, "run", input, "--job", job, "-o", output, "--base-url", url, "--rpm", "1e12", "--tps", "1e15", "--concurrency", "64"], { encoding: "utf8", env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "silent", TYPED_EVAL_API_KEY: "k" }, maxBuffer: 1 << 26 });
  const seconds = (Date.now() - started) / 1000;
  const peak = Number(r.stderr.trim().split("\n").at(-1)) / 1024;
  console.log(JSON.stringify({ build: name, status: r.status, records: n, seconds, records_per_second: Math.round(n / seconds), peak_mib: Math.round(peak), load: (await import("node:os")).loadavg()[0] }));
  for (const f of [output, `${output}.journal`]) rmSync(f, { force: true });
}
child.kill();
