/** `make bench [BENCH=name]`: runs every benchmark (or those whose name contains BENCH) and prints ratios. */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { meetsGoal, type Benchmark } from "./harness.js";

const filter = process.argv[2] ?? "";
const dir = import.meta.dirname;
const files = (await readdir(dir)).filter((f) => f.endsWith(".bench.ts")).sort();
let failed = 0;
for (const file of files) {
  const bench = ((await import(pathToFileURL(join(dir, file)).href)) as { default: Benchmark }).default;
  if (filter && !bench.name.includes(filter)) continue;
  console.log(`\n## ${bench.name}: ${bench.description}`);
  const result = await bench.run();
  for (const [key, value] of Object.entries(result.figures)) {
    console.log(`  ${key.padEnd(40)} ${typeof value === "number" ? Number(value.toPrecision(4)) : value}`);
  }
  for (const ratio of result.ratios) {
    const ok = meetsGoal(ratio);
    if (!ok) failed++;
    const goal = ratio.goal ? ` (goal ${ratio.goal.max !== undefined ? `<= ${ratio.goal.max}` : `>= ${ratio.goal.min}`}: ${ok ? "met" : "MISSED"})` : "";
    // A figure in milliseconds (its name ends "(ms)") is printed as such, not as a ratio.
    const unit = ratio.name.endsWith("(ms)") ? " ms" : "x";
    console.log(`  ratio ${ratio.name.padEnd(34)} ${ratio.value.toFixed(3)}${unit}${goal}`);
  }
}
process.exitCode = failed ? 1 : 0;
