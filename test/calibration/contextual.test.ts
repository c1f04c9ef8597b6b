/**
 * Contextual calibration through the embedded evaluator on the tiny generated
 * model: a label bias planted on top of the model's answers is found by
 * asking content-free states, and divided out.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Answer, Question } from "../../src/api/schema.js";
import { LlamaEngine } from "../../src/engines/llama.js";
import { answerDistribution, answerFrom, applyMap } from "../../src/calibration/maps.js";
import { LocalEvaluator } from "../../src/evaluator/local.js";
import { detectTemplate } from "../../src/evaluator/prompt.js";
import { generatedModel, TINY } from "../support/models.js";
import { CONTENT_FREE_STATES, contextualMaps } from "../../src/calibration/label-free.js";

let evaluator: LocalEvaluator;

beforeAll(async () => {
  const engine = await LlamaEngine.load({ modelPath: generatedModel(TINY), contextSize: 4096, sequences: 1 });
  evaluator = new LocalEvaluator(engine, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
}, 60_000);

afterAll(async () => {
  await evaluator?.close();
});

const questions: Record<string, Question> = {
  team: { type: "choice", instructions: "Which team?", criteria: { shipping: null, billing: null, product: null, account: null } },
  urgent: { type: "noul", instructions: "Is it urgent?" },
};
const planted: Record<string, number[]> = { team: [1.5, 0, -1, 0.25], urgent: [0.8, -0.8] };

/** The embedded model's answers with a per-option bias multiplied in, as a prompt-level bias would. */
async function ask(state: string, bias?: Record<string, number[]>): Promise<Record<string, Answer>> {
  const { answers } = (await evaluator.evaluate({ state, model: "tiny", questions })).response;
  if (!bias) return answers;
  return Object.fromEntries(
    Object.entries(answers).map(([name, a]) => {
      const q = questions[name]!;
      return [name, answerFrom(q, applyMap({ temperature: 1, bias: bias[name]! }, answerDistribution(q, a)))];
    }),
  );
}

const centred = (v: number[]) => v.map((x) => x - v.reduce((a, b) => a + b, 0) / v.length);

describe("contextual calibration", () => {
  it("asks each content-free state once per question set and removes at least 80% of a planted bias", async () => {
    let calls = 0;
    const clean = await contextualMaps(questions, (s) => ((calls += 1), ask(s)));
    expect(calls).toBe(CONTENT_FREE_STATES.length);
    const biased = await contextualMaps(questions, (s) => ask(s, planted));
    for (const name of Object.keys(questions)) {
      // The planted bias shows up, with its sign reversed, as the difference between the two maps' biases.
      const found = biased.maps[name]!.bias.map((b, i) => clean.maps[name]!.bias[i]! - b);
      const want = centred(planted[name]!);
      const residual = Math.hypot(...found.map((f, i) => f - want[i]!));
      expect(residual, name).toBeLessThan(0.2 * Math.hypot(...want));
    }
    // Applied to a real record's biased answer, the biased map lands where the clean map puts the unbiased answer.
    const record = "My parcel is two weeks late and nobody answers.";
    const [plain, skewed] = [await ask(record), await ask(record, planted)];
    const q = questions["team"]!;
    const a = applyMap(clean.maps["team"]!, answerDistribution(q, plain["team"]!));
    const b = applyMap(biased.maps["team"]!, answerDistribution(q, skewed["team"]!));
    const before = Math.max(...answerDistribution(q, plain["team"]!).map((p, i) => Math.abs(p - answerDistribution(q, skewed["team"]!)[i]!)));
    const after = Math.max(...a.map((p, i) => Math.abs(p - b[i]!)));
    expect(after).toBeLessThan(0.2 * before);
  }, 60_000);
});
