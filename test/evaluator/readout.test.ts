import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { answerViolations } from "../../src/api/consistency.js";
import { labelDistribution, labelMass, logSumExp } from "../../src/evaluator/readout.js";
import { choiceAnswer, choiceConfidence, type ChoiceQuestion } from "../../src/questions/choice.js";
import { argmax } from "../../src/questions/distribution.js";
import { noulAnswer } from "../../src/questions/noul.js";
import { scoreAnswer, scoreConfidence, type ScoreQuestion } from "../../src/questions/score.js";

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

function expectCloseAll(got: readonly number[], want: readonly number[], digits: number): void {
  expect(got).toHaveLength(want.length);
  got.forEach((g, i) => expect(g).toBeCloseTo(want[i]!, digits));
}

describe("logSumExp", () => {
  it("matches the naive formula where that does not overflow", () => {
    expect(logSumExp([Math.log(0.2), Math.log(0.3)])).toBeCloseTo(Math.log(0.5), 12);
  });

  it("stays finite at extreme logits", () => {
    expect(logSumExp([1e4, 1e4])).toBeCloseTo(1e4 + Math.log(2), 9);
    expect(logSumExp([-1e4, -1e4])).toBeCloseTo(-1e4 + Math.log(2), 9);
  });

  it("is -Infinity for no terms or only impossible ones", () => {
    expect(logSumExp([])).toBe(-Infinity);
    expect(logSumExp([-Infinity, -Infinity])).toBe(-Infinity);
  });

  it("throws on NaN", () => {
    expect(() => logSumExp([0, Number.NaN])).toThrow(/NaN/);
  });
});

describe("labelDistribution", () => {
  it("is the softmax of the log-probabilities", () => {
    const p = labelDistribution([Math.log(0.1), Math.log(0.3)]);
    expect(p[0]).toBeCloseTo(0.25, 12);
    expect(p[1]).toBeCloseTo(0.75, 12);
  });

  it("renormalises labels that hold only part of the mass", () => {
    expectCloseAll(labelDistribution([Math.log(0.01), Math.log(0.01), Math.log(0.02)]), [0.25, 0.25, 0.5], 14);
  });

  it("applies the calibration temperature: p ~ exp(logprob / T)", () => {
    const [a, b] = labelDistribution([0, -2], 2) as [number, number];
    expect(a / b).toBeCloseTo(Math.exp(1), 12);
    const sharp = labelDistribution([0, -2], 0.5);
    expect(sharp[0]! / sharp[1]!).toBeCloseTo(Math.exp(4), 9);
  });

  it("handles extreme logits without overflow", () => {
    expect(labelDistribution([1e4, -1e4])).toEqual([1, 0]);
    // At -1e4 the subtraction keeps about 12 significant digits of log(3).
    expectCloseAll(labelDistribution([-1e4, -1e4 - Math.log(3)]), [0.75, 0.25], 11);
  });

  it("is uniform when every label is impossible", () => {
    expect(labelDistribution([-Infinity, -Infinity, -Infinity, -Infinity])).toEqual([0.25, 0.25, 0.25, 0.25]);
  });

  it("gives all mass to +Infinity labels, shared equally", () => {
    expect(labelDistribution([Infinity, 0, Infinity])).toEqual([0.5, 0, 0.5]);
  });

  it("refuses NaN and a temperature that is not positive and finite", () => {
    expect(() => labelDistribution([Number.NaN])).toThrow(RangeError);
    for (const t of [0, -1, Infinity, Number.NaN]) expect(() => labelDistribution([0, 1], t)).toThrow(/temperature/);
  });
});

describe("labelMass", () => {
  it("is the share of the full distribution on the labels", () => {
    expect(labelMass([Math.log(0.2), Math.log(0.05)])).toBeCloseTo(0.25, 12);
    expect(labelMass([-Infinity])).toBe(0);
    expect(labelMass([0, 0])).toBe(1);
  });
});

describe("confidence (v1)", () => {
  it("choice: (n p_max - 1) / (n - 1)", () => {
    expect(choiceConfidence([0.5, 0.25, 0.25])).toBeCloseTo(0.25, 12);
    expect(choiceConfidence([1, 0, 0, 0])).toBe(1);
    expect(choiceConfidence([0.25, 0.25, 0.25, 0.25])).toBe(0);
    expect(choiceConfidence([1])).toBe(1);
  });

  it("choice: is not the preview's entropy formula", () => {
    const p = [0.7, 0.2, 0.1];
    const entropy = -sum(p.map((x) => x * Math.log(x))) / Math.log(3);
    expect(choiceConfidence(p)).toBeCloseTo(0.55, 12);
    expect(choiceConfidence(p)).not.toBeCloseTo(1 - entropy, 3);
  });

  it("score: 1 - sum p_i |i - m| / mad_uniform", () => {
    // k = 3: mad_uniform = (1 + 0 + 1) / 3; m = 1; spread = 0.2 + 0.2.
    expect(scoreConfidence([0.2, 0.6, 0.2])).toBeCloseTo(1 - 0.4 / (2 / 3), 12);
    // k = 5: mad_uniform = (2 + 1 + 0 + 1 + 2) / 5 = 1.2; m = 0; spread = 0.1 * 4.
    expect(scoreConfidence([0.9, 0, 0, 0, 0.1])).toBeCloseTo(1 - 0.4 / 1.2, 12);
    expect(scoreConfidence([0, 0, 1])).toBe(1);
    expect(scoreConfidence([0.5, 0.5])).toBe(0);
    expect(scoreConfidence([1])).toBe(1);
  });

  it("score: clipped to 0 when the mass is far from the mode", () => {
    expect(scoreConfidence([0.34, 0, 0.33, 0, 0.33])).toBe(0);
  });
});

describe("answer builders", () => {
  it("noul: the probability of yes", () => {
    expect(noulAnswer(0.8)).toEqual({ type: "noul", noul: 0.8 });
    expect(noulAnswer(1 + 1e-16)).toEqual({ type: "noul", noul: 1 });
  });

  it("choice: the argmax, with ties broken by option order", () => {
    expect(choiceAnswer(["a", "b", "c"], [0.2, 0.5, 0.3]).choice).toBe("b");
    expect(choiceAnswer(["a", "b", "c"], [0.4, 0.4, 0.2]).choice).toBe("a");
    expect(choiceAnswer(["x", "y"], [0.5, 0.5]).choice).toBe("x");
  });

  it("choice: keeps an option named __proto__ as an own key", () => {
    const answer = choiceAnswer(["__proto__", "b"], [0.9, 0.1]);
    expect(Object.keys(answer.probabilities)).toEqual(["__proto__", "b"]);
    // biome-ignore lint/suspicious/noProto: the point is that "__proto__" is an ordinary option label here
    expect(answer.probabilities["__proto__"]).toBe(0.9);
    expect(answer.choice).toBe("__proto__");
  });

  it("score: legend keys 0..n-1 deep-equal to the criteria, score = sum k p_k", () => {
    const levels = ["low", { name: "mid", hint: ["x"] }, ["high"]];
    const answer = scoreAnswer(levels, [0.2, 0.3, 0.5]);
    expect(answer.legend).toEqual({ "0": "low", "1": { name: "mid", hint: ["x"] }, "2": ["high"] });
    expect(answer.score).toBeCloseTo(0.3 + 1.0, 12);
    expect(Object.keys(answer.probabilities)).toEqual(["0", "1", "2"]);
  });

  it("score: one level gives score 0 and confidence 1", () => {
    expect(scoreAnswer(["only"], [1])).toEqual({
      type: "score",
      score: 0,
      legend: { "0": "only" },
      probabilities: { "0": 1 },
      confidence: 1,
    });
  });

  it("refuses mismatched lengths and empty option lists", () => {
    expect(() => choiceAnswer(["a", "b"], [1])).toThrow(/2 options but 1/);
    expect(() => scoreAnswer([], [])).toThrow(/at least one/);
  });

  it("argmax returns the first maximum, -1 for none", () => {
    expect(argmax([1, 3, 3])).toBe(1);
    expect(argmax([])).toBe(-1);
    expect(argmax([-Infinity, -Infinity])).toBe(0);
  });
});

describe("properties over random inputs", () => {
  // Logits from the extremes and the middle, including exact ties.
  const logit = fc.oneof(fc.constantFrom(-1e4, 1e4, 0, -Infinity), fc.double({ min: -1e4, max: 1e4, noNaN: true }), fc.integer({ min: -3, max: 3 }));
  const logits = (min: number, max: number) => fc.array(logit, { minLength: min, maxLength: max });
  const temperature = fc.oneof(fc.constant(1), fc.double({ min: 0.05, max: 20, noNaN: true }));

  it("a label distribution is a probability distribution, never NaN, for 1..255 labels", () => {
    fc.assert(
      fc.property(logits(1, 255), temperature, (xs, t) => {
        const p = labelDistribution(xs, t);
        expect(p).toHaveLength(xs.length);
        for (const v of p) expect(v >= 0 && v <= 1).toBe(true);
        expect(Math.abs(sum(p) - 1)).toBeLessThan(1e-9);
        // Order preserved: a larger logit never gets less probability.
        const i = argmax(xs);
        expect(p[i]).toBe(Math.max(...p));
      }),
      { numRuns: 400 },
    );
  });

  it("choice answers obey consistency rules 1, 3 and 5", () => {
    fc.assert(
      fc.property(logits(1, 255), temperature, (xs, t) => {
        const options = xs.map((_, i) => `option-${i}`);
        const question: ChoiceQuestion = { type: "choice", criteria: Object.fromEntries(options.map((o) => [o, null])) };
        const answer = choiceAnswer(options, labelDistribution(xs, t));
        expect(answerViolations("q", question, answer)).toEqual([]);
        expect(answer.choice).toBe(options[argmax(labelDistribution(xs, t))]);
      }),
      { numRuns: 300 },
    );
  });

  it("score answers obey consistency rules 1, 4 and 5, with the score inside [0, n-1]", () => {
    fc.assert(
      fc.property(logits(1, 10), temperature, (xs, t) => {
        const criteria = xs.map((_, k) => (k % 2 ? { level: k } : `level ${k}`));
        const question: ScoreQuestion = { type: "score", criteria };
        const answer = scoreAnswer(criteria, labelDistribution(xs, t));
        expect(answerViolations("q", question, answer)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it("noul answers lie within [0, 1] and follow the yes label", () => {
    fc.assert(
      fc.property(logit, logit, temperature, (yes, no, t) => {
        const [pYes] = labelDistribution([yes, no], t) as [number, number];
        const answer = noulAnswer(pYes);
        expect(answerViolations("q", { type: "noul" }, answer)).toEqual([]);
        if (yes > no) expect(answer.noul).toBeGreaterThanOrEqual(0.5);
        if (yes < no) expect(answer.noul).toBeLessThanOrEqual(0.5);
      }),
      { numRuns: 300 },
    );
  });

  it("confidences lie within [0, 1] and reach 1 on a one-hot distribution", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 255 }), fc.nat(), (n, seed) => {
        const hot = seed % n;
        const oneHot = Array.from({ length: n }, (_, i) => (i === hot ? 1 : 0));
        expect(choiceConfidence(oneHot)).toBe(1);
        if (n <= 10) expect(scoreConfidence(oneHot)).toBe(1);
        const uniform = Array.from({ length: n }, () => 1 / n);
        expect(choiceConfidence(uniform)).toBeCloseTo(n === 1 ? 1 : 0, 9);
      }),
      { numRuns: 300 },
    );
  });
});
