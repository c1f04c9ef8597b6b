/**
 * The layers of src/ hold: every import follows the one table of allowed
 * arrows (layers.ts), no file imports itself through others, and a fixture
 * tree that breaks each rule on purpose is flagged, so the rules cannot pass
 * by reading nothing.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { importGraph, MAY_IMPORT, violations } from "./layers.js";

const SRC = fileURLToPath(new URL("../../src", import.meta.url));
const BROKEN = fileURLToPath(new URL("./fixtures/broken", import.meta.url));

describe("the layers of src/", () => {
  it("every import follows the layer table, and no file cycle exists", () => {
    // The parser reads the real tree: a few hundred imports, not none.
    expect(importGraph(SRC).imports.length).toBeGreaterThan(300);
    expect(violations(SRC)).toEqual([]);
  });

  it("the rule on commands reads the real commands: every command file of src/cli is found", () => {
    const commands = readdirSync(join(SRC, "cli")).filter((f) => /:\s*CommandModule\b/.test(readFileSync(join(SRC, "cli", f), "utf8")));
    // 13 files hold the 14 commands main.ts lists (assess.ts holds assess and thresholds).
    expect(commands.length).toBeGreaterThanOrEqual(13);
  });

  it("the table keeps cli unimported, runner and quality apart, questions importing nothing, and its folders in one order", () => {
    const rows = Object.entries(MAY_IMPORT);
    expect(rows.filter(([, allowed]) => allowed.includes("cli")).map(([folder]) => folder)).toEqual([]);
    expect(MAY_IMPORT["runner"]).not.toContain("quality");
    expect(MAY_IMPORT["quality"]).not.toContain("runner");
    expect(MAY_IMPORT["questions"]).toEqual([]);
    // No cycle between folders: peel off folders that import no folder still left, until none is left.
    const left = new Map(rows);
    while (left.size > 0) {
      const free = [...left].filter(([, allowed]) => allowed.every((to) => !left.has(to))).map(([folder]) => folder);
      expect(free, `a cycle among ${[...left.keys()].join(", ")}`).not.toEqual([]);
      for (const folder of free) left.delete(folder);
    }
  });

  it("flags each broken rule of a fixture tree: an import the table forbids (static, re-exported, dynamic), an unknown folder, a cycle, a command importing a command", () => {
    expect(violations(BROKEN).sort()).toEqual(
      [
        "extra/ is in no row of the layer table: give it one",
        "quality/assess.ts imports runner/run.ts: quality/ may not import runner/",
        "quality/report.ts imports runner/run.ts: quality/ may not import runner/",
        "records/format.ts imports cli/main.ts: records/ may not import cli/",
        "import cycle among runner/loop.ts, runner/run.ts",
        "cli/estimate.ts imports cli/run.ts: a command imports no other command (move what they share into a module of its own)",
      ].sort(),
    );
  });

  it("refuses an import of a file that does not exist rather than skip it", () => {
    const root = mkdtempSync(join(tmpdir(), "layers-"));
    try {
      mkdirSync(join(root, "runner"));
      writeFileSync(join(root, "runner", "run.ts"), 'import { gone } from "./gone.js";\nexport const x = gone;\n');
      expect(() => importGraph(root)).toThrow("runner/run.ts imports ./gone.js, which is no file");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
