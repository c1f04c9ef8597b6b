/**
 * The layers of src/ as rules, and the import graph they are checked on.
 * `MAY_IMPORT` is the one table of allowed arrows between folders; the test
 * (layers.test.ts) runs `violations` over src/ and over a fixture tree
 * whose imports break the rules on purpose. One rule inside a folder: no
 * command module of cli/ imports another.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

/**
 * Which folders of src/ each folder may import (besides itself). Tiers from
 * the top: cli; runner, quality, server; calibration; records, evaluator;
 * engines, models, questions. A folder imports only folders below it, never
 * a sibling: runner and quality stay apart, nothing imports cli. api and
 * logging serve everyone but questions, which imports nothing of the
 * project, so api can build its wire unions from it; api uses logging's
 * scrubber (an error built from an endpoint's answer is scrubbed where it
 * is made), and logging imports nothing of the project.
 */
export const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  cli: ["runner", "quality", "server", "calibration", "records", "evaluator", "engines", "models", "questions", "api", "logging"],
  runner: ["calibration", "records", "evaluator", "engines", "models", "questions", "api", "logging"],
  quality: ["calibration", "records", "evaluator", "engines", "models", "questions", "api", "logging"],
  server: ["calibration", "records", "evaluator", "engines", "models", "questions", "api", "logging"],
  calibration: ["records", "evaluator", "engines", "models", "questions", "api", "logging"],
  records: ["engines", "models", "questions", "api", "logging"],
  evaluator: ["engines", "models", "questions", "api", "logging"],
  engines: ["api", "logging"],
  models: ["api", "logging"],
  api: ["questions", "logging"],
  logging: [],
  questions: [],
};

/** One import between two files of the tree (paths relative to the tree's root, with `/`). */
export interface Import {
  from: string;
  to: string;
}

// `import ... from "x"`, `export ... from "x"`, `import "x"` and `import("x")` (also in `typeof import("x")`).
const STATIC = /(?:^|[;\s])(?:import|export)\s+(?:type\s+)?(?:[\w$*{}\s,]*?\s+from\s*)?["']([^"']+)["']/g;
const DYNAMIC = /\bimport\(\s*["']([^"']+)["']\s*\)/g;

/** The text without comments, so an import quoted in a doc comment is not taken for one. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

/** Every .ts file under `dir`, as paths relative to `root`. */
function tsFiles(root: string, dir = root): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(root, path);
    return e.name.endsWith(".ts") ? [relative(root, path).split(sep).join("/")] : [];
  });
}

/** The project's own imports of every .ts file under `root` (packages and node: modules left out); an import of no file is an error. */
export function importGraph(root: string): { files: string[]; imports: Import[] } {
  const files = tsFiles(root);
  const imports: Import[] = [];
  for (const file of files) {
    const text = code(readFileSync(join(root, file), "utf8"));
    const specs = [...text.matchAll(STATIC), ...text.matchAll(DYNAMIC)].map((m) => m[1] as string).filter((s) => s.startsWith("."));
    for (const spec of new Set(specs)) {
      const target = resolve(root, dirname(file), spec).replace(/\.js$/, ".ts");
      if (!existsSync(target)) throw new Error(`${file} imports ${spec}, which is no file`);
      imports.push({ from: file, to: relative(root, target).split(sep).join("/") });
    }
  }
  return { files, imports };
}

/** The folder a file of the tree belongs to (its first path segment; "" for a file at the root). */
function folderOf(file: string): string {
  return file.includes("/") ? (file.split("/")[0] as string) : "";
}

/** The file cycles of a graph: each strongly connected component of more than one file (or a file importing itself), its files sorted. */
export function cycles(files: readonly string[], imports: readonly Import[]): string[][] {
  const next = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const { from, to } of imports) next.get(from)?.push(to);
  // Tarjan's algorithm, iterative so a deep chain cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  for (const start of files) {
    if (index.has(start)) continue;
    const work: { node: string; edge: number }[] = [{ node: start, edge: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const top = work[work.length - 1] as { node: string; edge: number };
      const edges = next.get(top.node) ?? [];
      if (top.edge < edges.length) {
        const to = edges[top.edge++] as string;
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, edge: 0 });
        } else if (onStack.has(to)) low.set(top.node, Math.min(low.get(top.node) as number, index.get(to) as number));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node) as number, low.get(top.node) as number));
      if (low.get(top.node) !== index.get(top.node)) continue;
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop() as string;
        onStack.delete(member);
        component.push(member);
      } while (member !== top.node);
      if (component.length > 1 || edges.includes(top.node)) found.push(component.sort());
    }
  }
  return found;
}

/** Every way the tree under `root` breaks the rules, one line each: arrows the table does not allow, folders it does not know, file cycles. */
export function violations(root: string, table: Readonly<Record<string, readonly string[]>> = MAY_IMPORT): string[] {
  const { files, imports } = importGraph(root);
  const out: string[] = [];
  for (const folder of new Set(files.map(folderOf))) {
    if (!(folder in table)) out.push(`${folder || "(root)"}/ is in no row of the layer table: give it one`);
  }
  for (const { from, to } of imports) {
    const a = folderOf(from);
    const b = folderOf(to);
    if (a === b || !(a in table)) continue;
    if (!table[a]?.includes(b)) out.push(`${from} imports ${to}: ${a}/ may not import ${b}/`);
  }
  for (const cycle of cycles(files, imports)) out.push(`import cycle among ${cycle.join(", ")}`);
  const commands = new Set(files.filter((file) => isCommandModule(root, file)));
  for (const { from, to } of imports) {
    if (commands.has(from) && commands.has(to))
      out.push(`${from} imports ${to}: a command imports no other command (move what they share into a module of its own)`);
  }
  return out;
}

/** A command module: a file of cli/ that declares a yargs command (`name: CommandModule`); main.ts, which lists them, is none. */
function isCommandModule(root: string, file: string): boolean {
  return folderOf(file) === "cli" && /:\s*CommandModule\b/.test(code(readFileSync(join(root, file), "utf8")));
}
