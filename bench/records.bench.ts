/**
 * What nightly jobs run: the bundled triage job (jobs/support-triage.json)
 * over short records (the example tickets, 40-80 tokens of data each) and
 * over 1,000-token records, embedded, on a random model with Qwen2.5-0.5B's
 * shapes and Qwen3's real vocabulary, 2 threads (speed only: random weights
 * say nothing of quality).
 *
 * Two engines on the same file, one keeping each sequence's prefix between
 * requests (the default) and one clearing it per request; the same records go
 * through both, four at a time (four requests in flight, as a job sends them)
 * and each group through one engine then the other. Every answer from one is
 * compared bit for bit with the other's. Records per CPU-second are printed
 * beside records/s: on a crowded machine they show the work saved whatever
 * share of the cores the benchmark gets.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { EvaluatorRequest, EvaluatorResponse } from "../src/api/schema.js";
import { LlamaEngine } from "../src/engines/llama.js";
import { LocalEvaluator } from "../src/evaluator/local.js";
import { detectTemplate } from "../src/evaluator/prompt.js";
import { loadJob } from "../src/records/job.js";
import { buildRequest } from "../src/runner/input/requests.js";
import { generatedModel, QWEN25_05B_SHAPE } from "../test/support/models.js";
import { median, type Benchmark } from "./harness.js";

const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 3);
const LONG_RECORDS = Number(process.env["BENCH_LONG_RECORDS"] ?? 4);
/** How many of the 24 example tickets to use (all by default). */
const SHORT_RECORDS = Number(process.env["BENCH_SHORT_RECORDS"] ?? 24);
const LONG_TOKENS = 1000;
const IN_FLIGHT = 4;
/** llama.cpp threads: 2 (the machine's cores) unless told; a crowded machine starves a 2-thread decode at its barriers. */
const THREADS = Number(process.env["BENCH_THREADS"] ?? 2);
const root = join(import.meta.dirname, "..");

const WORDS =
  "order delivery refund parcel kettle account invoice charge late broken support agent customer reply week address warehouse tracking number email phone store manager replacement policy return label courier".split(
    " ",
  );

interface Mode {
  name: "reuse" | "no reuse";
  engine: LlamaEngine;
  evaluator: LocalEvaluator;
}

/** Answers every request with `IN_FLIGHT` in flight; returns the responses in order, the seconds and the tokens fed to llama.cpp. */
async function pass(mode: Mode, requests: readonly EvaluatorRequest[]) {
  const responses: EvaluatorResponse[] = new Array<EvaluatorResponse>(requests.length);
  const tokensBefore = mode.engine.evaluatedTokens;
  const start = process.hrtime.bigint();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = next++; i < requests.length; i = next++) responses[i] = (await mode.evaluator.evaluate(requests[i] as EvaluatorRequest)).response;
    }),
  );
  return { responses, seconds: Number(process.hrtime.bigint() - start) / 1e9, tokens: mode.engine.evaluatedTokens - tokensBefore };
}

const benchmark: Benchmark = {
  name: "records",
  description: `the bundled triage job over short and ${LONG_TOKENS}-token records, reuse of the system text on and off, 0.5B-shaped model, real vocabulary, ${THREADS} thread(s)`,
  async run() {
    const path = generatedModel(QWEN25_05B_SHAPE);
    const modes: Mode[] = [];
    for (const reuse of [true, false]) {
      const engine = await LlamaEngine.load({ modelPath: path, contextSize: 2048, threads: THREADS, reuse });
      const evaluator = new LocalEvaluator(engine, { id: "bench-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
      modes.push({ name: reuse ? "reuse" : "no reuse", engine, evaluator });
    }
    const job = loadJob(join(root, "jobs/support-triage.json"));
    const lines = readFileSync(join(root, "examples/data/tickets.jsonl"), "utf8").trim().split("\n");
    const requestOf = (record: unknown, line: number) => {
      const built = buildRequest(job, record, line);
      if (!built.ok) throw new Error(built.message);
      return built.request;
    };
    const short = lines.slice(0, SHORT_RECORDS).map((line, i) => requestOf(JSON.parse(line), i + 1));
    // Long tickets: distinct bodies of about LONG_TOKENS tokens (each word about one token).
    const tokenizer = modes[0]!.engine;
    const long = Array.from({ length: LONG_RECORDS }, (_, r) => {
      let body = `Ticket ${r}: `;
      for (let i = 0; tokenizer.tokenize(body, false).length < LONG_TOKENS; i++) body += `${WORDS[(i * 7 + r * 3) % WORDS.length]} `;
      return requestOf({ ticket_id: `L-${r}`, ticket: { subject: `Long ticket ${r}`, body, channel: "email" } }, r + 1);
    });
    const sets = { short, long } as const;
    const prepared = modes[0]!.evaluator;
    const stateTokens = (requests: EvaluatorRequest[]) => median(requests.map((r) => prepared.prepare(r).prefix.length - prepared.prepare(r).shared));

    // Warm-up: every sequence of both engines holds a record of the job, none of the measured ones
    // (a sequence holding the very record would keep its whole prefix: the cache, not the work).
    const warmUp = Array.from({ length: IN_FLIGHT }, (_, i) =>
      requestOf({ ticket_id: `W-${i}`, ticket: { subject: `Warm-up ${i}`, body: "Hello", channel: "chat" } }, i + 1),
    );
    for (const mode of modes) await pass(mode, warmUp);

    // Interleaved finely: each group of IN_FLIGHT records goes through one engine and then the other
    // (the order alternating), so a change in the machine's load falls on both alike.
    const seconds: Record<string, number> = {};
    const cpu: Record<string, number> = {};
    const tokens: Record<string, number> = {};
    let mismatches = 0;
    for (let r = 0; r < ROUNDS; r++) {
      for (const [set, requests] of Object.entries(sets)) {
        for (let g = 0; g < requests.length; g += IN_FLIGHT) {
          const group = requests.slice(g, g + IN_FLIGHT);
          const order = (r + g / IN_FLIGHT) % 2 === 0 ? modes : [...modes].reverse();
          const results: EvaluatorResponse[][] = [];
          for (const mode of order) {
            const key = `${set} ${mode.name}`;
            const used = process.cpuUsage();
            const result = await pass(mode, group);
            const { user, system } = process.cpuUsage(used);
            seconds[key] = (seconds[key] ?? 0) + result.seconds;
            cpu[key] = (cpu[key] ?? 0) + (user + system) / 1e6;
            tokens[key] = (tokens[key] ?? 0) + result.tokens;
            results.push(result.responses);
          }
          results[0]!.forEach((response, i) => {
            if (JSON.stringify(response) !== JSON.stringify(results[1]![i])) mismatches++;
          });
        }
        process.stderr.write(
          `  round ${r + 1}, ${set}: ${modes.map((m) => `${m.name} ${seconds[`${set} ${m.name}`]!.toFixed(1)} s, ${tokens[`${set} ${m.name}`]} tokens`).join("; ")} (totals so far)\n`,
        );
      }
    }

    const done = (set: keyof typeof sets) => sets[set].length * ROUNDS;
    const rate = (set: keyof typeof sets, mode: Mode["name"]) => done(set) / seconds[`${set} ${mode}`]!;
    const cpuRate = (set: keyof typeof sets, mode: Mode["name"]) => done(set) / cpu[`${set} ${mode}`]!;
    const figures: Record<string, number | string> = {
      "system text (shared head) tokens": prepared.prepare(short[0]!).shared,
      "short records: median state tokens": stateTokens(short),
      "short records: count": short.length,
      [`${LONG_TOKENS}-token records: median state tokens`]: stateTokens(long),
      [`${LONG_TOKENS}-token records: count`]: long.length,
    };
    for (const set of ["short", "long"] as const) {
      const label = set === "short" ? "short records" : `${LONG_TOKENS}-token records`;
      for (const mode of ["no reuse", "reuse"] as const) {
        figures[`${label}, ${mode}: records/s`] = rate(set, mode);
        figures[`${label}, ${mode}: records per CPU-second`] = cpuRate(set, mode);
        figures[`${label}, ${mode}: tokens evaluated per record`] = tokens[`${set} ${mode}`]! / done(set);
      }
    }
    for (const mode of modes) await mode.evaluator.close();
    figures["answers differing between reuse and no reuse"] = mismatches;
    figures["rounds (each group of records through both engines in turn)"] = ROUNDS;
    figures["llama.cpp threads"] = THREADS;
    return {
      figures,
      ratios: [
        { name: "short records: records/s with reuse / without", value: rate("short", "reuse") / rate("short", "no reuse"), goal: { min: 1.25 } },
        { name: `${LONG_TOKENS}-token records: records/s with reuse / without`, value: rate("long", "reuse") / rate("long", "no reuse"), goal: { min: 0.98 } },
        // CPU time of the process (llama.cpp's threads included): the same comparison, blind to how much of the machine others take.
        { name: "short records: records per CPU-second, reuse / without", value: cpuRate("short", "reuse") / cpuRate("short", "no reuse") },
        { name: `${LONG_TOKENS}-token records: per CPU-second, reuse / without`, value: cpuRate("long", "reuse") / cpuRate("long", "no reuse") },
        { name: "answers bit-identical (1 = all)", value: mismatches === 0 ? 1 : 0, goal: { min: 1 } },
      ],
    };
  },
};
export default benchmark;
