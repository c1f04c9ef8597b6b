/**
 * The embedded evaluator on real llama.cpp, with models the tests write
 * themselves (random weights: these tests prove mechanics, never quality).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responseViolations } from "../../src/api/consistency.js";
import { UnprocessableEntityError } from "../../src/api/errors.js";
import type { EvaluatorResponse, SystemOneRequest, SystemOneResponse } from "../../src/api/schema.js";
import type { ScoreTask } from "../../src/engines/engine.js";
import { chunkSizes, LlamaEngine, prefixChunks } from "../../src/engines/llama.js";
import { LocalEvaluator } from "../../src/evaluator/local.js";
import { detectTemplate, renderQuestion, renderSystem, SYSTEM_TEXT, TEMPLATES, type ChatTemplate } from "../../src/evaluator/prompt.js";
import { distributionKinds } from "../../src/questions/index.js";
import { labelDistribution } from "../../src/evaluator/readout.js";
import { generatedModel, TINY } from "../support/models.js";
import { ReferenceModel } from "../support/reference.js";

const CHUNK = 256;
let engine: LlamaEngine;
let evaluator: LocalEvaluator;
let reference: ReferenceModel;

beforeAll(async () => {
  const path = generatedModel(TINY);
  engine = await LlamaEngine.load({ modelPath: path, contextSize: 8192, sequences: 2, chunkTokens: CHUNK });
  evaluator = new LocalEvaluator(engine, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
  reference = await ReferenceModel.load(path);
}, 60_000);

afterAll(async () => {
  await evaluator?.close();
  await reference?.close();
});

const ticket = {
  customer: "Dana",
  messages: [{ from: "customer", text: "My kettle never arrived. I want my money back." }],
};

function request(questions: SystemOneRequest["questions"], state: SystemOneRequest["state"] = ticket): SystemOneRequest {
  return { state, model: "tiny", questions };
}

const questions: SystemOneRequest["questions"] = {
  refund: { type: "noul", instructions: "Does the customer ask for a refund?", criteria: { true: "money back", false: null } },
  topic: { type: "choice", instructions: "Topic?", criteria: { shipping: "Deliveries", billing: null, product: { about: "defects" } } },
  urgency: { type: "score", instructions: "How urgent?", criteria: ["low", "medium", "high", "critical"] },
};

/** A request of the spec's types gets answers of the spec's types. */
async function answer(req: SystemOneRequest): Promise<SystemOneResponse> {
  return (await evaluator.evaluate(req)).response as SystemOneResponse;
}

/**
 * The reference's label log-probabilities for one task, evaluated in the same
 * batches as the engine (`split`) or in one batch per label.
 */
async function referenceLogprobs(prefix: readonly number[], shared: number, task: ScoreTask, split: boolean, only?: number[]): Promise<number[]> {
  const { suffix, labels } = task;
  const single = labels.every((l) => l.length === 1);
  const out: number[] = [];
  for (const label of only ? only.map((k) => labels[k]!) : labels) {
    const tokens = [...prefix, ...suffix, ...label.slice(0, -1), label[label.length - 1]!];
    // The label's last token is only predicted, never evaluated by the engine: it gets a batch of its own.
    const batches = !split
      ? [tokens.length - 1, 1]
      : single
        ? [...prefixChunks(prefix.length, shared, CHUNK), ...chunkSizes(suffix.length, CHUNK), 1]
        : [...prefixChunks(prefix.length, shared, CHUNK), ...chunkSizes(suffix.length - 1, CHUNK), label.length, 1];
    out.push(await reference.logprob(tokens, label.length, batches));
  }
  return out;
}

/** The probabilities an answer gives its options, in option order (noul: [yes, no]). */
function optionProbabilities(response: SystemOneResponse, name: string): number[] {
  const a = response.answers[name]!;
  if (a.type === "noul") return [a.noul, 1 - a.noul];
  return Object.values(a.probabilities);
}

describe("LocalEvaluator readout", () => {
  it("equals an independent computation from the engine's full next-token distribution (within 1e-6)", async () => {
    const req = request(questions);
    const response = await answer(req);
    const prepared = evaluator.prepare(req);
    for (const [i, name] of prepared.names.entries()) {
      const expected = labelDistribution(await referenceLogprobs(prepared.prefix, prepared.shared, prepared.tasks[i]!, true));
      const got = optionProbabilities(response, name);
      expect(got).toHaveLength(expected.length);
      got.forEach((p, k) => expect(Math.abs(p - expected[k]!)).toBeLessThan(1e-6));
    }
  });

  it("with prefix reuse matches evaluating each whole prompt in one batch, within batch-split noise", async () => {
    const req = request(questions);
    const response = await answer(req);
    const prepared = evaluator.prepare(req);
    let worst = 0;
    for (const [i, name] of prepared.names.entries()) {
      const expected = labelDistribution(await referenceLogprobs(prepared.prefix, prepared.shared, prepared.tasks[i]!, false));
      optionProbabilities(response, name).forEach((p, k) => (worst = Math.max(worst, Math.abs(p - expected[k]!))));
    }
    // Documented in the README: a different batch split moves probabilities by up to about 1e-3.
    expect(worst).toBeLessThan(5e-3);
  });

  it("reads every one of 255 options exactly (multi-token labels scored as whole sequences)", async () => {
    const criteria = Object.fromEntries(Array.from({ length: 255 }, (_, i) => [`option ${i}`, i % 3 ? null : `description ${i}`]));
    const req = request({ many: { type: "choice", instructions: "Pick one", criteria } }, "short state");
    const response = await answer(req);
    expect(responseViolations(req, response)).toEqual([]);
    const a = response.answers["many"]!;
    if (a.type !== "choice") throw new Error("expected a choice answer");
    expect(Object.keys(a.probabilities)).toEqual(Object.keys(criteria));
    // Every option has its own, nonzero probability: no top-k truncation.
    expect(Object.values(a.probabilities).every((p) => p > 0)).toBe(true);
    // The reference re-evaluates the whole prompt per label, so check a sample through probability ratios.
    const prepared = evaluator.prepare(req);
    const sample = [0, 9, 99, 254];
    const logprobs = await referenceLogprobs(prepared.prefix, prepared.shared, prepared.tasks[0]!, true, sample);
    for (let i = 1; i < sample.length; i++) {
      const ratio = Math.log(a.probabilities[`option ${sample[i]}`]! / a.probabilities[`option ${sample[0]}`]!);
      expect(Math.abs(ratio - (logprobs[i]! - logprobs[0]!))).toBeLessThan(1e-5);
    }
  }, 120_000);

  it("answers a 10-level score, a one-level score and a noul, consistently", async () => {
    const req = request({
      ten: { type: "score", criteria: Array.from({ length: 10 }, (_, k) => `level ${k}`) },
      one: { type: "score", criteria: ["the only level"] },
      yes: { type: "noul" },
    });
    const response = await answer(req);
    expect(responseViolations(req, response)).toEqual([]);
    expect(response.answers["one"]).toMatchObject({ score: 0, confidence: 1, probabilities: { "0": 1 } });
    const ten = response.answers["ten"]!;
    if (ten.type !== "score") throw new Error("expected a score");
    expect(ten.score).toBeCloseTo(
      Object.values(ten.probabilities).reduce((s, p, k) => s + k * p, 0),
      12,
    );
  });

  it("answers object, array and string states, each differently", async () => {
    const q = { yes: { type: "noul" as const, instructions: "Is it urgent?" } };
    const results = [];
    for (const state of [{ a: 1, nested: { b: [1, 2] } }, [1, "two", { three: 3 }], "plain text"]) {
      const req = request(q, state);
      const response = await answer(req);
      expect(responseViolations(req, response)).toEqual([]);
      results.push((response.answers["yes"] as { noul: number }).noul);
    }
    expect(new Set(results).size).toBe(3);
  });
});

describe("LocalEvaluator determinism", () => {
  it("gives bit-identical answers whatever the question keys are named", async () => {
    const a = await answer(request(questions));
    const renamed = Object.fromEntries(Object.entries(questions).map(([k, v]) => [`x_${k}_renamed`, v]));
    const b = await answer(request(renamed));
    for (const key of Object.keys(questions)) expect(b.answers[`x_${key}_renamed`]).toEqual(a.answers[key]);
  });

  it("gives bit-identical answers whatever the question order", async () => {
    const a = await answer(request(questions));
    const reversed = Object.fromEntries(Object.entries(questions).reverse());
    const b = await answer(request(reversed));
    expect(Object.keys(b.answers)).toEqual(Object.keys(reversed));
    for (const key of Object.keys(questions)) expect(b.answers[key]).toEqual(a.answers[key]);
  });

  it("answers each question the same whichever other questions of the types the request asks share it", async () => {
    const all = await answer(request(questions));
    // Other questions of the same three types: the same system text, so the same answer to each question.
    const others: SystemOneRequest["questions"] = {
      a: { type: "noul" },
      b: { type: "choice", criteria: { x: null, y: "why" } },
      c: { type: "score", criteria: ["none", "some"] },
    };
    for (const [key, question] of Object.entries(questions)) {
      const mixed = await answer(request({ ...others, [key]: question }));
      expect(mixed.answers[key]).toEqual(all.answers[key]);
    }
  });

  it("keeps the shared prefix free of the questions: one system text for every request, each type's reply hint in its own question's suffix", () => {
    const template = TEMPLATES["chatml"] as ChatTemplate;
    expect(
      renderSystem(template)
        .map((s) => s.text)
        .join(""),
    ).toContain(SYSTEM_TEXT);
    // A request asking one type has the prefix of one asking three, token for token.
    const one = evaluator.prepare(request({ refund: questions["refund"]! }));
    const three = evaluator.prepare(request(questions));
    expect(one.prefix).toEqual(three.prefix);
    expect(one.shared).toBe(three.shared);
    for (const kind of distributionKinds()) expect(SYSTEM_TEXT).not.toContain(kind.replyHint);
    const suffix = (q: SystemOneRequest["questions"][string]) =>
      renderQuestion(template, q)
        .suffix.map((s) => s.text)
        .join("");
    expect(suffix(questions["refund"]!)).toContain("Reply with Yes or No.\nYes or No?");
    expect(suffix(questions["topic"]!)).toContain("Reply with the letter or number of one option.\nLabel (A-C)?");
    expect(suffix(questions["urgency"]!)).toContain("Reply with the level number.\nLevel (0-3)?");
  });

  it("gives bit-identical answers while other requests share the engine", async () => {
    const req = request(questions);
    const alone = await answer(req);
    const others = [
      request({ o: { type: "noul" } }, "x".repeat(700)),
      request({ o: { type: "score", criteria: ["a", "b", "c"] } }, { long: "y".repeat(1500) }),
      request({ o: { type: "choice", criteria: { p: null, q: null } } }, ["z"]),
    ];
    const results = await Promise.all([answer(others[0]!), answer(req), answer(others[1]!), answer(req), answer(others[2]!)]);
    expect(results[1]).toEqual(alone);
    expect(results[3]).toEqual(alone);
    expect(engine.stats()).toEqual({ queued: 0, active: 0 });
  }, 60_000);
});

describe("LocalEvaluator usage and limits", () => {
  it("counts the state once and each question's suffix, as the tokenizer counts them", async () => {
    const req = request(questions, "a state of exactly some bytes");
    const response = await answer(req);
    const prepared = evaluator.prepare(req);
    expect(response.usage.input_tokens).toBe(prepared.prefix.length + prepared.tasks.reduce((s, t) => s + t.suffix.length, 0));
    // Independently: the byte-level tokenizer makes one token per UTF-8 byte of plain text.
    const more = await answer(request(questions, `a state of exactly some bytes${"é".repeat(10)}`));
    expect(more.usage.input_tokens - response.usage.input_tokens).toBe(20);
    const twice = await answer(request({ ...questions, again: questions["refund"]! }, "a state of exactly some bytes"));
    expect(twice.usage.input_tokens - response.usage.input_tokens).toBe(prepared.tasks[0]!.suffix.length);
  });

  it("counts one output token per position read", async () => {
    // Byte-level model: "0".."3" are single tokens, so a score question reads one position.
    const one = await answer(request({ s: { type: "score", criteria: ["a", "b", "c", "d"] } }));
    expect(one.usage.output_tokens).toBe(1);
    // "Yes"/"No" are several byte tokens plus a terminator: root, Y, Ye, Yes, N, No.
    const noul = await answer(request({ n: { type: "noul" } }));
    expect(noul.usage.output_tokens).toBe(6);
  });

  it("refuses state plus all questions over 64k tokens with a 422 naming the limit and the count", async () => {
    const big = "w".repeat(31_000);
    const many = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`q${i}`, { type: "noul" as const, instructions: big }]));
    const error = await evaluator.evaluate(request(many, "s")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnprocessableEntityError);
    const detail = (error as UnprocessableEntityError).detail;
    expect(detail[0]).toMatchObject({ type: "too_long", loc: ["body"], ctx: { max_length: 65_536 } });
    expect(detail[0]!.msg).toMatch(/65,536/);
    expect((detail[0]!.ctx as { actual_length: number }).actual_length).toBeGreaterThan(155_000);
  });

  it("refuses state plus one question over 32k tokens, at that question", async () => {
    const error = await evaluator
      .evaluate(request({ fine: { type: "noul" }, huge: { type: "noul", instructions: "v".repeat(33_000) } }, "s"))
      .catch((e: unknown) => e);
    const detail = (error as UnprocessableEntityError).detail;
    expect(detail).toHaveLength(1);
    expect(detail[0]).toMatchObject({ loc: ["body", "questions", "huge"], ctx: { max_length: 32_768 } });
  });

  it("refuses a request over the model's context window instead of truncating", async () => {
    const error = await evaluator.evaluate(request({ q: { type: "noul" } }, "u".repeat(9_000))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnprocessableEntityError);
    const item = (error as UnprocessableEntityError).detail[0]!;
    expect(item.msg).toMatch(/context window is 8,192/);
    expect(item.loc).toEqual(["body", "questions", "q"]);
  });

  it("stops at an aborted signal and frees its sequence", async () => {
    const controller = new AbortController();
    controller.abort(new Error("caller gave up"));
    await expect(evaluator.evaluate(request(questions), { signal: controller.signal })).rejects.toThrow("caller gave up");
    expect(engine.stats()).toEqual({ queued: 0, active: 0 });
  });
});

describe("LocalEvaluator determinism under load", () => {
  it("gives each of 12 varied requests the bits it gets alone, whatever runs beside it", async () => {
    // Small chunks and 4 sequences make many requests interleave chunk by chunk.
    const busy = await LlamaEngine.load({ modelPath: generatedModel(TINY), contextSize: 4096, sequences: 4, chunkTokens: 64 });
    const local = new LocalEvaluator(busy, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(busy.chatTemplate), metadata: [] });
    try {
      const requests: SystemOneRequest[] = Array.from({ length: 12 }, (_, i) => ({
        state: "state text ".repeat(5 + i * 23),
        model: "tiny",
        questions: Object.fromEntries(
          Array.from({ length: 1 + (i % 5) }, (_, j) => {
            const options = Object.fromEntries(Array.from({ length: 2 + ((i + j) % 30) }, (_, k) => [`o${k}`, null]));
            const q: SystemOneRequest["questions"][string] =
              j % 3 === 0
                ? { type: "noul", instructions: "x".repeat(j * 17 + i) }
                : j % 3 === 1
                  ? { type: "choice", criteria: options }
                  : { type: "score", criteria: ["a", "b", "c"] };
            return [`q${j}`, q];
          }),
        ),
      }));
      const solo: EvaluatorResponse[] = [];
      for (const r of requests) solo.push((await local.evaluate(r)).response);
      for (const order of [[...requests.keys()].reverse(), [...requests.keys()].sort((a, b) => ((a * 7) % 12) - ((b * 7) % 12))]) {
        const together = await Promise.all(order.map((i) => local.evaluate(requests[i]!)));
        together.forEach((result, k) => expect(result.response).toEqual(solo[order[k]!]));
      }
    } finally {
      await local.close();
    }
  }, 120_000);
});

describe("LocalEvaluator prefix reuse across requests", () => {
  // Small chunks: the byte-level system text (about 350 tokens) spans several decodes.
  let warm: LlamaEngine;
  let cold: LlamaEngine;
  beforeAll(async () => {
    warm = await LlamaEngine.load({ modelPath: generatedModel(TINY), contextSize: 4096, sequences: 3, chunkTokens: 64 });
    cold = await LlamaEngine.load({ modelPath: generatedModel(TINY), contextSize: 4096, sequences: 1, chunkTokens: 64, reuse: false });
  }, 60_000);
  afterAll(async () => {
    await warm?.close();
    await cold?.close();
  });

  const pair = (template: ChatTemplate) =>
    [warm, cold].map((e) => new LocalEvaluator(e, { id: "tiny-1.0.0", temperature: 1, template, metadata: [] })) as [LocalEvaluator, LocalEvaluator];
  // Byte-level vocabulary: Yes/No and the 30 numbered options are multi-token labels; score levels are single tokens.
  const probe: SystemOneRequest["questions"] = {
    refund: { type: "noul", instructions: "Does the customer ask for a refund?" },
    many: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`option ${i}`, null])) },
    urgency: { type: "score", criteria: ["low", "medium", "high", "critical"] },
  };

  it.each(Object.keys(TEMPLATES))(
    "answers bit-identically cold, after another record, after the same record and on each sequence (%s)",
    async (name) => {
      const [reusing, fresh] = pair(TEMPLATES[name] as ChatTemplate);
      const req = request(probe);
      const expected = (await fresh.evaluate(req)).response;
      await reusing.evaluate(request(probe, "another record entirely"));
      const afterOther = (await reusing.evaluate(req)).response;
      const afterSame = (await reusing.evaluate(req)).response;
      const onEach = await Promise.all([0, 1, 2].map(() => reusing.evaluate(req)));
      for (const got of [afterOther, afterSame, ...onEach.map((r) => r.response)]) expect(got).toEqual(expected);
      expect(warm.stats()).toEqual({ queued: 0, active: 0 });
    },
    60_000,
  );

  it("evaluates only the record after the first request: the system text stays cached", async () => {
    const [reusing, fresh] = pair(TEMPLATES["chatml"] as ChatTemplate);
    const one = { refund: probe["refund"]! };
    // Every sequence holds some record of this template first.
    await Promise.all([0, 1, 2].map((i) => reusing.evaluate(request(one, `warm-up ${i}`))));
    const req = request(one, "a record none of the sequences holds");
    const spent = async (engine: LlamaEngine, evaluator: LocalEvaluator) => {
      const before = engine.evaluatedTokens;
      const { response } = await evaluator.evaluate(req);
      return { tokens: engine.evaluatedTokens - before, response };
    };
    const [withReuse, without] = [await spent(warm, reusing), await spent(cold, fresh)];
    expect(withReuse.response).toEqual(without.response);
    expect(without.tokens - withReuse.tokens).toBe(reusing.prepare(req).shared);
    expect(reusing.prepare(req).shared).toBeGreaterThan(250);
    // The same record again: nothing of the prefix is evaluated, only the question.
    const again = await spent(warm, reusing);
    expect(again.response).toEqual(without.response);
    expect(again.tokens).toBe(without.tokens - reusing.prepare(req).prefix.length);
  });

  it("gives a record that begins like the system text, an empty state, or a prefix of the last record the answers it gives without reuse", async () => {
    const template = TEMPLATES["chatml"] as ChatTemplate;
    const [reusing, fresh] = pair(template);
    const systemText = renderSystem(template)
      .map((s) => s.text)
      .join("");
    const states: SystemOneRequest["state"][] = [
      systemText,
      "",
      `${systemText} and then some record text`,
      "",
      "prefix of a longer record",
      "prefix of a longer record, and the rest of it".repeat(3),
      "prefix of a longer record",
      { nested: systemText },
    ];
    for (const state of states) {
      const req = request(probe, state);
      expect((await reusing.evaluate(req)).response).toEqual((await fresh.evaluate(req)).response);
    }
  }, 60_000);
});

describe("a state too long for any window", () => {
  it("is refused from its byte length, before it is tokenized (a client cannot make the server tokenize megabytes)", async () => {
    const long: string[] = [];
    // The real engine, its tokenizer watched: which texts it was given.
    const watched = Object.assign(Object.create(engine) as LlamaEngine, {
      tokenize: (text: string, special: boolean) => {
        if (text.length > 10_000) long.push(text);
        return engine.tokenize(text, special);
      },
    });
    const local = new LocalEvaluator(watched, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
    const most = engine.maxTokenBytes() as number;
    expect(most).toBeGreaterThan(0);
    // Just over what the window could hold at the most bytes a token, and over the size below which states are tokenized.
    const bytes = Math.max(engine.contextSize * most, 256 * 1024) + 1000;
    const refused = (() => {
      try {
        local.estimateInputTokens(request({ q: { type: "noul" } }, "x".repeat(bytes)));
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(UnprocessableEntityError);
    expect((refused as UnprocessableEntityError).body()).toMatchObject({ detail: [{ type: "too_long", loc: ["body", "state"] }] });
    expect(JSON.stringify((refused as UnprocessableEntityError).body())).toMatch(/The state is at least [\d,]+ tokens/);
    expect(long).toEqual([]);
    // A long state that may fit is tokenized and measured as before.
    expect(() => local.estimateInputTokens(request({ q: { type: "noul" } }, "x ".repeat(20_000)))).toThrow(UnprocessableEntityError);
    expect(long).toHaveLength(1);
  });
});
