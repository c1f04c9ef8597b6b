import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";

/** Writes a whole text file under a temporary name and renames it, so a failure never leaves half a file. */
export function writeFileAtomic(path: string, text: string): void {
  mkdirSync(dirname(resolve(path)), { recursive: true });
  const partial = `${path}.partial`;
  try {
    writeFileSync(partial, text);
    renameSync(partial, path);
  } catch (error) {
    rmSync(partial, { force: true });
    throw error;
  }
}
