import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN } from "../support/cli.js";

function run(args: string[], input?: string) {
  const result = spawnSync(process.execPath, [BIN, ...args], { input, encoding: "utf8", timeout: 20_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("typed-eval CLI", () => {
  it("--help lists the commands that exist", () => {
    const { code, stdout } = run(["--help"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/typed-eval validate/);
    expect(stdout).toMatch(/typed-eval openapi/);
  });

  it("an unknown command is a usage error (exit 2) that names the problem", () => {
    const { code, stderr } = run(["frobnicate"]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/Unknown argument: frobnicate/);
  });

  it("validate: exit 0 and a summary for a valid body read from a file", () => {
    const dir = mkdtempSync(join(tmpdir(), "te-cli-"));
    const file = join(dir, "req.json");
    writeFileSync(file, JSON.stringify({ state: "s", model: "m", questions: { a: { type: "noul" }, b: { type: "noul" } } }));
    const { code, stdout } = run(["validate", file]);
    expect(code).toBe(0);
    expect(stdout).toBe("valid: 2 questions for model m\n");
  });

  it("validate -: reads stdin, prints the 422 body and exits 2 for an invalid body", () => {
    const { code, stdout } = run(["validate", "-"], JSON.stringify({ state: null, model: "m", questions: {} }));
    expect(code).toBe(2);
    const body = JSON.parse(stdout) as { detail: { loc: unknown[] }[] };
    expect(body.detail.map((d) => d.loc)).toEqual([
      ["body", "state"],
      ["body", "questions"],
    ]);
  });

  it("validate: a file that is not JSON is a clear error, exit 2", () => {
    const { code, stderr } = run(["validate"], "{not json");
    expect(code).toBe(2);
    expect(stderr).toMatch(/^typed-eval: stdin: .*JSON/);
  });

  it("openapi prints a parseable OpenAPI 3.1 document", () => {
    const { code, stdout } = run(["openapi"]);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ openapi: "3.1.0" });
  });
});

describe("examples/requests", () => {
  it("every example request is valid", () => {
    const { code, stdout } = run(["validate", join(import.meta.dirname, "../../examples/requests/support-ticket.json")]);
    expect(code).toBe(0);
    expect(stdout).toBe("valid: 3 questions for model default\n");
  });
});
