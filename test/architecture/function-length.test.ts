/**
 * Small pieces where changes land: no function in src/ runs over 60 lines
 * unless the comment right above it says why (`Long: <reason>`), and no
 * such reason stays on a function that has since become short. Functions
 * are found with the TypeScript compiler's own parser: declarations,
 * methods, accessors, constructors, arrow functions and function
 * expressions, nested ones each on their own (and within the function
 * around them).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../../src", import.meta.url));
/** About sixty lines: a function a reader holds in view at once. */
const LIMIT = 60;
/** A reason: `Long:` and a sentence of its own, not a placeholder. */
const REASON = /\bLong:\s+\S.{24,}/;

interface Found {
  where: string;
  name: string;
  lines: number;
  reason: boolean;
}

/** The comments just above a function: its own, or those of the statement, property, export or call (`rows.forEach(...)`) that holds it. */
function commentsAbove(node: ts.Node, text: string): string {
  let holder: ts.Node = node;
  while (
    holder.parent &&
    (ts.isVariableDeclaration(holder.parent) ||
      ts.isVariableDeclarationList(holder.parent) ||
      ts.isVariableStatement(holder.parent) ||
      ts.isPropertyAssignment(holder.parent) ||
      ts.isExportAssignment(holder.parent) ||
      ts.isCallExpression(holder.parent) ||
      ts.isExpressionStatement(holder.parent))
  )
    holder = holder.parent;
  const ranges = [...(ts.getLeadingCommentRanges(text, node.getFullStart()) ?? []), ...(ts.getLeadingCommentRanges(text, holder.getFullStart()) ?? [])];
  return ranges.map((r) => text.slice(r.pos, r.end)).join("\n");
}

function nameOf(node: ts.FunctionLikeDeclaration): string {
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText();
  if (ts.isConstructorDeclaration(node)) return "constructor";
  return "(anonymous)";
}

/** Every function of a source text with its length in lines, and whether a reason stands above it. */
function functionsOf(file: string, text: string): Found[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: Found[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body) {
      const fn = node as ts.FunctionLikeDeclaration;
      const start = source.getLineAndCharacterOfPosition(fn.getStart()).line;
      const end = source.getLineAndCharacterOfPosition(fn.getEnd()).line;
      found.push({ where: `${file}:${start + 1}`, name: nameOf(fn), lines: end - start + 1, reason: REASON.test(commentsAbove(fn, text)) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** What breaks the rule: a long function without a reason, and a reason above a function that is no longer long. */
function breaches(found: readonly Found[]): string[] {
  return found.flatMap((f) => {
    if (f.lines > LIMIT && !f.reason) return [`${f.where} ${f.name} is ${f.lines} lines: shorten it, or say why above it ("Long: ...")`];
    if (f.lines <= LIMIT && f.reason) return [`${f.where} ${f.name} is ${f.lines} lines but carries a "Long:" reason: drop the reason`];
    return [];
  });
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(path);
    return e.name.endsWith(".ts") ? [path] : [];
  });
}

describe(`functions in src/ stay within ${LIMIT} lines, or say why`, () => {
  const all = tsFiles(SRC).flatMap((path) => functionsOf(relative(SRC, path), readFileSync(path, "utf8")));

  it("every function over the limit has a reason above it, and every reason a long function below it", () => {
    // Reading something: the source holds over a thousand functions.
    expect(all.length).toBeGreaterThan(1000);
    expect(breaches(all)).toEqual([]);
  });

  it("the long ones are few, and listed here when one is added", () => {
    const long = all.filter((f) => f.lines > LIMIT).map((f) => `${f.where.replace(/:\d+$/, "")} ${f.name}`);
    expect(long.sort()).toEqual(
      [
        "api/json.ts syntaxErrorAt",
        "calibration/maps.ts fitMap",
        "cli/run.ts withRunOptions",
        "quality/answers.ts readAnswers",
        "quality/answers.ts readGold",
        "quality/answers.ts rows",
        "quality/assess.ts assessQuestion",
        "quality/label-noise.ts evaluate",
        "quality/labelstudio.ts (anonymous)",
        "quality/labelstudio.ts readLabelStudioGold",
        "quality/metric-table.ts metricsMarkdown",
        "quality/metrics.ts eceWithInterval",
        "quality/pages.ts assessmentCards",
      ].sort(),
    );
  });

  it("finds a long function of each form without a reason, takes a reason above it, and flags a stale one", () => {
    const body = Array.from({ length: LIMIT }, (_, i) => `  const x${i} = ${i};`).join("\n");
    const text = [
      `export function declared(): void {\n${body}\n}`,
      `export const arrow = (): void => {\n${body}\n};`,
      `class C {\n  method(): void {\n${body}\n  }\n}`,
      `const handlers = { handler: async () => {\n${body}\n} };`,
      `/** Long: one pass over the rows that keeps every counter in view. */\nexport function explained(): void {\n${body}\n}`,
      "/** Long: this one used to be long, and the reason stayed behind. */\nexport function stale(): void {}",
    ].join("\n\n");
    expect(breaches(functionsOf("fixture.ts", text)).map((b) => b.replace(/^fixture\.ts:\d+ (\S+) .*/, "$1"))).toEqual([
      "declared",
      "arrow",
      "method",
      "handler",
      "stale",
    ]);
  });
});
