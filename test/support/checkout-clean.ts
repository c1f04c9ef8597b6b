/**
 * vitest's global setup: the run fails when tests leave a new file in the
 * checkout. Tests write under temporary folders only; a default output path
 * (`out/<job>-<input>.jsonl`, a report beside its answers) reached from the
 * checkout as working directory is the usual culprit.
 */
import { readdirSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../..");
/** Written by the tools that run the tests, not by the tests: dependencies and their caches, the compiled build. */
const SKIP = new Set([".git", "node_modules", "dist"]);

/** Every file and folder under the checkout, as paths relative to it. */
function entries(dir = ROOT, out = new Set<string>()): Set<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (dir === ROOT && SKIP.has(entry.name)) continue;
    const path = join(dir, entry.name);
    out.add(relative(ROOT, path));
    if (entry.isDirectory()) entries(path, out);
  }
  return out;
}

/** Lists the checkout before the run; the returned teardown fails the run, naming them, when files were added. */
export function setup(): () => void {
  const before = entries();
  return () => {
    const added = [...entries()].filter((p) => !before.has(p)).sort();
    if (added.length === 0) return;
    // The topmost new paths: a new folder stands for what is in it.
    const top = added.filter((p) => !added.some((q) => q !== p && p.startsWith(`${q}/`)));
    process.stderr.write(
      `\n*** FAILED: the tests left ${top.length} new path${top.length > 1 ? "s" : ""} in the checkout (write under os.tmpdir() instead): ${top.slice(0, 20).join(", ")} ***\n\n`,
    );
    // vitest reports an error thrown here but still exits 0.
    process.exitCode = 1;
  };
}
