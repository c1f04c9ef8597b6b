/**
 * The runner's shape, held: no function in src/runner/ over 60 lines (the S3
 * journal and the locks aside, which have their own owner and issue), so a
 * stage stays a sequence of named steps a reader can follow.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");
const LIMIT = 60;
const EXEMPT = new Set(["src/runner/state/s3-journal.ts", "src/runner/state/lock.ts"]);

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    return e.isDirectory() ? files(path) : e.name.endsWith(".ts") ? [path] : [];
  });
}

/** Every function, method, accessor and arrow function longer than `limit` lines, as "file:line name (n lines)". */
function longFunctions(path: string, text: string, limit: number): string[] {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = node.name && ts.isIdentifier(node.name) ? node.name.text : "(anonymous)";
      if (last - first + 1 > limit) found.push(`${path}:${first + 1} ${name} (${last - first + 1} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe("the runner's shape", () => {
  it(`has no function over ${LIMIT} lines`, () => {
    const long = files(join(ROOT, "src/runner"))
      .map((file) => relative(ROOT, file))
      .filter((file) => !EXEMPT.has(file))
      .flatMap((file) => longFunctions(file, readFileSync(join(ROOT, file), "utf8"), LIMIT));
    expect(long).toEqual([]);
  });

  it("the check finds a long function", () => {
    const body = Array.from({ length: LIMIT + 1 }, (_, i) => `  const x${i} = ${i};`).join("\n");
    expect(longFunctions("x.ts", `function long() {\n${body}\n}\n`, LIMIT)).toEqual([`x.ts:1 long (${LIMIT + 3} lines)`]);
  });
});
