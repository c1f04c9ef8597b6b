import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { NoInputError, SourceError } from "../api/verdict.js";

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

/**
 * A command's own input (what it reads, as against a flag's file): when it is
 * not there at all, that is an absent input, exit 6 for every command, which a
 * scheduler may map to "skipped"; a missing --job, --gold or --compare stays a
 * mistake in the invocation (2).
 */
export function requireInput(file: string | boolean | undefined, what: string): void {
  if (isStdin(file) || String(file).startsWith("s3://")) return;
  if (!existsSync(String(file))) throw new SourceError(`no such ${what}: ${String(file)}`, { absent: true });
}

/** A command's own input that is there but empty (zero bytes): nothing to work on, exit 6 as for an absent one. */
export function requireContent(file: string | boolean | undefined, what: string): void {
  if (isStdin(file) || String(file).startsWith("s3://")) return;
  if (statSync(String(file), { throwIfNoEntry: false })?.size === 0)
    throw new NoInputError(`the ${what} ${String(file)} is empty: check that it is the file you meant`);
}
