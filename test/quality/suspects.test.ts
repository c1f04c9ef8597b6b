/**
 * Suspect gold labels by confident learning: a case worked by hand, the rule
 * that a gold label the model ranks first is never suspect (for any rows),
 * planted flips found with thresholds the method shipped before fails, and
 * the list as the file, the terminal and the HTML show it.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { assess } from "../../src/quality/assess.js";
import { findSuspects, SUSPECT_METHODS, type LabelledRows, type SuspectMethod } from "../../src/quality/confident-learning.js";
import { seededRandom } from "../../src/quality/metrics.js";
import { anchorOf, qualityPage } from "../../src/quality/pages.js";
import { buildVerdict } from "../../src/quality/verdict.js";
import { GoldIds, Suspects, TOP } from "../../src/quality/suspects.js";
import { runInProcess } from "../support/cli.js";
import { before, CASES, flipped, QUESTIONS, REGIMES, synthetic } from "../support/planted-flips.js";

const dir = mkdtempSync(join(tmpdir(), "te-suspects-"));
const TEAMS = ["shipping", "billing", "product", "account", "other"];
const MOODS = ["calm", "annoyed", "angry", "furious"];

function rowsOf(p: number[][], y: number[]): LabelledRows {
  const k = (p[0] as number[]).length;
  return { n: p.length, k, p: Float64Array.from(p.flat()), y: Int32Array.from(y) };
}

describe("confident learning, worked by hand", () => {
  // Three options A, B, C (0, 1, 2); 13 rows, the probabilities of A, B, C, then the gold label.
  const p = [
    [0.9, 0.05, 0.05], // r0  A
    [0.8, 0.1, 0.1], //   r1  A
    [0.1, 0.8, 0.1], //   r2  A
    [0.38, 0.32, 0.3], // r3  A
    [0.27, 0.08, 0.65], // r4 A
    [0.1, 0.85, 0.05], // r5  B
    [0.2, 0.7, 0.1], //   r6  B
    [0.6, 0.35, 0.05], // r7  B
    [0.1, 0.1, 0.8], //   r8  C
    [0.05, 0.15, 0.8], // r9  C
    [0.45, 0.1, 0.45], // r10 C
    [0.05, 0.05, 0.9], // r11 A
    [0.3, 0, 0.7], //     r12 A
  ];
  const y = [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 0];
  const rows = rowsOf(p, y);
  // Thresholds, the mean probability of each option over the rows gold-labelled with it:
  //   t_A = (.9 + .8 + .1 + .38 + .27 + .05 + .3) / 7 = 2.8 / 7 = 0.4
  //   t_B = (.85 + .7 + .35) / 3 = 0.6333
  //   t_C = (.8 + .8 + .45) / 3 = 0.6833
  // Confident labels (the most probable option at or over its threshold):
  //   r0, r1 A; r2 B (.8 >= .6333); r3 none (A .38 < .4, B .32, C .3); r4 none (C .65 < .6833);
  //   r5, r6 B; r7 A (.6 >= .4; B .35 < .6333); r8, r9 C; r10 A (.45 >= .4; C .45 < .6833);
  //   r11 C (.9); r12 C (.7 >= .6833; A .3 < .4).
  // Confident joint C (row gold, column confident):
  //   A: [2, 1, 2] (r0 r1 | r2 | r11 r12)   B: [1, 2, 0] (r7 | r5 r6)   C: [1, 0, 2] (r10 | r8 r9)
  // Calibrated, each row scaled to its gold label's 7, 3 and 3 rows:
  //   A: [2, 1, 2] * 7/5 = [2.8, 1.4, 2.8]   B: [1, 2, 0]   C: [1, 0, 2]   (sum 13)
  //   1 - trace / n = 1 - (2.8 + 2 + 2) / 13 = 6.2 / 13 = 0.4769 of the gold labels estimated wrong.
  // Whole rows, each row keeping its total: A's floors [2, 1, 2] sum to 5 of 7, so the two largest
  //   fractions (.8 for A and .8 for C, not .4 for B) gain one: A [3, 1, 3]; B [1, 2, 0]; C [1, 0, 2].
  it("finds the thresholds, the calibrated joint and the prune counts", () => {
    const found = findSuspects(rows, "noise-rate");
    [0.4, 1.9 / 3, 2.05 / 3].forEach((t, j) => expect(found.thresholds[j]).toBeCloseTo(t, 12));
    [2.8, 1.4, 2.8, 1, 2, 0, 1, 0, 2].forEach((c, i) => expect(found.joint[i]).toBeCloseTo(c, 12));
    expect([...found.prune]).toEqual([3, 1, 3, 1, 2, 0, 1, 0, 2]);
  });

  // Confident joint: its off-diagonal rows are r2, r11, r12 (gold A), r7 (gold B) and r10 (gold C);
  //   r10's gold C ties the model's top answer (.45 and .45), so it is dropped: r2, r7, r11, r12.
  //   (The method shipped before listed r10 too, with a margin of 0.)
  it("confident joint: the off-diagonal rows, less any whose gold label the model ranks first", () => {
    expect([...findSuspects(rows, "confident-joint").rows]).toEqual([2, 7, 11, 12]);
    expect([...before(rows)]).toEqual([2, 7, 10, 11, 12]);
  });

  // Prune by noise rate: for each off-diagonal cell (gold i, true j), its count of rows gold-labelled i
  //   with the largest p_j - p_i.
  //   (A, B) 1: p_B - p_A over gold A: r2 .7, r11 0, r3 -.06, r4 -.19, r12 -.3, ... -> r2
  //   (A, C) 3: p_C - p_A over gold A: r11 .85, r12 .4, r4 .38, r2 0, r3 -.08, ... -> r11, r12, r4
  //   (B, A) 1: p_A - p_B over gold B: r7 .25, r6 -.5, r5 -.75 -> r7
  //   (C, A) 1: p_A - p_C over gold C: r10 0, r8 -.7, r9 -.75 -> r10, dropped: its gold C ties the top.
  //   So r2, r4, r7, r11, r12: r4, which no option passes confidently, as well.
  it("prune by noise rate: the largest margins of each off-diagonal cell, less any whose gold label the model ranks first", () => {
    expect([...findSuspects(rows, "noise-rate").rows]).toEqual([2, 4, 7, 11, 12]);
  });

  // Ranked by margin = p(model's top option) - p(gold): r11 .85, r2 .7, r12 .4, r4 .38, r7 .25.
  it("lists them by margin, largest first, naming the model's top option", async () => {
    const answers = join(dir, "hand.jsonl");
    const gold = join(dir, "hand.csv");
    const names = ["A", "B", "C"];
    writeFileSync(
      answers,
      `${p
        .map((d, r) =>
          JSON.stringify({
            id: `r${r}`,
            answers: { letter: { type: "choice", choice: "A", probabilities: Object.fromEntries(names.map((l, j) => [l, d[j]])), confidence: 0.5 } },
          }),
        )
        .join("\n")}\n`,
    );
    writeFileSync(gold, `id,letter\n${y.map((g, r) => `r${r},${names[g]}`).join("\n")}\n`);
    const s = new Suspects("noise-rate");
    await assess(answers, gold, { suspects: s, bootstrap: 0 });
    const list = s.rows();
    expect(list.map((r) => [r.id, r.gold, r.model_label])).toEqual([
      ["r11", "A", "C"],
      ["r2", "A", "B"],
      ["r12", "A", "C"],
      ["r4", "A", "C"],
      ["r7", "B", "A"],
    ]);
    [0.85, 0.7, 0.4, 0.38, 0.25].forEach((m, i) => expect(list[i]!.margin).toBeCloseTo(m, 12));
    const q = s.summary().questions[0]!;
    expect(q.confident_joint_noise).toBeCloseTo(6.2 / 13, 12);
    expect(q.thresholds["A"]).toBeCloseTo(0.4, 12);
    expect(q.top).toEqual(list);
  });
});

describe("a gold label the model ranks first is never suspect", () => {
  // Rows of 2-5 options whose probabilities often tie (few distinct values), any gold labels.
  const question = fc.integer({ min: 2, max: 5 }).chain((k) =>
    fc.array(
      fc.tuple(
        fc.array(fc.integer({ min: 0, max: 4 }), { minLength: k, maxLength: k }).filter((w) => w.some((x) => x > 0)),
        fc.integer({ min: 0, max: k - 1 }),
      ),
      { minLength: 1, maxLength: 60 },
    ),
  );
  for (const method of SUSPECT_METHODS) {
    it(`${method}: for any rows, every suspect's gold label is below the model's top option`, () => {
      fc.assert(
        fc.property(question, (data) => {
          const p = data.map(([w]) => w.map((x) => x / w.reduce((a, b) => a + b, 0)));
          const rows = rowsOf(
            p,
            data.map(([, g]) => g),
          );
          const found = findSuspects(rows, method);
          for (const r of found.rows) {
            const d = p[r] as number[];
            expect(d[rows.y[r] as number]).toBeLessThan(Math.max(...d));
          }
          // Each gold label's prune counts add up to its rows: the calibrated joint keeps the observed label counts.
          for (let i = 0; i < rows.k; i++) {
            const total = [...found.prune.subarray(i * rows.k, (i + 1) * rows.k)].reduce((a, b) => a + b, 0);
            expect(total).toBe(rows.y.filter((g) => g === i).length);
          }
        }),
        { numRuns: 300, seed: 29 },
      );
    });
  }
});

describe("order", () => {
  it("names the same rows whatever their order, ties at a cell's cut broken by record key", () => {
    // Few distinct probabilities: many margins tie at the cut of prune by noise rate.
    const rowsArb = fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 2 })), { minLength: 2, maxLength: 50 });
    fc.assert(
      fc.property(rowsArb, fc.integer(), (data, seed) => {
        const order = data.map((_, i) => i);
        const random = seededRandom(seed);
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(random() * (i + 1));
          [order[i], order[j]] = [order[j] as number, order[i] as number];
        }
        const table = [
          [0.6, 0.3, 0.1],
          [0.2, 0.5, 0.3],
          [0.4, 0.4, 0.2],
          [0.1, 0.2, 0.7],
        ];
        const flagged = (rowsInOrder: number[]) => {
          const rows = rowsOf(
            rowsInOrder.map((r) => table[data[r]![0]]!),
            rowsInOrder.map((r) => data[r]![1]),
          );
          // Each row's key: its original index, reversed, so key order is neither order given.
          const keys = { hi: Uint32Array.from(rowsInOrder, (r) => data.length - r), lo: new Uint32Array(rowsInOrder.length) };
          return SUSPECT_METHODS.map((m) => [...findSuspects(rows, m, keys).rows].map((i) => rowsInOrder[i]).sort((a, b) => a! - b!));
        };
        expect(flagged(order)).toEqual(flagged(data.map((_, i) => i)));
      }),
      { numRuns: 300, seed: 7 },
    );
  });
});

describe("planted flips", () => {
  const regime = REGIMES.find((r) => r.name === "biased")!;
  const fivePercent = CASES.find((c) => c.name === "5% flips")!;
  /** Precision and recall of `method` over the three questions of the biased regime, 4,000 rows each, seed 1, 5% flipped. */
  function figures(method: (rows: LabelledRows) => Int32Array) {
    let found = 0;
    let hit = 0;
    let flips = 0;
    for (const [qi, q] of QUESTIONS.entries()) {
      const s = synthetic(q, regime, 4000, 1000 + qi);
      const { gold, flip } = flipped(q, s.truth, fivePercent, 7919 + 2 * 31 + qi);
      const named = method({ n: 4000, k: q.prior.length, p: s.p, y: gold });
      found += named.length;
      for (const r of named) hit += flip[r] as number;
      flips += flip.reduce((a, b) => a + b, 0);
    }
    return { precision: hit / found, recall: hit / flips };
  }
  const with_ = (method: SuspectMethod) => figures((rows) => findSuspects(rows, method).rows);

  it("finds 5% flips from a biased model with a precision the method shipped before does not reach", () => {
    // Measured: confident-joint P 0.495 R 0.630; noise-rate P 0.416 R 0.790; before P 0.456 R 0.635.
    const old = figures(before);
    const joint = with_("confident-joint");
    const noise = with_("noise-rate");
    expect(joint.precision).toBeGreaterThan(0.48);
    expect(joint.recall).toBeGreaterThan(0.6);
    expect(old.precision).toBeLessThan(0.48);
    // Prune by noise rate trades precision for recall.
    expect(noise.recall).toBeGreaterThan(0.75);
    expect(noise.precision).toBeGreaterThan(0.4);
  });
});

interface Planted {
  answers: string;
  gold: string;
  /** question -> ids whose gold label was flipped */
  flipped: Map<string, Set<string>>;
}

function softmax(x: number[]): number[] {
  const m = Math.max(...x);
  const e = x.map((v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

/** Answers and gold files of three questions, the true label drawn from the model's own distribution, `rate` flipped; `order` permutes the rows as written. */
function planted(n: number, seed: number, rate: number, order?: number[]): Planted {
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
  const answerLines: string[] = [];
  const goldLines: string[] = [];
  for (let i = 0; i < n; i++) {
    const id = `r${i}`;
    const dists = {
      urgent: softmax([0, 4.8 * normal()]),
      team: softmax(TEAMS.map(() => 4 * normal())),
      mood: softmax(MOODS.map(() => 4 * normal())),
    };
    const labels: Record<string, number> = {};
    for (const [q, p] of Object.entries(dists)) {
      let y = draw(p);
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
  return { answers, gold, flipped };
}

async function suspectsOf(p: Planted, method?: SuspectMethod): Promise<Suspects> {
  const s = new Suspects(method);
  await assess(p.answers, p.gold, { suspects: s, bootstrap: 0 });
  return s;
}

describe("the suspects list", () => {
  it("keeps gold ids compactly and gives each back as it was", () => {
    const ids = Array.from({ length: 10_000 }, (_, i) => (i % 3 === 0 ? `ticket-${i}` : i % 3 === 1 ? `é${"x".repeat(i % 50)}🙂` : String(i)));
    const table = new GoldIds(ids);
    for (const i of [0, 1, 4095, 4096, 4097, 8191, 8192, 9999]) expect(table.at(i)).toBe(ids[i]);
    expect(ids.every((id, i) => table.at(i) === id)).toBe(true);
  });

  it("lists the same suspects in the same order whatever the row order", async () => {
    const perm = Array.from({ length: 600 }, (_, i) => i);
    const random = seededRandom(3);
    for (let i = perm.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [perm[i], perm[j]] = [perm[j] as number, perm[i] as number];
    }
    for (const method of SUSPECT_METHODS) {
      const a = await suspectsOf(planted(600, 11, 0.1), method);
      const b = await suspectsOf(planted(600, 11, 0.1, perm), method);
      expect(a.rows().length).toBeGreaterThan(20);
      expect(b.rows()).toEqual(a.rows());
    }
  });

  it("names the model's top option and a positive margin; each question keeps its own top rows by margin", async () => {
    const p = planted(1000, 5, 0.1);
    const s = await suspectsOf(p);
    const summary = s.summary();
    const rows = s.rows();
    expect(summary.total).toBe(rows.length);
    expect(summary.method).toBe("confident-joint");
    expect(summary.sort_key).toBe("margin");
    for (const r of rows) {
      expect(r.model_label).not.toBe(r.gold);
      expect(r.margin).toBeGreaterThan(0);
      expect(r.margin).toBeCloseTo(r.probability - r.gold_probability, 12);
    }
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.margin).toBeLessThanOrEqual(rows[i - 1]!.margin);
    for (const q of summary.questions) {
      const mine = rows.filter((r) => r.question === q.question);
      expect(q.suspects).toBe(mine.length);
      expect(q.top).toEqual(mine.slice(0, TOP));
      // Most of the flips are found, and the top of each list is mostly flips.
      const flips = p.flipped.get(q.question)!;
      expect(mine.filter((r) => flips.has(r.id)).length / flips.size).toBeGreaterThan(0.6);
      expect(q.top.filter((r) => flips.has(r.id)).length).toBeGreaterThanOrEqual(8);
    }
  });

  it("writes every suspect as CSV or JSONL, most suspect first, each naming its method", async () => {
    const s = await suspectsOf(planted(500, 9, 0.1), "noise-rate");
    const csv = join(dir, "out", "suspects.csv");
    await s.write(csv);
    const lines = readFileSync(csv, "utf8").trim().split("\n");
    expect(lines[0]).toBe("id,question,gold,model_label,probability,gold_probability,margin,method");
    expect(lines.length).toBe(s.summary().total + 1);
    const first = s.rows(1)[0]!;
    expect(lines[1]).toBe(
      `${first.id},${first.question},${first.gold},${first.model_label},${first.probability},${first.gold_probability},${first.margin},noise-rate`,
    );
    const jsonl = join(dir, "out", "suspects.jsonl");
    await s.write(jsonl);
    const parsed = readFileSync(jsonl, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(parsed).toEqual(s.rows().map((r) => ({ ...r, method: "noise-rate" })));
    expect(s.summary().file).toBe(jsonl);
  });

  it("shows each question's own top rows with their margin in the HTML (not its share of one list for all)", async () => {
    const p = planted(1500, 17, 0.08);
    const s = await suspectsOf(p);
    const a = await assess(p.answers, p.gold, { bootstrap: 0 });
    a.suspects = s.summary();
    const html = qualityPage({ title: "Assessment", verdict: buildVerdict({ assessment: a }), assessment: a });
    for (const q of a.suspects.questions) {
      const section = html.slice(html.indexOf(`<h2 id="${anchorOf(q.question)}">`));
      const part = section.slice(0, section.indexOf("<h2", 4) > 0 ? section.indexOf("<h2", 4) : undefined);
      expect(part).toContain(`Suspect gold labels: ${q.suspects} rows`);
      expect(part).toContain("<th>margin ↓</th>");
      expect(q.top.length).toBe(Math.min(TOP, q.suspects));
      for (const r of q.top) expect(part).toContain(`<td>${r.id}</td>`);
    }
  });

  it("assess --suspects: each question's top rows in the text, the summary in the JSON, the file written; a path it cannot write is exit 2 and no file", async () => {
    const p = planted(300, 13, 0.1);
    const cli = (args: string[]) => runInProcess(["assess", p.answers, "--gold", p.gold, "--bootstrap", "0", ...args]);
    const file = join(dir, "cli", "suspects.csv");
    const json = await cli(["--suspects", file, "--json", "--suspects-method", "noise-rate"]);
    expect(json.code, json.stderr).toBe(0);
    const a = JSON.parse(json.stdout);
    expect(a.suspects.file).toBe(file);
    expect(a.suspects.method).toBe("noise-rate");
    expect(a.suspects.total).toBe(readFileSync(file, "utf8").trim().split("\n").length - 1);
    expect(a.suspects.questions.map((q: { question: string }) => q.question)).toEqual(["urgent", "team", "mood"]);
    const text = await cli(["--suspects"]);
    expect(text.code, text.stderr).toBe(0);
    const summary = JSON.parse((await cli(["--suspects", "--json"])).stdout).suspects;
    expect(summary.method).toBe("confident-joint");
    expect(text.stdout).toContain(`suspect gold labels (confident-joint; each list sorted by margin = p(model's label) - p(gold label)): ${summary.total}`);
    for (const q of summary.questions) {
      const r = q.top[0];
      expect(text.stdout).toContain(
        `${r.margin.toFixed(3)}   ${r.id}: ${r.gold} -> ${r.model_label} (${r.probability.toFixed(3)}, ${r.gold_probability.toFixed(3)})`,
      );
    }
    const folder = join(dir, "a-folder.csv");
    mkdirSync(folder);
    const bad = await cli(["--suspects", folder]);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
    expect(bad.stderr).toContain(`cannot write --suspects ${folder}`);
    expect(readdirSync(dir).filter((f) => f.startsWith("a-folder.csv."))).toEqual([]);
    expect(existsSync(`${folder}.partial`)).toBe(false);
    const unknown = await cli(["--suspects", "--suspects-method", "both"]);
    expect(unknown.code).toBe(2);
    const alone = await cli(["--suspects-method", "noise-rate"]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain("pass --suspects as well");
  });
});
