/** Billing figures: sums that add across runs, and the rates they fit. */
import { describe, expect, it } from "vitest";
import { addBilled, addSums, billingRates, noBilling, projectTokens, requestChars } from "../../src/api/billing.js";

describe("billingRates", () => {
  it("recovers the tokens per character of state and of questions a server bills, from one job whose states vary", () => {
    const sums = noBilling();
    // A server billing 0.27 tokens per state character, and framing worth 1.6 per question character (one job: 800 of them).
    for (const state of [120, 300, 95, 640, 210, 1800]) addBilled(sums, { state, questions: 800 }, 0.27 * state + 1.6 * 800);
    const rates = billingRates(sums);
    expect(rates?.fit).toBe("least-squares");
    expect(rates?.per_state_char).toBeCloseTo(0.27, 9);
    expect(rates?.per_question_char).toBeCloseTo(1.6, 9);
    // Another night, states four times longer, and another job's questions: still exact.
    const chars = { state: 4000, questions: 300 };
    expect(projectTokens(rates as NonNullable<typeof rates>, chars)).toBeCloseTo(0.27 * 4000 + 1.6 * 300, 6);
  });

  it("falls back to one rate for every character when the requests cannot tell state from questions", () => {
    const sums = noBilling();
    for (let i = 0; i < 5; i++) addBilled(sums, { state: 200, questions: 600 }, 400);
    expect(billingRates(sums)).toEqual({ per_state_char: 0.5, per_question_char: 0.5, fit: "ratio", requests: 5 });
    expect(billingRates(noBilling())).toBeUndefined();
  });

  it("adds across runs, shards and nights as one fit over all their requests would", () => {
    const a = noBilling();
    const b = noBilling();
    const all = noBilling();
    [100, 250, 900].forEach((state, i) => {
      addBilled(i === 1 ? b : a, { state, questions: 500 }, state / 3 + 700);
      addBilled(all, { state, questions: 500 }, state / 3 + 700);
    });
    expect(addSums(addSums(noBilling(), a), b)).toEqual(all);
    expect(addSums(addSums(noBilling(), all), b, -1)).toEqual(a);
  });
});

describe("requestChars", () => {
  it("counts the state and the questions as JSON, as the remote estimate does", () => {
    const questions = { ok: { type: "noul" as const, instructions: "Is it?" } };
    expect(requestChars({ state: "héllo\n", questions })).toEqual({ state: 9, questions: JSON.stringify(questions).length });
    expect(requestChars({ state: { a: [1, 2] }, questions }).state).toBe(11);
  });
});
