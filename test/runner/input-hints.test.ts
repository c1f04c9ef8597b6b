/**
 * An input a run cannot read as a file says what it is and what to do
 * instead: a pipe given by path (bash's `<(...)`, a named pipe) is read as
 * stdin (`-`), a directory names a file in it. Before any model loads, exit 2.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN, runInProcess } from "../support/cli.js";

const dir = mkdtempSync(join(tmpdir(), "te-input-hints-"));
const job = join(dir, "job.json");
writeFileSync(job, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
const data = join(dir, "t.jsonl");
writeFileSync(data, `${JSON.stringify({ id: "r1", text: "a" })}\n`);

describe("an input that is not a file", () => {
  it("run <(cat t.jsonl) (bash's process substitution, /dev/fd/63): exit 2, saying to pipe it in as - (it said only '/dev/fd/63 is not a file')", () => {
    const r = spawnSync("bash", ["-c", `"${process.execPath}" "${BIN}" run <(cat "${data}") --job "${job}" -o "${join(dir, "out.jsonl")}"`], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "warn" },
    });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(
      /^typed-eval: stopped: bad input: \/dev\/fd\/\d+ is not a file but a pipe \(a <\(\.\.\.\) process substitution, a named pipe\), which is read as stdin: pipe it in and pass - \(cat data\.jsonl \| typed-eval run - \.\.\.\)$/m,
    );
  }, 30_000);

  it("a named pipe, and a directory, for run and estimate alike", async () => {
    const fifo = join(dir, "pipe.jsonl");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    for (const command of ["run", "estimate"]) {
      const piped = await runInProcess([command, fifo, "--job", job], { TYPED_EVAL_LOG_LEVEL: "error" }, { cwd: dir });
      expect(piped.code, piped.stderr).toBe(2);
      expect(piped.stderr).toMatch(/pipe\.jsonl is not a file but a pipe .*pass -/);
      const folder = await runInProcess([command, dir, "--job", job], { TYPED_EVAL_LOG_LEVEL: "error" }, { cwd: dir });
      expect(folder.code, folder.stderr).toBe(2);
      expect(folder.stderr).toMatch(/is not a file \(it is a directory\): name a file in it/);
    }
  }, 30_000);
});
