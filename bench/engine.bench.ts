/**
 * The embedded engine on a random model with Qwen2.5-0.5B's shapes and a real
 * 151k vocabulary (speed only; random weights say nothing of quality).
 *
 * - Question scaling: a 2,000-token state with 1, 4 and 16 questions, against
 *   16 questions each sent with its own full prompt.
 * - Engine overhead: a one-question request through the evaluator against a
 *   bare node-llama-cpp evaluation of the same tokens.
 */
import { getLlama, LlamaLogLevel, type Token as LlamaToken } from "node-llama-cpp";
import type { Question, EvaluatorRequest } from "../src/api/schema.js";
import { LlamaEngine } from "../src/engines/llama.js";
import { LocalEvaluator } from "../src/evaluator/local.js";
import { detectTemplate } from "../src/evaluator/prompt.js";
import { generatedModel, QWEN25_05B_SHAPE } from "../test/support/models.js";
import { median, type Benchmark } from "./harness.js";

const STATE_TOKENS = Number(process.env["BENCH_STATE_TOKENS"] ?? 2000);
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 5);
const THREADS = Number(process.env["BENCH_THREADS"] ?? 2);
/** BENCH_NAIVE=0 skips the 16 one-question requests (the slowest figure) on a crowded machine. */
const NAIVE = process.env["BENCH_NAIVE"] !== "0";

const WORDS =
  "order delivery refund parcel kettle account invoice charge late broken support agent customer reply week address warehouse tracking number email phone store manager replacement policy return label courier".split(
    " ",
  );

/** The benchmark's question set: `count` questions cycling over noul, choice, score and a noul without criteria. */
export function questionSet(count: number): Record<string, Question> {
  const kinds: Question[] = [
    { type: "noul", instructions: "Does the customer ask for a refund of the full amount?", criteria: { true: "They want money back", false: null } },
    {
      type: "choice",
      instructions: "Which team should handle this ticket?",
      criteria: { shipping: "Late or lost parcels", billing: "Charges and invoices", product: "Defects and usage", other: null },
    },
    { type: "score", instructions: "How angry is the customer?", criteria: ["calm", "annoyed", "angry", "furious", "threatening to leave"] },
    { type: "noul", instructions: "Has the agent already offered a replacement?", criteria: null },
  ];
  return Object.fromEntries(
    Array.from({ length: count }, (_, i) => {
      const base = kinds[i % kinds.length] as Question;
      return [`q${i}`, { ...base, instructions: `${String(base.instructions)} (check ${i + 1})` }];
    }),
  );
}

/** A state of `tokens` tokens as the model counts them (words cycle, each about one token). */
export function benchState(engine: { tokenize(text: string, special: boolean): unknown[] }, tokens: number): string {
  let state = "";
  for (let i = 0; engine.tokenize(state, false).length < tokens; i++) state += `${WORDS[(i * 7) % WORDS.length]} `;
  return state;
}

async function peakRssDuring<T>(fn: () => Promise<T>): Promise<{ value: T; peakMiB: number }> {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  try {
    const value = await fn();
    peak = Math.max(peak, process.memoryUsage().rss);
    return { value, peakMiB: peak / 2 ** 20 };
  } finally {
    clearInterval(timer);
  }
}

async function seconds(fn: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

const benchmark: Benchmark = {
  name: "engine",
  description: `llama.cpp engine, Qwen2.5-0.5B-shaped random model (Q4_0), ${STATE_TOKENS}-token state, ${THREADS} thread(s)`,
  async run() {
    const path = generatedModel(QWEN25_05B_SHAPE);
    const engine = await LlamaEngine.load({ modelPath: path, contextSize: 4096, sequences: 1, threads: THREADS });
    const evaluator = new LocalEvaluator(engine, { id: "bench-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
    const state = benchState(engine, STATE_TOKENS);
    // Each request a record of its own (a new first word): sequences keep their prefix between requests,
    // and the same state twice would measure the cache, not the work on a state.
    let serial = 0;
    const request = (n: number): EvaluatorRequest => ({ state: `#${serial++} ${state}`, model: "bench", questions: questionSet(n) });

    // Peak memory of the evaluator alone: model, 4 x 4096-token KV streams, a 16-question request.
    const { peakMiB } = await peakRssDuring(() => evaluator.evaluate(request(16)));

    // The bare baseline: the same model through node-llama-cpp alone, one fresh sequence, logits at the end.
    const llama = await getLlama({ gpu: false, build: "never", maxThreads: THREADS, logLevel: LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
    const context = await model.createContext({ contextSize: 4096, sequences: 1, threads: THREADS, flashAttention: false });
    const sequence = context.getSequence();
    const prepared = evaluator.prepare(request(1));
    const tokens = [...prepared.prefix, ...prepared.tasks[0]!.suffix];
    const labels = prepared.tasks[0]!.labels.map((l) => l[0]!);
    const bareRun = async () => {
      await sequence.clearHistory();
      const items = tokens.map((t, i) =>
        i === tokens.length - 1
          ? ([t as LlamaToken, { generateNext: { logits: { filter: { tokens: labels as LlamaToken[], includeTop: 1 } }, totalLogitWeight: true } }] as const)
          : (t as LlamaToken),
      );
      await sequence.controlledEvaluate(items as Parameters<typeof sequence.controlledEvaluate>[0]);
    };

    // The same on an engine that clears each sequence per request (reuse off), for before/after in one run.
    const offEngine = await LlamaEngine.load({ modelPath: path, contextSize: 4096, sequences: 1, threads: THREADS, reuse: false });
    const off = new LocalEvaluator(offEngine, { id: "bench-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });

    await evaluator.evaluate(request(1)); // warm-ups
    await off.evaluate(request(1));
    await bareRun();
    // This VM's speed drifts by 15% between runs: interleave everything each round and take medians.
    const runs: Record<string, number[]> = { 1: [], 4: [], 16: [], bare: [], "off 1": [], "off 16": [] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const n of [1, 4, 16]) runs[n]!.push(await seconds(() => evaluator.evaluate(request(n))));
      runs["bare"]!.push(await seconds(bareRun));
      for (const n of [1, 16]) runs[`off ${n}`]!.push(await seconds(() => off.evaluate(request(n))));
    }
    const [t1, t4, t16, bare] = [median(runs[1]!), median(runs[4]!), median(runs[16]!), median(runs["bare"]!)];
    const [off1, off16] = [median(runs["off 1"]!), median(runs["off 16"]!)];
    await off.close();
    // Naive: each of the 16 questions sent with its own full prompt (state evaluated 16 times).
    const naive = NAIVE
      ? await seconds(async () => {
          for (const [name, q] of Object.entries(questionSet(16))) await evaluator.evaluate({ ...request(1), questions: { [name]: q } });
        })
      : Number.NaN;
    const tokens16 = evaluator.prepare(request(16)).usage.input_tokens;
    await evaluator.close();
    await context.dispose();
    await model.dispose();

    return {
      figures: {
        "state tokens": prepared.prefix.length,
        "1 question: s": t1,
        "4 questions: s": t4,
        "16 questions: s": t16,
        "16 questions, each its own prompt: s": naive,
        "16 questions: input tokens": tokens16,
        "16 questions: effective tokens/s": tokens16 / t16,
        "1 question: tokens/s": prepared.usage.input_tokens / t1,
        "bare node-llama-cpp, same tokens: s": bare,
        "reuse off: 1 question: s": off1,
        "reuse off: 16 questions: s": off16,
        "peak RSS, evaluator (model + 4 x 4096-token KV): MiB": peakMiB,
        "runs per figure (interleaved, median)": ROUNDS,
      },
      ratios: [
        { name: "16 questions / 1 question", value: t16 / t1, goal: { max: 1.6 } },
        { name: "16 questions / 1 question, reuse off", value: off16 / off1 },
        { name: "4 questions / 1 question", value: t4 / t1 },
        ...(NAIVE ? [{ name: "each-own-prompt / shared state (16)", value: naive / t16, goal: { min: 8 } }] : []),
        // With reuse the system text is not evaluated again, which the bare baseline does each time.
        { name: "evaluator / bare node-llama-cpp", value: t1 / bare, goal: { max: 1.1 } },
        { name: "evaluator, reuse off / bare node-llama-cpp", value: off1 / bare, goal: { max: 1.1 } },
      ],
    };
  },
};
export default benchmark;
