/**
 * Synthetic label sets for the quality tools: answers in the shape `run`
 * writes (with the usage summary and errors file beside them) and gold
 * labels, for questions of all three types, from a seed. Each question says
 * how its gold classes are spread, how well the model separates them, and
 * how it leans (a lean against a rare class makes a model that misses it);
 * a run can be drawn again "by another model" (sharper or blunter
 * probabilities), for drift.
 */
import { writeFileSync } from "node:fs";
import { seededRandom } from "../../src/quality/metrics.js";

/** The model of the tests' nights: its versioned id, and two identities as `run` records them (a local file; other weights of the same name, by hash). */
export const MODEL = "qwen2.5-0.5b-instruct-1.0.0";
export const IDENTITY_FILE = JSON.stringify(["local", MODEL, "file:/models/qwen2.5-0.5b-instruct-q4_k_m.gguf:397808192:1763800000000", "chatml", 1]);
export const IDENTITY_SHA = JSON.stringify(["local", MODEL, `sha256:${"67c4f157".repeat(8)}`, "chatml", 1]);

export interface QuestionSpec {
  name: string;
  type: "noul" | "choice" | "score";
  /** Option names (choice), level texts (score); a noul's classes are no and yes. */
  labels?: string[];
  /** Share of gold rows per class (no, yes for a noul). */
  prior: number[];
  /** How far a record's logit of its class stands above the others: how separable the classes are. */
  skill: number;
  /** Added to the model's logit of each class: a negative lean makes the model miss a class. */
  lean?: number[];
  /** The model's logits times this (1: calibrated; above 1 overconfident). */
  overconfidence?: number;
}

export interface RunSpec {
  n: number;
  seed: number;
  questions: QuestionSpec[];
  /** The model's id and identity, as the usage summary records them. */
  model: string;
  identity: string;
  /** Every question's logits times this as well: another model, surer above 1, vaguer below (default 1). */
  sharpness?: number;
  /** Failed rows in the errors file (default 0). */
  failed?: number;
  /** Ids start here (default 0): runs with disjoint ids share none. */
  firstId?: number;
}

function gaussian(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

function draw(random: () => number, p: readonly number[]): number {
  let u = random();
  for (let i = 0; i < p.length; i++) {
    u -= p[i] as number;
    if (u <= 0) return i;
  }
  return p.length - 1;
}

function softmax(logits: readonly number[]): number[] {
  const max = Math.max(...logits);
  const e = logits.map((x) => Math.exp(x - max));
  const t = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / t);
}

const labelsOf = (q: QuestionSpec) => (q.type === "noul" ? ["no", "yes"] : (q.labels ?? []));

/** One row's answer as `run` writes it, from the class probabilities. */
function answerOf(q: QuestionSpec, p: number[]): Record<string, unknown> {
  if (q.type === "noul") return { type: "noul", noul: p[1] };
  const labels = labelsOf(q);
  const top = p.indexOf(Math.max(...p));
  if (q.type === "choice") return { type: "choice", choice: labels[top], probabilities: Object.fromEntries(labels.map((l, j) => [l, p[j]])), confidence: 0 };
  return {
    type: "score",
    score: p.reduce((e, v, k) => e + k * v, 0),
    legend: Object.fromEntries(labels.map((l, k) => [String(k), l])),
    probabilities: Object.fromEntries(p.map((v, k) => [String(k), v])),
    confidence: 0,
  };
}

/** Writes `<path>` (answers JSONL) with its usage summary and errors file, and returns the gold labels of its rows (CSV text). */
export function writeRun(path: string, spec: RunSpec): { gold: string; golds: number[][] } {
  // Records and their gold labels depend on the seed alone, so another model's run of the same records has the same truth.
  const random = seededRandom(spec.seed);
  const lines: string[] = [];
  const golds: number[][] = [];
  const goldLines = [`id,${spec.questions.map((q) => q.name).join(",")}`];
  const first = spec.firstId ?? 0;
  for (let i = 0; i < spec.n; i++) {
    const answers: Record<string, unknown> = {};
    const mass: Record<string, number> = {};
    const row: number[] = [];
    for (const q of spec.questions) {
      // A record: its class, and logits around it; the truth is drawn from their softmax, so a model that reports it is calibrated.
      const c = draw(random, q.prior);
      const logits = q.prior.map((p, j) => Math.log(p) + (j === c ? q.skill : 0) + gaussian(random));
      const y = draw(random, softmax(logits));
      row.push(y);
      const scale = (q.overconfidence ?? 1) * (spec.sharpness ?? 1);
      answers[q.name] = answerOf(q, softmax(logits.map((x, j) => (x + (q.lean?.[j] ?? 0)) * scale)));
      mass[q.name] = 0.6 + 0.4 * random();
    }
    golds.push(row);
    const id = `R${first + i}`;
    lines.push(
      JSON.stringify({
        id,
        line: i + 1,
        source: "records.jsonl",
        model: spec.model,
        answers,
        usage: { input_tokens: 120, output_tokens: 3 },
        label_mass: mass,
      }),
    );
    goldLines.push(
      `${id},${spec.questions
        .map((q, j) => {
          const label = labelsOf(q)[row[j] as number] as string;
          return q.type === "score" ? String(row[j]) : /[",]/.test(label) ? `"${label.replaceAll('"', '""')}"` : label;
        })
        .join(",")}`,
    );
  }
  writeFileSync(path, `${lines.join("\n")}\n`);
  const failed = spec.failed ?? 0;
  writeFileSync(
    `${path}.errors.jsonl`,
    Array.from({ length: failed }, (_, i) =>
      JSON.stringify({
        line: spec.n + i + 1,
        source: "records.jsonl",
        id: `X${i}`,
        status: 0,
        type: "invalid_record",
        message: `line ${spec.n + i + 1}: invalid JSON`,
      }),
    )
      .map((l) => `${l}\n`)
      .join(""),
  );
  writeFileSync(
    `${path}.usage.json`,
    JSON.stringify({
      kind: "typed-eval.usage",
      model: spec.model,
      model_identity: spec.identity,
      price_per_million_input_tokens: 0,
      records: { read: spec.n + failed, answered: spec.n, failed, deduplicated: 0, resumed: 0, other_shards: 0 },
      requests: { sent: spec.n, retries: 0, rate_limited: 0, overloaded: 0 },
      tokens: { input: spec.n * 120, output: spec.n * 3, wasted_input: 0 },
      cost_usd: 0,
      seconds: 12,
      records_per_second: spec.n / 12,
      tokens_per_second: 0,
      this_run: { started: "2026-11-23T02:00:00.000Z" },
    }),
  );
  return { gold: `${goldLines.join("\n")}\n`, golds };
}

/** Five questions of all three types, as a night of support tickets: a rare spam class the model misses, a long option name, two scores. */
export const FIVE_QUESTIONS: QuestionSpec[] = [
  { name: "is_spam", type: "noul", prior: [0.958, 0.042], skill: 4, lean: [0, -3] },
  {
    name: "team",
    type: "choice",
    labels: ["shipping", "billing", "product", "account access and login problems", "other"],
    prior: [0.3, 0.25, 0.2, 0.15, 0.1],
    skill: 4,
    overconfidence: 1.6,
  },
  { name: "urgency", type: "score", labels: ["whenever", "within days", "within a day", "now"], prior: [0.35, 0.3, 0.25, 0.1], skill: 2.5 },
  { name: "wants_refund", type: "noul", prior: [0.7, 0.3], skill: 6 },
  { name: "tone", type: "score", labels: ["calm", "annoyed", "angry"], prior: [0.5, 0.35, 0.15], skill: 5 },
];

/** Ten questions: the five above and five more, for a page that must stay readable. */
export const TEN_QUESTIONS: QuestionSpec[] = [
  ...FIVE_QUESTIONS,
  { name: "language", type: "choice", labels: ["English", "German", "French", "Spanish"], prior: [0.6, 0.2, 0.12, 0.08], skill: 7 },
  { name: "mentions_competitor", type: "noul", prior: [0.85, 0.15], skill: 5 },
  {
    name: "product_line",
    type: "choice",
    labels: ["kitchen", "garden", "toys", "electronics", "furniture", "other"],
    prior: [0.2, 0.2, 0.15, 0.2, 0.15, 0.1],
    skill: 4,
  },
  { name: "satisfaction", type: "score", labels: ["1", "2", "3", "4", "5"], prior: [0.1, 0.15, 0.3, 0.3, 0.15], skill: 3, overconfidence: 0.6 },
  { name: "needs_callback", type: "noul", prior: [0.8, 0.2], skill: 5 },
];
