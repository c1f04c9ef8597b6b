/**
 * The label-quality commands on a night's worth of answers: `assess` (gold
 * for every row, the worst case), alone and with the suspects list by each
 * method, and `report --compare` on 1,000,000 answered rows with three
 * questions (noul, a 5-option choice, a 4-level score), as the CLI runs them. Wall time and peak RSS against the goals
 * (60 s, 500 MiB), and against a bare pass that only reads and parses the
 * same file, to show what the metrics cost on top of the I/O.
 */
import { spawnSync } from "node:child_process";
import { createReadStream, createWriteStream, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { seededRandom } from "../src/quality/metrics.js";
import type { Benchmark, Ratio } from "./harness.js";

const ROWS = Number(process.env["BENCH_QUALITY_ROWS"] ?? 1_000_000);
const BIN = join(import.meta.dirname, "../bin/typed-eval.js");
const dir = mkdtempSync(join(tmpdir(), "te-bench-quality-"));
const options = ["shipping", "billing", "product", "account", "other"];

async function write(path: string, lines: (i: number) => string): Promise<void> {
  const out = createWriteStream(path);
  for (let i = 0; i < ROWS; i++) {
    if (!out.write(lines(i))) await new Promise<void>((resolve) => out.once("drain", () => resolve()));
  }
  await new Promise<void>((resolve) => out.end(resolve));
}

async function fixtures(seed: number): Promise<{ answers: string; gold: string }> {
  const random = seededRandom(seed);
  const answers = join(dir, `answers-${seed}.jsonl`);
  const gold = join(dir, `gold-${seed}.csv`);

  await write(answers, (i) => {
    const p = random();
    const w = options.map(() => random() ** 3);
    const t = w.reduce((a, b) => a + b, 0);
    const lv = [random(), random(), random(), random()];
    const lt = lv.reduce((a, b) => a + b, 0);

    return `${JSON.stringify({
      id: `r${i}`,
      line: i + 1,
      source: "night.jsonl",
      model: "m-1.0.0",
      answers: {
        urgent: { type: "noul", noul: p },
        team: { type: "choice", choice: "shipping", probabilities: Object.fromEntries(options.map((o, j) => [o, (w[j] as number) / t])), confidence: 0.5 },
        mood: {
          type: "score",
          score: 1.5,
          legend: { 0: "calm", 1: "annoyed", 2: "angry", 3: "furious" },
          probabilities: Object.fromEntries(lv.map((x, j) => [String(j), x / lt])),
          confidence: 0.3,
        },
      },
      usage: { input_tokens: 200, output_tokens: 3 },
    })}\n`;
  });
  const g = seededRandom(seed + 100);
  await write(
    gold,
    (i) => `${i === 0 ? "id,urgent,team,mood\n" : ""}r${i},${g() < 0.5 ? "yes" : "no"},${options[Math.floor(g() * 5)]},${Math.floor(g() * 4)}\n`,
  );
  return { answers, gold };
}

/**
 * Runs the CLI under GNU time: wall seconds, CPU seconds (user + system: on
 * a machine shared with other work, the figure that does not grow with the
 * load) and peak RSS in MiB; `ok` lists the exit codes that count as a run.
 */
function measured(args: string[], ok: readonly number[] = [0]): { seconds: number; cpu: number; peakMiB: number } {
  const start = process.hrtime.bigint();
  const r = spawnSync("/usr/bin/time", ["-f", "%U %S %M", process.execPath, BIN, ...args], { encoding: "utf8", maxBuffer: 1 << 28 });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (!ok.includes(r.status ?? -1)) throw new Error(`typed-eval ${args.join(" ")} exited ${r.status}: ${r.stderr.slice(-2000)}`);
  const [user, system, kb] = (r.stderr.trim().split("\n").pop() ?? "").split(" ").map(Number) as [number, number, number];
  return { seconds, cpu: user + system, peakMiB: kb / 1024 };
}

async function bareRead(path: string): Promise<number> {
  const start = process.hrtime.bigint();
  let n = 0;
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity }))
    if (line) n += (JSON.parse(line) as { line: number }).line > 0 ? 1 : 0;
  if (n !== ROWS) throw new Error(`read ${n} rows`);
  return Number(process.hrtime.bigint() - start) / 1e9;
}

const bench: Benchmark = {
  name: "quality",
  description: `assess and report on ${ROWS.toLocaleString("en-US")} answered rows, three questions`,
  async run() {
    const a = await fixtures(1);
    const b = await fixtures(2);
    const bare = await bareRead(a.answers);
    const assess = measured(["assess", a.answers, "--gold", a.gold, "--json", "--html", join(dir, "assess.html")]);
    // With the drift gate, as a nightly scheduler runs it: the two synthetic nights differ, so it may exit 4 (the gate) as well as 0.
    const report = measured(
      ["report", a.answers, "--compare", b.answers, "--fail-if", "team.psi>0.2,agreement<0.9,label_mass<0.5", "-o", join(dir, "report.html")],
      [0, 4],
    );
    // Every gold row against random answers: most rows are suspects (2.05 million over three questions; 1.55 million by noise rate), the file's worst case.
    const suspects = measured(["assess", a.answers, "--gold", a.gold, "--json", "--html", join(dir, "assess.html"), "--suspects", join(dir, "suspects.csv")]);
    const noiseRate = measured([
      "assess",
      a.answers,
      "--gold",
      a.gold,
      "--json",
      "--html",
      join(dir, "assess.html"),
      "--suspects",
      join(dir, "suspects.csv"),
      "--suspects-method",
      "noise-rate",
    ]);
    const ratios: Ratio[] = [
      { name: "assess seconds / 60 s", value: assess.seconds / 60, goal: { max: 1 } },
      { name: "assess peak RSS / 500 MiB", value: assess.peakMiB / 500, goal: { max: 1 } },
      { name: "report --compare --fail-if seconds / 60 s", value: report.seconds / 60, goal: { max: 1 } },
      { name: "report --compare --fail-if peak RSS / 500 MiB", value: report.peakMiB / 500, goal: { max: 1 } },
      { name: "assess / bare read and parse", value: assess.seconds / bare },
      { name: "assess --suspects seconds / 60 s", value: suspects.seconds / 60, goal: { max: 1 } },
      { name: "assess --suspects peak RSS / 500 MiB", value: suspects.peakMiB / 500, goal: { max: 1 } },
      { name: "assess --suspects / assess, wall", value: suspects.seconds / assess.seconds },
      { name: "assess --suspects / assess, CPU", value: suspects.cpu / assess.cpu },
      { name: "assess --suspects-method noise-rate seconds / 60 s", value: noiseRate.seconds / 60, goal: { max: 1 } },
      { name: "assess --suspects-method noise-rate peak RSS / 500 MiB", value: noiseRate.peakMiB / 500, goal: { max: 1 } },
    ];
    return {
      figures: {
        rows: ROWS,
        "bare read + JSON.parse (s)": bare,
        "assess wall (s)": assess.seconds,
        "assess CPU (s)": assess.cpu,
        "assess peak RSS (MiB)": assess.peakMiB,
        "report --compare wall (s)": report.seconds,
        "report --compare CPU (s)": report.cpu,
        "report --compare peak RSS (MiB)": report.peakMiB,
        "assess --suspects wall (s)": suspects.seconds,
        "assess --suspects CPU (s)": suspects.cpu,
        "assess --suspects peak RSS (MiB)": suspects.peakMiB,
        "assess --suspects noise-rate wall (s)": noiseRate.seconds,
        "assess --suspects noise-rate CPU (s)": noiseRate.cpu,
        "assess --suspects noise-rate peak RSS (MiB)": noiseRate.peakMiB,
      },
      ratios,
    };
  },
};
export default bench;
