import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { UsageError } from "./exit.js";

/**
 * Makes the folder a file will be written in, or says in one line why it
 * cannot (a path through an existing file, no permission): a usage error.
 */
export function folderFor(path: string, flag: string): void {
  try {
    mkdirSync(dirname(resolve(path)), { recursive: true });
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    const why =
      e.code === "EEXIST" || e.code === "ENOTDIR"
        ? `part of ${dirname(path)} is a file, not a folder`
        : e.code === "EACCES"
          ? `no permission to create ${dirname(path)}`
          : e.message;
    throw new UsageError(`cannot write ${flag} ${path}: ${why}; choose another path`);
  }
}

/** Writes a whole text file under a temporary name and renames it, so a failure never leaves half a file. */
export function writeFileAtomic(path: string, text: string, flag = "output"): void {
  folderFor(path, flag);
  const partial = `${path}.partial`;
  try {
    writeFileSync(partial, text);
    renameSync(partial, path);
  } catch (error) {
    rmSync(partial, { force: true });
    const e = error as NodeJS.ErrnoException;
    // A folder where the file goes, or no permission: one line, exit 2, never a stack trace.
    if (e.code === "EISDIR" || e.code === "EACCES" || e.code === "EPERM" || e.code === "EROFS" || e.code === "ENOSPC") {
      const why = e.code === "EISDIR" ? "it is a folder" : e.code === "ENOSPC" ? "the disk is full" : "no permission to write there";
      throw new UsageError(`cannot write ${flag} ${path}: ${why}; choose another path`);
    }
    throw error;
  }
}
