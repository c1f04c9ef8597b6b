/**
 * The engine against another commit's, side by side in one process:
 *
 *   git worktree add /tmp/base <commit> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npx tsx bench/engine-ab.ts /tmp/base        (BENCH_ROUNDS, default 6; BENCH_STATE_TOKENS, default 2000)
 *
 * Both load the engine bench's model (Qwen2.5-0.5B-shaped, real vocabulary,
 * 2 threads, one 4,096-token sequence) and answer the engine bench's 1- and
 * 16-question requests on its 2,000-token state, interleaved round by round
 * with the order rotating, each request a record of its own. Prints each
 * side's medians and 16/1 ratio, and the median time of every decode by
 * position in the request (state chunks, then one per question), so a
 * difference in the ratio can be told from noise: this VM drifts by 15%
 * between runs, and two runs of the same code give 16/1 ratios 5% apart.
 *
 * Before 0b405cd an engine kept nothing between requests, so such a base
 * evaluates the system text in every request and its 16/1 ratio has a larger
 * denominator: compare the question decodes, not the ratios.
 *
 * The other checkout must have the same module layout as this one
 * (src/engines/llama.ts, src/evaluator/{local,prompt}.ts), as every commit
 * since the engine's first has.
 */
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { LlamaContextSequence as Sequence } from "node-llama-cpp";
import type { EvaluatorRequest } from "../src/api/schema.js";
import type { Evaluator } from "../src/evaluator/evaluator.js";
import { generatedModel, QWEN25_05B_SHAPE } from "../test/support/models.js";
import { benchState, questionSet } from "./engine.bench.js";
import { median, shuffler } from "./harness.js";

const base = process.argv[2];
if (!base) {
  console.error("usage: npx tsx bench/engine-ab.ts <checkout of the other commit, with node_modules>");
  process.exit(2);
}
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 6);
const path = generatedModel(QWEN25_05B_SHAPE);

interface Side {
  evaluator: Evaluator;
  tokenize(text: string, special: boolean): unknown[];
  /** Tokens before the first question (system text and state): the sides' prompts may differ. */
  prefixTokens(request: EvaluatorRequest): number;
}

/** The engine and evaluator of the checkout at `root`, loaded as the engine bench loads them. */
async function load(root: string): Promise<Side> {
  // The other checkout's modules, typed as this one's: the calls below are the API every commit has had.
  const from = (file: string): Promise<unknown> => import(pathToFileURL(resolve(root, file)).href);
  const { LlamaEngine } = (await from("src/engines/llama.ts")) as typeof import("../src/engines/llama.js");
  const { LocalEvaluator } = (await from("src/evaluator/local.ts")) as typeof import("../src/evaluator/local.js");
  const { detectTemplate } = (await from("src/evaluator/prompt.ts")) as typeof import("../src/evaluator/prompt.js");
  const engine = await LlamaEngine.load({ modelPath: path, contextSize: 4096, sequences: 1, threads: 2 });
  const evaluator = new LocalEvaluator(engine, { id: "bench-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
  const prefixTokens = (request: EvaluatorRequest) => evaluator.prepare(request).prefix.length;
  return { evaluator, tokenize: (text, special) => engine.tokenize(text, special), prefixTokens };
}

const sides = { base: await load(base), head: await load(resolve(import.meta.dirname, "..")) };
const state = benchState(sides.head, Number(process.env["BENCH_STATE_TOKENS"] ?? 2000));
let serial = 0;
const request = (n: number): EvaluatorRequest => ({ state: `#${serial++} ${state}`, model: "bench", questions: questionSet(n) });

// Both sides must run the same llama.cpp build, else the comparison mixes in the binaries' difference.
const llamaOf = (root: string) => pathToFileURL(createRequire(resolve(root, "package.json")).resolve("node-llama-cpp")).href;
if (llamaOf(base) !== llamaOf(resolve(import.meta.dirname, ".."))) {
  console.error(`${base} has a node-llama-cpp of its own: link this checkout's node_modules into it (see the usage above)`);
  process.exit(2);
}
const probe = request(1);
console.log(`tokens before the first question: base ${sides.base.prefixTokens(probe)}, head ${sides.head.prefixTokens(probe)}`);

// Every decode's wall time, by position in the request.
let decodes: number[] = [];
{
  const url = llamaOf(base);
  const { LlamaContextSequence } = (await import(url)) as typeof import("node-llama-cpp");
  const controlledEvaluate = LlamaContextSequence.prototype.controlledEvaluate;
  const timed = async function (this: Sequence, ...args: Parameters<typeof controlledEvaluate>) {
    const start = process.hrtime.bigint();
    try {
      return await controlledEvaluate.apply(this, args);
    } finally {
      decodes.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
  } as typeof controlledEvaluate;
  LlamaContextSequence.prototype.controlledEvaluate = timed;
}

type Run = `${keyof typeof sides} ${1 | 16}`;
const runs: Run[] = ["base 1", "head 1", "base 16", "head 16"];
const seconds = new Map<Run, number[]>(runs.map((r) => [r, []]));
const perDecode = new Map<Run, number[][]>(runs.map((r) => [r, []]));
for (const side of Object.values(sides)) await side.evaluator.evaluate(request(1)); // warm-ups
const order = shuffler();
for (let round = 0; round < ROUNDS; round++) {
  // A fresh random order each round: no run keeps a fixed neighbour.
  for (const run of order(runs)) {
    const [side, n] = run.split(" ") as [keyof typeof sides, string];
    decodes = [];
    const start = process.hrtime.bigint();
    await sides[side].evaluator.evaluate(request(Number(n)));
    seconds.get(run)?.push(Number(process.hrtime.bigint() - start) / 1e9);
    perDecode.get(run)?.push(decodes);
  }
  console.log(`round ${round + 1}: ${runs.map((r) => `${r}q ${seconds.get(r)?.at(-1)?.toFixed(2)} s`).join(", ")}`);
}

const med = (run: Run) => median(seconds.get(run) ?? []);
console.log(`\nmedians of ${ROUNDS} rounds (s)          1 question  16 questions  16 / 1`);
for (const side of Object.keys(sides) as (keyof typeof sides)[]) {
  const [one, sixteen] = [med(`${side} 1`), med(`${side} 16`)];
  console.log(
    `  ${(side === "base" ? `base (${base})` : "head (this checkout)").padEnd(36)} ${one.toFixed(2).padStart(10)} ${sixteen.toFixed(2).padStart(13)} ${(sixteen / one).toFixed(3).padStart(7)}x`,
  );
}
// The engine bench's questions have single-token labels and short suffixes: one decode each, the last `n` of a request.
console.log("\nmedian ms per decode, in request order (state chunks, then one per question):");
for (const run of runs) {
  const n = Number(run.split(" ")[1]);
  const all = perDecode.get(run) ?? [];
  const count = Math.min(...all.map((d) => d.length));
  const each = Array.from({ length: count }, (_, i) => median(all.map((d) => d[i] as number)));
  const sum = (ms: number[]) => ms.reduce((a, b) => a + b, 0).toFixed(0);
  console.log(`  ${run}q: ${each.map((ms) => ms.toFixed(0)).join(" ")}`);
  console.log(`  ${run}q: state ${sum(each.slice(0, -n))} ms in ${count - n} decodes, questions ${sum(each.slice(-n))} ms`);
}
for (const side of Object.values(sides)) await side.evaluator.close();
