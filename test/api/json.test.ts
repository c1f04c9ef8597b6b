import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { UnprocessableEntityError } from "../../src/api/errors.js";
import { depthExceededAt, parseJsonBody, syntaxErrorAt } from "../../src/api/json.js";

describe("request body parsing", () => {
  it("finds the offset of the first syntax error", () => {
    expect(syntaxErrorAt('{"state": "x", "model": }')).toBe(24);
    expect(syntaxErrorAt("[1, 2,]")).toBe(6);
    expect(syntaxErrorAt('{"a" 1}')).toBe(5);
    expect(syntaxErrorAt('"unterminated')).toBe(13);
    expect(syntaxErrorAt("{} extra")).toBe(3);
    expect(syntaxErrorAt('"bad \\x escape"')).toBe(6);
    expect(syntaxErrorAt("-")).toBe(0);
  });

  it("finds no error in any valid JSON, and one wherever JSON.parse fails", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(syntaxErrorAt(JSON.stringify(value))).toBe(-1);
        expect(syntaxErrorAt(JSON.stringify(value, null, 2))).toBe(-1);
      }),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), (text) => {
        let valid = true;
        try {
          JSON.parse(text);
        } catch {
          valid = false;
        }
        expect(syntaxErrorAt(text) === -1).toBe(valid);
      }),
      { numRuns: 2000 },
    );
  });

  it("bounds nesting before parsing, ignoring brackets inside strings", () => {
    expect(depthExceededAt("[[[]]]", 3)).toBe(-1);
    expect(depthExceededAt("[[[[]]]]", 3)).toBe(3);
    expect(depthExceededAt('["[[[[[[", {"a": "\\"[[[["}]', 2)).toBe(-1);
    expect(() => parseJsonBody("[".repeat(100_000))).toThrow(UnprocessableEntityError);
  });

  it("turns failures into FastAPI-shaped 422 details", () => {
    try {
      parseJsonBody('{"a": tru}');
      expect.unreachable();
    } catch (error) {
      expect((error as UnprocessableEntityError).detail[0]).toMatchObject({ type: "json_invalid", loc: ["body", 6], msg: "JSON decode error" });
    }
    expect(() => parseJsonBody("   ")).toThrow(/Field required/);
    expect(parseJsonBody('{"ok": [1, "two"]}')).toEqual({ ok: [1, "two"] });
  });
});
