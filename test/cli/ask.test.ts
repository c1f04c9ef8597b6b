import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { responseViolations } from "../../src/api/consistency.js";
import type { SystemOneRequest, SystemOneResponse } from "../../src/api/schema.js";
import { generatedModel, TINY } from "../support/models.js";
import { BIN } from "../support/cli.js";

const EXAMPLE = join(import.meta.dirname, "../../examples/requests/support-ticket.json");
let modelPath: string;

beforeAll(() => {
  modelPath = generatedModel(TINY);
});

function run(args: string[], input?: string, env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [BIN, ...args], {
    input,
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, TYPED_EVAL_MODELS_DIR: mkdtempSync(join(tmpdir(), "te-models-")), ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("typed-eval ask", () => {
  it("answers a request from a questions file and a state on stdin, offline with --model-path", () => {
    const { code, stdout, stderr } = run(["ask", "-q", EXAMPLE, "--model-path", modelPath], "The parcel is late. Refund me.");
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const response = JSON.parse(stdout) as SystemOneResponse;
    const request = { state: "x", model: "default", questions: (JSON.parse(readFileSync(EXAMPLE, "utf8")) as SystemOneRequest).questions };
    expect(responseViolations(request, response)).toEqual([]);
    // A file that is not the registry's download answers under its own name (general.name and hash).
    expect(response.model).toMatch(/^typed-eval-test-byte-[0-9a-f]{8}-0\.0\.0$/);
    expect(response.usage.input_tokens).toBeGreaterThan(100);
  });

  it("takes the model path from TYPED_EVAL_MODEL_PATH and prints label mass with --diagnostics", () => {
    const { code, stdout } = run(["ask", "-q", EXAMPLE, "-s", EXAMPLE, "--diagnostics"], undefined, { TYPED_EVAL_MODEL_PATH: modelPath });
    expect(code).toBe(0);
    const out = JSON.parse(stdout) as { diagnostics: { label_mass: Record<string, number> } };
    expect(Object.keys(out.diagnostics.label_mass).sort()).toEqual(["topic", "urgency", "wants_refund"]);
    for (const mass of Object.values(out.diagnostics.label_mass)) expect(mass).toBeGreaterThan(0);
  });

  it("prints the 422 body and exits 2 for invalid questions", () => {
    const dir = mkdtempSync(join(tmpdir(), "te-ask-"));
    const file = join(dir, "q.json");
    writeFileSync(file, JSON.stringify({ questions: { q: { type: "choice" } } }));
    const { code, stderr } = run(["ask", "-q", file, "--model-path", modelPath], "state");
    expect(code).toBe(2);
    expect(JSON.parse(stderr)).toMatchObject({ detail: [{ loc: ["body", "questions", "q", "choice", "criteria"], type: "missing" }] });
  });

  it("exits 2 naming the known models for an unknown model", () => {
    const { code, stderr } = run(["ask", "-q", EXAMPLE, "--model", "nope", "--model-path", modelPath], "state");
    expect(code).toBe(2);
    expect(stderr).toMatch(/unknown model "nope"; known: .*default/);
  });

  it("exits 3 (resumable: the download host is down, not the invocation wrong) with what to do when the model is missing and cannot be downloaded", () => {
    const { code, stderr } = run(["ask", "-q", EXAMPLE], "state", { HF_ENDPOINT: "http://127.0.0.1:9" });
    expect(code).toBe(3);
    expect(stderr).toMatch(/cannot reach .*--model-path/);
  });
});

describe("typed-eval models list", () => {
  it("lists the bundled default model and whether it is downloaded", () => {
    const { code, stdout } = run(["models", "list", "--json"]);
    expect(code).toBe(0);
    const rows = JSON.parse(stdout) as { id: string; aliases: string[]; downloaded: boolean }[];
    expect(rows.find((r) => r.aliases.includes("default"))).toMatchObject({ downloaded: false });
  });
});
