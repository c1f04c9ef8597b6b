/**
 * The processes benchmarks start: the stand-in upstream (`upstream.ts`, its
 * own process so its work is not measured) and a CLI command under
 * `/usr/bin/time`, for its wall time and peak RSS.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import type { UpstreamConfig } from "./upstream.js";

/** Starts `upstream.ts` with `config`; resolves once it listens. */
export async function upstreamProcess(config: UpstreamConfig): Promise<{ url: string; stop(): void }> {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "upstream.ts"), JSON.stringify(config)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<string>((resolve) => child.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())));
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

/** Runs `typed-eval <args>` silently with a key set: its exit code, stderr, wall seconds and peak RSS in MiB. */
export function timedCli(args: string[]): { code: number; stderr: string; seconds: number; peakMiB: number } {
  const started = Date.now();
  const time = spawnSync("/usr/bin/time", ["-f", "%M", process.execPath, join(import.meta.dirname, "../bin/typed-eval.js"), ...args], {
    encoding: "utf8",
    env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "silent", TYPED_EVAL_API_KEY: "k" },
    maxBuffer: 1 << 26,
  });
  const seconds = (Date.now() - started) / 1000;
  return { code: time.status ?? -1, stderr: time.stderr, seconds, peakMiB: Number(time.stderr.trim().split("\n").at(-1)) / 1024 };
}
