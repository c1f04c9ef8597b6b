/**
 * `make tiny-model`'s script: the model it writes loads and answers, so the
 * README's offline tour (`make eval MODEL_PATH=models/tiny-test.gguf`) works
 * without a download.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { SystemOneResponse } from "../../src/api/schema.js";
import { runInProcess } from "../support/cli.js";

const SCRIPT = join(import.meta.dirname, "../support/tiny-model.ts");
const EXAMPLE = join(import.meta.dirname, "../../examples/requests/support-ticket.json");

describe("make tiny-model", () => {
  it("writes a GGUF that loads and answers every question of a request", async () => {
    const dir = mkdtempSync(join(tmpdir(), "te-tiny-"));
    // A folder that does not exist yet, as models/ on a fresh clone.
    const path = join(dir, "models", "tiny-test.gguf");
    const made = spawnSync(process.execPath, ["--import", "tsx", SCRIPT, path], { encoding: "utf8", timeout: 60_000 });
    expect(made.stderr).toBe("");
    expect(made.status).toBe(0);
    expect(made.stdout).toMatch(/meaningless/);
    expect(readFileSync(path).subarray(0, 4).toString("latin1")).toBe("GGUF");

    const state = join(dir, "ticket.txt");
    writeFileSync(state, "My parcel is two weeks late and I want my money back.");
    const r = await runInProcess(["ask", "-q", EXAMPLE, "--model-path", path, "--state", state], {
      TYPED_EVAL_MODELS_DIR: join(dir, "cache"),
      TYPED_EVAL_LOG_LEVEL: "silent",
    });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const response = JSON.parse(r.stdout) as SystemOneResponse;
    expect(response.model).toMatch(/^typed-eval-test-byte-[0-9a-f]{8}-0\.0\.0$/);
    expect(Object.keys(response.answers).sort()).toEqual(["topic", "urgency", "wants_refund"]);
  }, 120_000);

  it("says how to call it when the output path is missing (exit 2)", () => {
    const r = spawnSync(process.execPath, ["--import", "tsx", SCRIPT], { encoding: "utf8", timeout: 60_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe("usage: tsx test/support/tiny-model.ts OUTPUT.gguf\n");
  }, 60_000);
});
