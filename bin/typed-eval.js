#!/usr/bin/env node
// Runs the compiled CLI (dist/, built by `make build` and by make eval/serve/bench) when it is newer
// than every source file, else the TypeScript sources through tsx: a stale build never runs.
// Compiled, a run needs less than half the memory (no transpiler in the process).
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// Signals that come while the CLI loads are held, not fatal: `run` replays them into its stop (src/cli/early-signals.ts).
const held = [];
const hold = (signal) => held.push(signal);
process.on("SIGTERM", hold).on("SIGINT", hold);
process[Symbol.for("typed-eval.early-signals")] = { signals: held, release: () => process.off("SIGTERM", hold).off("SIGINT", hold) };

const root = fileURLToPath(new URL("..", import.meta.url));
const stamp = join(root, "dist", ".built");

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }
  return newest;
}

const srcDir = join(root, "src");
const compiled = existsSync(stamp) && (!existsSync(srcDir) || statSync(stamp).mtimeMs >= newestSource(srcDir));
let entry;
if (compiled) {
  entry = await import(pathToFileURL(join(root, "dist", "cli", "main.js")).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  entry = await import(pathToFileURL(join(srcDir, "cli", "main.ts")).href);
}
if (process.argv[2] !== "run") {
  // Only `run` takes the held signals over; any other command dies of one as it would have.
  process.off("SIGTERM", hold).off("SIGINT", hold);
  if (held[0]) process.kill(process.pid, held[0]);
}
await entry.main();
