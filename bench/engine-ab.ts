/**
 * The engine against another commit's, side by side in one process:
 *
 *   mkdir /tmp/base && git archive <commit> | tar -x -C /tmp/base && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npx tsx bench/engine-ab.ts /tmp/base
 *
 * BENCH_WORKLOAD=questions (default): both sides load the engine bench's
 * model (Qwen2.5-0.5B-shaped, real vocabulary, 2 threads, one request at a
 * time, 4,096-token context) and answer the engine bench's 1- and
 * 16-question requests on a state of BENCH_STATE_TOKENS tokens (default
 * 2,000; 300 for short states), each request a record of its own,
 * interleaved round by round in a random order (BENCH_ROUNDS, default 6).
 * Prints each side's medians, its 16/1 ratio, the tokens it fed llama.cpp
 * per request, and the ratio of rows a 16-question request holds to a
 * 1-question one: the floor of 16/1 for any engine that evaluates every
 * token of every question.
 *
 * BENCH_WORKLOAD=records: what a job run sends, the bundled triage job
 * (jobs/support-triage.json) over the example tickets, four requests in
 * flight, on engines of four sequences and a 2,048-token context; each
 * group of four records goes through one side then the other, the order
 * alternating (BENCH_ROUNDS passes over the tickets, default 2; the first
 * BENCH_RECORDS tickets, default all 24). Prints
 * records/s of each side and head / base, and checks the answers are the
 * same bits on both sides.
 *
 * Both print the machine's load average before and after: this VM is
 * shared, its speed drifts by 15% between runs, and only ratios measured
 * side by side mean anything under load.
 *
 * The other checkout must have the same module layout as this one
 * (src/engines/llama.ts, src/evaluator/{local,prompt}.ts), as every commit
 * since the engine's first has.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { EvaluatorRequest, EvaluatorResponse } from "../src/api/schema.js";
import type { Evaluator } from "../src/evaluator/evaluator.js";
import { loadJob } from "../src/records/job.js";
import { buildRequest } from "../src/runner/input/requests.js";
import { generatedModel, QWEN25_05B_SHAPE } from "../test/support/models.js";
import { benchState, questionSet } from "./engine.bench.js";
import { median, shuffler } from "./harness.js";

const base = process.argv[2] ?? "";
if (!base) {
  console.error("usage: npx tsx bench/engine-ab.ts <checkout of the other commit, with node_modules>");
  process.exit(2);
}
const WORKLOAD = process.env["BENCH_WORKLOAD"] ?? "questions";
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? (WORKLOAD === "records" ? 2 : 6));
const THREADS = Number(process.env["BENCH_THREADS"] ?? 2);
const head = resolve(import.meta.dirname, "..");
const path = generatedModel(QWEN25_05B_SHAPE);

interface Side {
  name: string;
  evaluator: Evaluator;
  tokenize(text: string, special: boolean): unknown[];
  /** Tokens fed to llama.cpp since load. */
  fed(): number;
  /** Rows of a request: its prefix and every question's suffix. */
  rows(request: EvaluatorRequest): number;
}

/** The engine and evaluator of the checkout at `root`. */
async function load(name: string, root: string, options: { contextSize: number; sequences: number }): Promise<Side> {
  // The other checkout's modules, typed as this one's: the calls below are the API every commit has had.
  const from = (file: string): Promise<unknown> => import(pathToFileURL(resolve(root, file)).href);
  const { LlamaEngine } = (await from("src/engines/llama.ts")) as typeof import("../src/engines/llama.js");
  const { LocalEvaluator } = (await from("src/evaluator/local.ts")) as typeof import("../src/evaluator/local.js");
  const { detectTemplate } = (await from("src/evaluator/prompt.ts")) as typeof import("../src/evaluator/prompt.js");
  const engine = await LlamaEngine.load({ modelPath: path, threads: THREADS, ...options });
  const evaluator = new LocalEvaluator(engine, { id: "bench-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
  const rows = (request: EvaluatorRequest) => evaluator.prepare(request).usage.input_tokens;
  return { name, evaluator, tokenize: (text, special) => engine.tokenize(text, special), fed: () => engine.evaluatedTokens, rows };
}

// Both sides must run the same llama.cpp build, else the comparison mixes in the binaries' difference.
const llamaOf = (root: string) => pathToFileURL(createRequire(resolve(root, "package.json")).resolve("node-llama-cpp")).href;
if (llamaOf(base) !== llamaOf(head)) {
  console.error(`${base} has a node-llama-cpp of its own: link this checkout's node_modules into it (see the usage above)`);
  process.exit(2);
}

const seconds = async (fn: () => Promise<unknown>) => {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e9;
};
const load1 = () => loadavg()[0]?.toFixed(1);
console.log(`load average at the start: ${load1()} (1 min), ${loadavg()[1]?.toFixed(1)} (5 min), on ${THREADS} llama.cpp threads`);

/** 1- and 16-question requests on one state, interleaved; medians, ratios, tokens fed. */
async function questions(): Promise<void> {
  const options = { contextSize: 4096, sequences: 1 };
  const sides = [await load(`base (${base})`, base, options), await load("head (this checkout)", head, options)];
  const state = benchState(sides[1] as Side, Number(process.env["BENCH_STATE_TOKENS"] ?? 2000));
  let serial = 0;
  const request = (n: number): EvaluatorRequest => ({ state: `#${serial++} ${state}`, model: "bench", questions: questionSet(n) });
  const runs = sides.flatMap((side) => [1, 16].map((n) => ({ side, n, times: [] as number[], fed: [] as number[] })));
  for (const side of sides) await side.evaluator.evaluate(request(1)); // warm-ups
  const order = shuffler();
  for (let round = 0; round < ROUNDS; round++) {
    // A fresh random order each round: no run keeps a fixed neighbour.
    for (const run of order(runs)) {
      const before = run.side.fed();
      run.times.push(await seconds(() => run.side.evaluator.evaluate(request(run.n))));
      run.fed.push(run.side.fed() - before);
    }
    console.log(`round ${round + 1}: ${runs.map((r) => `${r.side.name.split(" ")[0]} ${r.n}q ${r.times.at(-1)?.toFixed(2)} s`).join(", ")}`);
  }
  const probe = sides[1] as Side;
  const rows = [1, 16].map((n) => probe.rows(request(n)));
  console.log(`\nstate: ${state.length} characters; rows of a request (prefix + suffixes): 1 question ${rows[0]}, 16 questions ${rows[1]}`);
  console.log(`rows of 16 / rows of 1: ${((rows[1] as number) / (rows[0] as number)).toFixed(3)}x (what 16/1 cannot go below)`);
  console.log(`medians of ${ROUNDS} rounds                     1 question  16 questions  16 / 1   tokens fed (1q, 16q)`);
  const med = (side: Side, n: number) => runs.find((r) => r.side === side && r.n === n) as (typeof runs)[number];
  for (const side of sides) {
    const [one, sixteen] = [med(side, 1), med(side, 16)];
    const [t1, t16] = [median(one.times), median(sixteen.times)];
    console.log(
      `  ${side.name.padEnd(40)} ${t1.toFixed(2).padStart(10)} ${t16.toFixed(2).padStart(13)} ${(t16 / t1).toFixed(3).padStart(7)}x   ${median(one.fed)}, ${median(sixteen.fed)}`,
    );
  }
  const [b, h] = sides as [Side, Side];
  for (const n of [1, 16]) console.log(`head / base, ${n} question(s): ${(median(med(h, n).times) / median(med(b, n).times)).toFixed(3)}x`);
  for (const side of sides) await side.evaluator.close();
}

/** The triage job's requests over the example tickets, four in flight, through each side in turn. */
async function records(): Promise<void> {
  const IN_FLIGHT = 4;
  const options = { contextSize: 2048, sequences: IN_FLIGHT };
  const sides = [await load(`base (${base})`, base, options), await load("head (this checkout)", head, options)];
  const job = loadJob(join(head, "jobs/support-triage.json"));
  const lines = readFileSync(join(head, "examples/data/tickets.jsonl"), "utf8").trim().split("\n");
  const requestOf = (record: unknown, line: number) => {
    const built = buildRequest(job, record, line);
    if (!built.ok) throw new Error(built.message);
    return built.request;
  };
  const tickets = lines.map((line, i) => requestOf(JSON.parse(line), i + 1)).slice(0, Number(process.env["BENCH_RECORDS"] ?? lines.length));
  const pass = async (side: Side, requests: readonly EvaluatorRequest[]) => {
    const responses = new Array<EvaluatorResponse>(requests.length);
    let next = 0;
    const time = await seconds(() =>
      Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          for (let i = next++; i < requests.length; i = next++) responses[i] = (await side.evaluator.evaluate(requests[i] as EvaluatorRequest)).response;
        }),
      ),
    );
    return { responses, time };
  };
  // Warm-up: every sequence holds a record of the job, none of the measured ones.
  const warmUp = Array.from({ length: IN_FLIGHT }, (_, i) =>
    requestOf({ ticket_id: `W-${i}`, ticket: { subject: `Warm-up ${i}`, body: "Hello", channel: "chat" } }, i + 1),
  );
  for (const side of sides) await pass(side, warmUp);
  const totals = new Map<Side, { time: number; fed: number; done: number }>(sides.map((s) => [s, { time: 0, fed: 0, done: 0 }]));
  let differing = 0;
  for (let round = 0; round < ROUNDS; round++) {
    for (let g = 0; g < tickets.length; g += IN_FLIGHT) {
      const group = tickets.slice(g, g + IN_FLIGHT);
      const order = (round + g / IN_FLIGHT) % 2 === 0 ? sides : [...sides].reverse();
      const answers = new Map<Side, EvaluatorResponse[]>();
      for (const side of order) {
        const before = side.fed();
        const { responses, time } = await pass(side, group);
        const total = totals.get(side) as { time: number; fed: number; done: number };
        total.time += time;
        total.fed += side.fed() - before;
        total.done += group.length;
        answers.set(side, responses);
      }
      const [a, b] = sides.map((s) => answers.get(s) as EvaluatorResponse[]);
      a?.forEach((response, i) => (differing += JSON.stringify(response.answers) === JSON.stringify(b?.[i]?.answers) ? 0 : 1));
    }
    console.log(`round ${round + 1}: ${sides.map((s) => `${s.name.split(" ")[0]} ${totals.get(s)?.time.toFixed(1)} s`).join(", ")} (totals so far)`);
  }
  const rate = (side: Side) => {
    const t = totals.get(side) as { time: number; done: number };
    return t.done / t.time;
  };
  for (const side of sides) {
    const t = totals.get(side) as { fed: number; done: number };
    console.log(`  ${side.name.padEnd(40)} ${rate(side).toFixed(3)} records/s, ${(t.fed / t.done).toFixed(1)} tokens fed per record`);
  }
  console.log(`records/s head / base: ${(rate(sides[1] as Side) / rate(sides[0] as Side)).toFixed(3)}x`);
  console.log(`answers differing between the sides: ${differing} of ${tickets.length * ROUNDS}`);
  for (const side of sides) await side.evaluator.close();
}

await (WORKLOAD === "records" ? records() : questions());
console.log(`load average at the end: ${load1()} (1 min), ${loadavg()[1]?.toFixed(1)} (5 min)`);
