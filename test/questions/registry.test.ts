import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { Question as QuestionSchema } from "../../src/api/schema.js";
import { validateRequest } from "../../src/api/validate.js";
import { infoOf, kindOf, SPEC_KINDS, type Question } from "../../src/questions/index.js";

const SRC = join(import.meta.dirname, "../../src");
/**
 * Lines outside src/questions that may name a type, and why. The metrics
 * table declares the types each metric applies to (issue 21: one entry per
 * metric, its types among its fields); nothing may switch on a type there.
 */
const MAY_NAME_A_TYPE: Record<string, RegExp> = {
  "quality/metric-table.ts": /^types: \[("\w+"(, )?)+\],$/,
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** One question of each registered type, with its labels in answer order. */
const SAMPLES: Record<string, Question> = {
  noul: { type: "noul", instructions: "Urgent?", criteria: { true: "needs action today" } },
  choice: { type: "choice", criteria: { billing: null, bug: "something broke", other: null } },
  score: { type: "score", criteria: ["calm", "annoyed", "angry"] },
};

describe("the question registry", () => {
  it("no code outside src/questions switches on a type's name", () => {
    const names = SPEC_KINDS.map((k) => k.type);
    const quoted = new RegExp(`"(${names.join("|")})"`);
    const offenders = sources(SRC)
      .map((path) => relative(SRC, path))
      .filter((path) => !path.startsWith("questions/"))
      .flatMap((path) =>
        readFileSync(join(SRC, path), "utf8")
          .split("\n")
          .map((line, i) => ({ line: line.trim(), at: `${path}:${i + 1}` }))
          .filter(({ line }) => !line.startsWith("*") && !line.startsWith("//") && quoted.test(line) && !MAY_NAME_A_TYPE[path]?.test(line))
          .map(({ at }) => at),
      );
    expect(offenders).toEqual([]);
  });

  it("the wire union lists every registered type, in registry order", () => {
    const union = QuestionSchema as unknown as { anyOf: { $id: string }[]; discriminator: { mapping: Record<string, string> } };
    expect(Object.keys(union.discriminator.mapping)).toEqual(SPEC_KINDS.map((k) => k.type));
    expect(union.anyOf.map((m) => m.$id)).toEqual(SPEC_KINDS.map((k) => k.question.$id));
    expect(Object.keys(SAMPLES)).toEqual(SPEC_KINDS.map((k) => k.type));
  });

  for (const [type, question] of Object.entries(SAMPLES)) {
    it(`${type}: an answer made from a distribution carries it back, obeys its rules, and its columns read it again`, () => {
      const kind = kindOf(question);
      const labels = kind.labels(question);
      const p = labels.map((_, i) => (i + 1) / ((labels.length * (labels.length + 1)) / 2));
      const answer = kind.answerFrom(question, p);
      const back = kind.distribution(question, answer);
      back.forEach((x, i) => expect(x).toBeCloseTo(p[i] as number, 12));
      expect(kind.violations("answers.q", question, answer)).toEqual([]);
      // The prompt's labels are one per option, and the readout of the prompt-order distribution is the same answer.
      const prompt = kind.prompt(question);
      expect(prompt.labels).toHaveLength(labels.length);
      const info = infoOf("q", question);
      const fields = kind.fields(info);
      const read = kind.toDistribution(fields.map((f) => f.pick(answer) as number));
      read.forEach((x, i) => expect(x).toBeCloseTo(p[i] as number, 12));
      const raw = kind.toDistribution(fields.map((f) => f.pick(kind.fromRaw(kind.raw(answer))) as number));
      expect(raw).toEqual(read);
      expect(kind.displayLabels(info)).toHaveLength(labels.length);
      labels.forEach((_, y) => expect(kind.goldClass(info, kind.goldText(info, y))).toBe(y));
    });
  }

  it("strict checking takes the criteria keys a type's schema names: a noul's true and false", () => {
    const result = validateRequest({ state: "", model: "m", questions: { q: { type: "noul", criteria: { true: "yes", maybe: "?" } } } });
    expect(result).toEqual({
      ok: false,
      errors: [
        {
          type: "extra_forbidden",
          loc: ["body", "questions", "q", "noul", "criteria", "maybe"],
          msg: "Extra inputs are not permitted: noul criteria take the keys true and false",
          input: "?",
        },
      ],
    });
  });
});
