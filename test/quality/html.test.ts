/**
 * The small pieces the report pages are made of: ranges that tell their
 * bounds apart, round ticks, plurals, paths as the user named them, and the
 * one gate parser of assess and report.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { describeIdentity } from "../../src/evaluator/evaluator.js";
import { breaches, checkConditions, parseConditions } from "../../src/quality/gate.js";
import { displayPath, niceTicks, rangeText, wrapLabel } from "../../src/quality/html.js";
import { num, pct, plural } from "../../src/quality/numbers.js";
import { psi, PSI_EPSILON } from "../../src/quality/report.js";

describe("report text", () => {
  it("prints a range with enough digits to tell its bounds apart, or one value", () => {
    expect(rangeText(0.0000026, 0.0000026)).toBe("0.0000026");
    expect(rangeText(0.00000261, 0.00000264)).toBe("0.00000261 – 0.00000264");
    expect(rangeText(2.6e-9, 2.7e-9)).toBe("2.6e-9 – 2.7e-9");
    expect(rangeText(0.1234, 0.1239)).toBe("0.123 – 0.124");
    expect(rangeText(0.003, 0.196)).toBe("0.003 – 0.2");
    expect(rangeText(0.797, 1)).toBe("0.8 – 1");
  });

  it("puts ticks on round numbers: 1, 2, 2.5 or 5 times a power of ten", () => {
    expect(niceTicks(269, 4).ticks).toEqual([0, 100, 200, 300]);
    expect(niceTicks(73, 4).ticks).toEqual([0, 20, 40, 60, 80]);
    expect(niceTicks(0.42, 4).ticks).toEqual([0, 0.2, 0.4, 0.6]);
    expect(niceTicks(1, 4).ticks).toEqual([0, 0.25, 0.5, 0.75, 1]);
    expect(niceTicks(1, 4, 0.4).ticks).toEqual([0.4, 0.6, 0.8, 1]);
  });

  it("says 1 row and 2 rows", () => {
    expect(plural(1, "gold row")).toBe("1 gold row");
    expect(plural(0, "gold row")).toBe("0 gold rows");
    expect(plural(1200, "breach", "breaches")).toBe("1,200 breaches");
  });

  it("shows a file under the working directory relative to it, any other as given", () => {
    expect(displayPath(join("/work/x", "out/answers.jsonl"), "/work/x")).toBe("out/answers.jsonl");
    expect(displayPath("out/answers.jsonl", "/work/x")).toBe("out/answers.jsonl");
    expect(displayPath("/data/answers.jsonl", "/work/x")).toBe("/data/answers.jsonl");
  });

  it("wraps a long option name at spaces, keeping every word", () => {
    expect(wrapLabel("account access and login problems", 16)).toEqual(["account access", "and login", "problems"]);
    expect(wrapLabel("supercalifragilistic", 8)).toEqual(["supercalifragilistic"]);
  });
});

describe("gates", () => {
  it("reads question.metric and bare metric conditions", () => {
    expect(parseConditions("topic.psi>0.2, agreement<0.9,label_mass<.5,a.b.ece>=1e-3")).toEqual([
      { question: "topic", metric: "psi", op: ">", value: 0.2, text: "topic.psi>0.2" },
      { question: undefined, metric: "agreement", op: "<", value: 0.9, text: "agreement<0.9" },
      { question: undefined, metric: "label_mass", op: "<", value: 0.5, text: "label_mass<.5" },
      { question: "a.b", metric: "ece", op: ">=", value: 0.001, text: "a.b.ece>=1e-3" },
    ]);
    expect(() => parseConditions("psi>>0.2")).toThrow(/cannot read "psi>>0.2"/);
  });

  it("reads min N and interval after the limit, and a verdict condition's mark", () => {
    expect(parseConditions('team.recall["fraud, card"]<0.6 min 30, accuracy<0.9 interval,a.b.recall["x"]<0.5 interval min 5')).toEqual([
      { question: "team", metric: "recall", option: "fraud, card", op: "<", value: 0.6, min: 30, text: 'team.recall["fraud, card"]<0.6 min 30' },
      { question: undefined, metric: "accuracy", option: undefined, op: "<", value: 0.9, interval: true, text: "accuracy<0.9 interval" },
      { question: "a.b", metric: "recall", option: "x", op: "<", value: 0.5, interval: true, min: 5, text: 'a.b.recall["x"]<0.5 interval min 5' },
    ]);
    expect(parseConditions("verdict>ok,team.verdict>=act")).toMatchObject([
      { metric: "verdict", op: ">", value: 0 },
      { question: "team", metric: "verdict", op: ">=", value: 2 },
    ]);
    for (const bad of ["accuracy<0.9 min", "accuracy<0.9 min 2.5", "accuracy<0.9 min 3 min 4", "accuracy<0.9 interval interval", "accuracy<0.9 at lower"])
      expect(() => parseConditions(bad), bad).toThrow(/cannot read/);
  });

  it("breaks a bare metric out per question, and counts a figure that cannot be computed as a breach", () => {
    const subject = {
      questions: [
        { name: "a", metrics: { agreement: 0.95, label_mass: 0.7 } },
        { name: "b", metrics: { agreement: 0.85, label_mass: Number.NaN } },
      ],
      known: () => ["agreement", "label_mass"],
    };
    const found = breaches(subject, parseConditions("agreement<0.9,label_mass<0.5"));
    expect(found.map((b) => [b.question, b.condition.metric])).toEqual([
      ["b", "agreement"],
      ["b", "label_mass"],
    ]);
    expect(() => breaches(subject, parseConditions("c.agreement<0.9"))).toThrow(/no question "c"/);
    expect(() => breaches(subject, parseConditions("a.psi>0.1"))).toThrow(/question a has no metric "psi"/);
  });

  it("keeps PSI finite over an empty bin, with the documented floor", () => {
    const value = psi([0.5, 0.5, 0], [0.4, 0.4, 0.2]);
    const expected = 2 * (0.4 - 0.5) * Math.log(0.4 / 0.5) + (0.2 - PSI_EPSILON) * Math.log(0.2 / PSI_EPSILON);
    expect(value).toBeCloseTo(expected, 12);
    expect(psi([0.3, 0.7], [0.3, 0.7])).toBe(0);
  });
});

describe("numbers for people", () => {
  it("prints significant digits where decimals would print zero, never a negative zero or NaN", () => {
    expect(num(5e-11)).toBe("5e-11");
    expect(num(0.00012)).toBe("0.00012");
    expect(num(-0.0000004)).toBe("-4e-7");
    expect(num(-0.0004, 1)).toBe("-0.0004");
    expect(num(-0)).toBe("0.000");
    expect(num(-0.00049999)).toBe("-0.0005");
    expect(num(0.1234)).toBe("0.123");
    expect(num(Number.NaN)).toBe("n/a");
    expect(num(null)).toBe("n/a");
    expect(pct(Number.NaN)).toBe("n/a");
    expect(pct(0.00001)).toBe("0.001%");
    expect(pct(1)).toBe("100.0%");
  });

  it("names a model identity as a person would", () => {
    expect(describeIdentity(JSON.stringify(["local", "m-1.0.0", "file:/models/model.gguf:397808192:1763800000000", "chatml", 1]))).toBe(
      "local file model.gguf, 398 MB, chatml",
    );
    expect(describeIdentity(JSON.stringify(["local", "m-1.0.0", `sha256:${"67c4f157".repeat(8)}`, "chatml", 0.7]))).toBe(
      "local, sha256 67c4f157…, chatml, temperature 0.7",
    );
    expect(describeIdentity(JSON.stringify(["remote", "https://api.example.com/v1/systemone", "jev-latest"]))).toBe(
      "remote https://api.example.com/v1/systemone, model jev-latest",
    );
    expect(describeIdentity("not json")).toBe("not json");
  });
});

describe("per class names in a gate", () => {
  it("reads a class as a JSON string: spaces, commas, dots, brackets, operators and escaped quotes survive", () => {
    const [a, b, c, d] = parseConditions(
      'team.recall["account access, login"]<0.6,recall["yes"]<=0.5, team.precision["a \\"quoted\\" > b [x]"]>=0.9,my.team.recall["a.b"]<1',
    );
    expect(a).toMatchObject({ question: "team", metric: "recall", option: "account access, login", op: "<", value: 0.6 });
    expect(b).toMatchObject({ question: undefined, metric: "recall", option: "yes", op: "<=", value: 0.5 });
    expect(c).toMatchObject({ question: "team", metric: "precision", option: 'a "quoted" > b [x]', op: ">=", value: 0.9 });
    expect(d).toMatchObject({ question: "my.team", metric: "recall", option: "a.b", op: "<", value: 1 });
    expect(() => parseConditions('team.recall["billing]<0.6')).toThrow(/cannot read/);
    expect(() => parseConditions("team.recall[billing]<0.6")).toThrow(/cannot read/);
  });

  it("checks per class names against the question's classes", () => {
    const subject = {
      questions: [
        { name: "team", metrics: { accuracy: 0.8, 'recall["billing"]': 0.55, 'recall["account access"]': 0.9 } },
        { name: "mood", metrics: { accuracy: 0.7 } },
      ],
      known: (q: string) => (q === "team" ? ["accuracy", 'recall["billing"]', 'recall["account access"]'] : ["accuracy"]),
    };
    expect(breaches(subject, parseConditions('team.recall["billing"]<0.6')).map((x) => x.actual)).toEqual([0.55]);
    // A bare per class condition checks the questions that have the class.
    expect(breaches(subject, parseConditions('recall["billing"]<0.6')).map((x) => x.question)).toEqual(["team"]);
    expect(() => breaches(subject, parseConditions('team.recall["bill"]<0.6'))).toThrow(
      /question team has no class "bill".*its classes are "billing", "account access"/,
    );
    expect(() => breaches(subject, parseConditions('recall["nowhere"]<0.6'))).toThrow(/no question has the class "nowhere"/);
  });

  it("refuses, before reading anything, a metric the command cannot measure with what it was given", () => {
    expect(() => checkConditions(parseConditions("team.recall<0.6"), { gold: true, compare: false, command: "assess" })).toThrow(
      /is per class; name the class: team\.recall\["class"\]/,
    );
    expect(() => checkConditions(parseConditions('ece["x"]<0.6'), { gold: true, compare: false, command: "assess" })).toThrow(/ece .* is not per class/);
    expect(() => checkConditions(parseConditions("accuracy<0.6"), { gold: false, compare: true, command: "report" })).toThrow(
      /measures against gold labels; add --gold/,
    );
    expect(() => checkConditions(parseConditions("psi>0.2"), { gold: true, compare: false, command: "assess" })).toThrow(/compares two nights; add --compare/);
    expect(() => checkConditions(parseConditions("f2<0.2"), { gold: false, compare: false, command: "report" })).toThrow(
      /no metric "f2" .*report gates on label_mass, verdict, with --compare on psi, js_distance, agreement, and with --gold on accuracy/,
    );
  });
});
