/**
 * One place sets the process's exit code: the boundary (src/cli/boundary.ts)
 * and the bin that starts it. Every command throws what ended it and the
 * boundary turns it into its line and code (`classify`, api/verdict.ts), so a
 * command cannot drift from the table in docs/scheduling.md.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { VERDICTS, type Verdict } from "../../src/api/verdict.js";

const ROOT = join(import.meta.dirname, "../..");

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    return e.isDirectory() ? files(path) : /\.(ts|js)$/.test(e.name) ? [path] : [];
  });
}

/** Code without comments, so a comment that names process.exit is not taken for a call. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

describe("exit codes", () => {
  it("are set by the boundary only: no process.exitCode = or process.exit( anywhere else in src/ or bin/", () => {
    const allowed = new Set(["src/cli/boundary.ts"]);
    const setters = [...files(join(ROOT, "src")), ...files(join(ROOT, "bin"))]
      .map((file) => relative(ROOT, file))
      .filter((file) => !allowed.has(file) && !file.startsWith("bin/"))
      .filter((file) => /process\.exitCode\s*=|process\.exit\s*\(/.test(code(readFileSync(join(ROOT, file), "utf8"))));
    expect(setters).toEqual([]);
  });

  it("the check itself finds a setter (a file that sets one is flagged)", () => {
    expect(/process\.exitCode\s*=|process\.exit\s*\(/.test(code("if (x) process.exit(3);"))).toBe(true);
    expect(/process\.exitCode\s*=|process\.exit\s*\(/.test(code("// process.exit(3) is the boundary's"))).toBe(false);
  });
});

describe("the exit-code table in docs/scheduling.md", () => {
  it("has a row for every verdict with the code the table in api/verdict.ts gives it", () => {
    const doc = readFileSync(join(ROOT, "docs/scheduling.md"), "utf8");
    const rows = new Map<string, string[]>();
    for (const m of doc.matchAll(/^\| ([\d /]+) \| `([a-z-]+)` \|/gm))
      rows.set(m[2] as string, [...(rows.get(m[2] as string) ?? []), ...(m[1] as string).split("/").map((c) => c.trim())]);
    for (const verdict of Object.keys(VERDICTS) as Verdict[]) {
      const codes = verdict === "stopped" ? (["SIGINT", "SIGTERM", "SIGPIPE"] as const).map((s) => VERDICTS.stopped.exit(s)) : [VERDICTS[verdict].exit()];
      expect(rows.get(verdict)?.map(Number).sort(), verdict).toEqual([...new Set(codes)].sort());
    }
  });
});
