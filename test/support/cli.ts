/** Runs the typed-eval CLI as a child process without blocking this one (servers under test live here). */
import { spawn } from "node:child_process";
import { join } from "node:path";

export const BIN = join(import.meta.dirname, "../../bin/typed-eval.js");

export function runCli(args: string[], options: { cwd: string; env: Record<string, string | undefined> }): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: options.cwd, env: options.env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => resolve({ code, stderr }));
  });
}
