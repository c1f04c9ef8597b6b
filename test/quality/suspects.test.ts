/**
 * Suspect gold labels on synthetic gold with planted label flips: answers
 * drawn from a calibrated model (the true label is drawn from the model's own
 * distribution), then a seeded 10% of the gold labels flipped to another
 * option. Confident learning should find most flips and little else.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { assess } from "../../src/quality/assess.js";
import { seededRandom } from "../../src/quality/metrics.js";
import { Suspects } from "../../src/quality/suspects.js";
import { BIN } from "../support/cli.js";

const dir = mkdtempSync(join(tmpdir(), "te-suspects-"));
const TEAMS = ["shipping", "billing", "product", "account", "other"];
const MOODS = ["calm", "annoyed", "angry", "furious"];

interface Planted {
  answers: string;
  gold: string;
  /** question -> ids whose gold label was flipped */
  flipped: Map<string, Set<string>>;
  /** question -> the model's accuracy against the true labels */
  accuracy: Map<string, number>;
}

function softmax(x: number[]): number[] {
  const m = Math.max(...x);
  const e = x.map((v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

/** Synthetic answers and gold with `rate` of the gold labels flipped; `order` permutes the rows as written. */
function planted(n: number, seed: number, rate: number, order?: number[], sharp = 4): Planted {
  const random = seededRandom(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const draw = (p: number[]) => {
    let u = random();
    for (let j = 0; j < p.length; j++) if ((u -= p[j] as number) < 0) return j;
    return p.length - 1;
  };
  const flipped = new Map<string, Set<string>>([
    ["urgent", new Set()],
    ["team", new Set()],
    ["mood", new Set()],
  ]);
  const right = new Map<string, number>();
  const answerLines: string[] = [];
  const goldLines: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = `r${i}`;
    const dists = {
      urgent: softmax([0, 1.2 * sharp * normal()]),
      team: softmax(TEAMS.map(() => sharp * normal())),
      mood: softmax(MOODS.map(() => sharp * normal())),
    };
    const labels: Record<string, number> = {};
    for (const [q, p] of Object.entries(dists)) {
      let y = draw(p);
      if (p[y] === Math.max(...p)) right.set(q, (right.get(q) ?? 0) + 1 / n);
      if (random() < rate) {
        y = (y + 1 + Math.floor(random() * (p.length - 1))) % p.length;
        flipped.get(q)!.add(id);
      }
      labels[q] = y;
    }
    answerLines.push(
      JSON.stringify({
        id,
        answers: {
          urgent: { type: "noul", noul: dists.urgent[1] },
          team: { type: "choice", choice: "x", probabilities: Object.fromEntries(TEAMS.map((t, j) => [t, dists.team[j]])), confidence: 0.5 },
          mood: {
            type: "score",
            score: 1,
            legend: Object.fromEntries(MOODS.map((m, j) => [String(j), m])),
            probabilities: Object.fromEntries(MOODS.map((_, j) => [String(j), dists.mood[j]])),
            confidence: 0.5,
          },
        },
      }),
    );
    goldLines.push(`${id},${labels["urgent"] ? "yes" : "no"},${TEAMS[labels["team"] as number]},${labels["mood"]}`);
  }
  const perm = order ?? answerLines.map((_, i) => i);
  const answers = join(dir, `answers-${seed}-${order ? "shuffled" : "plain"}.jsonl`);
  const gold = join(dir, `gold-${seed}-${order ? "shuffled" : "plain"}.csv`);
  writeFileSync(answers, `${perm.map((i) => answerLines[i]).join("\n")}\n`);
  writeFileSync(
    gold,
    `id,urgent,team,mood\n${[...perm]
      .reverse()
      .map((i) => goldLines[i])
      .join("\n")}\n`,
  );
  return { answers, gold, flipped, accuracy: right };
}

async function suspectsOf(p: Planted): Promise<Suspects> {
  const s = new Suspects();
  await assess(p.answers, p.gold, { suspects: s, bootstrap: 0 });
  return s;
}

interface Figures {
  /** The model's accuracy against the true (unflipped) labels. */
  accuracy: number;
  flips: number;
  suspects: number;
  precision: number;
  recall: number;
  /** Precision among the most confident quarter of the suspects. */
  topQuarterPrecision: number;
}

async function figures(sharp: number): Promise<Record<string, Figures>> {
  const p = planted(4000, 7, 0.1, undefined, sharp);
  const s = await suspectsOf(p);
  const rows = s.rows();
  const out: Record<string, Figures> = {};
  for (const q of ["urgent", "team", "mood"]) {
    const flips = p.flipped.get(q)!;
    const found = rows.filter((r) => r.question === q);
    const hit = found.filter((r) => flips.has(r.id)).length;
    const top = found.slice(0, Math.round(found.length / 4));
    out[q] = {
      accuracy: p.accuracy.get(q)!,
      flips: flips.size,
      suspects: found.length,
      precision: hit / found.length,
      recall: hit / flips.size,
      topQuarterPrecision: top.filter((r) => flips.has(r.id)).length / top.length,
    };
  }
  return out;
}

describe("suspect gold labels (confident learning)", () => {
  it("finds planted label flips: precision and recall of a 10% flip rate, every question type", async () => {
    // A model 80-89% right (logit scale 4): recall 0.71-0.76, precision 0.48-0.70, 0.89-0.98 in the most confident quarter.
    const f = await figures(4);
    if (process.env["SUSPECTS_FIGURES"]) console.log(JSON.stringify({ sharp: 4, ...f }));
    for (const x of Object.values(f)) {
      expect(x.accuracy).toBeGreaterThan(0.7);
      expect(x.recall).toBeGreaterThan(0.65);
      expect(x.precision).toBeGreaterThan(0.42);
      expect(x.topQuarterPrecision).toBeGreaterThan(0.8);
    }
    // A sharper model (about 90% right) separates its own errors from label errors better.
    const sharp = await figures(6);
    if (process.env["SUSPECTS_FIGURES"]) console.log(JSON.stringify({ sharp: 6, ...sharp }));
    for (const [q, x] of Object.entries(sharp)) {
      expect(x.precision).toBeGreaterThan((f[q] as Figures).precision);
      expect(x.recall).toBeGreaterThan(0.72);
    }
  });

  it("lists the same suspects in the same order whatever the row order", async () => {
    const a = await suspectsOf(planted(600, 11, 0.1));
    const perm = Array.from({ length: 600 }, (_, i) => i);
    const random = seededRandom(3);
    for (let i = perm.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [perm[i], perm[j]] = [perm[j] as number, perm[i] as number];
    }
    const b = await suspectsOf(planted(600, 11, 0.1, perm));
    expect(a.rows().length).toBeGreaterThan(20);
    expect(b.rows()).toEqual(a.rows());
  });

  it("flags only rows whose confident label is not the gold one, ranked by margin", async () => {
    const s = await suspectsOf(planted(1000, 5, 0.1));
    const summary = s.summary();
    const rows = s.rows();
    expect(summary.total).toBe(rows.length);
    expect(summary.top).toEqual(rows.slice(0, 20));
    for (const r of rows) {
      expect(r.model_label).not.toBe(r.gold);
      const t = summary.questions.find((q) => q.question === r.question)!.thresholds;
      const key = r.question === "urgent" ? (r.model_label === "yes" ? "true" : "false") : r.question === "mood" ? r.model_label.split(":")[0]! : r.model_label;
      expect(r.probability).toBeGreaterThanOrEqual(t[key] as number);
      expect(r.margin).toBeCloseTo(r.probability - r.gold_probability, 12);
    }
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.margin).toBeLessThanOrEqual(rows[i - 1]!.margin);
  });

  it("writes every suspect as CSV or JSONL, most confident first", async () => {
    const s = await suspectsOf(planted(500, 9, 0.1));
    const csv = join(dir, "out", "suspects.csv");
    await s.write(csv);
    const lines = readFileSync(csv, "utf8").trim().split("\n");
    expect(lines[0]).toBe("id,question,gold,model_label,probability,gold_probability,margin");
    expect(lines.length).toBe(s.summary().total + 1);
    const first = s.rows(1)[0]!;
    expect(lines[1]!.startsWith(`${first.id},${first.question},${first.gold},${first.model_label},`)).toBe(true);
    const jsonl = join(dir, "out", "suspects.jsonl");
    await s.write(jsonl);
    const parsed = readFileSync(jsonl, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(parsed).toEqual(s.rows());
    expect(s.summary().file).toBe(jsonl);
  });

  it("assess --suspects: summary in the text and JSON, the file written; a path it cannot write is exit 2 and no file", () => {
    const p = planted(300, 13, 0.1);
    const cli = (args: string[]) =>
      spawnSync(process.execPath, [BIN, "assess", p.answers, "--gold", p.gold, "--bootstrap", "0", ...args], { encoding: "utf8" });
    const file = join(dir, "cli", "suspects.csv");
    const json = cli(["--suspects", file, "--json"]);
    expect(json.status, json.stderr).toBe(0);
    const a = JSON.parse(json.stdout);
    expect(a.suspects.file).toBe(file);
    expect(a.suspects.total).toBe(readFileSync(file, "utf8").trim().split("\n").length - 1);
    expect(a.suspects.questions.map((q: { question: string }) => q.question)).toEqual(["urgent", "team", "mood"]);
    const text = cli(["--suspects"]);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toContain(`suspect gold labels (confident learning): ${a.suspects.total}`);
    expect(text.stdout).toContain(`${a.suspects.top[0].id}, ${a.suspects.top[0].question}: ${a.suspects.top[0].gold} -> ${a.suspects.top[0].model_label}`);
    const folder = join(dir, "a-folder");
    mkdirSync(folder);
    const bad = cli(["--suspects", folder]);
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
    expect(bad.stderr).toContain(`cannot write suspects ${folder}`);
    expect(readdirSync(dir).filter((f) => f.startsWith("a-folder."))).toEqual([]);
    expect(existsSync(`${folder}.partial`)).toBe(false);
  }, 120_000);
});
