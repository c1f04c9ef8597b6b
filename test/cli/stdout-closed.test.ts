/**
 * The reader closing stdout ends every command alike: exit 141 (128 +
 * SIGPIPE's 13) and one line, as `run -o - | head -1` ends (truth.test.ts in
 * process, scheduler.test.ts as a process). Real processes whose stdout is a
 * pipe closed before they print: the process's exit code is the point.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT } from "../../src/api/exit-codes.js";
import { BIN } from "../support/cli.js";

const dir = mkdtempSync(join(tmpdir(), "te-stdout-closed-"));
const answers = join(dir, "answers.jsonl");
writeFileSync(
  answers,
  Array.from({ length: 40 }, (_, i) => JSON.stringify({ id: `T-${i}`, answers: { wants_refund: { type: "noul", noul: (i % 5) / 5 + 0.1 } } })).join("\n"),
);
const gold = join(dir, "gold.csv");
writeFileSync(gold, `id,wants_refund\n${Array.from({ length: 40 }, (_, i) => `T-${i},${i % 2 ? "yes" : "no"}`).join("\n")}\n`);

/** Runs the CLI with its stdout a pipe this side closes at once (`| head -c 0`): its exit code and stderr. */
function closedStdout(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: dir,
      env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => done({ code, stderr }));
  });
}

describe("a command whose reader closed stdout", () => {
  it.each([
    ["assess --json (the issue's `| head -c 100`)", ["assess", answers, "--gold", gold, "--json"]],
    ["openapi", ["openapi"]],
    ["models list --json", ["models", "list", "--json"]],
  ])(
    "%s: exit 141 with one line, as run -o - | head (was: exit 2, 'write EPIPE')",
    async (_name, args) => {
      const r = await closedStdout(args);
      expect(r.code, r.stderr).toBe(EXIT.outputClosed);
      expect(r.stderr.trimEnd()).toBe("typed-eval: whoever read the output closed it (EPIPE)");
    },
    30_000,
  );
});
