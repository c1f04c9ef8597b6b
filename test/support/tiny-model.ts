/**
 * `make tiny-model`: writes the tests' tiny random-weight model (`TINY`: 64
 * dimensions, 2 layers, a byte vocabulary, 0.4 MB) to a path, for trying the
 * whole pipeline without a download. Its answers are meaningless (random
 * weights): it shows that things run, never how well.
 *
 * It lives beside the GGUF writer it reuses, which is test support: neither
 * is shipped in the package, and the top-level layout stays as it is.
 */
import { copyFileSync, mkdirSync, renameSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { generatedModel, TINY } from "./models.js";

/** Writes the tiny model to `path` (through a temporary name, so a reader never sees half a file). */
export function writeTinyModel(path: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  copyFileSync(generatedModel(TINY), partial);
  renameSync(partial, path);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const path = process.argv[2];
  if (path === undefined) {
    process.stderr.write("usage: tsx test/support/tiny-model.ts OUTPUT.gguf\n");
    process.exit(2);
  }
  writeTinyModel(path);
  process.stdout.write(`${path}: a tiny random-weight model; its answers are meaningless (for trying the pipeline offline)\n`);
}
