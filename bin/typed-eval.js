#!/usr/bin/env node
// Runs the compiled CLI when `npm run build` has produced it, else the
// TypeScript sources through tsx (a development checkout).
import { existsSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const compiled = `${root}dist/cli/main.js`;
if (existsSync(compiled)) {
  await import(pathToFileURL(compiled).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import(pathToFileURL(`${root}src/cli/main.ts`).href);
}
