/**
 * What the prompt costs and whether an answer depends on its neighbours.
 *
 * Independence: every example ticket is asked the bundled triage job's three
 * questions together, and each question alone; the figure is the largest
 * gap between an option's probability asked alone and asked together (0 when
 * the shared prefix holds nothing question-dependent and the engine decodes
 * each suffix alike). Also the issue's case from the API's view: a choice
 * alone against the same choice with a noul and a score.
 *
 * Tokens: per record, the shared prefix (system text and state, computed
 * once), each question's suffix, and the input tokens billed, on a model with
 * Qwen3's real vocabulary (the counts a real model's tokenizer gives). The
 * gaps are measured on the byte-vocabulary test model the tests use and on
 * the Qwen3-vocabulary one. Random weights: mechanics, never quality.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { EvaluatorRequest } from "../src/api/schema.js";
import { LlamaEngine } from "../src/engines/llama.js";
import { LocalEvaluator } from "../src/evaluator/local.js";
import { detectTemplate } from "../src/evaluator/prompt.js";
import { loadJob } from "../src/records/job.js";
import { buildRequest } from "../src/runner/input/requests.js";
import { generatedModel, TINY, TINY_QWEN_VOCAB } from "../test/support/models.js";
import type { Benchmark } from "./harness.js";

const root = join(import.meta.dirname, "..");
const THREADS = Number(process.env["BENCH_THREADS"] ?? 1);

/** Every probability an answer carries, flattened in a fixed order. */
function probabilities(answer: unknown): number[] {
  const a = answer as { noul?: number; probabilities?: Record<string, number> };
  return a.noul !== undefined ? [a.noul] : Object.values(a.probabilities ?? {});
}

function gap(a: unknown, b: unknown): number {
  const x = probabilities(a);
  const y = probabilities(b);
  return Math.max(0, ...x.map((v, i) => Math.abs(v - (y[i] as number))));
}

const mean = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

const benchmark: Benchmark = {
  name: "prompt",
  description: "each question asked alone vs with the job's others (largest probability gap), and the prompt's tokens per record, bundled triage job",
  async run() {
    const job = loadJob(join(root, "jobs/support-triage.json"));
    const lines = readFileSync(join(root, "examples/data/tickets.jsonl"), "utf8").trim().split("\n");
    const requests = lines.map((line, i) => {
      const built = buildRequest(job, JSON.parse(line), i + 1);
      if (!built.ok) throw new Error(built.message);
      return built.request;
    });
    const figures: Record<string, number | string> = {};
    const ratios: { name: string; value: number }[] = [];
    for (const [name, spec] of [
      ["byte-vocabulary test model", TINY],
      ["Qwen3-vocabulary test model", TINY_QWEN_VOCAB],
    ] as const) {
      const engine = await LlamaEngine.load({ modelPath: generatedModel(spec), contextSize: 4096, threads: THREADS, sequences: 1 });
      const evaluator = new LocalEvaluator(engine, { id: "bench-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
      let worst = 0;
      let worstChoice = 0;
      for (const request of requests) {
        const together = (await evaluator.evaluate(request)).response.answers;
        for (const [q, question] of Object.entries(request.questions)) {
          const alone = (await evaluator.evaluate({ ...request, questions: { [q]: question } })).response.answers;
          const g = gap(alone[q], together[q]);
          worst = Math.max(worst, g);
          if (question.type === "choice") worstChoice = Math.max(worstChoice, g);
        }
      }
      figures[`${name}: largest gap, alone vs with the others`] = worst;
      figures[`${name}: largest gap, a choice alone vs with a noul and a score`] = worstChoice;
      if (spec === TINY_QWEN_VOCAB) {
        const prepared = requests.map((r) => evaluator.prepare(r as EvaluatorRequest));
        const first = prepared[0]!;
        figures["tokens: system text (shared by every record)"] = first.shared;
        figures["tokens: prefix per record, mean (system text + state)"] = mean(prepared.map((p) => p.prefix.length));
        first.names.forEach((q, i) => {
          figures[`tokens: suffix of ${q}`] = first.tasks[i]!.suffix.length;
        });
        const suffixes = mean(prepared.map((p) => p.tasks.reduce((s, t) => s + t.suffix.length, 0)));
        figures["tokens: suffixes per record (3 questions)"] = suffixes;
        figures["tokens: input billed per record, mean"] = mean(prepared.map((p) => p.usage.input_tokens));
        // What the engine evaluates for a record of a run: the system text is kept between records.
        figures["tokens: evaluated per record beyond the kept system text, mean"] = mean(prepared.map((p) => p.usage.input_tokens - p.shared));
        ratios.push({ name: "suffix tokens / input tokens billed", value: suffixes / mean(prepared.map((p) => p.usage.input_tokens)) });
        // A question asked alone: the whole prefix is its own.
        for (const q of Object.keys(job.questions)) {
          const alone = requests.map((r) => evaluator.prepare({ ...r, questions: { [q]: r.questions[q]! } } as EvaluatorRequest));
          figures[`tokens: ${q} asked alone, prefix / input billed, mean`] =
            `${mean(alone.map((p) => p.prefix.length)).toFixed(1)} / ${mean(alone.map((p) => p.usage.input_tokens)).toFixed(1)}`;
        }
      }
      await evaluator.close();
    }
    figures["records"] = requests.length;
    return { figures, ratios };
  },
};
export default benchmark;
