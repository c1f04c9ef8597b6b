/**
 * `make tiny-model`'s script: the model it writes loads and answers, so the
 * README's offline tour (`make eval MODEL_PATH=models/tiny-test.gguf`) works
 * without a download.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { SystemOneResponse } from "../../src/api/schema.js";
import { runInProcess } from "../support/cli.js";

const SCRIPT = join(import.meta.dirname, "../support/tiny-model.ts");
const EXAMPLE = join(import.meta.dirname, "../../examples/requests/support-ticket.json");
const README = join(import.meta.dirname, "../../README.md");
const BIN = join(import.meta.dirname, "../../bin/typed-eval.js");

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

  it("README's offline tour: its TYPED_EVAL_MODEL_PATH line, run in the checkout, names the model from any folder (a relative path failed from another one)", () => {
    const readme = readFileSync(README, "utf8");
    const section = readme.slice(readme.indexOf("## Trying everything offline"));
    const line = /^export TYPED_EVAL_MODEL_PATH=.*$/m.exec(section)?.[0];
    expect(line, "the offline tour exports TYPED_EVAL_MODEL_PATH").toBeDefined();
    // A stand-in for the checkout, where `make tiny-model` wrote the model; then a command from another folder.
    const checkout = mkdtempSync(join(tmpdir(), "te-checkout-"));
    const made = spawnSync(process.execPath, ["--import", "tsx", SCRIPT, join(checkout, "models", "tiny-test.gguf")], { encoding: "utf8", timeout: 60_000 });
    expect(made.status, made.stderr).toBe(0);
    writeFileSync(join(checkout, "ticket.txt"), "My parcel is late.");
    const elsewhere = join(checkout, "elsewhere", "deeper");
    mkdirSync(elsewhere, { recursive: true });
    const script = `${(line as string).replace(/\s+#.*$/, "")}\ncd "${elsewhere}"\n"${process.execPath}" "${BIN}" ask -q "${EXAMPLE}" --state "${join(checkout, "ticket.txt")}"`;
    const r = spawnSync("bash", ["-c", script], {
      cwd: checkout,
      encoding: "utf8",
      timeout: 120_000,
      env: { ...process.env, TYPED_EVAL_MODELS_DIR: join(checkout, "cache"), TYPED_EVAL_LOG_LEVEL: "silent", TYPED_EVAL_BASE_URL: "" },
    });
    expect(r.status, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as SystemOneResponse).model).toMatch(/^typed-eval-test-byte-[0-9a-f]{8}-0\.0\.0$/);
  }, 120_000);

  it("README's Install as a package names the oldest Node the package's engines take", () => {
    const readme = readFileSync(README, "utf8");
    const section = readme.slice(readme.indexOf("## Install as a package"), readme.indexOf("\n## ", readme.indexOf("## Install as a package") + 1));
    const engines = (JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8")) as { engines: { node: string } }).engines.node;
    const floor = /\^(\d+\.\d+)/.exec(engines)?.[1] as string;
    expect(section).toContain(`Node ${floor} or later`);
  });
});
