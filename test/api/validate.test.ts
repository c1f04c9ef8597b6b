import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { validateRequest, validateResponseShape } from "../../src/api/validate.js";
import type { ValidationErrorItem } from "../../src/api/schema.js";

const valid = () => ({
  state: "The customer writes: my order never arrived and I want a refund.",
  model: "typed-eval-default",
  questions: {
    refund: { type: "noul", instructions: "Does the customer ask for a refund?" },
    topic: {
      type: "choice",
      instructions: "What is the ticket about?",
      criteria: { shipping: "Delivery problems", billing: null, other: { note: "anything else" } },
    },
    urgency: { type: "score", instructions: "How urgent is it?", criteria: ["not urgent", "somewhat", ["very", "urgent"]] },
  },
});

function errorsOf(body: unknown): ValidationErrorItem[] {
  const result = validateRequest(body);
  if (result.ok) throw new Error("expected validation to fail");
  return result.errors;
}

/** The single error of a body, checked to be the only one. */
function onlyError(body: unknown): ValidationErrorItem {
  const errors = errorsOf(body);
  expect(errors).toHaveLength(1);
  return errors[0]!;
}

describe("validateRequest accepts", () => {
  it("a body with all three question types and returns it typed", () => {
    const result = validateRequest(valid());
    expect(result.ok).toBe(true);
    if (result.ok) expect(Object.keys(result.value.questions)).toEqual(["refund", "topic", "urgency"]);
  });

  it("object and array states", () => {
    expect(validateRequest({ ...valid(), state: { user: "a", turns: [1, 2] } }).ok).toBe(true);
    expect(validateRequest({ ...valid(), state: [{ role: "user", content: "hi" }] }).ok).toBe(true);
    expect(validateRequest({ ...valid(), state: "" }).ok).toBe(true);
  });

  it("unknown top-level fields, ignored; unknown keys inside a question, refused unless lenient", () => {
    const top = valid() as Record<string, unknown>;
    top["temperature"] = 3;
    expect(validateRequest(top).ok).toBe(true);
    const body = valid() as Record<string, unknown>;
    (body["questions"] as Record<string, Record<string, unknown>>)["refund"]!["weight"] = 2;
    expect(validateRequest(body, { lenient: true }).ok).toBe(true);
  });

  it("a question without instructions, and null instructions", () => {
    expect(validateRequest({ ...valid(), questions: { q: { type: "noul" } } }).ok).toBe(true);
    expect(validateRequest({ ...valid(), questions: { q: { type: "noul", instructions: null } } }).ok).toBe(true);
  });

  it("noul criteria as an object, null, or with either key", () => {
    for (const criteria of [null, {}, { true: "yes means refund" }, { false: null }, { true: ["a"], false: { b: 1 } }]) {
      expect(validateRequest({ ...valid(), questions: { q: { type: "noul", criteria } } }).ok).toBe(true);
    }
  });

  it("a one-level score, as the hosted service does", () => {
    expect(validateRequest({ ...valid(), questions: { q: { type: "score", criteria: ["only"] } } }).ok).toBe(true);
  });

  it("exactly 255 choice options and exactly 10 score levels", () => {
    const criteria = Object.fromEntries(Array.from({ length: 255 }, (_, i) => [`option ${i}`, null]));
    const levels = Array.from({ length: 10 }, (_, i) => `level ${i}`);
    expect(validateRequest({ ...valid(), questions: { c: { type: "choice", criteria }, s: { type: "score", criteria: levels } } }).ok).toBe(true);
  });
});

describe("validateRequest refuses", () => {
  it("a body that is not an object", () => {
    for (const body of [null, [], "text", 42, true]) {
      const error = onlyError(body);
      expect(error.loc).toEqual(["body"]);
      expect(error.type).toBe("model_attributes_type");
      expect(error.input).toEqual(body);
    }
  });

  it("a missing state", () => {
    const { state: _state, ...body } = valid();
    const error = onlyError(body);
    expect(error).toMatchObject({ loc: ["body", "state"], type: "missing", msg: "Field required" });
  });

  it("a null state", () => {
    const error = onlyError({ ...valid(), state: null });
    expect(error).toMatchObject({ loc: ["body", "state"], type: "union_type", input: null });
    expect(error.msg).toMatch(/string, dictionary or list, not null/);
  });

  it("a state of the wrong type", () => {
    expect(onlyError({ ...valid(), state: 12 })).toMatchObject({ loc: ["body", "state"], type: "union_type", input: 12 });
  });

  it("`document` instead of `state`, with a message that says to use `state`", () => {
    const { state, ...rest } = valid();
    const error = onlyError({ ...rest, document: state });
    expect(error.loc).toEqual(["body", "state"]);
    expect(error.type).toBe("missing");
    expect(error.msg).toContain("`state`");
    expect(error.msg).toContain("`document`");
  });

  it("a missing model", () => {
    const { model: _model, ...body } = valid();
    expect(onlyError(body)).toMatchObject({ loc: ["body", "model"], type: "missing" });
  });

  it("a model that is not a string", () => {
    for (const model of [null, 3, ["a"], { name: "x" }]) {
      expect(onlyError({ ...valid(), model })).toMatchObject({ loc: ["body", "model"], type: "string_type", input: model });
    }
  });

  it("missing questions", () => {
    const { questions: _questions, ...body } = valid();
    expect(onlyError(body)).toMatchObject({ loc: ["body", "questions"], type: "missing" });
  });

  it("questions that are not an object", () => {
    for (const questions of [null, [], "q", 1]) {
      expect(onlyError({ ...valid(), questions })).toMatchObject({ loc: ["body", "questions"], type: "dict_type" });
    }
  });

  it("empty questions", () => {
    expect(onlyError({ ...valid(), questions: {} })).toMatchObject({
      loc: ["body", "questions"],
      type: "too_short",
      ctx: { field_type: "Dictionary", min_length: 1, actual_length: 0 },
    });
  });

  it("a question that is not an object", () => {
    for (const question of [null, "noul", 3, ["noul"]]) {
      expect(onlyError({ ...valid(), questions: { q: question } })).toMatchObject({
        loc: ["body", "questions", "q"],
        type: "model_attributes_type",
      });
    }
  });

  it("an unknown type, listing the expected tags", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "yesno" } } })).toMatchObject({
      loc: ["body", "questions", "q"],
      type: "union_tag_invalid",
      ctx: { tag: "yesno", expected_tags: "'noul', 'choice', 'score'", discriminator: "'type'" },
    });
  });

  it("a type that is not a string", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: 7 } } })).toMatchObject({ type: "union_tag_invalid" });
  });

  it("a missing type", () => {
    expect(onlyError({ ...valid(), questions: { q: { instructions: "x" } } })).toMatchObject({
      loc: ["body", "questions", "q"],
      type: "union_tag_not_found",
    });
  });

  it("a choice without criteria", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "choice" } } })).toMatchObject({
      loc: ["body", "questions", "q", "choice", "criteria"],
      type: "missing",
    });
  });

  it("choice criteria that are not an object", () => {
    for (const criteria of [["a", "b"], "a", null, 2]) {
      expect(onlyError({ ...valid(), questions: { q: { type: "choice", criteria } } })).toMatchObject({
        loc: ["body", "questions", "q", "choice", "criteria"],
        type: "dict_type",
      });
    }
  });

  it("more than 255 choice options", () => {
    const criteria = Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`o${i}`, null]));
    expect(onlyError({ ...valid(), questions: { q: { type: "choice", criteria } } })).toMatchObject({
      loc: ["body", "questions", "q", "choice", "criteria"],
      type: "too_long",
      ctx: { field_type: "Dictionary", max_length: 255, actual_length: 256 },
    });
  });

  it("zero choice options", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "choice", criteria: {} } } })).toMatchObject({
      type: "too_short",
      ctx: { min_length: 1, actual_length: 0 },
    });
  });

  it("a choice option description of the wrong type, at the option's key", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "choice", criteria: { a: null, b: 5 } } } })).toMatchObject({
      loc: ["body", "questions", "q", "choice", "criteria", "b"],
      type: "union_type",
    });
  });

  it("a score without criteria", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "score" } } })).toMatchObject({
      loc: ["body", "questions", "q", "score", "criteria"],
      type: "missing",
    });
  });

  it("score criteria that are not an array", () => {
    for (const criteria of [{ 0: "low" }, "low", null]) {
      expect(onlyError({ ...valid(), questions: { q: { type: "score", criteria } } })).toMatchObject({
        loc: ["body", "questions", "q", "score", "criteria"],
        type: "list_type",
      });
    }
  });

  it("a null score level, at its array index", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "score", criteria: ["low", null, "high"] } } })).toMatchObject({
      loc: ["body", "questions", "q", "score", "criteria", 1],
      type: "union_type",
      input: null,
    });
  });

  it("zero score levels", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "score", criteria: [] } } })).toMatchObject({
      type: "too_short",
      ctx: { field_type: "List", min_length: 1, actual_length: 0 },
    });
  });

  it("more than 10 score levels", () => {
    const criteria = Array.from({ length: 11 }, (_, i) => `level ${i}`);
    expect(onlyError({ ...valid(), questions: { q: { type: "score", criteria } } })).toMatchObject({
      loc: ["body", "questions", "q", "score", "criteria"],
      type: "too_long",
      msg: "List should have at most 10 items after validation, not 11",
    });
  });

  it("noul criteria that are neither an object nor null", () => {
    for (const criteria of ["yes", 1, ["yes", "no"], true]) {
      expect(onlyError({ ...valid(), questions: { q: { type: "noul", criteria } } })).toMatchObject({
        loc: ["body", "questions", "q", "noul", "criteria"],
        type: "model_attributes_type",
      });
    }
  });

  it("noul criteria whose true/false are of the wrong type", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "noul", criteria: { true: 1 } } } })).toMatchObject({
      loc: ["body", "questions", "q", "noul", "criteria", "true"],
      type: "union_type",
    });
  });

  it("instructions of the wrong type", () => {
    expect(onlyError({ ...valid(), questions: { q: { type: "noul", instructions: 5 } } })).toMatchObject({
      loc: ["body", "questions", "q", "noul", "instructions"],
      type: "union_type",
    });
  });
});

describe("validateRequest collects", () => {
  it("every error of a body, each at its own location, in body order", () => {
    const errors = errorsOf({
      document: "old field",
      model: 1,
      questions: {
        a: { type: "choice", criteria: {} },
        b: { type: "bogus" },
        c: { type: "score", criteria: [null, "x", null] },
        d: 5,
      },
    });
    expect(errors.map((e) => [e.loc.join("."), e.type])).toEqual([
      ["body.state", "missing"],
      ["body.model", "string_type"],
      ["body.questions.a.choice.criteria", "too_short"],
      ["body.questions.b", "union_tag_invalid"],
      ["body.questions.c.score.criteria.0", "union_type"],
      ["body.questions.c.score.criteria.2", "union_type"],
      ["body.questions.d", "model_attributes_type"],
    ]);
  });

  it("errors that survive a JSON round trip unchanged (the 422 body)", () => {
    const errors = errorsOf({ state: null, model: "m", questions: { "weird key \u2603": { type: "score", criteria: [] } } });
    expect(JSON.parse(JSON.stringify({ detail: errors }))).toEqual({ detail: errors });
    expect(errors[1]!.loc).toEqual(["body", "questions", "weird key \u2603", "score", "criteria"]);
  });
});

describe("validateResponseShape", () => {
  it("accepts a well-formed response and refuses a noul above 1", () => {
    const response = { model: "m-1.0.0", answers: { q: { type: "noul", noul: 0.25 } }, usage: { input_tokens: 3, output_tokens: 1 } };
    expect(validateResponseShape(response).ok).toBe(true);
    const bad = validateResponseShape({ ...response, answers: { q: { type: "noul", noul: 1.5 } } });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.errors[0]).toMatchObject({ loc: ["response", "answers", "q", "noul", "noul"], type: "less_than_equal" });
  });

  it("refuses missing usage, fractional token counts and empty answers", () => {
    const bad = validateResponseShape({ model: "m", answers: {}, usage: { input_tokens: 1.5 } });
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      expect(bad.errors.map((e) => [e.loc.join("."), e.type])).toEqual([
        ["response.answers", "too_short"],
        ["response.usage.input_tokens", "int_type"],
        ["response.usage.output_tokens", "missing"],
      ]);
    }
  });
});

describe("strict by default", () => {
  const errorsOf = (body: unknown, lenient = false) => {
    const r = validateRequest(body, { lenient });
    return r.ok ? [] : r.errors;
  };

  it("refuses a typo inside a question with extra_forbidden at the exact loc, and says what was meant", () => {
    const body = { state: "s", model: "m", questions: { team: { type: "choice", instruction: "Which team?", criteria: { a: null } } } };
    expect(errorsOf(body)).toEqual([
      {
        type: "extra_forbidden",
        loc: ["body", "questions", "team", "choice", "instruction"],
        msg: "Extra inputs are not permitted (did you mean instructions?)",
        input: "Which team?",
      },
    ]);
    expect(errorsOf(body, true)).toEqual([]);
  });

  it("refuses noul criteria keys other than true and false", () => {
    const body = { state: "s", model: "m", questions: { q: { type: "noul", criteria: { true: "yes", yes: "also yes" } } } };
    expect(errorsOf(body)).toMatchObject([{ type: "extra_forbidden", loc: ["body", "questions", "q", "noul", "criteria", "yes"] }]);
    expect(errorsOf(body, true)).toEqual([]);
  });

  it("refuses images and videos, which no model here can see, and lets empty ones pass", () => {
    for (const key of ["images", "videos"]) {
      const body = { state: "s", model: "m", questions: { q: { type: "noul" } }, [key]: ["data:image/png;base64,AAAA"] };
      expect(errorsOf(body)).toMatchObject([{ type: "value_error", loc: ["body", key], msg: expect.stringContaining("answers from text only") }]);
      expect(errorsOf(body, true)).toEqual([]);
      expect(errorsOf({ ...body, [key]: [] })).toEqual([]);
    }
  });

  it("refuses no request the spec allows (property)", () => {
    const content = fc.oneof(fc.string(), fc.dictionary(fc.string(), fc.jsonValue()), fc.array(fc.jsonValue()));
    const nullable = fc.option(content, { nil: null });
    const instructions = fc.option(nullable, { nil: undefined });
    const question = fc.oneof(
      fc.record(
        {
          type: fc.constant("noul"),
          instructions,
          criteria: fc.option(fc.option(fc.record({ true: nullable, false: nullable }, { requiredKeys: [] }), { nil: null }), { nil: undefined }),
        },
        { requiredKeys: ["type"] },
      ),
      fc.record(
        { type: fc.constant("choice"), instructions, criteria: fc.dictionary(fc.string({ minLength: 1 }), nullable, { minKeys: 1, maxKeys: 8 }) },
        { requiredKeys: ["type", "criteria"] },
      ),
      fc.record(
        { type: fc.constant("score"), instructions, criteria: fc.array(content, { minLength: 1, maxLength: 10 }) },
        { requiredKeys: ["type", "criteria"] },
      ),
    );
    const request = fc.record(
      { state: content, model: fc.string(), questions: fc.dictionary(fc.string(), question, { minKeys: 1, maxKeys: 5 }), extra: fc.jsonValue() },
      { requiredKeys: ["state", "model", "questions"] },
    );
    fc.assert(
      fc.property(request, (body) => {
        const cleaned = JSON.parse(JSON.stringify(body)) as unknown;
        expect(errorsOf(cleaned)).toEqual([]);
      }),
      { numRuns: 400 },
    );
  });
});
