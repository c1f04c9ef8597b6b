/** Runs the typed-eval CLI as a child process without blocking this one (servers under test live here). */
import { spawn } from "node:child_process";
import { join } from "node:path";

export const BIN = join(import.meta.dirname, "../../bin/typed-eval.js");

/** How long `runCli` lets a run take before it kills it: longer than any run here takes on a loaded machine, shorter than a test's timeout. */
export const RUN_DEADLINE_MS = 45_000;

/**
 * Runs the CLI as a child process. A child that outlives `deadlineMs` is
 * killed and the call rejects with its command line and what it printed: a
 * hang fails the test with its evidence, not as a bare test timeout.
 */
export function runCli(
  args: string[],
  options: { cwd: string; env: Record<string, string | undefined>; deadlineMs?: number },
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: options.cwd, env: options.env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    const deadlineMs = options.deadlineMs ?? RUN_DEADLINE_MS;
    const deadline = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`typed-eval ${args.join(" ")} had not ended after ${deadlineMs / 1000} s (killed); it printed:\n${stderr.slice(-4_000)}`));
    }, deadlineMs);
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => {
      clearTimeout(deadline);
      resolve({ code, stderr });
    });
  });
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command line in this process exactly as `main` does (the parser, then
 * the boundary's line and exit code for what it throws), with `env` applied
 * for its duration (and `cwd` as the working directory, if given): seconds
 * faster than a process, for the cases where the process itself is not what
 * is tested. What it cannot see: the logger's lines (pino writes to fd 2
 * itself), stdin, signals and the exit of a real process.
 */
export async function runInProcess(
  argv: string[],
  env: Record<string, string | undefined> = {},
  options: { cwd?: string; around?: <T>(work: () => Promise<T>) => Promise<T> } = {},
): Promise<CliResult> {
  const { typedEval } = await import("../../src/cli/main.js");
  const { endingOf } = await import("../../src/cli/boundary.js");
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  const setEnv = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  const out: string[] = [];
  const err: string[] = [];
  const writes = { stdout: process.stdout.write, stderr: process.stderr.write };
  // Captured, not mocked: the command's own writes, collected instead of printed.
  // Each write's callback is called, as a stream would once the chunk is out: a sink that awaits it (`run -o -`) goes on.
  const capture =
    (into: string[]) => (chunk: string | Uint8Array, encoding?: BufferEncoding | ((error?: Error | null) => void), done?: (error?: Error | null) => void) => {
      into.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
      (typeof encoding === "function" ? encoding : done)?.();
      return true;
    };
  process.stdout.write = capture(out) as typeof process.stdout.write;
  process.stderr.write = capture(err) as typeof process.stderr.write;
  setEnv(env);
  process.exitCode = undefined;
  const cwd = process.cwd();
  // One test file per process (vitest's forks pool), its tests in sequence: changing the directory reaches no other test.
  if (options.cwd !== undefined) process.chdir(options.cwd);
  let code: number;
  try {
    // `around` wraps the command alone (a permission case runs it as another user), not the directory changes.
    await (options.around ? options.around(() => typedEval(argv)) : typedEval(argv));
    code = Number(process.exitCode ?? 0);
  } catch (error) {
    const ending = endingOf(error);
    // A command that already said how it ended (a run's verdict line) leaves the boundary nothing to print.
    if (ending.text) err.push(`${ending.text}\n`);
    code = ending.code;
  } finally {
    process.stdout.write = writes.stdout;
    process.stderr.write = writes.stderr;
    setEnv(saved);
    if (options.cwd !== undefined) process.chdir(cwd);
    process.exitCode = undefined;
  }
  return { code, stdout: out.join(""), stderr: err.join("") };
}
