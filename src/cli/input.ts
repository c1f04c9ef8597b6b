import { readFile } from "node:fs/promises";

/**
 * Whether a file argument means stdin. yargs-parser turns a lone "-" into an
 * empty string (or `true`), so every form of "-" and an omitted file count.
 */
export function isStdin(file: string | boolean | undefined): boolean {
  return file === undefined || file === "" || file === "-" || file === true;
}

/** Reads a whole file, or stdin for "-" or no file. */
export async function readInput(file: string | boolean | undefined): Promise<string> {
  if (!isStdin(file)) return readFile(String(file), "utf8");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
