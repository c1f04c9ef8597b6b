import { describe, expect, it } from "vitest";
import { responseViolations } from "../../src/api/consistency.js";
import type { SystemOneRequest, SystemOneResponse } from "../../src/api/schema.js";

const request: SystemOneRequest = {
  state: "text",
  model: "m",
  questions: {
    yes: { type: "noul" },
    pick: { type: "choice", criteria: { a: null, b: "bee" } },
    rate: { type: "score", criteria: ["low", { mid: true }, "high"] },
  },
};

const good = (): SystemOneResponse => ({
  model: "m-1.0.0",
  answers: {
    yes: { type: "noul", noul: 0.3 },
    pick: { type: "choice", choice: "b", probabilities: { a: 0.4, b: 0.6 }, confidence: 0.2 },
    rate: {
      type: "score",
      score: 1.2,
      legend: { "0": "low", "1": { mid: true }, "2": "high" },
      probabilities: { "0": 0.2, "1": 0.4, "2": 0.4 },
      confidence: 0.1,
    },
  },
  usage: { input_tokens: 10, output_tokens: 3 },
});

describe("responseViolations", () => {
  it("finds nothing in a consistent response", () => {
    expect(responseViolations(request, good())).toEqual([]);
  });

  it("rule 1: answers under unknown names, missing answers, wrong types", () => {
    const r = good();
    r.answers["extra"] = { type: "noul", noul: 0.5 };
    delete r.answers["yes"];
    r.answers["pick"] = { type: "noul", noul: 0.5 };
    expect(responseViolations(request, r)).toEqual([
      "answers.extra: no question of that name",
      "answers.yes: missing",
      "answers.pick: type noul answers a choice question",
    ]);
  });

  it("rule 3: a choice outside the options, probabilities keyed otherwise", () => {
    const r = good();
    r.answers["pick"] = { type: "choice", choice: "c", probabilities: { a: 0.4, c: 0.6 }, confidence: 0.2 };
    const problems = responseViolations(request, r);
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/choice "c" is not an option/);
    expect(problems[1]).toMatch(/probabilities keys/);
  });

  it("rule 4: legend keys and legend values must be the criteria", () => {
    const r = good();
    const rate = r.answers["rate"]!;
    if (rate.type !== "score") throw new Error("fixture");
    rate.legend["1"] = { mid: false };
    expect(responseViolations(request, r)).toEqual(["answers.rate: legend[1] differs from criteria[1]"]);
    rate.legend = { "1": "low", "2": "x", "3": "y" };
    expect(responseViolations(request, r)[0]).toMatch(/legend keys/);
  });

  it("rule 5: values outside [0, 1] and sums away from 1", () => {
    const r = good();
    r.answers["yes"] = { type: "noul", noul: 1.2 };
    r.answers["pick"] = { type: "choice", choice: "b", probabilities: { a: 0.1, b: 0.6 }, confidence: -0.1 };
    expect(responseViolations(request, r)).toEqual([
      "answers.yes: noul 1.2 outside [0, 1]",
      "answers.pick: confidence -0.1 outside [0, 1]",
      "answers.pick: probabilities sum to 0.7, not 1",
    ]);
  });

  it("a noul answer carrying confidence, a score outside its levels", () => {
    const r = good();
    r.answers["yes"] = { type: "noul", noul: 0.5, confidence: 1 } as SystemOneResponse["answers"][string];
    const rate = r.answers["rate"]!;
    if (rate.type === "score") rate.score = 2.5;
    expect(responseViolations(request, r)).toEqual(["answers.yes: a noul answer has no confidence", "answers.rate: score 2.5 outside [0, 2]"]);
  });
});
