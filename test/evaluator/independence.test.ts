/**
 * A question's answer depends only on the model, the state and that question
 * (issue 35): not on the other questions of the request, their types, their
 * order or their count, nor on the requests that run beside it (the engine's
 * sequences take turns). A property over random question sets (choices of up
 * to 6 options, lettered, or of 27 to 32, numbered labels of several tokens;
 * scores of 1 to 10 levels), through the
 * evaluator's public interface (`evaluate`) on the real embedded engine and a
 * generated model, so it holds for whatever the engine does inside a request
 * (one decode per suffix today; several suffixes in one batch tomorrow).
 * That registering a type moves nothing is the golden test's to prove.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Answer, SystemOneRequest } from "../../src/api/schema.js";
import { LlamaEngine } from "../../src/engines/llama.js";
import { LocalEvaluator } from "../../src/evaluator/local.js";
import { detectTemplate } from "../../src/evaluator/prompt.js";
import { generatedModel, TINY } from "../support/models.js";

/**
 * How far a question's answer asked with others may lie from its answer asked
 * alone, per probability (and score). Zero: bit-identical, which today's
 * engine gives (the same prefix, then each suffix decoded on its own). An
 * engine that decodes a request's suffixes together states its tolerance
 * here (issue 35 asks 1e-6 or tighter) and in docs/architecture.md.
 */
const INDEPENDENCE_TOLERANCE = 0;

const RUNS = process.env["SOAK"] ? 300 : 25;

let evaluator: LocalEvaluator;

beforeAll(async () => {
  const engine = await LlamaEngine.load({ modelPath: generatedModel(TINY), contextSize: 8192, sequences: 2 });
  evaluator = new LocalEvaluator(engine, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
}, 60_000);

afterAll(async () => {
  await evaluator?.close();
});

type Question = SystemOneRequest["questions"][string];

const text = fc.string({ minLength: 1, maxLength: 24 });
const content = fc.oneof(text, fc.constant(null), fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), text, { maxKeys: 2 }));
const instructions = fc.option(fc.oneof(text, fc.constantFrom("Is the customer angry?", "Which team?", "How urgent?")), { nil: undefined });
const withInstructions = <Q extends Question>(q: Q, given: string | undefined): Q => (given === undefined ? q : { ...q, instructions: given });

const noul = fc
  .record({ instructions, yes: fc.option(text, { nil: undefined }), no: fc.option(text, { nil: undefined }) })
  .map(
    ({ instructions: given, yes, no }): Question =>
      withInstructions({ type: "noul", ...(yes !== undefined || no !== undefined ? { criteria: { true: yes ?? null, false: no ?? null } } : {}) }, given),
  );
const choice = fc
  .record({
    instructions,
    // Up to 26 options read single-letter labels at one position; beyond, numbered labels of several tokens, each position of the trie read.
    options: fc.oneof(
      { weight: 4, arbitrary: fc.uniqueArray(fc.string({ minLength: 1, maxLength: 10 }), { minLength: 1, maxLength: 6 }) },
      { weight: 1, arbitrary: fc.uniqueArray(fc.string({ minLength: 1, maxLength: 4 }), { minLength: 27, maxLength: 32 }) },
    ),
    descriptions: fc.array(content, { maxLength: 6 }),
  })
  .map(
    ({ instructions: given, options, descriptions }): Question =>
      withInstructions({ type: "choice", criteria: Object.fromEntries(options.map((o, i) => [o, descriptions[i] ?? null])) }, given),
  );
const score = fc
  .record({ instructions, levels: fc.array(text, { minLength: 1, maxLength: 10 }) })
  .map(({ instructions: given, levels }): Question => withInstructions({ type: "score", criteria: levels }, given));

/** A request's questions: 1 to 6 of random types, under random keys, in random order; the same question may come twice. */
const questionSet = fc
  .uniqueArray(fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), fc.oneof(noul, choice, score)), { minLength: 1, maxLength: 6, selector: ([key]) => key })
  .chain((entries) => fc.tuple(fc.constant(entries), fc.subarray(entries.map(([key]) => key)), fc.boolean()))
  .map(([entries, subset, twice]) => {
    const questions: SystemOneRequest["questions"] = Object.fromEntries(entries);
    // The same question under another key, beside itself.
    if (twice) questions["\u0000again"] = entries[0]![1];
    return { questions, subset };
  });

const state = fc.oneof(
  fc.constantFrom<SystemOneRequest["state"]>(
    { customer: "Dana", messages: [{ from: "customer", text: "My kettle never arrived. I want my money back." }] },
    "The printer jams on every second page.",
    ["order 4411", { late: true }],
    "",
  ),
  fc.string({ maxLength: 80 }),
);

/** Every number of an answer, with its path, in a fixed order. */
function numbersOf(value: unknown, path = ""): [string, number][] {
  if (typeof value === "number") return [[path, value]];
  if (value && typeof value === "object") return Object.entries(value).flatMap(([k, v]) => numbersOf(v, `${path}.${k}`));
  return [];
}

/** The largest gap between two answers' numbers; Infinity when they differ in anything else (type, top label, keys). */
function gap(a: Answer, b: Answer): number {
  const strip = (x: unknown): unknown => JSON.parse(JSON.stringify(x, (_k, v: unknown) => (typeof v === "number" ? 0 : v)));
  if (JSON.stringify(strip(a)) !== JSON.stringify(strip(b))) return Number.POSITIVE_INFINITY;
  const [x, y] = [numbersOf(a), numbersOf(b)];
  return Math.max(0, ...x.map(([, v], i) => Math.abs(v - (y[i]?.[1] as number))));
}

async function answers(s: SystemOneRequest["state"], questions: SystemOneRequest["questions"]): Promise<Record<string, Answer>> {
  return (await evaluator.evaluate({ state: s, model: "tiny", questions })).response.answers;
}

describe("a question's answer depends only on the model, the state and that question", () => {
  it(`is the answer it gets alone, whatever else the request asks (random types, orders, counts, subsets; tolerance ${INDEPENDENCE_TOLERANCE})`, async () => {
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(state, questionSet, async (s, { questions, subset }) => {
        const together = await answers(s, questions);
        // A subset of the same questions, in reverse order.
        const some = Object.fromEntries(subset.reverse().map((key) => [key, questions[key] as Question]));
        // Each question alone, all at once and beside the subset: requests that run together share the engine's sequences
        // and take turns decode by decode, and an answer must not depend on what runs beside it either.
        const keys = Object.keys(questions);
        const [fewer, ...single] = await Promise.all([
          subset.length ? answers(s, some) : Promise.resolve<Record<string, Answer>>({}),
          ...keys.map((key) => answers(s, { [key]: questions[key] as Question })),
        ]);
        for (const [i, key] of keys.entries()) {
          const alone = (single[i] as Record<string, Answer>)[key] as Answer;
          const seen = [together[key] as Answer, ...(key in fewer ? [fewer[key] as Answer] : [])];
          for (const other of seen) {
            const g = gap(alone, other);
            if (!(g <= INDEPENDENCE_TOLERANCE)) throw new Error(`question ${JSON.stringify(key)} moved by ${g} with other questions beside it`);
            compared++;
          }
        }
      }),
      { numRuns: RUNS, seed: Number(process.env["FC_SEED"] ?? 35) },
    );
    expect(compared).toBeGreaterThan(RUNS);
  }, 300_000);

  it("holds for the same choice asked alone and with a noul and a score, on many states", async () => {
    const topic: Question = { type: "choice", instructions: "Topic?", criteria: { shipping: "Deliveries", billing: null, product: { about: "defects" } } };
    const others: SystemOneRequest["questions"] = {
      refund: { type: "noul", instructions: "Does the customer ask for a refund?", criteria: { true: "money back", false: null } },
      urgency: { type: "score", instructions: "How urgent?", criteria: ["low", "medium", "high", "critical"] },
    };
    for (const s of ["Where is my parcel?", { ticket: "charged twice", tier: "gold" }, ["a", 1]]) {
      const alone = (await answers(s, { topic }))["topic"];
      expect((await answers(s, { ...others, topic }))["topic"]).toEqual(alone);
      expect((await answers(s, { topic, ...others }))["topic"]).toEqual(alone);
    }
  });
});
