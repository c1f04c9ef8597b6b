/**
 * What a server loses when its clients ask different sets of question types.
 * The system text holds the reply hints of the types a request asks, so a
 * request of nouls and one of choices read different texts, and a sequence
 * whose last request asked the other set evaluates the system text again.
 * A job asks the same types of every record: a run loses nothing.
 *
 * The same requests (each example ticket asked once with the triage job's
 * noul, once with its choice) go through the engine in two orders: grouped
 * (every noul request, then every choice request: one change of set) and
 * alternating (noul, choice, noul, ...: a change at every request). Equal
 * work but for the system text kept or not; answers must be bit-identical.
 * Three engines: one sequence and one client (the worst case), four
 * sequences (the server's default) and one client, four sequences and four
 * requests in flight. Random model with Qwen2.5-0.5B's shapes and Qwen3's
 * real vocabulary, 2 threads (speed only).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { EvaluatorRequest } from "../src/api/schema.js";
import { LlamaEngine } from "../src/engines/llama.js";
import { LocalEvaluator } from "../src/evaluator/local.js";
import { detectTemplate } from "../src/evaluator/prompt.js";
import { loadJob } from "../src/records/job.js";
import { buildRequest } from "../src/runner/input/requests.js";
import { generatedModel, QWEN25_05B_SHAPE } from "../test/support/models.js";
import type { Benchmark } from "./harness.js";

/** At least 2: each order asks a round's states in another round than the other order (see below). */
const ROUNDS = Math.max(2, Number(process.env["BENCH_ROUNDS"] ?? 2));
/** How many of the 24 example tickets to ask (each twice: noul, choice). */
const RECORDS = Number(process.env["BENCH_RECORDS"] ?? 12);
const THREADS = Number(process.env["BENCH_THREADS"] ?? 2);
const root = join(import.meta.dirname, "..");

interface Setup {
  name: string;
  sequences: number;
  inFlight: number;
}
const SETUPS: Setup[] = [
  { name: "1 sequence, 1 in flight", sequences: 1, inFlight: 1 },
  { name: "4 sequences, 1 in flight", sequences: 4, inFlight: 1 },
  { name: "4 sequences, 4 in flight", sequences: 4, inFlight: 4 },
];

/** Answers `requests` in order with `inFlight` at a time: the answers (as JSON), the seconds and the tokens fed to llama.cpp. */
async function pass(engine: LlamaEngine, evaluator: LocalEvaluator, requests: readonly EvaluatorRequest[], inFlight: number) {
  const answers = new Array<string>(requests.length);
  const before = engine.evaluatedTokens;
  const start = process.hrtime.bigint();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (let i = next++; i < requests.length; i = next++)
        answers[i] = JSON.stringify((await evaluator.evaluate(requests[i] as EvaluatorRequest)).response.answers);
    }),
  );
  return { answers, seconds: Number(process.hrtime.bigint() - start) / 1e9, tokens: engine.evaluatedTokens - before };
}

const benchmark: Benchmark = {
  name: "type-sets",
  description: `requests alternating two sets of question types against the same requests grouped by set, 0.5B-shaped model, real vocabulary, ${THREADS} thread(s)`,
  async run() {
    const path = generatedModel(QWEN25_05B_SHAPE);
    const job = loadJob(join(root, "jobs/support-triage.json"));
    const sets = { noul: { wants_refund: job.questions["wants_refund"]! }, choice: { team: job.questions["team"]! } };
    const lines = readFileSync(join(root, "examples/data/tickets.jsonl"), "utf8").trim().split("\n").slice(0, RECORDS);
    const ask = (line: string, i: number, questions: EvaluatorRequest["questions"]) => {
      const built = buildRequest({ ...job, questions }, JSON.parse(line), i + 1);
      if (!built.ok) throw new Error(built.message);
      return built.request;
    };
    const byNoul = lines.map((l, i) => ask(l, i, sets.noul));
    const byChoice = lines.map((l, i) => ask(l, i, sets.choice));
    const orders = {
      grouped: [...byNoul, ...byChoice],
      alternating: byNoul.flatMap((r, i) => [r, byChoice[i] as EvaluatorRequest]),
    };
    const figures: Record<string, number | string> = {};
    const ratios: { name: string; value: number; goal?: { min?: number; max?: number } }[] = [];
    let mismatches = 0;
    for (const setup of SETUPS) {
      const engine = await LlamaEngine.load({ modelPath: path, contextSize: 2048, threads: THREADS, sequences: setup.sequences });
      const evaluator = new LocalEvaluator(engine, { id: "bench-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
      if (!figures["system text tokens, nouls / choices"]) {
        figures["system text tokens, nouls / choices"] = `${evaluator.prepare(byNoul[0]!).shared} / ${evaluator.prepare(byChoice[0]!).shared}`;
      }
      // Warm-up: every sequence holds some request that is none of the measured ones, of a third set of types.
      const warmUp = Array.from({ length: setup.sequences }, (_, i) => ({
        ...ask(lines[0]!, 0, { w: { type: "score", criteria: ["a", "b"] } }),
        state: `warm-up ${i}`,
      }));
      await pass(engine, evaluator, warmUp, setup.sequences);
      const seconds = { grouped: 0, alternating: 0 };
      const tokens = { grouped: 0, alternating: 0 };
      // Each order asks every state tag once: grouped tag r in round r, alternating tag r + 1, so no sequence holds
      // the record it is asked (a tag comes back a round later, after every other request), and the two orders'
      // answers to the same tagged request are compared.
      const answers = { grouped: new Map<string, string>(), alternating: new Map<string, string>() };
      for (let r = 0; r < ROUNDS; r++) {
        const first = r % 2 === 0 ? (["grouped", "alternating"] as const) : (["alternating", "grouped"] as const);
        for (const order of first) {
          const tag = order === "grouped" ? r : (r + 1) % ROUNDS;
          const requests = orders[order].map((q) => ({ ...q, state: `[${tag}] ${JSON.stringify(q.state)}` }));
          const result = await pass(engine, evaluator, requests, setup.inFlight);
          seconds[order] += result.seconds;
          tokens[order] += result.tokens;
          orders[order].forEach((q, i) => answers[order].set(`${tag} ${JSON.stringify(q)}`, result.answers[i] as string));
        }
      }
      for (const [key, answer] of answers.grouped) if (answers.alternating.get(key) !== answer) mismatches++;
      const n = orders.grouped.length * ROUNDS;
      figures[`${setup.name}: tokens evaluated per request, grouped / alternating`] =
        `${(tokens.grouped / n).toFixed(1)} / ${(tokens.alternating / n).toFixed(1)}`;
      figures[`${setup.name}: ms per request, grouped / alternating`] =
        `${((seconds.grouped / n) * 1000).toFixed(0)} / ${((seconds.alternating / n) * 1000).toFixed(0)}`;
      ratios.push({ name: `${setup.name}: time, alternating / grouped`, value: seconds.alternating / seconds.grouped });
      ratios.push({ name: `${setup.name}: tokens evaluated, alternating / grouped`, value: tokens.alternating / tokens.grouped });
      await evaluator.close();
    }
    figures["requests per order and round (noul and choice per ticket)"] = orders.grouped.length;
    figures["rounds"] = ROUNDS;
    figures["answers differing between the orders"] = mismatches;
    ratios.push({ name: "answers bit-identical (1 = all)", value: mismatches === 0 ? 1 : 0, goal: { min: 1 } });
    return { figures, ratios };
  },
};
export default benchmark;
