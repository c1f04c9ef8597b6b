/**
 * llama.cpp's native lines and node-llama-cpp's notices stay out of the
 * terminal: a model that fails to load ends in exactly one line (the
 * command's own), and the native lines are in the debug log for whoever
 * looks. A truncated GGUF passes the header check and fails in llama.cpp,
 * which is what printed `llama_model_load: error loading model ...` before.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN, runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

const dir = mkdtempSync(join(tmpdir(), "te-native-logs-"));
const job = resolve(import.meta.dirname, "../../jobs/support-triage.json");
const state = join(dir, "state.txt");
writeFileSync(state, "My parcel is late.");
const truncated = join(dir, "truncated.gguf");
writeFileSync(truncated, readFileSync(generatedModel(TINY)).subarray(0, 200_000));
const notGguf = join(dir, "notes.gguf");
writeFileSync(notGguf, "not a model\n");

const ask = (model: string, extra: string[] = []) => ["ask", "-q", job, "--state", state, "--text", "--model-path", model, ...extra];
const lines = (text: string) => text.split("\n").filter((l) => l.trim() !== "");

function cli(args: string[], level: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, TYPED_EVAL_LOG_LEVEL: level }, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => done({ code, stderr }));
  });
}

describe("native output", () => {
  it("a truncated GGUF: exactly one line besides the log, exit 2; llama.cpp's own lines are in the debug log", async () => {
    // In this process, console and stderr writes are what a terminal would show at the default level.
    const quiet = await runInProcess(ask(truncated));
    expect(quiet.code).toBe(2);
    expect(lines(quiet.stderr), quiet.stderr).toEqual([
      expect.stringMatching(/^typed-eval: cannot load model file .*truncated\.gguf: .*truncated or unsupported GGUF/),
    ]);
    // A real process at debug level: the logger's JSON lines carry the native ones; nothing else is printed but the message.
    const debug = await cli(ask(truncated), "debug");
    expect(debug.code).toBe(2);
    const [json, plain] = [lines(debug.stderr).filter((l) => l.startsWith("{")), lines(debug.stderr).filter((l) => !l.startsWith("{"))];
    expect(plain, debug.stderr).toEqual([expect.stringMatching(/^typed-eval: cannot load model file .*truncated\.gguf/)]);
    const logged = json.map((l) => JSON.parse(l) as { level: number; llama?: string; msg: string });
    expect(logged.find((l) => l.llama !== undefined && /llama_model_load/.test(l.msg))).toMatchObject({ level: 20 });
  }, 30_000);

  it("a file that is not GGUF, and a GPU build that is not there: one line each, no node-llama-cpp notice", async () => {
    const r = await runInProcess(ask(notGguf));
    expect(r.code).toBe(2);
    expect(lines(r.stderr)).toEqual([expect.stringMatching(/^typed-eval: cannot load model file .*notes\.gguf: the model file is not a GGUF file/)]);
    const gpu = await runInProcess(ask(generatedModel(TINY), ["--gpu", "cuda"]));
    expect(gpu.code).toBe(2);
    expect(lines(gpu.stderr), gpu.stderr).toEqual([expect.stringMatching(/^typed-eval: --gpu cuda: no CUDA build of llama\.cpp can be loaded here/)]);
  }, 30_000);
});
