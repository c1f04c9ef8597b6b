/**
 * The recipes of docs/architecture.md name files that exist: every path in
 * backticks in the Recipes section (alone or inside a command) is checked
 * from the repository's root, so a recipe cannot send a newcomer to a file
 * that was moved or never was. A placeholder (`src/questions/<type>.ts`)
 * names the folder before it, which must exist.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

/** The Recipes section of an architecture page. */
function recipes(page: string): string {
  const at = page.indexOf("\n## Recipes");
  if (at < 0) throw new Error("docs/architecture.md has no '## Recipes' section");
  const next = page.indexOf("\n## ", at + 1);
  return page.slice(at, next < 0 ? undefined : next);
}

/** Words in backticks that name a file or a folder: holding a slash, or ending in a file extension. */
function pathsNamed(text: string): string[] {
  const spans = [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string);
  return spans
    .flatMap((span) => span.split(/\s+/))
    .filter((word) => !/^-|=|:\/\//.test(word))
    .filter((word) => word.includes("/") || /\.(ts|js|md|json|jsonl|csv|txt|xml)$/.test(word));
}

/** The paths a recipe names that do not exist under `root`; a placeholder's folder stands for it. */
function missingPaths(page: string, root: string): string[] {
  return pathsNamed(recipes(page)).filter((path) => {
    const open = path.indexOf("<");
    const known = open < 0 ? path : path.slice(0, path.lastIndexOf("/", open) + 1);
    return known !== "" && !existsSync(join(root, known));
  });
}

describe("docs/architecture.md: the recipes", () => {
  const page = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");

  it("name only files and folders that exist", () => {
    // Reading something: the recipes name dozens of paths.
    expect(pathsNamed(recipes(page)).length).toBeGreaterThan(20);
    expect(missingPaths(page, ROOT)).toEqual([]);
  });

  it("catch a path that does not exist, bare, in a command or before a placeholder", () => {
    const broken = [
      "# Architecture\n\n## Recipes\n",
      "- **A thing**: `src/questions/index.ts` and `src/questions/gone.ts`; `factory.ts`",
      "  (`UPDATE_DOCS=1 npx vitest run test/quality/nothing.test.ts`), `src/nowhere/<type>.ts`,",
      "  `src/questions/<type>.ts`, `--fail-if`, `kindOf(question)`.\n\n## After\n`src/also-gone.ts`\n",
    ].join("\n");
    expect(missingPaths(broken, ROOT)).toEqual(["src/questions/gone.ts", "factory.ts", "test/quality/nothing.test.ts", "src/nowhere/<type>.ts"]);
  });
});
