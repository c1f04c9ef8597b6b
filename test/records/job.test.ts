import { describe, expect, it } from "vitest";
import { JobError, loadJob, parseJob } from "../../src/records/job.js";

describe("job files", () => {
  it("load the bundled examples", () => {
    expect(loadJob("jobs/support-triage.json")).toMatchObject({ model: "default", state: "ticket", id: "ticket_id" });
    expect(Object.keys(loadJob("jobs/review-rating.json").questions)).toEqual(["sentiment", "topic", "needs_reply"]);
  });

  it("default the model and leave state and id to the whole record and line number", () => {
    const job = parseJob({ questions: { q: { type: "noul" } } }, "j.json");
    expect(job.model).toBe("default");
    expect(job.state).toBeUndefined();
    expect(job.id).toBeUndefined();
  });

  it("report every mistake of a job file at once, naming the field", () => {
    let message = "";
    try {
      parseJob(
        {
          model: 3,
          state: "",
          keep: "customer",
          questions: { a: { type: "choice" }, b: { type: "score", criteria: [] }, c: { type: "maybe" } },
          outputs: [],
        },
        "bad.json",
      );
    } catch (error) {
      expect(error).toBeInstanceOf(JobError);
      message = (error as Error).message;
    }
    expect(message).toMatch(/^bad\.json: \d+ problems:/);
    for (const part of [
      "model: Input should be a valid string",
      "keep: Input should be a valid list",
      "questions.a.choice.criteria: Field required",
      "questions.b.score.criteria: List should have at least 1 item",
      "questions.c: Input tag 'maybe'",
      "outputs: unknown field",
    ]) {
      expect(message).toContain(part);
    }
  });

  it("refuse empty questions, a dotted path with an empty part, and files that are not JSON", () => {
    expect(() => parseJob({ questions: {} }, "j")).toThrow(/questions: Dictionary should have at least 1 item/);
    expect(() => parseJob({ state: "a..b", questions: { q: { type: "noul" } } }, "j")).toThrow(/"a\.\.b" is not a field name/);
    expect(() => loadJob("package-lock.json.missing")).toThrow(/cannot read job file/);
    expect(() => loadJob("README.md")).toThrow(/is not valid JSON/);
  });

  it("check review thresholds and the audit share", () => {
    const q = { q: { type: "noul" } };
    expect(parseJob({ questions: q, review_below: { q: 0.8 }, audit_sample: "1%" }, "j")).toMatchObject({ review_below: { q: 0.8 }, audit_sample: "1%" });
    expect(() => parseJob({ questions: q, review_below: { other: 0.8 } }, "j")).toThrow(/review_below\.other: no such question or part; the questions are q/);
    expect(() => parseJob({ questions: q, review_below: 1.5 }, "j")).toThrow(/review_below/);
    expect(() => parseJob({ questions: q, audit_sample: "lots" }, "j")).toThrow(/audit_sample: "lots" is not a share/);
  });

  it("refuse kept fields that would collide with the columns typed-eval writes, or repeat", () => {
    const q = { urgent: { type: "noul" } };
    expect(() => parseJob({ questions: q, keep: ["line", "id"] }, "j")).toThrow(
      /keep: "line" is also a column typed-eval writes[\s\S]*keep: "id" is also a column/,
    );
    expect(() => parseJob({ questions: q, keep: ["urgent.noul"] }, "j")).toThrow(/keep: "urgent\.noul" is also a column/);
    expect(() => parseJob({ questions: q, keep: ["tier", "tier"] }, "j")).toThrow(/keep: "tier" is listed twice/);
    expect(parseJob({ questions: q, keep: ["customer.tier", "lines"] }, "j").keep).toEqual(["customer.tier", "lines"]);
  });

  it("say that comments are the reason a copied README example is refused", async () => {
    const { mkdtempSync, writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const path = join(mkdtempSync(join(tmpdir(), "te-job-")), "commented.json");
    writeFileSync(path, '{\n  "state": "ticket",   // a field or dotted path\n  "questions": {"q": {"type": "noul"}}\n}\n');
    expect(() => loadJob(path)).toThrow(/comments \(\/\/ or \/\* \*\/\) are not allowed in JSON job files; remove them/);
  });
});
